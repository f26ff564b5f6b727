//! The names a program using senders types, for `use senders::prelude::*;`.
//!
//! The traits whose methods are called on senders, schedulers and environments; the
//! sender factories, adaptor functions and `sync_wait`; the timed schedulers' senders and
//! `timeout`; the schedulers and the pool; the
//! scopes and their tokens; `Task`; the erased and either senders; and the stop tokens.
//! Everything here is also at the crate root, which adds the traits implemented rather
//! than called (`Receiver`, `OperationState`, `SenderTo`, `Query`, `Domain`,
//! `ScopeToken`), the environment and domain names (`EmptyEnv`, `GetScheduler`,
//! `GetDomain`, `DefaultDomain`, `prop`), the schedulers' own names (`RunLoopScheduler`,
//! `SingleThreadScheduler`) and the pool's builder (`PoolBuilder`, `BuildError`).

pub use crate::{
    AnySender, CountingScope, CountingToken, EitherSender, Env, EnvExt, Grain, InlineScheduler, InplaceStopSource,
    LetScopeToken, Panic, PoolScheduler, RunLoop, Scheduler, Sender, SenderExt, SimpleCountingScope,
    SimpleCountingToken, SingleThreadContext, Spawnable, StaticThreadPool, StopCallback, StopToken, Task,
    TimedScheduler, awaited, change_scheduler, defer, fork_join, from_future, into_awaitable, just, just_error,
    just_stopped, let_async_scope, nest, on, read_env, schedule, schedule_from, spawn, spawn_future, starts_on,
    stop_when, sync_wait, sync_wait_value, when_all, when_all_iter, when_all_with_variant, when_any, when_any_iter,
};
pub use crate::{LetReduceToken, ReduceToken, ReducingScope};
#[cfg(not(loom))]
pub use crate::{default_pool, parallel_scheduler, schedule_after, schedule_at, timeout};
