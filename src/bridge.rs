//! Bridges between senders and Rust futures, both ways.
//!
//! - [`into_awaitable`] (and [`SenderExt::into_awaitable`](crate::SenderExt::into_awaitable)):
//!   a `'static` sender as a [`Future`], awaitable from any executor.
//! - [`from_future`]: a future as a sender, polled on the receiver's scheduler.
//!
//! # Sender → future
//!
//! The first poll connects the sender into one heap block shared by the future and the
//! running operation, and starts it there: the two-sided block of
//! [`spawn_future`](crate::spawn_future) (`scope/future.rs`), with no scope. The block
//! holds the operation, its result, the waker of the last poll and a stop source (the
//! operation's stop token). A reference count of two (the future's and the operation's)
//! decides who frees the block, so dropping the future while the operation runs requests
//! stop and leaves the memory to the operation. The sender must be `'static`: a future
//! can be leaked while its operation runs on another thread, and nothing may then be
//! borrowed.
//!
//! # Future → sender
//!
//! The operation holds the pinned future. Each poll runs on the receiver's scheduler
//! (inline when its environment has none). The waker is a reference-counted handle that
//! may outlive the operation; it schedules a poll through this state machine:
//!
//! | state | meaning | `wake` | the poll |
//! |---|---|---|---|
//! | `IDLE` | the future returned `Pending` | → `SCHEDULED`, schedules a poll | — |
//! | `SCHEDULED` | a poll is on its way | nothing | → `POLLING` |
//! | `POLLING` | being polled | → `POLLING \| WOKEN` | `Pending`: → `IDLE`, or polls again if `WOKEN` |
//! | `DEAD` | completed (value or stopped) | nothing | — |
//!
//! The operation completes only from a poll (the owner of `POLLING`), so a waker that wins
//! `IDLE → SCHEDULED` always finds the operation alive. A stop request on the receiver's
//! token sets a flag and wakes: the next poll drops the future and completes stopped.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll, Wake, Waker};

use crate::domain::NoDomain;
use crate::env::{EmptyEnv, Env};
use crate::job::JobRef;
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::scheduler::HopTo;
use crate::scope::future::{Detached, FutureReceiver, Header, Waiter, connect_work};
use crate::scope::spawn::SpawnBlock;
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::{Invoke, RawStopCallback, StopToken};
use crate::sync::{Arc, AtomicBool, AtomicUsize, Ordering};

// ---------------------------------------------------------------------------------------
// Sender → future

/// The receiver of an awaited sender: it publishes the completion in the block it shares
/// with the future, as the work of [`spawn_future`](crate::spawn_future) does (the
/// same block, with no scope: [`Detached`]).
pub type AwaitReceiver<V, E> = FutureReceiver<V, E, Detached>;

/// A sender awaited as a future: see [`into_awaitable`].
///
/// It resolves to `Some(Ok(value))`, `Some(Err(error))`, or `None` if the sender
/// completed stopped; a panic in the sender resumes in the task that polls it.
#[must_use = "futures do nothing unless polled"]
pub struct SenderFuture<S: Sender> {
    state: FutureState<S>,
}

enum FutureState<S: Sender> {
    Unstarted(S),
    Running(NonNull<Header<S::Value, S::Error>>),
    Finished,
}

// SAFETY: the future only moves the sender (`Send`) or touches the block through its
// synchronized cell and stop source; the result types are `Send`.
unsafe impl<S: Sender + Send> Send for SenderFuture<S>
where
    S::Value: Send,
    S::Error: Send,
{
}

impl<S: Sender> Unpin for SenderFuture<S> {}

impl<S: Sender> std::fmt::Debug for SenderFuture<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let state = match self.state {
            FutureState::Unstarted(_) => "unstarted",
            FutureState::Running(_) => "running",
            FutureState::Finished => "finished",
        };
        f.debug_struct("SenderFuture").field("state", &state).finish()
    }
}

