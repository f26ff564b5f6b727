//! [`ScheduleAt`]: the timed sender of every crate scheduler, and of any scheduler a user
//! makes timed with it. At its deadline the sender starts a `schedule()` of the scheduler
//! (the hop), so it completes on the scheduler's execution resource.
//!
//! **Where the hop starts.** The timer thread runs no user code. The crate's queueing
//! schedulers (the pool, the run loop, a single-thread context, and a task's scheduler over
//! one of these) only queue work when their `schedule()` starts, so the timer thread starts
//! their hop itself. Any other scheduler's hop (a user's scheduler, the inline scheduler)
//! starts on a firing thread (`firing.rs`), so its continuation runs there if the
//! scheduler runs it inline, and a continuation that blocks holds that firing thread only.
//! A completion that a hop started on the timer thread makes inline (a pool or a run loop
//! that has shut down refuses the work: stopped) is delivered on a firing thread too: the
//! hop's receiver records it in the operation and in the thread-local `HOPPING`, and the
//! timer thread submits it once the hop's `start` has returned (never before: the
//! completion may free the operation, hop included).

use std::any::{Any, TypeId};
use std::cell::{Cell, UnsafeCell};
use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::time::{Duration, Instant};

use super::firing::Firing;
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
/// `impl TimedScheduler for MySched { type TimedSender = ScheduleAt<Self>; fn schedule_at(&self, t: Instant) -> ScheduleAt<Self> { ScheduleAt::new(self.clone(), Some(t)) } fn schedule_after(&self, d: Duration) -> ScheduleAt<Self> { ScheduleAt::after(self.clone(), d) } }`.
///
/// **Where it completes.** At the deadline the sender starts `sch.schedule()` (the hop).
/// The timer thread never runs user code: for the crate's queueing schedulers (the pool,
/// the run loop, a single-thread context, a task's scheduler over one of them), whose hop
/// only queues work, it starts the hop itself and the sender completes on the scheduler's
/// thread. Any other scheduler's hop starts on a *firing thread*, a thread the timer
/// service keeps for this (named `senders-firing`): a scheduler that completes inline, such
/// as [`InlineScheduler`](crate::InlineScheduler), completes there. Each firing thread
/// runs one continuation at a time and a new one starts when all are busy, so a
/// continuation that blocks (even on another timer) delays no other timer. A hop that
/// completes inline on the timer thread (the work is refused because the pool or the run
/// loop has shut down) completes on a firing thread too. A deadline found passed at
/// `start` starts the hop at once, on the starting thread; a stop request completes the
/// sender stopped on the thread that requests it.
#[must_use = "senders do nothing unless connected and started"]
pub struct ScheduleAt<Sch> {
    sch: Sch,
    when: When,
}

/// When a [`ScheduleAt`] completes.
#[derive(Clone, Copy, Debug)]
enum When {
    /// At this instant (`None`: never).
    At(Option<Instant>),
    /// This long after `start`.
    After(Duration),
}

impl<Sch: Scheduler> ScheduleAt<Sch> {
    /// Completes on `sch` at `deadline`; `None` is a deadline too far to represent,
    /// which never passes (only a stop request completes it).
    ///
    /// ```
    /// use senders::{InlineScheduler, SenderExt, sync_wait, time::ScheduleAt};
    /// use std::time::{Duration, Instant};
    /// let deadline = Instant::now() + Duration::from_millis(5);
    /// // With an inline scheduler the continuation runs on a `senders-firing` thread.
    /// let at = ScheduleAt::new(InlineScheduler, Some(deadline)).then(|()| Instant::now());
    /// assert!(sync_wait(at).unwrap().unwrap() >= deadline);
    /// ```
    pub fn new(sch: Sch, deadline: Option<Instant>) -> Self {
        ScheduleAt { sch, when: When::At(deadline) }
    }

