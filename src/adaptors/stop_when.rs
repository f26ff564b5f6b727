//! `stop_when`: run a sender with a stop token that also fires when another token does.
//!
//! **Completing inside a forwarded request.** A forwarder runs `request_stop` on the
//! merged source, which runs the child's stop callbacks; one of them may complete the
//! child, and the final receiver may then free the operation, merged source included,
//! while that `request_stop` is still on the stack (it retakes the source's lock after
//! each callback), even on the same thread, where deregistration does not wait. So
//! `stop_when` does not use `MergedStopSource`: its operation holds the merged source,
//! its two forwarding callbacks and one state word, `IN_FLIGHT` times the number of
//! forwarders inside `request_stop` plus a `DONE` bit. A forwarder enters (compare-
//! exchange) only while `DONE` is clear. The child's completion is stored, then sets
//! `DONE` (AcqRel): if no forwarder was in flight it deregisters the forwarders
//! (waiting for any popped on another thread, which sees `DONE` and leaves at once) and
//! completes at once; otherwise the last forwarder to leave hands the stored completion
//! on, on its own thread. Hence `stop_when` (and `nest`, built on it) require `Send`
//! values, errors and receivers.
//!
//! Regression tests: `tests/scope.rs`
//! (`stop_when_completes_only_after_a_forwarded_stop_request_returns`,
//! `nest_completes_only_after_the_scopes_stop_request_returns`), and the loom models in
//! `tests/loom_stop_when.rs` (a completion inside the forwarded request, and one racing
//! it).

use std::cell::UnsafeCell;
use std::marker::PhantomPinned;
use std::pin::Pin;

use crate::env::Env;
use crate::outcome::Outcome;
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, adaptor_sender};
use crate::stop::{InplaceStopSource, Invoke, RawStopCallback, StopToken};
use crate::sync::{AtomicBool, AtomicUsize, Ordering};

/// The sender of [`stop_when(sndr, token)`](stop_when).
#[must_use = "senders do nothing unless connected and started"]
pub struct StopWhen<'a, S> {
    sndr: S,
    token: StopToken<'a>,
}

/// Runs `sndr` with a stop token that fires when the receiver's token does, or when
/// `token` does. The token is borrowed, so its source outlives the operation.
///
/// When one of the two tokens can never stop (`StopToken::never()`, or a receiver
/// without stop), `sndr` sees the other one itself: no merged source, no forwarding
/// callback, as if `stop_when` were not there.
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

adaptor_sender!(['a, S: Sender] StopWhen<'a, S> where [] {
    value = S::Value, error = S::Error, stopped = true
});

/// The part of the state that the forwarding callbacks reach, whatever the receiver type:
/// the merged source and the forwarders' state word. It heads [`StopWhenState`], so a
/// pointer to it is a pointer to the whole state.
#[repr(C)]
struct Forwarding {
    /// The stop source whose token the child sees.
    source: InplaceStopSource,
    /// `IN_FLIGHT` times the number of forwarders inside `source.request_stop()`, plus
    /// `DONE` once the child has completed.
    flight: AtomicUsize,
    /// Hands the stored completion on (`StopWhenState::complete_deferred`).
    complete: unsafe fn(*const Forwarding),
    /// The first panic of the child's stop callbacks, run by a forwarder: the operation
    /// completes with it. Written by the forwarder that sets `panicked`, before it
    /// leaves; read by the completion, after every forwarder has left.
    stop_panic: UnsafeCell<Option<Panic>>,
    panicked: AtomicBool,
}

/// Set in `Forwarding::flight` once the child has completed.
const DONE: usize = 1;
/// One forwarder running, in `Forwarding::flight`.
const IN_FLIGHT: usize = 2;

impl Forwarding {
    /// A forwarder enters, unless the child has completed (nothing left to stop).
    fn enter(&self) -> bool {
        let mut cur = self.flight.load(Ordering::Acquire);
        loop {
            if cur & DONE != 0 {
                return false;
            }
            match self.flight.compare_exchange_weak(cur, cur + IN_FLIGHT, Ordering::Acquire, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => cur = now,
            }
        }
    }

    /// A forwarder leaves. Returns `true` iff it is the last one out after the child
    /// completed: the completion was left to it.
    fn leave(&self) -> bool {
        self.flight.fetch_sub(IN_FLIGHT, Ordering::AcqRel) == IN_FLIGHT | DONE
    }
}

/// The forwarding callback: requests stop on the merged source. While it runs (perhaps
/// running the child's own stop callback, which may complete the child), the child's
/// completion is held back, because the operation, and the source inside it, may be
/// freed as soon as the final receiver is called.
struct Forward(*const Forwarding);

// SAFETY: the pointer targets a `Forwarding` heading a pinned `StopWhenState`, which is
// `Sync` as far as a forwarder uses it (an `InplaceStopSource` and an atomic); a deferred
// completion it runs moves the stored completion and the receiver to its thread, which
// `StopWhen`'s `SenderTo` impl allows only for `Send` values, errors and receivers.
unsafe impl Send for Forward {}

impl Invoke for Forward {
    fn invoke(self) {
        // SAFETY: the forwarding callbacks are dropped (deregistered, a run in progress
        // on another thread waited for) before the operation completes, so the state is
        // alive whenever one runs; once a forwarder has entered, the completion waits for
        // it to leave.
        let fwd = unsafe { &*self.0 };
        if !fwd.enter() {
            return;
        }
        // A panic in the child's stop callbacks is kept for the completion.
        if let Err(p) = fwd.source.request_stop_catching()
            && !fwd.panicked.swap(true, Ordering::Relaxed)
        {
            // SAFETY: only the forwarder that set `panicked` writes the slot; the
            // completion reads it after this forwarder has left (`flight`'s `AcqRel`).
            unsafe { *fwd.stop_panic.get() = Some(p) };
        }
        if fwd.leave() {
            // SAFETY: the child completed while this forwarder ran, and this is the last
            // forwarder out: the completion is this thread's to hand on, once.
            unsafe { (fwd.complete)(self.0) }
        }
    }
}

/// The two forwarding callbacks: from the receiver's stop token and from the given one.
struct Links<'a> {
    from_parent: RawStopCallback<'a, Forward>,
    from_token: RawStopCallback<'a, Forward>,
}

