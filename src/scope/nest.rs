//! `nest` (P3149R6): associate a sender with a scope without starting it.

use std::marker::PhantomPinned;
use std::pin::Pin;

use crate::adaptors::stop_when::{StopWhen, stop_when};
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::StopToken;

use super::token::{Association, ScopeToken};

/// The sender of [`nest`]: *associated* (it holds one count on the scope, from creation
/// until its operation is destroyed) or *unassociated* (the scope refused; it completes
/// with `set_stopped` and never runs the sender).
#[must_use = "senders do nothing unless connected and started"]
pub struct Nest<S: Sender, Tk: ScopeToken> {
    token: Tk,
    inner: Option<(S, Tk::Association)>,
}

/// Associates `sndr` with the scope of `token` (P3149R6 `nest`). The count is taken now
/// and moves with the sender, then into its operation on connect; the operation
/// destroys the child operation *before* it dissociates. If the scope refuses, the
/// result is an unassociated sender that completes stopped, and `sndr` is dropped.
///
/// A [`CountingScope`](crate::CountingScope)'s `request_stop` reaches the nested work:
/// its stop token is merged with the receiver's.
///
/// ```
/// use senders::{SimpleCountingScope, just, nest, sync_wait, SenderExt};
/// let scope = SimpleCountingScope::new();
/// let work = nest(just(40).then(|x| x + 2), scope.token());
/// scope.close();
/// // Associated before the close: it still runs.
/// assert_eq!(sync_wait(work).unwrap(), Some(42));
/// // After the close: unassociated, completes stopped.
/// assert_eq!(sync_wait(nest(just(1), scope.token())).unwrap(), None);
/// sync_wait(scope.join()).unwrap();
/// ```
pub fn nest<S: Sender, Tk: ScopeToken>(sndr: S, token: Tk) -> Nest<S, Tk> {
    let inner = token.try_associate().map(|assoc| (sndr, assoc));
    Nest { token, inner }
}

impl<S: Sender, Tk: ScopeToken> Nest<S, Tk> {
    /// Whether this sender holds an association (the scope accepted it).
    ///
    /// ```
    /// use senders::{SimpleCountingScope, just, nest, sync_wait};
    /// let scope = SimpleCountingScope::new();
    /// let early = nest(just(1), scope.token());
    /// scope.close();
    /// let late = nest(just(2), scope.token());
    /// assert!(early.is_associated() && !late.is_associated());
    /// assert_eq!(sync_wait(late).unwrap(), None, "unassociated: completes stopped");
    /// drop(early); // dissociates, so the join can complete
    /// sync_wait(scope.join()).unwrap();
    /// ```
    pub fn is_associated(&self) -> bool {
        self.inner.is_some()
    }
}

/// Copying an associated sender associates again; if the scope refuses, the copy is
/// unassociated. Copying an unassociated sender gives an unassociated one.
impl<S: Sender, Tk: ScopeToken> Clone for Nest<S, Tk>
where
    S: Clone,
{
    fn clone(&self) -> Self {
        let inner =
            self.inner.as_ref().and_then(|(sndr, _)| self.token.try_associate().map(|assoc| (sndr.clone(), assoc)));
        Nest { token: self.token, inner }
    }
}

impl<S: Sender, Tk: ScopeToken> std::fmt::Debug for Nest<S, Tk> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Nest").field("associated", &self.is_associated()).finish_non_exhaustive()
    }
}

sender!([S: Sender, Tk: ScopeToken] Nest<S, Tk> { value = <Merged<S> as Sender>::Value, error = <Merged<S> as Sender>::Error, stopped = true, domain = <S as Sender>::Domain });

/// The nested sender with the association's stop token merged in.
type Merged<S> = StopWhen<'static, S>;

impl<S, Tk, R> SenderTo<R> for Nest<S, Tk>
where
    S: Sender,
    Tk: ScopeToken,
    R: Receiver<<Merged<S> as Sender>::Value, <Merged<S> as Sender>::Error>,
    Merged<S>: SenderTo<R>,
{
    type Operation = NestOp<S, Tk, R>;
    fn connect(self, receiver: R) -> NestOp<S, Tk, R> {
        let (sndr, assoc) = self.inner.map_or((None, None), |(s, a)| (Some(s), Some(a)));
        NestOp { child: None, sndr, rcvr: Some(receiver), assoc, _pin: PhantomPinned }
    }
}

/// The operation state of [`nest`]. Field order matters: the child operation is dropped
/// before the association.
pub struct NestOp<S, Tk, R>
where
    S: Sender,
    Tk: ScopeToken,
    R: Receiver<<Merged<S> as Sender>::Value, <Merged<S> as Sender>::Error>,
    Merged<S>: SenderTo<R>,
{
    child: Option<<Merged<S> as SenderTo<R>>::Operation>,
    sndr: Option<S>,
    rcvr: Option<R>,
    assoc: Option<Tk::Association>,
    _pin: PhantomPinned,
}

impl<S, Tk, R> OperationState for NestOp<S, Tk, R>
where
    S: Sender,
    Tk: ScopeToken,
    R: Receiver<<Merged<S> as Sender>::Value, <Merged<S> as Sender>::Error>,
    Merged<S>: SenderTo<R>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: fields are never moved out of the pinned operation except the
        // `Option`s taken here, which are not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let rcvr = this.rcvr.take().expect("nest: started once");
        let (Some(sndr), Some(assoc)) = (this.sndr.take(), this.assoc.as_ref()) else {
            // Unassociated: the scope refused when the sender was made.
            return rcvr.set_stopped();
        };
        // SAFETY: the token borrows the association, which lives in this pinned operation
        // (it does not move again) and is dropped after `child` (field order), so the
        // token outlives every use the child makes of it. It is the association's
        // forwarding token (its shard's source, stopped with the scope's), so that the
        // merged source's forwarder does not register on the scope's one shared source.
        let token = unsafe { std::mem::transmute::<StopToken<'_>, StopToken<'static>>(assoc.forwarding_token()) };
        let child = this.child.insert(stop_when(sndr, token).connect(rcvr));
        // SAFETY: the child lives in the pinned operation and is started once.
        unsafe { Pin::new_unchecked(child).start() }
    }
}
