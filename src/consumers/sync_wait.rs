//! `sync_wait`: the blocking consumer, and the root that makes borrowing safe.

use std::cell::UnsafeCell;
use std::pin::pin;

use crate::domain::{EarlyDomain, NoDomain, apply_sync_wait};
use crate::env::Env;
use crate::outcome::{Outcome, outcome_completions};
use crate::panic::AbortOnUnwind;
use crate::pool::WorkerThread;
use crate::receiver::Receiver;
use crate::schedulers::run_loop::{Finisher, RunLoop, RunLoopScheduler, WorkerWait};
use crate::sender::{OperationState, Sender, SenderTo};
use crate::stop::StopToken;

/// Starts `sndr` and blocks the calling thread until it completes, running work
/// scheduled on the calling thread's [`RunLoop`] meanwhile.
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

/// The default `sync_wait` of [`DefaultDomain`](crate::DefaultDomain).
pub(crate) fn run_sync_wait<S>(sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
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
/// `src/pool/README.md`, *Waiting on a worker*).
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
