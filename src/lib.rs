//! `senders`: the C++ `std::execution` model — senders, receivers, operation states,
//! domains and async scopes (P2300, P2999, P3149, P3296, P3552) — for Rust.
//!
//! # The model
//!
//! A *sender* describes asynchronous work and does nothing until it is started. Connecting
//! a sender to a *receiver* (the continuation, with its value, error and stopped channels)
//! makes a pinned *operation state*, which runs the work and allocates nothing while it
//! runs. A *scheduler* says where work runs (`schedule(sch)` is a sender that completes
//! there): a [`StaticThreadPool`], a [`SingleThreadContext`], a [`RunLoop`], or the
//! process-wide pool of [`parallel_scheduler()`]. Adaptors ([`SenderExt`]'s methods,
//! [`when_all`], [`starts_on`], [`on`]) build bigger senders from smaller ones, and a
//! *domain* lets an execution resource replace how `then`, `bulk` and `when_all` run. A
//! consumer such as [`sync_wait`] starts the work and blocks for its result, and a scope
//! ([`CountingScope`], or [`let_async_scope`], which may borrow) tracks work it
//! [`spawn`]s.
//!
//! # Getting started
//!
//! - `cargo run --release --example tree`: a million-node tree owned by `main`, one
//!   `spawn` per node into a `let_async_scope_reduce` whose work borrows the tree and
//!   returns each node's value through the scope, timed against rayon.
//! - `cargo run --release --example mergesort` (and `matmul`, `strassen`): divide and
//!   conquer as sender graphs, each node lending parts of its buffers to its children
//!   with [`let_value_ref`](SenderExt::let_value_ref) and using the whole again after.
//! - `cargo test`: the tests.
//!
//! `use senders::prelude::*;` brings in what a program types: the traits whose methods
//! it calls, the factories and adaptor functions, the schedulers, scopes and their
//! tokens, `Task` and stop tokens. The crate root holds the same names, and the traits
//! implemented rather than called. The types the adaptors return, their receivers and
//! operation states live in modules named after the architecture: [`adaptors`],
//! [`factories`], [`consumers`], [`schedulers`], [`pool`], [`scope`], [`task`],
//! [`stop`], [`env`](mod@env), [`domain`], [`any`] and [`bridge`].
//!
//! # A tree on the pool, borrowed
//!
//! Each node's work runs on the pool, spawns its children's into the same
//! [`let_async_scope_reduce`](SenderExt::let_async_scope_reduce), and returns its value,
//! which the worker that ran it folds into an accumulator of its own. The scope is joined
//! before `sync_wait` returns, so the work borrows the tree from the caller's stack; the
//! join merges the accumulators into the scope's value.
//!
//! ```
//! use senders::prelude::*;
//!
//! struct Tree { value: u64, children: Vec<Tree> }
//! type Token<'s, 'e> = LetReduceToken<'s, 'e, PoolScheduler, u64>;
//!
//! fn visit<'s, 'e>(tk: Token<'s, 'e>, sch: &'s PoolScheduler, t: &'s Tree) -> impl Spawnable<Token<'s, 'e>> {
//!     schedule(sch).then(move |()| {
//!         for c in &t.children {
//!             spawn(visit(tk, sch, c), tk);
//!         }
//!         t.value
//!     })
//! }
//!
//! let leaf = |value| Tree { value, children: vec![] };
//! let tree = Tree { value: 1, children: vec![leaf(2), Tree { value: 3, children: vec![leaf(4)] }] };
//! let pool = StaticThreadPool::new(2).unwrap();
//! let sch = pool.scheduler();
//! let (tree_ref, sch_ref) = (&tree, &sch);
//! let work = just(()).let_async_scope_reduce(|| 0, |sum: &mut u64, v| *sum += v, |a, b| a + b, |tk, ()| {
//!     spawn(visit(tk, sch_ref, tree_ref), tk);
//! });
//! assert_eq!(sync_wait(starts_on(sch.clone(), work)).unwrap(), Some(10));
//! ```
//!
//! # Where things are
//!
//! One concept per module, from the lowest layer up: each builds on those above it in
//! the table (the core concepts, `sender`, `receiver`, `env`, `scheduler` and `domain`,
//! with the trait of `when_all`'s children, are the one circle). The
//! larger directories (`adaptors/`, `pool/`, `scope/`) map their own files in their
//! `mod.rs`. `tests/module_map.rs` checks that this map names every
//! module and only modules that exist.
//!
//! | module | what it holds |
//! |---|---|
//! | `src/sync.rs` | the one sync facade: std's atomics and locks, loom's under `--cfg loom` |
//! | `src/job.rs` | `JobRef` and [`SpawnedOp`](crate::scope::SpawnedOp): the one type-erased "run this, once" |
//! | `src/panic.rs` | [`Panic`], catching user panics, the abort guard of code that must not unwind |
//! | `src/block/` | heap blocks recycled per thread, for everything allocated while work runs; `BlockSlice` and `BlockVec` in them |
//! | `src/blocking.rs` | what a thread does before it blocks (a pool worker hands out its latent forks) |
//! | `src/inplace.rs` | `InPlace`: an optional value built where it lives |
//! | `src/stop/` | in-place stop tokens, callbacks, merged sources, and the forwarder of stop requests |
//! | `src/env.rs` | environments and queries |
//! | `src/sender.rs`, `src/receiver.rs`, `src/scheduler.rs` | the core traits ([`Sender`], [`Receiver`], [`OperationState`], [`Scheduler`], [`Awaitable`]) and the `sender!` macro that declares the crate's senders |
//! | `src/ready.rs` | `ReadyFn`: a value made by a plain call from one word of state, which an `AnySender` keeps without a heap block |
//! | `src/domain.rs` | domains: the customization hooks and early and late dispatch (P2999) |
//! | `src/outcome.rs` | a completion stored as a value, and the one conversion into it |
//! | `src/factories/` | `just`, `just_error`, `just_stopped`, `read_env`, `defer` |
//! | `src/adaptors/` | the adaptors: `then`, `let_*`, `bulk`, `when_all` (and `fork_join`), `when_any`, `continues_on`, `starts_on`, `on`, `stop_when`, `write_env`, the channel reshapers, `EitherSender` |
//! | `src/consumers/` | `sync_wait`, `sync_wait_value` |
//! | `src/schedulers/` | `RunLoop`, `InlineScheduler`, `SingleThreadContext` |
//! | `src/time/` | timed schedulers (`schedule_at`, `schedule_after`), the timer service, `timeout` |
//! | `src/ext.rs` | [`SenderExt`], the methods that chain adaptors |
//! | `src/pool/` | [`StaticThreadPool`], its scheduler and its domain; the default pool |
//! | `src/scope/` | async scopes: tokens, `nest`, `spawn`, `spawn_future`, the counting scopes, `let_async_scope`, scope reductions |
//! | `src/task/` | [`Task`] and the scheduler it shows the senders it awaits |
//! | `src/any.rs` | [`AnySender`], the type-erased sender |
//! | `src/bridge.rs` | senders as Rust futures and futures as senders |
//! | `src/prelude.rs` | the names a program types |
//!
//! # The papers
//!
//! `docs/DESIGN.md` in the repository maps each facility of the papers to its Rust
//! counterpart (§4, "Mapping table"), says where this crate deviates from them (§7), and
//! describes the thread pool (§6) and how the implementation is verified (§8).

