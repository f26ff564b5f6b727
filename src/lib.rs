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

mod adaptors;
mod consumers;
mod domain;
mod env;
mod ext;
mod factories;
mod panic;
mod receiver;
mod scheduler;
mod schedulers;
mod sender;
mod stop;
mod sync;

pub use adaptors::bulk::{Bulk, BulkFn, BulkImpl, BulkOutcome, BulkReceiver};
pub use adaptors::when_all::{
    ConnectTuple, DomainFold, SenderTuple, WhenAll, WhenAllImpl, WhenAllOp, WhenAllReceiver, when_all, when_all_with_variant,
};
pub use adaptors::then::{Then, ThenFn, ThenImpl, UponError, UponStopped};
pub use consumers::sync_wait::{SyncWaitEnv, SyncWaitReceiver, sync_wait};
pub use domain::{
    CommonDomain, DefaultDomain, Domain, EarlyDomain, LateDomain, MaybeDomain, NoDomain, apply_sync_wait,
    transform_env,
};
pub use env::{EmptyEnv, Env, EnvExt, EnvQuery, GetDomain, GetScheduler, Query};
pub use ext::SenderExt;
pub use factories::just::{Just, JustError, JustStopped, just, just_error, just_stopped};
pub use factories::read_env::{ReadEnv, read_env};
pub use panic::Panic;
pub use receiver::Receiver;
pub use scheduler::{MaybeScheduler, NoScheduler, Scheduler, schedule};
pub use schedulers::run_loop::{RunLoop, RunLoopScheduler, RunLoopSender};
pub use sender::{OperationState, Sender, SenderTo};
pub use stop::{InplaceStopSource, StopCallback, StopToken};
