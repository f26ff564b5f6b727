//! What the loom models share: a child whose completion the model delivers by hand, from
//! any thread, and an environment with the parent's stop token.
#![allow(dead_code)] // each model file uses part of it

use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::Mutex;

use loom::sync::Arc;
use senders::domain::NoDomain;
use senders::schedulers::NoScheduler;
use senders::{Env, InplaceStopSource, OperationState, Panic, Receiver, Sender, SenderTo, StopToken};

/// How a [`Manual`] child completes when the model tells it to.
pub enum Outcome {
    Value(u32),
    Error(&'static str),
    Stopped,
    /// `set_panic`, with this message.
    Panic(&'static str),
    /// Asks the environment for the stop token first (`when_all` links the parent's
    /// token to the children's source then, lazily), then completes stopped if stop was
    /// requested, else with the value.
    AskThenValue(u32),
}

/// A started child's completion: delivers the outcome and says which channel it used.
pub type Completion = Box<dyn FnOnce(Outcome) -> &'static str + Send>;
pub type Handle = std::sync::Arc<Mutex<Option<Completion>>>;

/// A sender whose completion the model delivers by hand, from any thread: `start`
/// leaves its completion in the handle.
pub struct Manual(pub Handle);

impl Sender for Manual {
    type Value = u32;
    type Error = &'static str;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

pub struct ManualOp<R> {
    handle: Handle,
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl<R: Receiver<u32, &'static str> + Send + 'static> SenderTo<R> for Manual {
    type Operation = ManualOp<R>;
    fn connect(self, receiver: R) -> ManualOp<R> {
        ManualOp { handle: self.0, rcvr: Some(receiver), _pin: PhantomPinned }
    }
}

impl<R: Receiver<u32, &'static str> + Send + 'static> OperationState for ManualOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is structurally pinned here.
        let this = unsafe { self.get_unchecked_mut() };
        let rcvr = this.rcvr.take().unwrap();
        *this.handle.lock().unwrap() = Some(Box::new(move |o| match o {
            Outcome::Value(v) => {
                rcvr.set_value(v);
                "value"
            }
            Outcome::Error(e) => {
                rcvr.set_error(e);
                "error"
            }
            Outcome::Stopped => {
                rcvr.set_stopped();
                "stopped"
            }
            Outcome::Panic(m) => {
                rcvr.set_panic(Panic::new(Box::new(m)));
                "panic"
            }
            Outcome::AskThenValue(v) => {
                if rcvr.env().stop_token().stop_requested() {
                    rcvr.set_stopped();
                    "stopped"
                } else {
                    rcvr.set_value(v);
                    "value"
                }
            }
        }));
    }
}

/// The parent's environment: its stop token, no scheduler.
pub struct TestEnv(pub Arc<InplaceStopSource>);

impl Env for TestEnv {
    type Scheduler = NoScheduler;
    type Domain = NoDomain;
    fn scheduler(&self) -> NoScheduler {
        NoScheduler
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.0.token()
    }
}
