//! Loom models of `when_any`'s race: children completing on different threads (the first
//! decides, exactly one completion), a parent stop request racing them (the operation
//! then completes stopped, unless it completed before the request), a loser's panic
//! replacing the winner's completion, and the winner's stop request reaching the other
//! child, through its stop callback or when it asks its token.
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_when_any`.
#![cfg(loom)]

mod loom_common;

use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::Mutex;

use loom::sync::Arc;
use loom::thread;
use loom_common::{Handle, Manual, Outcome, TestEnv};
use senders::domain::NoDomain;
use senders::schedulers::NoScheduler;
use senders::{Env, InplaceStopSource, OperationState, Panic, Receiver, Sender, SenderTo, StopCallback, when_any};

/// A sender that never completes on its own: a stop callback, registered at start,
/// completes it stopped when its stop token is asked to stop.
struct OnStop;

impl Sender for OnStop {
    type Value = u32;
    type Error = &'static str;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

/// The receiver, until the stop callback takes it.
type Slot<R> = std::sync::Arc<Mutex<Option<R>>>;

struct OnStopOp<R> {
    rcvr: Slot<R>,
    callback: Option<StopCallback<'static, Box<dyn FnOnce() + Send>>>,
    _pin: PhantomPinned,
}

impl<R: Receiver<u32, &'static str> + Send + 'static> SenderTo<R> for OnStop {
    type Operation = OnStopOp<R>;
    fn connect(self, receiver: R) -> OnStopOp<R> {
        OnStopOp { rcvr: std::sync::Arc::new(Mutex::new(Some(receiver))), callback: None, _pin: PhantomPinned }
    }
}

impl<R: Receiver<u32, &'static str> + Send + 'static> OperationState for OnStopOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `callback` is pinned in place below and never moved; `rcvr` is not
        // structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let token = {
            let rcvr = this.rcvr.lock().unwrap();
            // SAFETY: the token's source is `when_any`'s, in the same operation state as
            // this child's; the models drop that operation only after every thread is
            // joined, when the callback has run (stop is always requested) and is
            // unlinked from the source.
            unsafe { rcvr.as_ref().expect("started once").env().stop_token().detach() }
        };
        let slot = this.rcvr.clone();
        let complete: Box<dyn FnOnce() + Send> = Box::new(move || {
            let rcvr = slot.lock().unwrap().take();
            if let Some(rcvr) = rcvr {
                rcvr.set_stopped();
            }
        });
        let callback = this.callback.insert(StopCallback::new(token, complete));
        // SAFETY: the callback lives in the pinned operation and is never moved.
        unsafe { Pin::new_unchecked(callback) }.register();
    }
}

/// Records every completion it receives (there must be exactly one).
struct TestReceiver {
    env: TestEnv,
    result: std::sync::Arc<Mutex<Vec<String>>>,
}

impl Receiver<u32, &'static str> for TestReceiver {
    type Env = TestEnv;
    fn env(&self) -> &TestEnv {
        &self.env
    }
    fn set_value(self, v: u32) {
        self.result.lock().unwrap().push(format!("value {v}"));
    }
    fn set_error(self, e: &'static str) {
        self.result.lock().unwrap().push(format!("error {e}"));
    }
    fn set_stopped(self) {
        self.result.lock().unwrap().push("stopped".into());
    }
    fn set_panic(self, p: Panic) {
        self.result.lock().unwrap().push(format!("panic {}", p.message().unwrap_or("?")));
    }
}

/// What a model saw: the receiver's completions and the channel each child used.
struct Seen {
    result: Vec<String>,
    a: &'static str,
    b: &'static str,
}

/// Runs `when_any((a, b))` of two [`Manual`] children completed on two threads with
/// `a()` and `b()`, while the main thread requests stop on the parent if `parent_stop`;
/// returns what was seen once both threads are joined.
fn race(a: fn() -> Outcome, b: fn() -> Outcome, parent_stop: bool) -> Seen {
    let parent = Arc::new(InplaceStopSource::new());
    let result = std::sync::Arc::new(Mutex::new(Vec::new()));
    let (ha, hb): (Handle, Handle) = Default::default();
    let rcvr = TestReceiver { env: TestEnv(parent.clone()), result: result.clone() };
    let mut op = Box::pin(when_any((Manual(ha.clone()), Manual(hb.clone()))).connect(rcvr));
    // SAFETY: the operation is pinned and not dropped before both threads are joined,
    // after which it has completed.
    unsafe { op.as_mut().start() };
    let ca = ha.lock().unwrap().take().unwrap();
    let cb = hb.lock().unwrap().take().unwrap();
    let ta = thread::spawn(move || ca(a()));
    let tb = thread::spawn(move || cb(b()));
    if parent_stop {
        parent.request_stop();
    }
    let a = ta.join().unwrap();
    let b = tb.join().unwrap();
    drop(op);
    let result = result.lock().unwrap().clone();
    Seen { result, a, b }
}

/// Runs `when_any((a, OnStop))`: `a` completes on a thread with `a()`, the [`OnStop`]
/// child only through its stop callback, while the main thread requests stop on the
/// parent if `parent_stop`; returns the receiver's completions.
fn race_on_stop(a: fn() -> Outcome, parent_stop: bool) -> Vec<String> {
    let parent = Arc::new(InplaceStopSource::new());
    let result = std::sync::Arc::new(Mutex::new(Vec::new()));
    let ha: Handle = Default::default();
    let rcvr = TestReceiver { env: TestEnv(parent.clone()), result: result.clone() };
    let mut op = Box::pin(when_any((Manual(ha.clone()), OnStop)).connect(rcvr));
    // SAFETY: the operation is pinned and not dropped before the thread is joined,
    // after which it has completed.
    unsafe { op.as_mut().start() };
    let ca = ha.lock().unwrap().take().unwrap();
    let ta = thread::spawn(move || ca(a()));
    if parent_stop {
        parent.request_stop();
    }
    ta.join().unwrap();
    drop(op);
    result.lock().unwrap().clone()
}

/// Two values race each other and the parent's stop request: the receiver gets exactly
/// one completion, either value (the operation completed before the request) or
/// stopped.
#[test]
fn two_values_racing_a_parent_stop_complete_once() {
    loom::model(|| {
        let seen = race(|| Outcome::Value(1), || Outcome::Value(2), true);
        assert_eq!(seen.result.len(), 1, "{:?}", seen.result);
        assert!(["value 1", "value 2", "stopped"].contains(&seen.result[0].as_str()), "{:?}", seen.result);
    });
}

/// Without a parent stop, a value races an error: whichever completes first is
/// delivered, exactly once, and never stopped.
#[test]
fn a_value_racing_an_error_delivers_the_first_once() {
    loom::model(|| {
        let seen = race(|| Outcome::Value(1), || Outcome::Error("b"), false);
        assert_eq!(seen.result.len(), 1, "{:?}", seen.result);
        assert!(seen.result[0] == "value 1" || seen.result[0] == "error b", "{:?}", seen.result);
    });
}

/// A panic is never lost: whether it wins or loses against a value, and whatever the
/// parent's stop request racing both, the receiver gets exactly the panic.
#[test]
fn a_panic_is_delivered_whether_it_wins_or_loses() {
    loom::model(|| {
        let seen = race(|| Outcome::Value(1), || Outcome::Panic("boom"), true);
        assert_eq!(seen.result, ["panic boom"]);
    });
}

/// A child that asks its stop token when it completes sees the winner's stop request
/// only if the other child won: it then completes stopped and the winner's value is
/// delivered; otherwise it completes with its own value and either may win.
#[test]
fn a_child_asking_its_token_sees_stop_only_after_the_other_won() {
    loom::model(|| {
        let seen = race(|| Outcome::Value(1), || Outcome::AskThenValue(2), false);
        assert_eq!(seen.result.len(), 1, "{:?}", seen.result);
        match seen.b {
            "stopped" => assert_eq!(seen.result, ["value 1"]),
            "value" => assert!(seen.result[0] == "value 1" || seen.result[0] == "value 2", "{:?}", seen.result),
            other => panic!("unexpected completion {other}"),
        }
    });
}

/// Both children ask their tokens as they complete: the first to complete cannot have
/// seen a stop request (nothing requested one before a child won), so at most one
/// completes stopped, and then the other one's value is delivered.
#[test]
fn of_two_children_asking_their_tokens_at_most_the_loser_sees_stop() {
    loom::model(|| {
        let seen = race(|| Outcome::AskThenValue(1), || Outcome::AskThenValue(2), false);
        assert_eq!(seen.result.len(), 1, "{:?}", seen.result);
        match (seen.a, seen.b) {
            ("stopped", "value") => assert_eq!(seen.result, ["value 2"]),
            ("value", "stopped") => assert_eq!(seen.result, ["value 1"]),
            ("value", "value") => {
                assert!(seen.result[0] == "value 1" || seen.result[0] == "value 2", "{:?}", seen.result)
            }
            other => panic!("both children saw stop, or completed otherwise: {other:?}"),
        }
    });
}

/// A child that completes only when stopped is stopped by the winner's request (its
/// callback runs on the winner's thread), and the winner's value is delivered once.
#[test]
fn a_child_waiting_for_stop_is_stopped_by_the_winner() {
    loom::model(|| {
        assert_eq!(race_on_stop(|| Outcome::Value(1), false), ["value 1"]);
    });
}

/// The winner's stop request and the parent's (forwarded to the children) race to run
/// the waiting child's stop callback: it runs once, and the operation completes once,
/// with the value (completed before the parent's request) or stopped.
#[test]
fn a_child_waiting_for_stop_is_stopped_once_when_the_parent_stops_too() {
    loom::model(|| {
        let r = race_on_stop(|| Outcome::Value(1), true);
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0] == "value 1" || r[0] == "stopped", "{r:?}");
    });
}