/// Turns a `'static` sender into a [`Future`] that any executor can poll (P2300's
/// `as_awaitable`, for Rust executors). The first poll starts the operation; it resolves
/// to `Some(Ok(v))` for a value, `Some(Err(e))` for an error, `None` for stopped, and a
/// panic in the sender resumes in the polling task.
///
/// Dropping the future requests stop on the operation, which keeps its memory until it
/// completes. The sender must be `'static` because a future may be leaked while its
/// operation runs. A panic of the operation's stop callbacks, run by that request,
/// resumes in the drop; a panic in the drop of a result that comes after the future was
/// dropped has nobody to go to, and is dropped once std's panic hook has reported it.
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, schedule};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let work = schedule(&pool.scheduler()).then(|()| 6 * 7);
/// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
/// assert_eq!(rt.block_on(work.into_awaitable()), Some(Ok(42)));
/// ```
pub fn into_awaitable<S>(sndr: S) -> SenderFuture<S>
where
    S: SenderTo<AwaitReceiver<<S as Sender>::Value, <S as Sender>::Error>> + 'static,
{
    SenderFuture { state: FutureState::Unstarted(sndr) }
}

impl<S> Future for SenderFuture<S>
where
    S: SenderTo<AwaitReceiver<<S as Sender>::Value, <S as Sender>::Error>>,
{
    type Output = Option<Result<S::Value, S::Error>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let (header, first) = match std::mem::replace(&mut this.state, FutureState::Finished) {
            FutureState::Unstarted(sndr) => {
                // A panic in `connect` resumes here, in the polling task, as one from the
                // operation would.
                let block = connect_work(sndr, Detached::new());
                // SAFETY: the block is fresh and its operation unstarted; it is started
                // once, here.
                unsafe { SpawnBlock::start_in_place(block) };
                (block.cast::<Header<S::Value, S::Error>>(), true)
            }
            FutureState::Running(header) => (header, false),
            FutureState::Finished => panic!("SenderFuture polled after completion"),
        };
        // SAFETY: the future's reference keeps the block alive.
        let cell = unsafe { &header.as_ref().cell };
        // A later poll takes its last waker back and waits with this one, unless the
        // result is ready.
        let ready = (!first && !cell.unwait()) || cell.wait(Waiter::Waker(cx.waker().clone()));
        if !ready {
            this.state = FutureState::Running(header);
            return Poll::Pending;
        }
        let outcome = cell.take();
        // SAFETY: the future's reference, given up once (the state is `Finished`).
        unsafe { Header::release(header.as_ptr()) };
        Poll::Ready(outcome.resume().transpose())
    }
}

impl<S: Sender> Drop for SenderFuture<S> {
    fn drop(&mut self) {
        if let FutureState::Running(header) = self.state {
            // SAFETY: the future owns its side of the block and gives it up once; the
            // stop request may run the operation's stop callbacks here, which is what
            // dropping asks for.
            unsafe { Header::abandon(header.as_ptr()) };
        }
    }
}

// ---------------------------------------------------------------------------------------
// Future → sender

/// The sender of [`from_future`].
#[must_use = "senders do nothing unless connected and started"]
pub struct FromFuture<F> {
    fut: F,
}

impl<F> std::fmt::Debug for FromFuture<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FromFuture").finish_non_exhaustive()
    }
}

/// Runs a Rust future as a sender: it completes with the future's output.
///
/// Every poll runs on the scheduler of the receiver's environment (inline on the waking
/// thread if there is none); the future's waker schedules the next poll there. A stop
/// request on the receiver's stop token drops the future at its next poll, without
/// polling it, and completes stopped. A panic in `poll` completes with the panic.
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, from_future, starts_on, sync_wait};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let (tx, rx) = tokio::sync::oneshot::channel();
/// std::thread::spawn(move || tx.send(41).unwrap());
/// let fut = async move { rx.await.unwrap() + 1 };
/// let v = sync_wait(starts_on(pool.scheduler(), from_future(fut)));
/// assert_eq!(v.unwrap(), Some(42));
/// ```
pub fn from_future<F: Future>(fut: F) -> FromFuture<F> {
    FromFuture { fut }
}

sender!([F: Future] FromFuture<F> { value = F::Output, error = Infallible, stopped = true, domain = NoDomain });

