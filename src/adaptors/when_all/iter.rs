//! `when_all_iter`: the list form over an iterator, pulled when the operation starts.
//!
//! The sender holds the iterator (not yet iterated); its operation holds the iterator
//! and the receiver until it starts, then collects the senders into a
//! [`BlockVec`](crate::adaptors::BlockVec) and becomes, in place, the operation of
//! `when_all` over them (with its early and late domain customization). So building a
//! recursion of `when_all_iter`s builds one node, and each node's children are made on
//! the thread that starts it: on a pool, the worker that runs (or stole) the node.

use std::marker::PhantomPinned;
use std::pin::Pin;

use crate::block::BlockVec;
use crate::domain::MaybeDomain;
use crate::panic::catch;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, sender};

use super::when_all;

/// The `when_all` that a [`WhenAllIter`] of senders `S` becomes when it starts: the
/// early-customized `when_all` of their [`BlockVec`].
pub type WhenAllOfBlockVec<S> = <<S as Sender>::Domain as MaybeDomain>::EarlyWhenAll<BlockVec<S>>;

/// The sender of [`when_all_iter`](super::when_all_iter): the iterator of child senders,
/// pulled when the operation starts.
#[must_use = "senders do nothing unless connected and started"]
#[derive(Clone, Debug)]
pub struct WhenAllIter<I>(pub(super) I);

sender!([I] WhenAllIter<I> where [I: IntoIterator, I::Item: Sender] {
    value = Vec<<I::Item as Sender>::Value>,
    error = <I::Item as Sender>::Error,
    stopped = <I::Item as Sender>::SENDS_STOPPED,
    domain = <I::Item as Sender>::Domain,
});

impl<I, R> SenderTo<R> for WhenAllIter<I>
where
    I: IntoIterator,
    I::Item: Sender,
    R: Receiver<Vec<<I::Item as Sender>::Value>, <I::Item as Sender>::Error>,
    WhenAllOfBlockVec<I::Item>: SenderTo<R>,
{
    type Operation = WhenAllIterOp<I, R, <WhenAllOfBlockVec<I::Item> as SenderTo<R>>::Operation>;
    #[inline]
    fn connect(self, receiver: R) -> Self::Operation {
        WhenAllIterOp { unstarted: Some((self.0, receiver)), op: None, _pin: PhantomPinned }
    }
}

/// The operation state of [`WhenAllIter`]: before the start, the iterator and the
/// receiver; from it on, the `when_all`'s own operation.
pub struct WhenAllIterOp<I, R, Op> {
    unstarted: Option<(I, R)>,
    op: Option<Op>,
    _pin: PhantomPinned,
}

impl<I, R, Op> OperationState for WhenAllIterOp<I, R, Op>
where
    I: IntoIterator,
    I::Item: Sender,
    R: Receiver<Vec<<I::Item as Sender>::Value>, <I::Item as Sender>::Error>,
    WhenAllOfBlockVec<I::Item>: SenderTo<R, Operation = Op>,
    Op: OperationState,
{
    #[inline]
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `op` is not moved once written: it is pinned where it lies; the
        // iterator and the receiver are moved out (not structurally pinned).
        let this = unsafe { self.get_unchecked_mut() };
        let Some((iter, rcvr)) = this.unstarted.take() else { return };
        // The user's iterator runs here, on the starting thread; a panic in it (or in a
        // sender's construction) is delivered, after the senders made so far and the
        // rest of the iterator are dropped (inside `catch`).
        match catch(move || iter.into_iter().collect::<BlockVec<_>>()) {
            Ok(children) => {
                let op = this.op.insert(when_all(children).connect(rcvr));
                // SAFETY: the operation lies in our pinned state, is started once, and
                // is never moved out (`op` is not written again).
                unsafe { Pin::new_unchecked(op).start() }
            }
            Err(panic) => rcvr.set_panic(panic),
        }
    }
}
