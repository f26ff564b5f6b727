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
    ///
    /// ```
    /// use senders::{ScopeToken, SimpleCountingScope, sync_wait};
    /// use senders::scope::ScopeState;
    /// let scope = SimpleCountingScope::new();
    /// let token = scope.token();
    /// let association = token.try_associate().expect("an open scope associates");
    /// assert_eq!(scope.state(), ScopeState::Open);
    /// scope.close();
    /// assert!(token.try_associate().is_none(), "a closed scope refuses");
    /// drop(association); // dissociates: the join may complete
    /// sync_wait(scope.join()).unwrap();
    /// ```
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
    ///
    /// ```
    /// use senders::{CountingScope, Env, ScopeToken, sync_wait};
    /// use senders::scope::Association;
    /// let scope = CountingScope::new();
    /// let association = scope.token().try_associate().unwrap();
    /// assert!(!association.env().stop_token().stop_requested());
    /// scope.request_stop();
    /// assert!(association.env().stop_token().stop_requested(), "nested work sees the scope's stop");
    /// drop(association);
    /// sync_wait(scope.join()).unwrap();
    /// ```
    fn env(&self) -> &Self::Env;

    /// Hands the scope a panic of spawned work, which has no receiver to report it to.
    /// The counting scopes resume the first one from their join; a `let_async_scope`
    /// also requests stop on its other work.
    ///
    /// ```
    /// use std::panic::{AssertUnwindSafe, catch_unwind};
    /// use senders::{Panic, ScopeToken, SimpleCountingScope, sync_wait};
    /// use senders::scope::Association;
    /// let scope = SimpleCountingScope::new();
    /// let association = scope.token().try_associate().unwrap();
    /// association.report_panic(Panic::new(Box::new("lost work")));
    /// drop(association);
    /// let joined = catch_unwind(AssertUnwindSafe(|| sync_wait(scope.join()))).unwrap_err();
    /// assert_eq!(joined.downcast_ref::<&str>(), Some(&"lost work"), "the join resumes it");
    /// ```
    fn report_panic(&self, panic: Panic);

    /// Hands the scope an error of spawned work. A `let_async_scope` keeps the first one
    /// (it becomes the scope's completion) and requests stop on its other work.
    ///
    /// ```
    /// use senders::{ScopeToken, SenderExt, just, sync_wait};
    /// use senders::scope::Association;
    /// let work = just(()).with_error::<&str>().let_async_scope(|tk, ()| {
    ///     let association = tk.try_associate().expect("the scope is open");
    ///     association.report_error("disk full");
    ///     just(1).with_error::<&str>()
    /// });
    /// assert_eq!(sync_wait(work), Err("disk full"), "the error replaces the value");
    /// ```
    fn report_error(&self, error: Self::Error);

    /// The token on which a callback that only forwards the scope's stop requests
    /// registers: one stopped whenever the scope's is (the counting scopes and
    /// `let_async_scope` give the source of the association's counter shard, on a line
    /// of the worker that associated, where the scope's own source is one line that every
    /// worker would write). By default the environment's token.
    ///
    /// ```
    /// use senders::{CountingScope, ScopeToken, sync_wait};
    /// use senders::scope::Association;
    /// let scope = CountingScope::new();
    /// let association = scope.token().try_associate().unwrap();
    /// assert!(!association.forwarding_token().stop_requested());
    /// scope.request_stop();
    /// assert!(association.forwarding_token().stop_requested());
    /// drop(association);
    /// sync_wait(scope.join()).unwrap();
    /// ```
    fn forwarding_token(&self) -> StopToken<'_> {
        self.env().stop_token()
    }
}