    /// Completes on `sch` `delay` after the sender is started (not after it is made:
    /// senders are lazy); a delay too long to represent never passes.
    ///
    /// ```
    /// use senders::{InlineScheduler, sync_wait, time::ScheduleAt};
    /// use std::time::{Duration, Instant};
    /// let nap = ScheduleAt::after(InlineScheduler, Duration::from_millis(20));
    /// std::thread::sleep(Duration::from_millis(30)); // not started yet: no time passes for it
    /// let start = Instant::now();
    /// sync_wait(nap).unwrap();
    /// assert!(start.elapsed() >= Duration::from_millis(20));
    /// ```
    pub fn after(sch: Sch, delay: Duration) -> Self {
        ScheduleAt { sch, when: When::After(delay) }
    }
}

/// Whether starting `sch.schedule()` only queues work for the scheduler's own threads
/// (and, if the scheduler refuses it, completes stopped): the crate's queueing
/// schedulers, whose hop the timer thread starts itself. The check is on the type (a
/// task's scheduler: on the scheduler it erases); `SingleThreadScheduler`s with a domain
/// of their own are not recognized, and take the firing thread.
fn queues_only<Sch: Scheduler>(sch: &Sch) -> bool {
    fn queueing(t: TypeId) -> bool {
        t == TypeId::of::<crate::PoolScheduler>()
            || t == TypeId::of::<crate::RunLoopScheduler>()
            || t == TypeId::of::<crate::SingleThreadScheduler<crate::domain::NoDomain>>()
    }
    // The type ids are constants: for a concrete scheduler this folds to a constant.
    queueing(TypeId::of::<Sch>())
        || (sch as &dyn Any).downcast_ref::<crate::task::TaskScheduler>().is_some_and(|t| {
            t.downcast_ref::<crate::PoolScheduler>().is_some()
                || t.downcast_ref::<crate::RunLoopScheduler>().is_some()
                || t.downcast_ref::<crate::SingleThreadScheduler<crate::domain::NoDomain>>().is_some()
        })
}

/// How the hop completed (kept in the operation when it completed inline on the timer
/// thread, until a firing thread delivers it).
enum Landed {
    Value,
    Stopped,
    Panic(Panic),
}

impl Landed {
    /// Completes `rcvr` the same way.
    fn deliver<R: Receiver<(), Infallible>>(self, rcvr: R) {
        match self {
            Landed::Value => rcvr.set_value(()),
            Landed::Stopped => rcvr.set_stopped(),
            Landed::Panic(p) => rcvr.set_panic(p),
        }
    }
}

/// The timer thread's hop in progress, while it starts one (see the module docs).
enum Hopping {
    /// No hop is starting on this thread.
    No,
    /// The timer thread is starting a hop.
    Starting,
    /// The hop completed inline: this job delivers the completion.
    Landed(JobRef),
}

crate::sync::const_thread_local! {
    /// The timer thread's hop in progress (see the module docs).
    static HOPPING: Cell<Hopping> = Cell::new(Hopping::No);
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
                landed: UnsafeCell::new(None),
            },
            sch: Some(self.sch),
            when: self.when,
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
    /// A completion the hop made inline on the timer thread, until a firing thread
    /// delivers it.
    landed: UnsafeCell<Option<Landed>>,
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

    /// Delivers a completion that the hop made inline on the timer thread: a firing
    /// thread's job.
    ///
    /// # Safety
    ///
    /// `this` is the state of a started operation whose hop completed inline on the timer
    /// thread and stored the completion in `landed`; called once, after the hop's
    /// `start` returned.
    unsafe fn deliver_landed(this: *const (), (): ()) {
        let this = this.cast::<Self>();
        // SAFETY: the caller's contract: the completion, and so these cells, are ours.
        unsafe {
            let landed = (*(*this).landed.get()).take().expect("schedule_at: a landed completion");
            // DROP ORDER: the outcome moves into the completion; nothing is left here.
            Self::complete(this, |r| landed.deliver(r))
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
    fn finish(self, landed: Landed) {
        let state = self.state;
        match HOPPING.replace(Hopping::No) {
            Hopping::No => {}
            Hopping::Starting => {
                // On the timer thread, inside the hop's `start`: the completion is
                // delivered on a firing thread, once `start` has returned.
                // SAFETY: the node fired, so this completion is the operation's only one
                // and the cell is ours; the job runs once, and the operation stays alive
                // until it does (nothing else completes it).
                unsafe {
                    *(*state).landed.get() = Some(landed);
                    HOPPING.set(Hopping::Landed(JobRef::new(state, TimerState::<R>::deliver_landed)));
                }
                return;
            }
            Hopping::Landed(_) => unreachable!("schedule_at: one hop starts at a time on the timer thread"),
        }
        // SAFETY: the node fired, so the hop's completion is the operation's only one.
        unsafe { TimerState::complete(state, |r| landed.deliver(r)) }
    }
}

impl<R: Receiver<(), Infallible>> Receiver<(), Infallible> for TimerReceiver<R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        // SAFETY: the state outlives the hop, whose completion this receiver makes.
        unsafe { (*self.state).env() }
    }
    fn set_value(self, (): ()) {
        self.finish(Landed::Value)
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        self.finish(Landed::Stopped)
    }
    fn set_panic(self, panic: Panic) {
        self.finish(Landed::Panic(panic))
    }
}