const IDLE: usize = 0;
const SCHEDULED: usize = 1;
const POLLING: usize = 2;
const WOKEN: usize = 4;
const DEAD: usize = 8;

/// What a waker holds: the state word and, while the operation lives, how to schedule a
/// poll of it.
struct WakeShared {
    state: AtomicUsize,
    /// The operation, type-erased; valid while `state` is not `DEAD` (see the module docs).
    op: *const (),
    /// Schedules a poll of `op` (hop onto the scheduler, or poll inline).
    schedule: unsafe fn(*const ()),
}

// SAFETY: `op` is only used by the thread that wins `IDLE → SCHEDULED`, while the
// operation is alive (it completes only from a poll); the operation is `Send`.
unsafe impl Send for WakeShared {}
// SAFETY: as above: every access goes through the atomic state.
unsafe impl Sync for WakeShared {}

impl WakeShared {
    fn wake_up(&self) {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let next = match state {
                IDLE => SCHEDULED,
                POLLING => POLLING | WOKEN,
                _ => return,
            };
            match self.state.compare_exchange_weak(state, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) if next == SCHEDULED => {
                    // SAFETY: winning `IDLE → SCHEDULED` means the operation is alive and
                    // no poll is scheduled: this is the one that schedules it.
                    return unsafe { (self.schedule)(self.op) };
                }
                Ok(_) => return,
                Err(now) => state = now,
            }
        }
    }
}

/// The waker of a [`from_future`] operation.
struct FutureWaker(Arc<WakeShared>);

impl Wake for FutureWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.wake_up();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        self.0.wake_up();
    }
}

/// What a scheduled poll delivers to the operation.
enum Hop {
    Poll,
    Refused,
    Panicked(Panic),
}

/// The receiver of the hop onto the scheduler: runs a poll there. It names the
/// operation only by a job (the operation's type names the hop's).
pub struct PollHop(JobRef<Hop>);

impl Receiver<(), Infallible> for PollHop {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, (): ()) {
        self.0.run(Hop::Poll)
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        // The scheduler refused the poll (e.g. a pool shutting down): stop the future.
        self.0.run(Hop::Refused)
    }
    fn set_panic(self, panic: Panic) {
        // The future is dropped and the panic delivered.
        self.0.run(Hop::Panicked(panic))
    }
}

/// Requests the future's stop: sets the flag and wakes it.
struct StopFuture(Arc<WakeShared>, *const AtomicBool);

// SAFETY: the flag lives in the operation, which deregisters this callback before it
// completes; the wake handle is `Send`.
unsafe impl Send for StopFuture {}

impl Invoke for StopFuture {
    fn invoke(self) {
        // SAFETY: the operation (and its flag) is alive while the callback is registered.
        unsafe { (*self.1).store(true, Ordering::Release) };
        // DROP ORDER: the wake-up may complete the operation; the wake handle dropped
        // after it is shared, reference-counted, and holds no user data.
        self.0.wake_up();
    }
}

type HopOp<F, R> = <<<R as Receiver<<F as Future>::Output, Infallible>>::Env as Env>::Scheduler as HopTo<PollHop>>::Op;

/// The operation state of [`from_future`].
pub struct FromFutureOp<F: Future, R: Receiver<F::Output, Infallible>>
where
    <R::Env as Env>::Scheduler: HopTo<PollHop>,
{
    fut: std::cell::UnsafeCell<Option<F>>,
    rcvr: std::cell::UnsafeCell<Option<R>>,
    wake: Option<Arc<WakeShared>>,
    waker: Option<Waker>,
    stop_flag: AtomicBool,
    stop_cb: std::cell::UnsafeCell<Option<RawStopCallback<'static, StopFuture>>>,
    hop: std::cell::UnsafeCell<Option<HopOp<F, R>>>,
    hop_panic: std::cell::UnsafeCell<Option<Panic>>,
    _pin: PhantomPinned,
}

