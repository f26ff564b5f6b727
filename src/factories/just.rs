//! `just`, `just_error`, `just_stopped`: senders that complete at once.

use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::domain::NoDomain;
use crate::receiver::Receiver;
use crate::scheduler::NoScheduler;
use crate::sender::seal::Seal;
use crate::sender::{OperationState, SenderTo, sender};

/// The sender of [`just`].
#[must_use = "senders do nothing unless connected and started"]
#[derive(Clone, Debug)]
pub struct Just<V>(V);

/// A sender that completes inline with `value` when started.
///
/// ```
/// use senders::{just, sync_wait, SenderExt};
/// assert_eq!(sync_wait(just(2).then(|x| x + 1)).unwrap(), Some(3));
/// ```
pub fn just<V>(value: V) -> Just<V> {
    Just(value)
}

/// The sender of [`just_error`].
#[must_use = "senders do nothing unless connected and started"]
pub struct JustError<V, E>(E, PhantomData<fn() -> V>);

/// A sender that completes inline with the error `error`. Its value type `V` is free,
/// so it fits wherever a `V` is expected; name it when nothing else does.
///
/// ```
/// use senders::{just_error, sync_wait};
/// assert_eq!(sync_wait(just_error::<(), _>("bad")), Err("bad"));
/// ```
pub fn just_error<V, E>(error: E) -> JustError<V, E> {
    JustError(error, PhantomData)
}

/// The sender of [`just_stopped`].
#[must_use = "senders do nothing unless connected and started"]
pub struct JustStopped<V, E>(PhantomData<fn() -> (V, E)>);

/// A sender that completes inline as stopped. Its value and error types are free.
///
/// ```
/// use senders::{just_stopped, sync_wait};
/// use std::convert::Infallible;
/// assert_eq!(sync_wait(just_stopped::<i32, Infallible>()), Ok(None));
/// ```
pub fn just_stopped<V, E>() -> JustStopped<V, E> {
    JustStopped(PhantomData)
}

sender!(impl [V] Just<V> {
    type Value = V;
    type Error = Infallible;
    const SENDS_STOPPED: bool = false;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
    fn into_ready_value(self) -> Result<V, Self> {
        Ok(self.0)
    }
    fn into_held_value(self, _: Seal) -> Result<V, Self> {
        Ok(self.0)
    }
});

sender!([V, E] JustError<V, E> { value = V, error = E, stopped = false, domain = NoDomain });

sender!([V, E] JustStopped<V, E> { value = V, error = E, stopped = true, domain = NoDomain });

/// What a [`JustOp`] completes with.
enum Outcome<V, E> {
    Value(V),
    Error(E),
    Stopped,
}

/// The operation state of the `just` family.
pub struct JustOp<V, E, R> {
    inner: Option<(Outcome<V, E>, R)>,
    _pin: PhantomPinned,
}

impl<V, E, R: Receiver<V, E>> OperationState for JustOp<V, E, R> {
    #[inline]
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `inner` is not structurally pinned: it is moved out, never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some((outcome, rcvr)) = this.inner.take() {
            match outcome {
                Outcome::Value(v) => rcvr.set_value(v),
                Outcome::Error(e) => rcvr.set_error(e),
                Outcome::Stopped => rcvr.set_stopped(),
            }
        }
    }
}

fn op<V, E, R>(outcome: Outcome<V, E>, rcvr: R) -> JustOp<V, E, R> {
    JustOp { inner: Some((outcome, rcvr)), _pin: PhantomPinned }
}

impl<V, R: Receiver<V, Infallible>> SenderTo<R> for Just<V> {
    type Operation = JustOp<V, Infallible, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        op(Outcome::Value(self.0), receiver)
    }
}

impl<V, E, R: Receiver<V, E>> SenderTo<R> for JustError<V, E> {
    type Operation = JustOp<V, E, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        op(Outcome::Error(self.0), receiver)
    }
}

impl<V, E, R: Receiver<V, E>> SenderTo<R> for JustStopped<V, E> {
    type Operation = JustOp<V, E, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        op(Outcome::Stopped, receiver)
    }
}
