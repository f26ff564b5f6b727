//! `senders`: the C++ `std::execution` model — senders, receivers, operation states
//! and domains (P2300, P2999) — for Rust.
//!
//! ```
//! use senders::{just, sync_wait, when_all, SenderExt};
//! let work = when_all((just(20), just(1).then(|x| x * 2)))
//!     .then(|(a, b)| a + b);
//! assert_eq!(sync_wait(work).unwrap(), Some(22));
//! ```
//!
//! See `docs/DESIGN.md` for how each facility of the papers maps to Rust.

pub mod adaptors;
pub mod any;
mod block;
pub mod bridge;
pub mod consumers;
pub mod domain;
pub mod env;
mod ext;
pub mod factories;
mod outcome;
mod panic;
pub mod pool;
pub mod prelude;
mod receiver;
mod scheduler;
pub mod schedulers;
pub mod scope;
mod sender;
mod spawn;
pub mod stop;
mod sync;
pub mod task;

pub use adaptors::{EitherSender, on, prop, schedule_from, starts_on, stop_when, when_all, when_all_with_variant};
pub use any::AnySender;
pub use bridge::{from_future, into_awaitable};
pub use consumers::sync_wait;
pub use domain::{DefaultDomain, Domain};
pub use env::{EmptyEnv, Env, EnvExt, GetDomain, GetScheduler, Query};
pub use ext::SenderExt;
pub use factories::{just, just_error, just_stopped, read_env};
pub use panic::Panic;
pub use pool::{BuildError, PoolBuilder, PoolScheduler, StaticThreadPool};
#[cfg(not(loom))]
pub use pool::{default_pool, parallel_scheduler};
pub use receiver::Receiver;
pub use scheduler::{Scheduler, schedule};
pub use schedulers::{InlineScheduler, RunLoop, RunLoopScheduler, SingleThreadContext, SingleThreadScheduler};
pub use scope::{
    CountingScope, CountingToken, LetScopeToken, ScopeToken, SimpleCountingScope, SimpleToken, Spawnable,
    let_async_scope, nest, spawn, spawn_future,
};
pub use sender::{OperationState, Sender, SenderTo};
pub use stop::{InplaceStopSource, StopCallback, StopToken};
pub use task::{Task, awaited, change_scheduler};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