impl<F, R> SenderTo<R> for FromFuture<F>
where
    F: Future + Send,
    R: Receiver<F::Output, Infallible> + Send,
    <R::Env as Env>::Scheduler: HopTo<PollHop>,
{
    type Operation = FromFutureOp<F, R>;
    fn connect(self, receiver: R) -> FromFutureOp<F, R> {
        FromFutureOp {
            fut: std::cell::UnsafeCell::new(Some(self.fut)),
            rcvr: std::cell::UnsafeCell::new(Some(receiver)),
            wake: None,
            waker: None,
            stop_flag: AtomicBool::new(false),
            stop_cb: std::cell::UnsafeCell::new(None),
            hop: std::cell::UnsafeCell::new(None),
            hop_panic: std::cell::UnsafeCell::new(None),
            _pin: PhantomPinned,
        }
    }
}

impl<F: Future, R: Receiver<F::Output, Infallible>> FromFutureOp<F, R>
where
    <R::Env as Env>::Scheduler: HopTo<PollHop>,
{
    /// Schedules a poll: a hop onto the receiver's scheduler, or a poll right here.
    ///
    /// # Safety
    ///
    /// `op` is a started, live operation, and the caller won `IDLE → SCHEDULED`.
    unsafe fn schedule(op: *const ()) {
        let this = op.cast::<Self>();
        // SAFETY: the caller's contract; only the scheduling side touches the hop slot,
        // and the previous hop has completed (its poll ran before `IDLE`).
        unsafe {
            let rcvr = (*(*this).rcvr.get()).as_ref().expect("from_future: receiver");
            // The env and the scheduler's `schedule`/`connect` are user code: a panic
            // there is handled as a panicking hop.
            // The hop's job is the scheduled poll: the operation is alive until a poll
            // completes it, and it is `Send`.
            let poll = PollHop(JobRef::new(this, Self::hopped));
            match catch(|| rcvr.env().scheduler().hop(poll)) {
                Ok(Some(hop)) => Pin::new_unchecked((*(*this).hop.get()).insert(hop)).start(),
                Ok(None) => Self::run(this),
                Err(p) => Self::hopped(op, Hop::Panicked(p)),
            }
        }
    }

    /// The hop's completion.
    ///
    /// # Safety
    ///
    /// As for `run`; `op` is the operation.
    unsafe fn hopped(op: *const (), hop: Hop) {
        let this = op.cast::<Self>();
        // SAFETY: the scheduled poll owns the flags until it polls.
        unsafe {
            match hop {
                Hop::Poll => {}
                Hop::Refused => (*this).stop_flag.store(true, Ordering::Release),
                Hop::Panicked(p) => *(*this).hop_panic.get() = Some(p),
            }
            Self::run(this)
        }
    }

    /// A scheduled poll: polls until `Pending` without a new wake, or completes.
    ///
    /// # Safety
    ///
    /// `this` is live and in `SCHEDULED`, and this is the one poll scheduled.
    unsafe fn run(this: *const Self) {
        // SAFETY: the caller's contract.
        let wake = unsafe { (*this).wake.as_ref() }.expect("from_future: started");
        wake.state.store(POLLING, Ordering::Release);
        loop {
            // SAFETY: `POLLING` gives this thread the future, the receiver and the flags.
            let stopping = unsafe { (*this).stop_flag.load(Ordering::Acquire) || (*(*this).hop_panic.get()).is_some() };
            let polled = if stopping {
                None
            } else {
                // SAFETY: as above; the future is pinned in the pinned operation.
                let fut = unsafe { Pin::new_unchecked((*(*this).fut.get()).as_mut().expect("from_future: future")) };
                // SAFETY: as above.
                let waker = unsafe { (*this).waker.as_ref() }.expect("from_future: waker");
                let mut cx = Context::from_waker(waker);
                match catch(|| fut.poll(&mut cx)) {
                    Ok(Poll::Pending) => Some(None),
                    Ok(Poll::Ready(v)) => Some(Some(Ok(v))),
                    Err(p) => Some(Some(Err(p))),
                }
            };
            match polled {
                Some(None) => {
                    match wake.state.compare_exchange(POLLING, IDLE, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => return,
                        // Woken during the poll: poll again (a loop, not a recursion).
                        Err(_) => wake.state.store(POLLING, Ordering::Release),
                    }
                }
                // SAFETY: this thread owns `POLLING`; the operation completes once.
                Some(Some(result)) => return unsafe { Self::complete(this, Some(result)) },
                // SAFETY: as above.
                None => return unsafe { Self::complete(this, None) },
            }
        }
    }

    /// Completes: drops the future, marks the wake handle dead, deregisters the stop
    /// callback, then calls the receiver.
    ///
    /// # Safety
    ///
    /// The caller owns `POLLING`; called once.
    unsafe fn complete(this: *const Self, result: Option<Result<F::Output, Panic>>) {
        // SAFETY: the caller's contract. The future is dropped before the receiver runs
        // (a panic in its drop is delivered unless an earlier one is). `DEAD` keeps
        // later wakes away from the operation. The stop callback may be the caller of
        // this very poll (inline, without a scheduler): dropping one's own registration
        // from inside it is allowed.
        let (rcvr, hop_panic, dropped) = unsafe {
            let dropped = discard((*(*this).fut.get()).take());
            (*this).wake.as_ref().expect("from_future: started").state.store(DEAD, Ordering::Release);
            *(*this).stop_cb.get() = None;
            let rcvr = (*(*this).rcvr.get()).take().expect("from_future: completes once");
            (rcvr, (*(*this).hop_panic.get()).take(), dropped)
        };
        // DROP ORDER: `settle` consumes what it does not deliver.
        match settle(hop_panic, result, dropped) {
            Some(Ok(v)) => rcvr.set_value(v),
            Some(Err(p)) => rcvr.set_panic(p),
            None => rcvr.set_stopped(),
        }
    }
}

