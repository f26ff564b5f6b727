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
mod any;
mod block;
mod bridge;
mod consumers;
mod domain;
mod env;
mod ext;
mod factories;
mod outcome;
mod panic;
mod pool;
mod receiver;
mod scheduler;
mod schedulers;
mod scope;
mod sender;
mod spawn;
mod stop;
mod sync;
mod task;

pub use adaptors::bulk::{
    Bulk, BulkEach, BulkEachFn, BulkEachImpl, BulkEachReceiver, BulkFn, BulkImpl, BulkOutcome, BulkReceiver,
};
pub use adaptors::channels::{
    IntoVariant, IntoVariantReceiver, MapError, MapErrorFn, MapErrorReceiver, StoppedAsError, StoppedAsErrorReceiver,
    StoppedAsOptional, StoppedAsOptionalReceiver, WithError, WithErrorReceiver,
};
pub use adaptors::either::{EitherOp, EitherSender};
pub use adaptors::let_::{
    Let, LetFirstReceiver, LetKind, LetOp, LetSecondEnv, LetSecondReceiver, LetShared, LetState, OnError, OnStopped,
    OnValue,
};
pub use adaptors::on::{On, OnOp, on};
pub use adaptors::stop_when::{StopWhen, StopWhenOp, StopWhenReceiver, StopWhenState, stop_when};
pub use adaptors::then::{
    Then, ThenFn, ThenImpl, ThenReceiver, UponError, UponErrorReceiver, UponStopped, UponStoppedReceiver,
};
pub use adaptors::transfer::{
    ScheduleFrom, ScheduleFromOp, StartsOn, StartsOnHopReceiver, StartsOnOp, StartsOnReceiver, StartsOnShared,
    StartsOnState, TransferCore, TransferHopReceiver, TransferReceiver, TransferState, schedule_from, starts_on,
};
pub use adaptors::when_all::{
    ConnectTuple, DomainFold, ForwardStop, SenderTuple, Sequential, Shared as WhenAllShared, Slot, StartPolicy,
    WhenAll, WhenAllImpl, WhenAllOp, WhenAllReceiver, start_erased, when_all, when_all_with_variant,
};
pub use adaptors::write_env::{Prop, WriteEnv, WriteEnvReceiver, prop};
pub use any::{AnyOp, AnyReceiver, AnySender, ErasedEnvScheduler, IntoAnyScheduler, RcvrVTable};
pub use bridge::{AwaitReceiver, FromFuture, FromFutureOp, PollHop, SenderFuture, from_future, into_awaitable};
pub use consumers::sync_wait::{SyncWaitEnv, SyncWaitReceiver, sync_wait};
pub use domain::{
    CommonDomain, DefaultDomain, Domain, EarlyDomain, LateDomain, MaybeDomain, NoDomain, apply_sync_wait, transform_env,
};
pub use env::{EmptyEnv, Env, EnvExt, EnvQuery, GetDomain, GetScheduler, Query};
pub use ext::SenderExt;
pub use factories::just::{Just, JustError, JustOp, JustStopped, just, just_error, just_stopped};
pub use factories::read_env::{ReadEnv, ReadEnvOp, read_env};
pub use panic::Panic;
pub use pool::{
    BuildError, BulkState, DEFAULT_STACK_SIZE, EachKernel, ForkOnPool, Kernel, PoolBuilder, PoolBulk, PoolBulkEach,
    PoolBulkOp, PoolBulkReceiver, PoolDomain, PoolOp, PoolScheduler, PoolSender, SharedKernel, StaticThreadPool,
};
#[cfg(not(loom))]
pub use pool::{GlobalPoolError, default_pool, parallel_scheduler};
pub use receiver::Receiver;
pub use scheduler::{MaybeScheduler, NoScheduler, Scheduler, schedule};
pub use schedulers::inline::{InlineOp, InlineScheduler, InlineSender};
pub use schedulers::run_loop::{RunLoop, RunLoopOp, RunLoopScheduler, RunLoopSender};
pub use schedulers::single_thread::{SingleThreadContext, SingleThreadScheduler, SingleThreadSender};
pub use scope::{
    Association, CounterKind, CountingScope, CountingToken, FutureOp, FutureReceiver, HopTo, IntoScopeSender, JoinHop,
    JoinOp, JoinSender, JoinShared, LetAssociation, LetAsyncScope, LetForwardStop, LetHop, LetResult, LetScopeFirst,
    LetScopeOp, LetScopeShared, LetScopeState, LetScopeToken, LetTail, Nest, NestOp, NoHop, ScopeAssociation,
    ScopeLifetime, ScopeState, ScopeToken, SimpleCountingScope, SimpleToken, SpawnFuture, let_async_scope, nest,
    spawn_future,
};
pub use sender::{OperationState, Sender, SenderTo};
pub use spawn::{SpawnReceiver, Spawnable, SpawnedOp, spawn};
pub use stop::{InplaceStopSource, MergedStopSource, StopCallback, StopToken};
pub use task::{
    AwaitNode, AwaitRcvr, Awaited, ChangeScheduler, ErasedScheduleReceiver, Task, TaskCtx, TaskHome, TaskHop, TaskOp,
    TaskScheduleOp, TaskScheduleSender, TaskScheduler, awaited, change_scheduler,
};

/// The README's examples, compiled and run as doctests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
