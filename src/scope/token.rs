//! The async scope token concept (P3149R6 `async_scope_token`): `try_associate` and
//! `dissociate` (there is no `wrap`; see [`ScopeToken`]), and how long spawned work may
//! borrow ([`ScopeLifetime`]).

use crate::env::Env;
use crate::panic::Panic;
use crate::stop::StopToken;

/// A non-owning, copyable handle to an async scope: the basis operations that
/// [`nest`](crate::nest), [`spawn`](crate::spawn()) and
/// [`spawn_future`](crate::spawn_future) are built on.
///
/// P3149's `try_associate() -> bool` and `dissociate()` become one typed step here:
/// [`try_associate`](Self::try_associate) returns an [`Association`] on success, and
/// dropping that association is the `dissociate`. A dissociation can therefore neither
/// be forgotten by mistake nor happen twice.
///
/// P3149's `wrap` (adapt a sender before it is nested) is absent: it is the identity for
/// every scope here, whose stop request reaches nested work through the association's
/// environment (see [`Association::env`]) instead of a wrapping `stop_when`, and a
/// projection such as `Tk::Wrap<S>` would keep generic code over tokens from proving
/// that a sender can be spawned.
///
/// How long spawned work may borrow is said by [`ScopeLifetime`].
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
pub trait ScopeToken: Copy + Send + Sync {
    /// Proof of one association with the scope; dropping it dissociates.
    type Association: Association;

    /// Associates one more operation with the scope, or returns `None` if the scope
    /// refuses (it is closed, joined, or gone).
    fn try_associate(&self) -> Option<Self::Association>;
}

/// How long a token's scope outlives the work started through it: [`spawn`](crate::spawn())
/// and [`spawn_future`](crate::spawn_future) accept work that lives for `'scope`, so it
/// may borrow anything that lives at least that long.
///
/// The counting scopes' tokens are `ScopeLifetime<'static>` only: their work is
/// detached, so it must own its data. A
/// [`let_async_scope`](crate::SenderExt::let_async_scope) token is `ScopeLifetime<'s>`
/// for its scope's own lifetime `'s`, which is invariant and shorter than the scope's
/// operation: a token implements this trait for one lifetime only.
///
/// # Safety
///
/// The scope must not let its owner go on (complete, or be dropped) before every
/// association made through the token has ended, as long as anything `'scope` may
/// borrow is in use, and the token must implement this trait for that one lifetime.
pub unsafe trait ScopeLifetime<'scope>: ScopeToken + 'scope {}

/// One operation's association with a scope. Dropping it dissociates: the scope's count
/// goes down, and a waiting join may complete. Nothing the association protects may be
/// used after it is dropped.
pub trait Association: Send {
    /// The error type the scope accepts from spawned work
    /// ([`Infallible`](std::convert::Infallible) for the counting scopes: their spawned
    /// work cannot fail).
    type Error;

    /// The environment spawned work sees: the scope's stop token, and for a
    /// `let_async_scope` the outer receiver's scheduler, domain and user queries.
    type Env: Env + Sync;

    /// The environment of work nested through this association. Its stop token is the
    /// scope's, merged into the stop token of nested work; it never stops for a scope
    /// without `request_stop`.
    fn env(&self) -> &Self::Env;

    /// Hands the scope a panic of spawned work, which has no receiver to report it to.
    /// The counting scopes resume the first one from their join; a `let_async_scope`
    /// also requests stop on its other work.
    fn report_panic(&self, panic: Panic);

    /// Hands the scope an error of spawned work. A `let_async_scope` keeps the first one
    /// (it becomes the scope's completion) and requests stop on its other work.
    fn report_error(&self, error: Self::Error);

    /// The token on which a callback that only forwards the scope's stop requests
    /// registers: one stopped whenever the scope's is (the counting scopes and
    /// `let_async_scope` give the source of the association's counter shard, on a line
    /// of the worker that associated, where the scope's own source is one line that every
    /// worker would write). By default the environment's token.
    fn forwarding_token(&self) -> StopToken<'_> {
        self.env().stop_token()
    }
}