/// The operation state of [`ScheduleAt`].
pub struct ScheduleAtOp<Sch: Scheduler, R: Receiver<(), Infallible>>
where
    Sch::Sender: SenderTo<TimerReceiver<R>>,
{
    state: TimerState<R>,
    sch: Option<Sch>,
    when: When,
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
    /// Starts the hop, once its node fired or was found due at insertion.
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

    /// [`start_hop`](Self::start_hop) as a job.
    ///
    /// # Safety
    ///
    /// As [`start_hop`](Self::start_hop).
    unsafe fn start_hop_job(op: *const (), (): ()) {
        // SAFETY: the caller's contract.
        unsafe { Self::start_hop(op) }
    }

    /// The node's `fire` for a queueing scheduler, on the timer thread: starts the hop
    /// here, and hands a completion it made inline to a firing thread.
    ///
    /// # Safety
    ///
    /// As [`start_hop`](Self::start_hop).
    unsafe fn fire_here(op: *const ()) {
        let before = HOPPING.replace(Hopping::Starting);
        debug_assert!(matches!(before, Hopping::No), "schedule_at: a hop inside a hop on the timer thread");
        // SAFETY: the caller's contract.
        unsafe { Self::start_hop(op) };
        // The operation may be gone now (the hop completed on another thread), unless
        // its completion landed here, in which case nothing has completed it yet.
        if let Hopping::Landed(job) = HOPPING.replace(Hopping::No) {
            Firing::submit(Firing::global(), job);
        }
    }

    /// The node's `fire` for any other scheduler, on the timer thread: starts the hop on
    /// a firing thread.
    ///
    /// # Safety
    ///
    /// As [`start_hop`](Self::start_hop).
    unsafe fn fire_elsewhere(op: *const ()) {
        // SAFETY: the caller's contract: the hop may start once, on any thread (the
        // operation's receiver is `Send + Sync`, and the scheduler `Send + Sync`), and the
        // operation stays alive until the hop completes it.
        let job = unsafe { JobRef::new(op.cast::<Self>(), Self::start_hop_job) };
        Firing::submit(Firing::global(), job);
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
            let queued = queues_only(&sch);
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
            let at = match (*op).when {
                When::At(deadline) => deadline.map_or(u64::MAX, |d| timers.nanos(d)),
                When::After(delay) => timers.after(delay),
            };
            let fire: unsafe fn(*const ()) = if queued { Self::fire_here } else { Self::fire_elsewhere };
            // `fire(op)` may run once, on the timer thread, once the node fires: the
            // operation cannot complete before (only the hop, or the cancellation of a
            // pending node, completes it).
            (*op).state.node.set(at, timers.shard(), op.cast_const().cast(), fire);
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
