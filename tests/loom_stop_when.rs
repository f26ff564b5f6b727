//! Loom models of `stop_when`'s forwarding: a completion that arrives while a forwarded
//! stop request is running is handed on only after that request returns. Run with
//! `tools/loom.sh loom_stop_when` (or `RUSTFLAGS="--cfg loom" cargo test --release
//! --test loom_stop_when`).
#![cfg(loom)]

use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use loom::thread;

use loom_common::TestEnv;
use senders::domain::NoDomain;
use senders::schedulers::NoScheduler;
use senders::*;

mod loom_common;

/// What the model observes.
#[derive(Default)]
struct Probe {
    /// A stop callback of the child is running inside a forwarded stop request (set on
    /// entry, cleared on exit; not for a callback run inline by its registration, on the
    /// starting thread, which the model never requests stop from).
    in_callback: AtomicBool,
    /// Completions of the final receiver.
    completions: AtomicUsize,
}

/// The final receiver: counts its completion and checks that no stop callback of the
/// child is still running then (the operation may be freed as soon as it is called). Its
/// token can stop (its source is never asked to), so that `stop_when` merges it with the
/// given one and forwards: under a token that cannot stop, `stop_when` would hand the
/// child the given token itself, and the child may complete inside its request.
struct Check(Arc<Probe>, TestEnv);

impl Receiver<(), Infallible> for Check {
    type Env = TestEnv;
    fn env(&self) -> &TestEnv {
        &self.1
    }
    fn set_value(self, (): ()) {
        self.arrive();
    }
    fn set_error(self, e: Infallible) {
        match e {}
    }
    fn set_stopped(self) {
        self.arrive();
    }
    fn set_panic(self, _: Panic) {
        panic!("no panic in the model");
    }
}

impl Check {
    fn arrive(&self) {
        assert!(!self.0.in_callback.load(Ordering::SeqCst), "completed inside a running stop request");
        self.0.completions.fetch_add(1, Ordering::SeqCst);
    }
}

/// The child: on a stop request it completes stopped from inside its stop callback
/// (after dropping its own registration); with `finish_alone`, `start` also tries to
/// complete it with a value right after registering, racing the callback (whoever claims
/// the receiver completes; `start` drops the registration first).
struct Child<'a> {
    probe: Arc<Probe>,
    finish_alone: bool,
    _borrow: PhantomData<&'a ()>,
}

impl Sender for Child<'_> {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

type Callback<'a> = StopCallback<'static, Box<dyn FnOnce() + Send + 'a>>;

struct ChildOp<'a, R> {
    probe: Arc<Probe>,
    finish_alone: bool,
    /// The thread that connected (and starts) the operation.
    starter: thread::ThreadId,
    rcvr: Option<R>,
    callback: Option<Callback<'a>>,
    claimed: AtomicBool,
    _pin: PhantomPinned,
}

/// The operation, for the callback on the requesting thread.
struct OpPtr<T>(*mut T);
// SAFETY: the operation lives until its completion, which the one claimant makes, and
// the receiver is `Send`.
unsafe impl<T> Send for OpPtr<T> {}

impl<'a, R: Receiver<(), Infallible> + Send + 'a> SenderTo<R> for Child<'a> {
    type Operation = ChildOp<'a, R>;
    fn connect(self, receiver: R) -> ChildOp<'a, R> {
        ChildOp {
            probe: self.probe,
            finish_alone: self.finish_alone,
            starter: thread::current().id(),
            rcvr: Some(receiver),
            callback: None,
            claimed: AtomicBool::new(false),
            _pin: PhantomPinned,
        }
    }
}

impl<'a, R: Receiver<(), Infallible> + Send + 'a> ChildOp<'a, R> {
    /// Completes stopped from the stop callback, if the starter did not claim first.
    ///
    /// # Safety
    ///
    /// `this` is the started operation, alive until its completion.
    unsafe fn on_stop(this: *mut Self) {
        // SAFETY: the caller's contract.
        let (probe, starter) = unsafe { ((*this).probe.clone(), (*this).starter) };
        let forwarded = thread::current().id() != starter;
        probe.in_callback.store(forwarded, Ordering::SeqCst);
        // SAFETY: as above.
        if !unsafe { (*this).claimed.swap(true, Ordering::AcqRel) } {
            // SAFETY: claimed: the receiver and the registration are ours. Dropping our
            // own registration from inside the callback is allowed.
            let rcvr = unsafe {
                (*this).callback = None;
                (*this).rcvr.take().unwrap()
            };
            rcvr.set_stopped();
        }
        probe.in_callback.store(false, Ordering::SeqCst);
    }

    /// The starter's attempt to complete with a value.
    ///
    /// # Safety
    ///
    /// As for `on_stop`.
    unsafe fn finish_alone(this: *mut Self) {
        // SAFETY: the caller's contract. Claimed: the registration is dropped first
        // (waiting for a callback running on another thread, which lost the claim), as
        // the protocol asks; not claimed: the callback completes, and nothing is touched.
        unsafe {
            if !(*this).claimed.swap(true, Ordering::AcqRel) {
                (*this).callback = None;
                (*this).rcvr.take().unwrap().set_value(());
            }
        }
    }
}

impl<'a, R: Receiver<(), Infallible> + Send + 'a> OperationState for ChildOp<'a, R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is moved out of the pinned operation.
        let this: *mut Self = unsafe { self.get_unchecked_mut() };
        let op = OpPtr(this);
        // SAFETY: `this` is valid until its completion; the token outlives the callback,
        // which is dropped before the operation completes.
        let token = unsafe { (*this).rcvr.as_ref().unwrap().env().stop_token().detach() };
        let on_stop: Box<dyn FnOnce() + Send + 'a> = Box::new(move || {
            let op = op;
            // SAFETY: the callback runs while the operation is alive (it is deregistered,
            // or claimed by this callback, before the operation completes).
            unsafe { Self::on_stop(op.0) }
        });
        // SAFETY: as above. `finish_alone` is read before registering; after it only the
        // claim is touched before knowing who completes (the model frees the operation
        // only after the requester has returned).
        unsafe {
            let finish_alone = (*this).finish_alone;
            let callback = (*this).callback.insert(StopCallback::new(token, on_stop));
            Pin::new_unchecked(callback).register_unchecked();
            if finish_alone {
                Self::finish_alone(this);
            }
        }
    }
}

fn run(finish_alone: bool) {
    loom::model(move || {
        let source = Arc::new(InplaceStopSource::new());
        let probe = Arc::new(Probe::default());
        let requester = {
            let source = source.clone();
            thread::spawn(move || {
                source.request_stop();
            })
        };
        let sndr = stop_when(Child { probe: probe.clone(), finish_alone, _borrow: PhantomData }, source.token());
        let parent = TestEnv(Arc::new(InplaceStopSource::new()));
        let mut op = Box::pin(sndr.connect(Check(probe.clone(), parent)));
        // SAFETY: pinned in the box, started once, dropped only after it completed.
        unsafe { op.as_mut().start() };
        requester.join().unwrap();
        assert_eq!(probe.completions.load(Ordering::SeqCst), 1, "exactly one completion");
        drop(op);
    });
}

#[test]
fn completion_inside_a_forwarded_request_waits_for_it() {
    run(false);
}

#[test]
fn completion_racing_a_forwarded_request() {
    run(true);
}
