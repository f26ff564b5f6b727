//! The async scope token concept (P3149R6 `async_scope_token`): `try_associate`,
//! `dissociate` and `wrap`.

use crate::panic::Panic;
use crate::sender::Sender;
use crate::stop::StopToken;

/// A non-owning, copyable handle to an async scope: the basis operations that
/// [`nest`](crate::nest), [`spawn`](crate::spawn) and
/// [`spawn_future`](crate::spawn_future) are built on.
///
/// P3149's `try_associate() -> bool` and `dissociate()` become one typed step here:
/// [`try_associate`](Self::try_associate) returns an [`Association`] on success, and
/// dropping that association is the `dissociate`. A dissociation can therefore neither
/// be forgotten by mistake nor happen twice.
///
/// ```
/// use senders::{ScopeToken, SimpleCountingScope, sync_wait};
/// let scope = SimpleCountingScope::new();
/// let token = scope.token();
/// let association = token.try_associate().expect("an open scope associates");
/// drop(association); // dissociate
/// scope.close();
/// assert!(token.try_associate().is_none());
/// sync_wait(scope.join()).unwrap();
/// ```
pub trait ScopeToken: Copy + Send + Sync + 'static {
    /// Proof of one association with the scope; dropping it dissociates.
    type Association: Association;

    /// The sender [`wrap`](Self::wrap) turns `S` into.
    type Wrap<S: Sender>: Sender<Value = S::Value, Error = S::Error>;

    /// Associates one more operation with the scope, or returns `None` if the scope
    /// refuses (it is closed, joined, or gone).
    fn try_associate(&self) -> Option<Self::Association>;

    /// Adapts a sender before it is nested in the scope (P3149R6 `wrap`). The counting
    /// scopes return it unchanged: their stop request reaches nested work through the
    /// association (see [`Association::stop_token`]), so that a wrapped sender never
    /// carries a stop token that could outlive its association.
    fn wrap<S: Sender>(&self, sndr: S) -> Self::Wrap<S>;
}

/// One operation's association with a scope. Dropping it dissociates: the scope's count
/// goes down, and a waiting join may complete. Nothing the association protects may be
/// used after it is dropped.
pub trait Association: Send + 'static {
    /// The scope's stop token, merged into the stop token of nested work. It never
    /// stops for a scope without `request_stop`.
    fn stop_token(&self) -> StopToken<'_>;

    /// Hands the scope a panic of spawned work, which has no receiver to report it to.
    /// The counting scopes resume the first one from their join.
    fn report_panic(&self, panic: Panic);
}
