//! `sync_wait`: the blocking consumer, and the root that makes borrowing safe.

use std::cell::UnsafeCell;
use std::pin::pin;

use crate::domain::{DefaultDomain, DefaultSyncWait, EarlyDomain, NoDomain, apply_sync_wait};
use crate::env::Env;
use crate::outcome::{Outcome, outcome_completions};
use crate::panic::AbortOnUnwind;
use crate::pool::WorkerThread;
use crate::receiver::Receiver;
use crate::schedulers::run_loop::{Finisher, RunLoop, RunLoopScheduler, WorkerWait};
use crate::sender::{OperationState, Sender, SenderTo};
use crate::stop::StopToken;

/// Starts `sndr` and blocks the calling thread until it completes, running work
/// scheduled on the calling thread's [`RunLoop`] meanwhile (on a pool worker, running
/// the pool's work too: see [below](#on-a-pool-worker)).
///
/// | completion | result |
/// |---|---|
/// | value `v` | `Ok(Some(v))` |
/// | stopped | `Ok(None)` |
/// | error `e` | `Err(e)` |
/// | panic in user code | the panic resumes on this thread |
///
/// Because it does not return before the operation completes, the sender may borrow
/// from the caller's stack, even when its work runs on other threads.
///
/// The call goes through `apply_sender` of the sender's domain (P2999), so a domain
/// can replace how it waits.
///
/// # On a pool worker
///
/// Called on a worker of a [`StaticThreadPool`](crate::StaticThreadPool) (inside work
/// running on the pool), `sync_wait` does not block the worker: it *waits by working*,
/// as `rayon::join` does. Until the sender completes, the worker runs what the sender
/// scheduled on this wait's own scheduler, then its own queued jobs, then jobs it steals
/// from the other workers; only when there is nothing to run does it sleep, and the
/// completion (or new work anywhere in the pool) wakes it. So fork-join written as
/// nested waits never hangs for lack of workers, even on one worker:
///
/// ```
/// use senders::{PoolScheduler, SenderExt, StaticThreadPool, schedule, sync_wait, when_all};
///
/// fn fib(n: u64, sch: &PoolScheduler) -> u64 {
///     if n < 2 {
///         return n;
///     }
///     // The first child runs here; the second is forked onto the pool, and taken back
///     // and run here too unless another worker stole it meanwhile.
///     let both = when_all((schedule(sch).then(|()| fib(n - 1, sch)), schedule(sch).then(|()| fib(n - 2, sch))));
///     let (a, b) = sync_wait(both).unwrap().unwrap();
///     a + b
/// }
///
/// let pool = StaticThreadPool::new(1).unwrap();
/// let sch = &pool.scheduler();
/// assert_eq!(sync_wait(schedule(sch).then(|()| fib(20, sch))).unwrap(), Some(6765));
/// ```
///
/// The environment is the same type as off the pools: its scheduler is this wait's
/// [`RunLoopScheduler`] (work scheduled there runs on the waiting worker) and its domain
/// is the default one, so what forks onto the pool is what names the pool itself (its
/// scheduler's senders, as `schedule(sch)` above). A sender that completes inline costs
/// no allocation and no atomic read-modify-write.
///
/// Three limits, as with rayon:
///
/// - Waits nest on the worker's stack, last in, first out: a wait returns only after
///   everything the worker started running above it has returned. A wait whose
///   completion depends on code that runs after an *outer* wait on the same worker
///   returns can therefore deadlock.
/// - While it waits, the worker runs *unrelated* jobs of the pool on the same thread,
///   inside the wait. State the waiting job holds across the wait is in reach of those
///   jobs: a lock guard (a job that locks the same `std::sync::Mutex` deadlocks the
///   thread on itself, or a `parking_lot` lock that is reentrant gives it a second
///   guard), a `RefCell` borrow (a second borrow panics), a thread-local value (it sees
///   the waiting job's value, and what it leaves there the waiting job sees after).
///   This holds even when the wait depends only on work it started or on other
///   threads. What is safe: release the guard (end the borrow, restore the
///   thread-local) before the wait and take it again after, or wait off the pool (from
///   a thread that is not a worker, which blocks and runs nothing else).
/// - Each nested wait takes room on the worker's stack (about 0.5 KiB in a release
///   build, 2.8 KiB in a debug build; more with large operation states), as do the jobs
///   a waiting worker runs: the default stack of
///   [`DEFAULT_STACK_SIZE`](crate::pool::DEFAULT_STACK_SIZE) (8 MiB) holds about
///   16,000 nested waits in a release build. Deeper recursion needs a larger
///   [`stack_size`](crate::PoolBuilder::stack_size).
///
/// ```
/// use senders::{just, sync_wait, SenderExt};
/// let data = vec![1, 2, 3];
/// let sum = sync_wait(just(()).then(|()| data.iter().sum::<i32>()));
/// assert_eq!(sum.unwrap(), Some(6));
/// ```
pub fn sync_wait<S>(sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
where
    S: Sender + SenderTo<SyncWaitReceiver<<S as Sender>::Value, <S as Sender>::Error>>,
{
    apply_sync_wait(EarlyDomain::<S>::default(), sndr)
}

/// The environment `sync_wait` gives its sender: the waiting thread's run loop as
/// scheduler, no stop token. (On a pool worker, the loop is made when the scheduler is
/// first asked for.)
pub struct SyncWaitEnv {
    home: Home,
}

/// Where the environment's run loop is.
enum Home {
    /// Off the pools: the waiting thread's loop, which outlives the operation.
    Loop(*const RunLoop),
    /// On a pool worker: the wait, which makes its loop on demand and outlives the
    /// operation.
    Worker(*const WorkerWait),
}

// SAFETY: the run loop (or the worker's wait) lives on the waiting thread's stack until
// the operation has completed, and a shared `RunLoop` or `WorkerWait` only hands out
// scheduler handles (`Sync`).
unsafe impl Sync for SyncWaitEnv {}
// SAFETY: as above.
unsafe impl Send for SyncWaitEnv {}

impl Env for SyncWaitEnv {
    type Scheduler = RunLoopScheduler;
    type Domain = NoDomain;
    fn scheduler(&self) -> RunLoopScheduler {
        match self.home {
            // SAFETY: see the `Sync` impl.
            Home::Loop(run_loop) => unsafe { (*run_loop).scheduler() },
            // SAFETY: see the `Sync` impl.
            Home::Worker(wait) => unsafe { (*wait).scheduler() },
        }
    }
    fn stop_token(&self) -> StopToken<'_> {
        StopToken::never()
    }
}

