//! `stop_when`: run a sender with a stop token that also fires when another token does.

use std::cell::UnsafeCell;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::env::Env;
use crate::panic::Panic;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, adaptor_sender};
use crate::stop::{MergedStopSource, StopToken};

/// The sender of `stop_when(sndr, token)`.
#[must_use = "senders do nothing unless connected and started"]
pub struct StopWhen<'a, S> {
    sndr: S,
    token: StopToken<'a>,
}

/// Runs `sndr` with a stop token that fires when the receiver's token does, or when
/// `token` does. The token is borrowed, so its source outlives the operation.
///
/// ```
/// use senders::{InplaceStopSource, just, stop_when, sync_wait, SenderExt};
/// let source = InplaceStopSource::new();
/// source.request_stop();
/// // `bulk` looks at its stop token and sees the merged request.
/// let r = sync_wait(stop_when(just(()).bulk(10, |_, _| ()), source.token()));
/// assert_eq!(r.unwrap(), None);
/// ```
pub fn stop_when<S: Sender>(sndr: S, token: StopToken<'_>) -> StopWhen<'_, S> {
    StopWhen { sndr, token }
}

adaptor_sender!([S: Sender] StopWhen<'_, S> where [] {
    value = S::Value, error = S::Error, stopped = true
});

/// The final receiver and the merged stop source.
pub struct StopWhenState<'a, R> {
    rcvr: UnsafeCell<Option<R>>,
    merged: UnsafeCell<Option<MergedStopSource<'a>>>,
}

impl<'a, R> StopWhenState<'a, R> {
    fn rcvr<V, E>(&self) -> &R
    where
        R: Receiver<V, E>,
    {
        // SAFETY: present until the completion takes it.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("stop_when: env after completion")
    }

    /// Deregisters the merged source from both inputs, then hands out the receiver.
    fn finish(&self) -> R {
        // SAFETY: called once, by the child's completion; the child has deregistered its
        // own callbacks on the merged source before completing.
        unsafe {
            *self.merged.get() = None;
            (*self.rcvr.get()).take().expect("stop_when: completes once")
        }
    }
}

/// The child's receiver, and its environment: the parent's with the merged token.
pub struct StopWhenReceiver<'a, V, E, R> {
    state: *const StopWhenState<'a, R>,
    _t: PhantomData<fn() -> (V, E)>,
}

// SAFETY: the child may complete on another thread and run the final receiver there;
// the env (the parent's, the merged source) is shared, hence `Sync`.
unsafe impl<V: Send, E: Send, R: Receiver<V, E> + Send + Sync> Send for StopWhenReceiver<'_, V, E, R> where R::Env: Sync {}
// SAFETY: a shared reference only reaches the environment.
unsafe impl<V, E, R: Receiver<V, E> + Sync> Sync for StopWhenReceiver<'_, V, E, R> where R::Env: Sync {}

impl<'a, V, E, R: Receiver<V, E>> StopWhenReceiver<'a, V, E, R> {
    fn state(&self) -> &StopWhenState<'a, R> {
        // SAFETY: the state lives in the pinned operation until the final completion.
        unsafe { &*self.state }
    }
}

impl<V, E, R: Receiver<V, E>> Env for StopWhenReceiver<'_, V, E, R> {
    type Scheduler = <R::Env as Env>::Scheduler;
    type Domain = <R::Env as Env>::Domain;
    fn scheduler(&self) -> Self::Scheduler {
        self.state().rcvr().env().scheduler()
    }
    fn stop_token(&self) -> StopToken<'_> {
        // SAFETY: set before the child was connected and kept until its completion.
        match unsafe { (*self.state().merged.get()).as_ref() } {
            // SAFETY: the merged source is pinned in place inside the pinned operation.
            Some(merged) => unsafe { Pin::new_unchecked(merged) }.token(),
            None => StopToken::never(),
        }
    }
    fn prop(&self, key: std::any::TypeId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.state().rcvr().env().prop(key)
    }
}

impl<V, E, R: Receiver<V, E>> Receiver<V, E> for StopWhenReceiver<'_, V, E, R> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: V) {
        self.state().finish().set_value(value)
    }
    fn set_error(self, error: E) {
        self.state().finish().set_error(error)
    }
    fn set_stopped(self) {
        self.state().finish().set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.state().finish().set_panic(panic)
    }
}

/// The operation state of `stop_when`.
pub struct StopWhenOp<'a, S, R>
where
    S: Sender + SenderTo<StopWhenReceiver<'a, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    state: StopWhenState<'a, R>,
    token: StopToken<'a>,
    sndr: Option<S>,
    child: Option<S::Operation>,
    _pin: PhantomPinned,
}

impl<'a, S, R> SenderTo<R> for StopWhen<'a, S>
where
    S: Sender + SenderTo<StopWhenReceiver<'a, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = StopWhenOp<'a, S, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        StopWhenOp {
            state: StopWhenState { rcvr: UnsafeCell::new(Some(receiver)), merged: UnsafeCell::new(None) },
            token: self.token,
            sndr: Some(self.sndr),
            child: None,
            _pin: PhantomPinned,
        }
    }
}

impl<'a, S, R> OperationState for StopWhenOp<'a, S, R>
where
    S: Sender + SenderTo<StopWhenReceiver<'a, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `state` and `child` are only addressed in place; `sndr` is not
        // structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(sndr) = this.sndr.take() else { return };
        // SAFETY: the parent env outlives this operation's completion, and `finish` drops
        // the merged source (deregistering from this token) before completing.
        let parent = unsafe { this.state.rcvr().env().stop_token().detach() };
        // SAFETY: the slot is ours until the child starts; the merged source is pinned in
        // place inside the pinned operation.
        unsafe {
            let merged = (*this.state.merged.get()).insert(MergedStopSource::new(parent, this.token));
            Pin::new_unchecked(merged).register();
        }
        let rcvr = StopWhenReceiver { state: &this.state, _t: PhantomData };
        let child = this.child.insert(sndr.connect(rcvr));
        // SAFETY: pinned in place, started once.
        unsafe { Pin::new_unchecked(child).start() };
    }
}