#![deny(missing_docs)]

pub mod adaptors;
pub mod any;
mod block;
mod blocking;
pub mod bridge;
pub mod consumers;
pub mod domain;
pub mod env;
mod ext;
pub mod factories;
mod inplace;
mod job;
mod outcome;
mod panic;
pub mod pool;
pub mod prelude;
mod ready;
mod receiver;
mod scheduler;
pub mod schedulers;
pub mod scope;
mod sender;
pub mod stop;
mod sync;
pub mod task;
pub mod time;

pub use adaptors::{
    EitherSender, Grain, fork_join, on, prop, schedule_from, starts_on, stop_when, when_all, when_all_iter,
    when_all_with_variant, when_any, when_any_iter,
};
pub use any::AnySender;
pub use bridge::{from_future, into_awaitable};
pub use consumers::{sync_wait, sync_wait_value};
pub use domain::{DefaultDomain, Domain};
pub use env::{EmptyEnv, Env, EnvExt, GetDomain, GetScheduler, Query};
pub use ext::SenderExt;
pub use factories::{defer, just, just_error, just_stopped, read_env};
pub use panic::Panic;
#[cfg(loom)]
#[doc(hidden)]
pub use pool::join_handed_over_teardown;
pub use pool::{BuildError, PoolBuilder, PoolScheduler, StaticThreadPool};
#[cfg(not(loom))]
pub use pool::{default_pool, parallel_scheduler};
pub use receiver::Receiver;
pub use scheduler::{Scheduler, schedule};
pub use schedulers::{InlineScheduler, RunLoop, RunLoopScheduler, SingleThreadContext, SingleThreadScheduler};
pub use scope::{
    CountingScope, CountingToken, LetScopeToken, ScopeToken, SimpleCountingScope, SimpleCountingToken, Spawnable,
    let_async_scope, nest, spawn, spawn_future,
};
pub use scope::{LetReduceToken, ReduceToken, ReducingScope, let_async_scope_reduce};
pub use sender::{Awaitable, OperationState, Sender, SenderTo};
pub use stop::{InplaceStopSource, StopCallback, StopToken};
pub use task::{Task, awaited, change_scheduler};
pub use time::TimedScheduler;
#[cfg(not(loom))]
pub use time::{schedule_after, schedule_at, timeout};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