impl<F: Future, R: Receiver<F::Output, Infallible>> OperationState for FromFutureOp<F, R>
where
    <R::Env as Env>::Scheduler: HopTo<PollHop>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is moved out of the pinned operation.
        let this: *mut Self = unsafe { self.get_unchecked_mut() };
        let wake = Arc::new(WakeShared {
            state: AtomicUsize::new(SCHEDULED),
            op: this.cast_const().cast(),
            schedule: Self::schedule,
        });
        // SAFETY: before the first poll nothing else touches the operation; the stop
        // token borrows the receiver's env, which lives in this pinned operation and
        // outlives the callback (dropped by `complete` before the receiver is taken).
        unsafe {
            (*this).waker = Some(Waker::from(std::sync::Arc::new(FutureWaker(wake.clone()))));
            (*this).wake = Some(wake.clone());
            let token = (*(*this).rcvr.get()).as_ref().expect("from_future: receiver").env().stop_token();
            let token = std::mem::transmute::<StopToken<'_>, StopToken<'static>>(token);
            let flag = &raw const (*this).stop_flag;
            let cb = (*(*this).stop_cb.get()).insert(RawStopCallback::new(token, StopFuture(wake, flag)));
            // A stop requested already runs the callback here: it sets the flag, and its
            // wake finds `SCHEDULED` and does nothing; the first poll sees the flag.
            Pin::new_unchecked(cb).register();
            // The first poll, scheduled like every other.
            Self::schedule(this.cast_const().cast());
        }
    }
}

/// What a `from_future` operation delivers: the first panic of the hop, the future and
/// the future's drop, else the future's output (`None`: stopped). Whatever it does not
/// deliver is dropped here, before the caller completes.
fn settle<T>(
    hop: Option<Panic>,
    result: Option<Result<T, Panic>>,
    dropped: Result<(), Panic>,
) -> Option<Result<T, Panic>> {
    match (hop, result) {
        (Some(p), _) => Some(Err(p)),
        (None, Some(Err(p))) => Some(Err(p)),
        (None, Some(Ok(v))) => Some(dropped.map(|()| v)),
        (None, None) => dropped.err().map(Err),
    }
}

