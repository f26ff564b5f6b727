//! `InlineScheduler`: `schedule()` completes inline, on the thread that starts it.

use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;

use crate::domain::NoDomain;
use crate::env::Env;
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, SenderTo, sender};

/// A scheduler whose `schedule()` completes inline when started (stopped if a stop was
/// already requested).
///
/// ```
/// use senders::{InlineScheduler, Scheduler, SenderExt, sync_wait};
/// let id = sync_wait(InlineScheduler.schedule().then(|()| std::thread::current().id()));
/// assert_eq!(id.unwrap(), Some(std::thread::current().id()));
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct InlineScheduler;

impl Scheduler for InlineScheduler {
    type Domain = NoDomain;
    type Sender = InlineSender;
    fn schedule(&self) -> InlineSender {
        InlineSender
    }
    fn is_current(&self) -> bool {
        true
    }
}

/// The sender of `InlineScheduler::schedule()`.
#[must_use = "senders do nothing unless connected and started"]
#[derive(Clone, Copy, Debug, Default)]
pub struct InlineSender;

sender!(impl [] InlineSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = InlineScheduler;
    fn completion_scheduler(&self) -> InlineScheduler {
        InlineScheduler
    }
});

impl<R: Receiver<(), Infallible>> SenderTo<R> for InlineSender {
    type Operation = InlineOp<R>;
    fn connect(self, receiver: R) -> InlineOp<R> {
        InlineOp { rcvr: Some(receiver), _pin: PhantomPinned }
    }
}

/// The operation state of `InlineScheduler::schedule()`.
pub struct InlineOp<R> {
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible>> OperationState for InlineOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `rcvr` is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(rcvr) = this.rcvr.take() {
            if rcvr.env().stop_token().stop_requested() {
                rcvr.set_stopped();
            } else {
                rcvr.set_value(());
            }
        }
    }
}