/// The merged stop source, the forwarding callbacks, the final receiver, and the child's
/// completion while a forwarder holds it back.
#[repr(C)]
pub(crate) struct StopWhenState<'a, V, E, R> {
    /// Must stay the first field (see [`Forwarding`]).
    fwd: Forwarding,
    /// The token the child sees; set by `start` before the child is connected, then
    /// only read.
    seen: Seen<'a>,
    links: UnsafeCell<Option<Links<'a>>>,
    rcvr: UnsafeCell<Option<R>>,
    outcome: UnsafeCell<Option<Outcome<V, E>>>,
}

impl<'a, V, E, R: Receiver<V, E>> StopWhenState<'a, V, E, R> {
    fn rcvr(&self) -> &R {
        // SAFETY: present until the completion takes it.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("stop_when: env after completion")
    }

    /// The child's completion: stored, then handed on now, or by the last forwarder to
    /// leave if one is running.
    fn complete(&self, outcome: Outcome<V, E>) {
        // SAFETY: written once, by the child's one completion, before `DONE` is
        // published (Release) to the forwarder that may take it.
        unsafe { *self.outcome.get() = Some(outcome) };
        if self.fwd.flight.fetch_or(DONE, Ordering::AcqRel) == 0 {
            // SAFETY: no forwarder is running and none will enter: the completion is ours.
            unsafe { self.finish() }
        }
    }

    /// # Safety
    ///
    /// `fwd` heads a `StopWhenState<'a, V, E, R>` whose completion was left to the caller.
    unsafe fn complete_deferred(fwd: *const Forwarding) {
        // SAFETY: the caller's contract; `Forwarding` is the first field of the
        // `repr(C)` state.
        unsafe { (*fwd.cast::<Self>()).finish() }
    }

    /// Deregisters the forwarding callbacks, then hands the stored completion to the
    /// receiver.
    ///
    /// # Safety
    ///
    /// Called once, after the child completed, when no forwarder is inside
    /// `request_stop` (a forwarder running on this thread is the caller itself).
    unsafe fn finish(&self) {
        // SAFETY: the caller's contract. Dropping the links waits for a forwarder popped
        // on another thread, which sees `DONE` and leaves at once; the child dropped its
        // own callbacks on the merged source before completing.
        let (rcvr, outcome, stop_panic) = unsafe {
            *self.links.get() = None;
            ((*self.rcvr.get()).take(), (*self.outcome.get()).take(), (*self.fwd.stop_panic.get()).take())
        };
        let outcome = outcome.expect("stop_when: completion stored");
        // DROP ORDER: a stop callback's panic replaces the child's completion (unless
        // that is a panic), which is dropped here, before the receiver is called.
        let outcome = match (outcome, stop_panic) {
            (Outcome::Panic(p), _) => Outcome::Panic(p),
            (replaced, Some(p)) => {
                let _ = discard(replaced);
                Outcome::Panic(p)
            }
            (outcome, None) => outcome,
        };
        outcome.deliver(rcvr.expect("stop_when: completes once"));
    }
}

