//! Async scopes (P3149R6): the scope token concept, `nest`, `spawn_future`, and the
//! counting scopes with per-worker counters merged at join; `let_async_scope` (P3296); and
//! [`spawn`], whose source sits beside the domains' spawn hook.

mod core;
pub(crate) mod counter;
mod counting;
pub(crate) mod future;
mod let_scope;
mod nest;
pub(crate) mod slot;
mod token;

pub use crate::spawn::{SpawnReceiver, Spawnable, SpawnedOp, spawn};
pub use counter::ScopeState;
pub use counting::{
    CounterKind, CountingScope, CountingToken, JoinHop, JoinOp, JoinSender, ScopeAssociation, SimpleCountingScope,
    SimpleToken,
};
pub use future::{FutureOp, FutureReceiver, SpawnFuture, spawn_future};
pub use let_scope::{
    HopTo, IntoScopeSender, LetAssociation, LetAsyncScope, LetHop, LetResult, LetScopeFirst, LetScopeOp, LetScopeToken,
    NoHop, let_async_scope,
};
pub use nest::{Nest, NestOp, nest};
pub use token::{Association, ScopeLifetime, ScopeToken};
