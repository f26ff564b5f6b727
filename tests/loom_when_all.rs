//! Loom models of `when_all`'s completion counting: children completing on different
//! threads, first failure wins, and the parent's stop request racing the completions
//! (the forwarder holds a count so the operation is never completed underneath it).
//!
//! Run with `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --release --test loom_when_all`.
#![cfg(loom)]

mod loom_common;

use std::sync::Mutex;

use loom::sync::Arc;
use loom::thread;
use loom_common::{Handle, Manual, Outcome, TestEnv};
use senders::{EmptyEnv, InplaceStopSource, OperationState, Panic, Receiver, SenderTo, when_all};

struct TestReceiver {
    env: TestEnv,
    result: std::sync::Arc<Mutex<Vec<String>>>,
}

impl Receiver<(u32, u32), &'static str> for TestReceiver {
    type Env = TestEnv;
    fn env(&self) -> &TestEnv {
        &self.env
    }
    fn set_value(self, (a, b): (u32, u32)) {
        self.result.lock().unwrap().push(format!("value {a} {b}"));
    }
    fn set_error(self, e: &'static str) {
        self.result.lock().unwrap().push(format!("error {e}"));
    }
    fn set_stopped(self) {
        self.result.lock().unwrap().push("stopped".into());
    }
    fn set_panic(self, _: Panic) {
        self.result.lock().unwrap().push("panic".into());
    }
}

/// Runs `when_all((a, b))`, completes `a` and `b` on two threads while the main thread
/// requests stop on the parent, and returns what the receiver saw.
fn run(a: fn() -> Outcome, b: fn() -> Outcome) -> Vec<String> {
    run_with(a, b, false)
}

/// As `run`; with `stop_first`, the parent's stop is requested before the children run.
fn run_with(a: fn() -> Outcome, b: fn() -> Outcome, stop_first: bool) -> Vec<String> {
    let parent = Arc::new(InplaceStopSource::new());
    if stop_first {
        parent.request_stop();
    }
    let result = std::sync::Arc::new(Mutex::new(Vec::new()));
    let (ha, hb): (Handle, Handle) = Default::default();
    let rcvr = TestReceiver { env: TestEnv(parent.clone()), result: result.clone() };
    let mut op = Box::pin(when_all((Manual(ha.clone()), Manual(hb.clone()))).connect(rcvr));
    // SAFETY: the operation is pinned and not dropped before both threads are joined,
    // after which it has completed.
    unsafe { op.as_mut().start() };
    let ca = ha.lock().unwrap().take().unwrap();
    let cb = hb.lock().unwrap().take().unwrap();
    let ta = thread::spawn(move || ca(a()));
    let tb = thread::spawn(move || cb(b()));
    parent.request_stop();
    ta.join().unwrap();
    tb.join().unwrap();
    drop(op);
    let _ = EmptyEnv;
    let r = result.lock().unwrap().clone();
    r
}

#[test]
fn two_values_racing_a_parent_stop_complete_once_with_both_values() {
    loom::model(|| {
        let r = run(|| Outcome::Value(1), || Outcome::Value(2));
        assert_eq!(r, ["value 1 2"]);
    });
}

#[test]
fn an_error_beats_a_value_and_a_parent_stop() {
    loom::model(|| {
        let r = run(|| Outcome::Value(1), || Outcome::Error("b"));
        assert_eq!(r, ["error b"]);
    });
}

#[test]
fn an_error_beats_a_concurrent_stop() {
    loom::model(|| {
        let r = run(|| Outcome::Stopped, || Outcome::Error("b"));
        assert_eq!(r, ["error b"]);
    });
}

#[test]
fn first_of_two_errors_wins_and_only_one_completion_happens() {
    loom::model(|| {
        let r = run(|| Outcome::Error("a"), || Outcome::Error("b"));
        assert_eq!(r.len(), 1);
        assert!(r[0] == "error a" || r[0] == "error b", "{r:?}");
    });
}

/// The parent's stop token is linked to the children's source only when a child asks for
/// its token: here both children ask, racing each other (one wins the link, the other
/// goes on at once), the parent's stop request and the completion. The operation
/// completes once, stopped or with both values.
#[test]
fn children_linking_the_parent_token_lazily_race_its_stop_request() {
    loom::model(|| {
        let r = run(|| Outcome::AskThenValue(1), || Outcome::AskThenValue(2));
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0] == "value 1 2" || r[0] == "stopped", "{r:?}");
    });
}

/// One child asks (and links), the other never does: a parent stop after the link is
/// forwarded, and the operation completes once.
#[test]
fn one_child_linking_races_the_parent_stop_and_the_other_completion() {
    loom::model(|| {
        let r = run(|| Outcome::AskThenValue(1), || Outcome::Value(2));
        assert_eq!(r.len(), 1, "{r:?}");
        assert!(r[0] == "value 1 2" || r[0] == "stopped", "{r:?}");
    });
}

/// A stop requested before the children ask reaches them through the lazy link.
#[test]
fn a_parent_stop_requested_before_the_link_reaches_the_children() {
    loom::model(|| {
        let r = run_with(|| Outcome::AskThenValue(1), || Outcome::AskThenValue(2), true);
        assert_eq!(r, ["stopped"]);
    });
}