/// Which stop token the child sees.
#[derive(Clone, Copy)]
enum Seen<'a> {
    /// The merged source's: both tokens can stop.
    Merged,
    /// The receiver's own: the given token can never stop.
    Parent,
    /// The given token itself: the receiver's can never stop.
    Given(StopToken<'a>),
}

/// The child's receiver, and its environment: the parent's with the merged token.
pub struct StopWhenReceiver<'a, V, E, R> {
    state: *const StopWhenState<'a, V, E, R>,
}

// SAFETY: the child may complete on another thread and run the final receiver there;
// the env (the parent's, the merged source) is shared, hence `Sync`.
unsafe impl<V: Send, E: Send, R: Receiver<V, E> + Send + Sync> Send for StopWhenReceiver<'_, V, E, R> where R::Env: Sync {}
// SAFETY: a shared reference only reaches the environment.
unsafe impl<V, E, R: Receiver<V, E> + Sync> Sync for StopWhenReceiver<'_, V, E, R> where R::Env: Sync {}

impl<'a, V, E, R: Receiver<V, E>> StopWhenReceiver<'a, V, E, R> {
    fn state(&self) -> &StopWhenState<'a, V, E, R> {
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
        let state = self.state();
        match state.seen {
            Seen::Merged => state.fwd.source.token(),
            Seen::Parent => state.rcvr().env().stop_token(),
            Seen::Given(token) => token,
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
        self.state().complete(Outcome::Value(value))
    }
    fn set_error(self, error: E) {
        self.state().complete(Outcome::Error(error))
    }
    fn set_stopped(self) {
        self.state().complete(Outcome::Stopped)
    }
    fn set_panic(self, panic: Panic) {
        self.state().complete(Outcome::Panic(panic))
    }
}

/// The operation state of `stop_when`.
pub struct StopWhenOp<'a, S, R>
where
    S: Sender + SenderTo<StopWhenReceiver<'a, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    state: StopWhenState<'a, S::Value, S::Error, R>,
    token: StopToken<'a>,
    sndr: Option<S>,
    child: Option<S::Operation>,
    _pin: PhantomPinned,
}

/// The child's completion may be handed on by a forwarder, on the thread that requested
/// stop: the value, the error and the receiver must be `Send`.
impl<'a, S, R> SenderTo<R> for StopWhen<'a, S>
where
    S: Sender + SenderTo<StopWhenReceiver<'a, <S as Sender>::Value, <S as Sender>::Error, R>>,
    S::Value: Send,
    S::Error: Send,
    R: Receiver<S::Value, S::Error> + Send,
{
    type Operation = StopWhenOp<'a, S, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        StopWhenOp {
            state: StopWhenState {
                fwd: Forwarding {
                    source: InplaceStopSource::new(),
                    flight: AtomicUsize::new(0),
                    complete: StopWhenState::<'a, S::Value, S::Error, R>::complete_deferred,
                    stop_panic: UnsafeCell::new(None),
                    panicked: AtomicBool::new(false),
                },
                seen: Seen::Merged,
                links: UnsafeCell::new(None),
                rcvr: UnsafeCell::new(Some(receiver)),
                outcome: UnsafeCell::new(None),
            },
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
        // the forwarding callbacks (deregistering from this token) before completing.
        let parent = unsafe { this.state.rcvr().env().stop_token().detach() };
        this.state.seen = match (parent.stop_possible(), this.token.stop_possible()) {
            (_, false) => Seen::Parent,
            (false, true) => Seen::Given(this.token),
            (true, true) => Seen::Merged,
        };
        if let Seen::Merged = this.state.seen {
            let fwd: *const Forwarding = &this.state.fwd;
            // SAFETY: the slot is ours until the child starts; the callbacks are pinned in
            // place inside the pinned operation and registered once. `Forward` borrows
            // nothing: it points into this pinned state, which outlives the callbacks
            // (they are dropped by `finish`, or with the operation, before the source).
            unsafe {
                let links = (*this.state.links.get()).insert(Links {
                    from_parent: RawStopCallback::new(parent, Forward(fwd)),
                    from_token: RawStopCallback::new(this.token, Forward(fwd)),
                });
                Pin::new_unchecked(&mut links.from_parent).register();
                Pin::new_unchecked(&mut links.from_token).register();
            }
        }
        let rcvr = StopWhenReceiver { state: &this.state };
        match catch(move || sndr.connect(rcvr)) {
            Ok(child) => {
                let child = this.child.insert(child);
                // SAFETY: pinned in place, started once.
                unsafe { Pin::new_unchecked(child).start() };
            }
            // A panic in the child's `connect` completes the operation, as the child's own
            // panic would (after a stop forwarder that is running, if any).
            Err(p) => this.state.complete(Outcome::Panic(p)),
        }
    }
}
