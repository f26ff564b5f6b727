//! [`ScheduleAt`]: the timed sender of every crate scheduler, and of any scheduler a user
//! makes timed with it. At its deadline the timer thread starts a `schedule()` of the
//! scheduler, so the sender completes on the scheduler's execution resource.

use std::cell::UnsafeCell;
use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::time::Instant;

use super::timers::{Cancel, Inserted, TimerNode, Timers};
use crate::env::Env;
use crate::job::JobRef;
use crate::panic::{AbortOnUnwind, Panic, catch, discard};
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, SenderTo, sender};
use crate::stop::{Invoke, RawStopCallback};

/// The sender of [`schedule_at`](super::schedule_at) and
/// [`schedule_after`](super::schedule_after) on `Sch`: completes with `()` on `Sch`'s
/// execution resource once the deadline has passed, or stopped as soon as a stop is
/// requested before that.
///
/// A user scheduler can be made timed with it:
/// `impl TimedScheduler for MySched { type TimedSender = ScheduleAt<Self>; fn schedule_at(&self, t: Instant) -> ScheduleAt<Self> { ScheduleAt::new(self.clone(), Some(t)) } }`.
#[must_use = "senders do nothing unless connected and started"]
pub struct ScheduleAt<Sch> {
    sch: Sch,
    deadline: Option<Instant>,
}

impl<Sch: Scheduler> ScheduleAt<Sch> {
    /// Completes on `sch` at `deadline`; `None` is a deadline too far to represent,
    /// which never passes (only a stop request completes it).
    pub fn new(sch: Sch, deadline: Option<Instant>) -> Self {
        ScheduleAt { sch, deadline }
    }
}

sender!(impl [Sch: Scheduler] ScheduleAt<Sch> {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = Sch::Domain;
    type CompletionScheduler = Sch;
    fn completion_scheduler(&self) -> Sch {
        self.sch.clone()
    }
});

/// The hop's operation state: `schedule()` on `Sch`, delivering to `R`.
type HopOp<Sch, R> = <<Sch as Scheduler>::Sender as SenderTo<TimerReceiver<R>>>::Operation;

impl<Sch, R> SenderTo<R> for ScheduleAt<Sch>
where
    Sch: Scheduler,
    Sch::Sender: SenderTo<TimerReceiver<R>>,
    R: Receiver<(), Infallible> + Send + Sync,
    R::Env: Sync,
{
    type Operation = ScheduleAtOp<Sch, R>;
    fn connect(self, receiver: R) -> ScheduleAtOp<Sch, R> {
        ScheduleAtOp {
            state: TimerState {
                node: TimerNode::new(),
                rcvr: UnsafeCell::new(Some(receiver)),
                on_stop: UnsafeCell::new(None),
            },
            sch: Some(self.sch),
            deadline: self.deadline,
            hop: UnsafeCell::new(None),
            _pin: PhantomPinned,
        }
    }
}

/// What the hop's receiver and the stop callback reach: the node, the final receiver,
/// the callback.
pub struct TimerState<R> {
    node: TimerNode,
    rcvr: UnsafeCell<Option<R>>,
    on_stop: UnsafeCell<Option<RawStopCallback<'static, CancelTimer>>>,
}

impl<R: Receiver<(), Infallible>> TimerState<R> {
    fn env(&self) -> &R::Env {
        // SAFETY: the receiver stays in place until the one completion takes it.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("schedule_at: env after completion").env()
    }

    /// Completes the operation: drops the stop callback first (waiting for a run of it on
    /// another thread, which then finds nothing to do), then completes the receiver.
    ///
    /// # Safety
    ///
    /// The operation's one completion, by whoever decided how it ends (see
    /// `timers.rs`'s state table).
    unsafe fn complete(this: *const Self, complete: impl FnOnce(R)) {
        // SAFETY: the caller's contract: the completion, and so these cells, are ours.
        unsafe {
            // Dropped in place: the registered callback is pinned (moving it out with
            // `take` would deregister a copy).
            *(*this).on_stop.get() = None;
            let rcvr = (*(*this).rcvr.get()).take().expect("schedule_at completes once");
            complete(rcvr)
        }
    }
}

/// The stop callback of a pending timer: cancels it.
pub struct CancelTimer(JobRef);

impl Invoke for CancelTimer {
    fn invoke(self) {
        self.0.execute()
    }
}

/// The receiver of the hop onto the scheduler, started when the deadline passes.
pub struct TimerReceiver<R> {
    state: *const TimerState<R>,
}

// SAFETY: the hop completes on the scheduler's thread: it completes the final receiver
// there (`R: Send`) and reads its environment (`R: Sync`, `R::Env: Sync`).
unsafe impl<R: Receiver<(), Infallible> + Send + Sync> Send for TimerReceiver<R> where R::Env: Sync {}
// SAFETY: a shared reference reaches only the environment.
unsafe impl<R: Receiver<(), Infallible> + Sync> Sync for TimerReceiver<R> where R::Env: Sync {}

impl<R: Receiver<(), Infallible>> TimerReceiver<R> {
    fn finish(self, complete: impl FnOnce(R)) {
        // SAFETY: the node fired, so the hop's completion is the operation's only one.
        unsafe { TimerState::complete(self.state, complete) }
    }
}