// SAFETY: the future, the receiver and the hop's operation are `Send`; the cells are
// handed between threads through the wake state's acquire-release transitions.
unsafe impl<F: Future + Send, R: Receiver<F::Output, Infallible> + Send> Send for FromFutureOp<F, R>
where
    <R::Env as Env>::Scheduler: HopTo<PollHop>,
    HopOp<F, R>: Send,
{
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The `into_awaitable` block under loom: the future's drop, or its second poll,
    //! racing the operation's completion on another thread.
    use super::*;
    use crate::scheduler::NoScheduler;
    use crate::sync::thread;
    use loom::sync::atomic::AtomicUsize as Count;
    use std::task::Wake;

    /// A value that counts its drops.
    struct Counted(Arc<Count>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }

    type Rcvr = AwaitReceiver<Counted, ()>;
    type Handle = Arc<Mutex<Option<Rcvr>>>;
    use crate::sync::{Mutex, lock};

    /// A sender whose operation hands its receiver to the model, which completes it on
    /// another thread.
    struct Handoff(Handle);
    struct HandoffOp(Handle, Option<Rcvr>);

    impl Sender for Handoff {
        type Value = Counted;
        type Error = ();
        const SENDS_STOPPED: bool = false;
        type Domain = NoDomain;
        type CompletionScheduler = NoScheduler;
        fn completion_scheduler(&self) -> NoScheduler {
            NoScheduler
        }
    }
    impl SenderTo<Rcvr> for Handoff {
        type Operation = HandoffOp;
        fn connect(self, rcvr: Rcvr) -> HandoffOp {
            HandoffOp(self.0, Some(rcvr))
        }
    }
    impl OperationState for HandoffOp {
        unsafe fn start(self: Pin<&mut Self>) {
            // SAFETY: nothing is structurally pinned.
            let this = unsafe { self.get_unchecked_mut() };
            *lock(&this.0) = this.1.take();
        }
    }

    /// A waker that counts its wakes.
    struct CountWakes(Count);
    impl Wake for CountWakes {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn complete_on_another_thread(handle: &Handle, drops: &Arc<Count>) -> thread::JoinHandle<()> {
        let rcvr = lock(handle).take().expect("the first poll started the operation");
        let drops = drops.clone();
        thread::spawn(move || rcvr.set_value(Counted(drops)))
    }

    #[test]
    fn dropping_the_future_races_the_completion() {
        loom::model(|| {
            let handle: Handle = Arc::new(Mutex::new(None));
            let drops = Arc::new(Count::new(0));
            let mut fut = into_awaitable(Handoff(handle.clone()));
            let wakes = std::sync::Arc::new(CountWakes(Count::new(0)));
            let waker = Waker::from(wakes.clone());
            assert!(Pin::new(&mut fut).poll(&mut Context::from_waker(&waker)).is_pending());
            let worker = complete_on_another_thread(&handle, &drops);
            drop(fut);
            worker.join().unwrap();
            // The block was freed exactly once, by whichever side finished last: the
            // value (never taken) is dropped with it.
            assert_eq!(drops.load(Ordering::Acquire), 1);
        });
    }

    #[test]
    fn a_second_poll_races_the_completion_without_losing_the_wake() {
        loom::model(|| {
            let handle: Handle = Arc::new(Mutex::new(None));
            let drops = Arc::new(Count::new(0));
            let mut fut = into_awaitable(Handoff(handle.clone()));
            let wakes = std::sync::Arc::new(CountWakes(Count::new(0)));
            let waker = Waker::from(wakes.clone());
            let mut cx = Context::from_waker(&waker);
            assert!(Pin::new(&mut fut).poll(&mut cx).is_pending());
            let worker = complete_on_another_thread(&handle, &drops);
            let second = Pin::new(&mut fut).poll(&mut cx);
            worker.join().unwrap();
            let value = match second {
                Poll::Ready(v) => v,
                Poll::Pending => {
                    // Pending: the completion came after the waker was stored, so it woke.
                    assert!(wakes.0.load(Ordering::Acquire) >= 1, "lost wake-up");
                    match Pin::new(&mut fut).poll(&mut cx) {
                        Poll::Ready(v) => v,
                        Poll::Pending => panic!("completed, yet pending"),
                    }
                }
            };
            assert!(matches!(value, Some(Ok(_))));
            drop(value);
            drop(fut);
            assert_eq!(drops.load(Ordering::Acquire), 1);
        });
    }
}