struct State<V, E> {
    env: SyncWaitEnv,
    outcome: UnsafeCell<Option<Outcome<V, E>>>,
}

/// The receiver `sync_wait` connects its sender to.
pub struct SyncWaitReceiver<V, E> {
    state: *const State<V, E>,
    finish: Finish,
}

/// How the completion releases the waiting thread.
enum Finish {
    /// Off the pools: by finishing its run loop.
    Loop(Finisher),
    /// On a pool worker: by setting the wait's flag (and waking the worker if it sleeps).
    Worker(*const WorkerWait),
}

// SAFETY: the receiver writes the outcome (a `V` or `E`, both `Send`) into state owned by
// the waiting thread, which reads it only after the finish (a release of the loop's
// state or the wait's flag, which the waiting thread acquires); the env it hands out is
// `Sync`.
unsafe impl<V: Send, E: Send> Send for SyncWaitReceiver<V, E> {}
// SAFETY: a shared reference only reaches `env()`, which reads the immutable
// `SyncWaitEnv` (a scheduler handle, which is `Sync`).
unsafe impl<V, E> Sync for SyncWaitReceiver<V, E> {}

impl<V, E> SyncWaitReceiver<V, E> {
    fn complete(self, outcome: Outcome<V, E>) {
        // SAFETY: the state lives on the waiting thread's stack until the finish below
        // lets the wait return; this receiver is the only writer, and completes once.
        unsafe { *(*self.state).outcome.get() = Some(outcome) };
        match self.finish {
            // SAFETY: the waiting thread keeps its loop until this one completion
            // finishes it. After `finish`, the state may be gone.
            Finish::Loop(finisher) => unsafe { finisher.finish() },
            // SAFETY: the worker keeps its wait until this one completion sets it. After
            // `set`, the state may be gone.
            Finish::Worker(wait) => unsafe { WorkerWait::set(wait) },
        }
    }
}

