//! Async scopes (P3149R6): the scope token concept, `nest`, `spawn`, `spawn_future`, and
//! the counting scopes with per-worker counters merged at join; `let_async_scope` (P3296).
//!
//! | file | what |
//! |---|---|
//! | `token.rs` | the token concept: [`ScopeToken`], [`Association`], [`ScopeLifetime`] |
//! | `spawn.rs` | [`spawn`], and the heap block every spawned operation lives in |
//! | `future.rs` | [`spawn_future`], and the two-sided block it shares with `into_awaitable` |
//! | `nest.rs` | [`nest`] |
//! | `counting.rs` | [`SimpleCountingScope`], [`CountingScope`], their tokens and join |
//! | `let_scope/` | [`let_async_scope`]: the operation (`mod.rs`); the scope's shared part, its token and association (`association.rs`); the final completion, the hop and the returned sender's receiver (`completion.rs`) |
//! | `reduce.rs` | scope reductions: [`ReduceToken`], [`ReducingScope`], [`let_async_scope_reduce`]: spawned work's values folded per worker, merged at the join |
//! | `counter.rs` | the sharded counter, its state machine and the join's wait |
//! | `core.rs` | a scope's counter, stop source and first panic, in type-stable memory |

mod core;
pub(crate) mod counter;
mod counting;
pub(crate) mod future;
mod let_scope;
mod nest;
mod reduce;
pub(crate) mod spawn;
mod token;

pub use crate::job::SpawnedOp;
pub use crate::scheduler::{HopTo, NoHop};
pub use counter::ScopeState;
pub use counting::{
    CounterKind, CountingScope, CountingToken, JoinHop, JoinOp, JoinSender, ScopeAssociation, SimpleCountingScope,
    SimpleCountingToken,
};
pub use future::{Detached, FutureOp, FutureReceiver, SpawnFuture, spawn_future};
pub use let_scope::{
    IntoScopeSender, LetAssociation, LetAsyncScope, LetHop, LetResult, LetScopeFirst, LetScopeFn, LetScopeOp,
    LetScopeToken, let_async_scope,
};
pub use nest::{Nest, NestOp, nest};
pub use reduce::{
    FoldReceiver, FoldSender, LetAsyncScopeReduce, LetReduceToken, MergeReceiver, ReduceBody, ReduceJoin,
    ReduceJoinReceiver, ReduceToken, ReducingScope, let_async_scope_reduce,
};
pub use spawn::{SpawnReceiver, Spawnable, spawn};
pub use token::{Association, ScopeLifetime, ScopeToken};