impl<R: Receiver<(), Infallible>> Receiver<(), Infallible> for TimerReceiver<R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        // SAFETY: the state outlives the hop, whose completion this receiver makes.
        unsafe { (*self.state).env() }
    }
    fn set_value(self, (): ()) {
        self.finish(|r| r.set_value(()))
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        self.finish(R::set_stopped)
    }
    fn set_panic(self, panic: Panic) {
        self.finish(|r| r.set_panic(panic))
    }
}

/// The operation state of [`ScheduleAt`].
pub struct ScheduleAtOp<Sch: Scheduler, R: Receiver<(), Infallible>>
where
    Sch::Sender: SenderTo<TimerReceiver<R>>,
{
    state: TimerState<R>,
    sch: Option<Sch>,
    deadline: Option<Instant>,
    hop: UnsafeCell<Option<HopOp<Sch, R>>>,
    _pin: PhantomPinned,
}

impl<Sch, R> ScheduleAtOp<Sch, R>
where
    Sch: Scheduler,
    Sch::Sender: SenderTo<TimerReceiver<R>>,
    R: Receiver<(), Infallible> + Send + Sync,
    R::Env: Sync,
{
    /// Starts the hop, once its node fired (on the timer thread) or was due at insertion.
    ///
    /// # Safety
    ///
    /// `op` is this started operation; its node fired (or was found due), so nothing
    /// else completes it, and the hop is connected and not started.
    unsafe fn start_hop(op: *const ()) {
        let op = op.cast::<Self>();
        let _guard = AbortOnUnwind("a scheduler's start unwound in a timer");
        // SAFETY: the caller's contract; the hop is pinned inside the pinned operation.
        unsafe {
            let hop = (*(*op).hop.get()).as_mut().expect("schedule_at: hop connected at start");
            Pin::new_unchecked(hop).start();
        }
        std::mem::forget(_guard);
    }

    /// The stop callback's job: cancels the timer, and completes the operation stopped
    /// if the timer was pending.
    ///
    /// # Safety
    ///
    /// `op` is this started operation, whose stop callback is running (so the operation
    /// has not completed: its completion drops the callback first).
    unsafe fn cancel(op: *const (), (): ()) {
        let op = op.cast::<Self>();
        // SAFETY: alive (see above); the node was set up before the callback was
        // registered.
        unsafe {
            let state = &raw const (*op).state;
            if Timers::global().cancel(&(*state).node) == Cancel::Removed {
                // The completion is ours: the callback drops itself (allowed while it
                // runs), then the receiver completes stopped, here.
                TimerState::complete(state, R::set_stopped);
            }
        }
    }
}

impl<Sch, R> OperationState for ScheduleAtOp<Sch, R>
where
    Sch: Scheduler,
    Sch::Sender: SenderTo<TimerReceiver<R>>,
    R: Receiver<(), Infallible> + Send + Sync,
    R::Env: Sync,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is moved out of the pinned fields (`sch` is not structurally
        // pinned). From here on the operation is reached through `op` alone: the timer
        // thread, the hop and the stop callback hold pointers derived from it.
        let op: *mut Self = unsafe { self.get_unchecked_mut() };
        // SAFETY: `op` is the pinned, started operation; until the node is inserted (or
        // the stop callback registered) nothing else touches it.
        unsafe {
            let Some(sch) = (*op).sch.take() else { return };
            let state: *const TimerState<R> = &raw const (*op).state;
            // Before anything is inserted or registered, the completion is ours.
            let fail = |outcome: Result<(), Panic>| {
                TimerState::complete(state, |r| match outcome {
                    Ok(()) => r.set_stopped(),
                    Err(p) => r.set_panic(p),
                })
            };
            if (*state).env().stop_token().stop_requested() {
                return fail(discard(sch));
            }
            let rcvr = TimerReceiver { state };
            // DROP ORDER: the closure takes the scheduler, which dies in it, before the
            // timer can complete the operation (here, or on another thread).
            let timers = match catch(move || (sch.schedule().connect(rcvr), Timers::global())) {
                Ok((hop, timers)) => {
                    // Not shared yet: the hop starts only once the node fires.
                    *(*op).hop.get() = Some(hop);
                    timers
                }
                Err(p) => return fail(Err(p)),
            };
            let at = (*op).deadline.map_or(u64::MAX, |d| timers.nanos(d));
            // `start_hop(op)` may run once, on the timer thread, once the node fires: the
            // operation cannot complete before (only the hop, or the cancellation of a
            // pending node, completes it).
            (*op).state.node.set(at, timers.shard(), op.cast_const().cast(), Self::start_hop);
            let token = (*state).env().stop_token();
            if token.stop_possible() {
                // The env outlives the operation's completion, which drops the callback
                // first; the callback is pinned in place, registered once, and its job
                // may run on any thread (the receiver is `Send + Sync`). A request made
                // meanwhile runs it here: the node is `Idle`, so it is only marked.
                let cancel = CancelTimer(JobRef::new(op.cast_const(), Self::cancel));
                let cb = (*(*state).on_stop.get()).insert(RawStopCallback::new(token.detach(), cancel));
                Pin::new_unchecked(cb).register();
            }
            // The node is set up, inserted once, and alive while pending.
            match timers.insert(&raw const (*state).node) {
                Inserted::Pending => {}
                // Found due: nothing else completes the operation.
                Inserted::Due => Self::start_hop(op.cast_const().cast()),
                // A stop request marked the node before it was inserted: the completion
                // is ours (dropping the callback waits for it to return).
                Inserted::Cancelled => TimerState::complete(state, R::set_stopped),
            }
        }
    }
}