impl<V, E> Receiver<V, E> for SyncWaitReceiver<V, E> {
    type Env = SyncWaitEnv;
    fn env(&self) -> &SyncWaitEnv {
        // SAFETY: the state outlives every receiver borrow: it is freed only after the
        // completion, which consumes the receiver.
        unsafe { &(*self.state).env }
    }
    outcome_completions!(complete);
}

/// The default `sync_wait`: what [`Domain::apply_sync_wait`](crate::Domain::apply_sync_wait)
/// runs unless a domain replaces it.
impl DefaultSyncWait for DefaultDomain {
    type Receiver<V, E> = SyncWaitReceiver<V, E>;
    fn wait<S>(sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
    where
        S: Sender + SenderTo<SyncWaitReceiver<<S as Sender>::Value, <S as Sender>::Error>>,
    {
        run_sync_wait(sndr)
    }
}

/// The default `sync_wait` of [`DefaultDomain`].
fn run_sync_wait<S>(sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
where
    S: Sender + SenderTo<SyncWaitReceiver<<S as Sender>::Value, <S as Sender>::Error>>,
{
    // SAFETY: a non-null `current_ptr` is this thread's worker state, alive while this
    // thread runs one of its jobs, which it does until this call returns.
    if let Some(worker) = unsafe { WorkerThread::current_ptr().as_ref() } {
        return wait_on_worker(worker, sndr);
    }
    // This thread's cached loop: no allocation, no lock and no system call when the
    // sender completes inline (see `RunLoop`).
    let run_loop = RunLoop::for_sync_wait();
    let outcome = {
        let state = State { env: SyncWaitEnv { home: Home::Loop(&run_loop) }, outcome: UnsafeCell::new(None) };
        let rcvr = SyncWaitReceiver { state: &state, finish: Finish::Loop(run_loop.finisher()) };
        run_loop.claim_current_thread();
        let mut op = pin!(sndr.connect(rcvr));
        let guard = AbortOnUnwind("an operation's start unwound inside sync_wait");
        // SAFETY: `op` is pinned on this stack frame, started once, and not dropped
        // before the completion: `run` returns only after the receiver called `finish`,
        // and the abort guards turn any unwind in between into an abort instead of a drop.
        unsafe { op.as_mut().start() };
        run_loop.run();
        std::mem::forget(guard);
        // SAFETY: the receiver wrote the outcome before `finish`; `run` returned after it.
        unsafe { (*state.outcome.get()).take() }
    };
    run_loop.recycle();
    outcome.expect("sync_wait: run loop finished without a completion").resume()
}

/// `sync_wait` on a pool worker: it waits by working (`WorkerWait`, and
/// `src/pool/README.md`, *Waiting on a worker*). Never inlined, so that the path off the
/// pools stays small enough to inline where it is called.
#[inline(never)]
fn wait_on_worker<S>(worker: &WorkerThread, sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
where
    S: Sender + SenderTo<SyncWaitReceiver<<S as Sender>::Value, <S as Sender>::Error>>,
{
    let wait = WorkerWait::new(worker);
    let outcome = {
        let state = State { env: SyncWaitEnv { home: Home::Worker(&wait) }, outcome: UnsafeCell::new(None) };
        let rcvr = SyncWaitReceiver { state: &state, finish: Finish::Worker(&wait) };
        let mut op = pin!(sndr.connect(rcvr));
        let guard = AbortOnUnwind("an operation's start unwound inside sync_wait");
        // SAFETY: `op` is pinned on this stack frame, started once, and not dropped
        // before the completion: `wait` returns only after the receiver set the flag,
        // and the abort guards turn any unwind in between into an abort instead of a drop.
        unsafe { op.as_mut().start() };
        wait.wait(worker);
        std::mem::forget(guard);
        // SAFETY: the receiver wrote the outcome before setting the flag, which `wait`
        // acquired.
        unsafe { (*state.outcome.get()).take() }
    };
    outcome.expect("sync_wait: the wait returned without a completion").resume()
}
