//! `RunLoop`: a FIFO of work items drained by whichever thread calls `run`.
//!
//! Work items are intrusive: the operation state of `schedule()` *is* the queue node,
//! so scheduling allocates nothing. The queue is a singly linked list under a mutex,
//! with a condition variable for the running thread to sleep on.
//!
//! | state | `schedule().start()` | `run()` |
//! |---|---|---|
//! | running | enqueues the node | runs nodes in FIFO order, sleeps when empty |
//! | finishing | completes `set_stopped` inline (nobody would run it) | drains what was queued, then returns |
//!
//! One atomic word beside the mutex holds `FINISHED`, `SLEEPING` (the runner waits on the
//! condition variable) and the number of queued nodes, so that the common path of
//! [`sync_wait`](crate::sync_wait), a sender that completes inline, takes no lock and
//! makes no system call: `finish` sets `FINISHED` and notifies only if the runner sleeps,
//! and `run` returns at once when it finds `FINISHED` with nothing queued. A push counts
//! its node in the same word in which it checks `FINISHED`, so a node counted before the
//! finish is always run. The runner sets `SLEEPING` with a read-modify-write that also
//! reads `FINISHED`, under the lock a pusher takes, so no wake-up is lost.

use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::ptr;

use crate::domain::NoDomain;
use crate::env::Env;
use crate::panic::AbortOnUnwind;
use crate::pool::{WakeWorker, WorkerThread};
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, SenderTo, sender};
use crate::sync::{Arc, AtomicBool, AtomicPtr, AtomicUsize, Condvar, Mutex, Ordering, lock};

/// A queue node: the head of every run-loop operation state.
pub(crate) struct Node {
    next: *mut Node,
    /// Runs the operation owning this node. Called exactly once.
    execute: unsafe fn(*mut Node),
}

struct Queue {
    head: *mut Node,
    tail: *mut Node,
}

// SAFETY: the raw pointers are queue links to operation states whose connect required
// a `Send` receiver; they are only followed by the thread that pops them, under the
// mutex.
unsafe impl Send for Queue {}

const FINISHED: usize = 1;
const SLEEPING: usize = 2;
const QUEUED: usize = 4;

pub(crate) struct Inner {
    queue: Mutex<Queue>,
    ready: Condvar,
    /// `FINISHED | SLEEPING | queued nodes × QUEUED` (see the module docs).
    state: AtomicUsize,
    /// The thread running the loop: the address of a thread-local of that thread (0:
    /// none), so that `is_current` takes no lock.
    runner: AtomicUsize,
    /// The pool worker that runs this loop while it waits by working ([`WorkerWait`]),
    /// or null: then a push from another thread wakes it through the pool's sleep
    /// protocol, not the condition variable.
    waiter: AtomicPtr<WorkerThread>,
    /// Under loom: finishes in progress, which must be none when the loop is dropped.
    #[cfg(loom)]
    finishing: AtomicUsize,
}

#[cfg(loom)]
impl Drop for Inner {
    fn drop(&mut self) {
        assert_eq!(self.finishing.load(Ordering::Relaxed), 0, "run loop dropped during a finish");
    }
}

crate::sync::const_thread_local! {
    /// This thread's identity for `Inner::runner`: the address of this byte.
    static THREAD_MARK: u8 = 0;
}

/// How long `run` looks for work before it sleeps, at most: about a round trip to an
/// awake pool worker.
#[cfg(not(loom))]
const SPIN: std::time::Duration = std::time::Duration::from_micros(3);

/// Looks at the state word until something is queued or the loop is finished, for at
/// most [`SPIN`], busily. Short on purpose: a worker woken onto this core waits for the
/// spin to end, and yielding instead (tried) gives the processor away on a loaded
/// machine, where getting it back can take milliseconds. Under loom, not at all: the
/// protocol must hold without it, and it would only multiply the interleavings.
fn spin_for_work(inner: &Inner) {
    #[cfg(not(loom))]
    {
        let start = std::time::Instant::now();
        while inner.state.load(Ordering::Acquire) == 0 && start.elapsed() < SPIN {
            std::hint::spin_loop();
        }
    }
    #[cfg(loom)]
    let _ = inner;
}

/// A nonzero number unique to the calling thread among live threads.
#[inline]
fn thread_mark() -> usize {
    THREAD_MARK.with(|m| std::ptr::from_ref(m) as usize)
}

impl Inner {
    fn new() -> Self {
        Inner {
            queue: Mutex::new(Queue { head: ptr::null_mut(), tail: ptr::null_mut() }),
            ready: Condvar::new(),
            state: AtomicUsize::new(0),
            runner: AtomicUsize::new(0),
            waiter: AtomicPtr::new(ptr::null_mut()),
            #[cfg(loom)]
            finishing: AtomicUsize::new(0),
        }
    }

    /// Enqueues `node`, or returns false if the loop is finishing.
    fn push(&self, node: *mut Node) -> bool {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s & FINISHED != 0 {
                return false;
            }
            match self.state.compare_exchange_weak(s, s + QUEUED, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break,
                Err(now) => s = now,
            }
        }
        let mut q = lock(&self.queue);
        // SAFETY: `node` is a pinned, started operation state that stays alive until its
        // `execute` runs; its link is ours until then.
        unsafe { (*node).next = ptr::null_mut() };
        if q.tail.is_null() {
            q.head = node;
        } else {
            // SAFETY: `tail` is a queued node, alive until executed, linked under the lock.
            unsafe { (*q.tail).next = node };
        }
        q.tail = node;
        // The runner sets `SLEEPING` under this lock before it waits.
        let sleeping = self.state.load(Ordering::Relaxed) & SLEEPING != 0;
        // A worker waiting by working sleeps in its pool instead. It cannot return before
        // it has popped this node, under this lock, so it is still waiting here.
        let wake = self.other_thread_waiter().map(|worker| {
            // SAFETY: the worker waits until it has run this node.
            unsafe { WakeWorker::new(worker) }
        });
        drop(q);
        if sleeping {
            self.ready.notify_one();
        }
        if let Some(wake) = wake {
            wake.wake();
        }
        true
    }

    /// The worker waiting by working on this loop, if there is one and it is not the
    /// calling thread (which is running, so needs no wake-up).
    #[inline]
    fn other_thread_waiter(&self) -> Option<*const WorkerThread> {
        let worker = self.waiter.load(Ordering::Acquire);
        (!worker.is_null() && self.runner.load(Ordering::Relaxed) != thread_mark()).then_some(worker.cast_const())
    }

    /// Runs one queued node, if one is counted: true if it ran one, or if one is counted
    /// but not linked yet (after a pause: the pusher links it next, under the lock).
    fn run_one(&self) -> bool {
        if self.state.load(Ordering::Acquire) < QUEUED {
            return false;
        }
        let mut q = lock(&self.queue);
        let node = self.pop(&mut q);
        drop(q);
        if node.is_null() {
            crate::sync::spin_wait();
            return true;
        }
        let guard = AbortOnUnwind("a run-loop work item unwound");
        // SAFETY: `node` was pushed by a started operation that stays alive until its
        // `execute` runs, and it is popped exactly once.
        unsafe { ((*node).execute)(node) };
        std::mem::forget(guard);
        true
    }

    fn pop(&self, q: &mut Queue) -> *mut Node {
        let node = q.head;
        if !node.is_null() {
            // SAFETY: `node` is queued and alive; we hold the lock.
            q.head = unsafe { (*node).next };
            if q.head.is_null() {
                q.tail = ptr::null_mut();
            }
            self.state.fetch_sub(QUEUED, Ordering::AcqRel);
        }
        node
    }

    /// Sets `FINISHED`; wakes the runner only if it sleeps.
    ///
    /// After the read-modify-write, this touches the loop only if the runner was asleep
    /// then: it cannot return (and free the loop) before this notification.
    fn finish(&self) {
        if self.state.fetch_or(FINISHED, Ordering::AcqRel) & SLEEPING != 0 {
            drop(lock(&self.queue));
            self.ready.notify_all();
        }
    }

    /// Whether `run` has nothing left to do: finished, and nothing queued.
    fn done(&self) -> bool {
        self.state.load(Ordering::Acquire) == FINISHED
    }

    /// Returns the loop to its initial state, for reuse by `sync_wait` on this thread.
    #[cfg(not(loom))]
    fn reset(&self) {
        debug_assert!(self.done());
        self.state.store(0, Ordering::Release);
        self.runner.store(0, Ordering::Release);
    }
}

/// An execution resource that runs work on the thread that calls [`RunLoop::run`].
///
/// [`sync_wait`](crate::sync_wait) drives one on the waiting thread.
///
/// ```
/// use senders::RunLoop;
/// let run_loop = RunLoop::new();
/// let sch = run_loop.scheduler();
/// assert!(!sch.is_current());
/// run_loop.finish();
/// run_loop.run(); // returns: finished and empty
/// ```
pub struct RunLoop {
    inner: Arc<Inner>,
}

impl Default for RunLoop {
    fn default() -> Self {
        Self::new()
    }
}

/// Dropping a loop that was not finished finishes it: work scheduled on it afterwards
/// completes stopped (nobody would run it), and work already queued runs here, on the
/// dropping thread, as [`run`](RunLoop::run) would run it.
impl Drop for RunLoop {
    fn drop(&mut self) {
        if !self.inner.done() {
            self.finish();
            self.run();
        }
    }
}

impl RunLoop {
    /// A new, empty run loop.
    ///
    /// ```
    /// use senders::RunLoop;
    /// let run_loop = RunLoop::new();
    /// run_loop.finish();
    /// run_loop.run(); // nothing queued: returns at once
    /// ```
    pub fn new() -> Self {
        RunLoop { inner: Arc::new(Inner::new()) }
    }

    /// A scheduler whose `schedule()` completes on the thread running this loop. Once
    /// the loop is finished (or dropped), `schedule()` completes stopped.
    ///
    /// ```
    /// use senders::{RunLoop, schedule, sync_wait};
    /// let run_loop = RunLoop::new();
    /// let sch = run_loop.scheduler();
    /// run_loop.finish();
    /// run_loop.run();
    /// assert_eq!(sync_wait(schedule(&sch)).unwrap(), None, "a finished loop completes stopped");
    /// ```
    pub fn scheduler(&self) -> RunLoopScheduler {
        RunLoopScheduler { inner: self.inner.clone() }
    }

    /// Runs queued work on this thread until [`finish`](Self::finish) has been called
    /// and the queue is empty.
    ///
    /// A work item whose completion unwinds breaks the receiver contract (completions
    /// must not unwind); the process is aborted rather than leaving operation states
    /// half-completed.
    ///
    /// ```
    /// use senders::{RunLoop, SenderExt, schedule, sync_wait_value};
    /// use std::sync::mpsc;
    /// let run_loop = RunLoop::new();
    /// let sch = run_loop.scheduler();
    /// let (tx, rx) = mpsc::channel();
    /// let here = std::thread::current().id();
    /// std::thread::scope(|s| {
    ///     // Another thread schedules work on the loop, waits for it, then finishes it.
    ///     s.spawn(|| {
    ///         let ran_on = sync_wait_value(schedule(&sch).then(|()| std::thread::current().id()));
    ///         tx.send(ran_on).unwrap();
    ///         run_loop.finish();
    ///     });
    ///     run_loop.run(); // runs that work on this thread, then returns
    /// });
    /// assert_eq!(rx.recv().unwrap(), here);
    /// ```
    pub fn run(&self) {
        let inner = &*self.inner;
        inner.runner.store(thread_mark(), Ordering::Release);
        if inner.done() {
            inner.runner.store(0, Ordering::Release);
            return;
        }
        let mut q = lock(&inner.queue);
        let mut spun = false;
        loop {
            let node = inner.pop(&mut q);
            if !node.is_null() {
                drop(q);
                let guard = AbortOnUnwind("a run-loop work item unwound");
                // SAFETY: `node` was pushed by a started operation that stays alive until
                // its `execute` runs, and it is popped exactly once.
                unsafe { ((*node).execute)(node) };
                std::mem::forget(guard);
                q = lock(&inner.queue);
                continue;
            }
            if !spun && inner.state.load(Ordering::Acquire) == 0 {
                // Nothing queued and not finished: before sleeping, look for a short
                // while without the lock. A completion from another thread that comes
                // meanwhile (a round trip to an awake pool worker takes microseconds)
                // then costs the waker no system call and this thread no wake-up.
                spun = true;
                drop(q);
                spin_for_work(inner);
                q = lock(&inner.queue);
                continue;
            }
            spun = false;
            // Empty under the lock: sleep, unless finished (in the same step, so that a
            // `finish` either sees `SLEEPING` or is seen here).
            let s = inner.state.fetch_or(SLEEPING, Ordering::AcqRel);
            if s & FINISHED != 0 && s < QUEUED {
                inner.state.fetch_and(!SLEEPING, Ordering::AcqRel);
                drop(q);
                inner.runner.store(0, Ordering::Release);
                return;
            }
            if s >= QUEUED {
                // Counted but not linked yet: the pusher links it under this lock next.
                inner.state.fetch_and(!SLEEPING, Ordering::AcqRel);
                drop(q);
                crate::sync::spin_wait();
                q = lock(&inner.queue);
                continue;
            }
            // On a pool worker, what this loop waits for may be a fork the worker holds
            // latent: the worker hands them all to the other workers before blocking.
            crate::blocking::before_blocking();
            q = match inner.ready.wait(q) {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            inner.state.fetch_and(!SLEEPING, Ordering::AcqRel);
        }
    }

    /// Marks the calling thread as the one running this loop before [`run`](Self::run)
    /// is entered, so work started inline first (as `sync_wait` does) sees its
    /// scheduler as current.
    #[inline]
    pub(crate) fn claim_current_thread(&self) {
        self.inner.runner.store(thread_mark(), Ordering::Release);
    }

    /// Asks [`run`](Self::run) to return once the queue is empty. Work scheduled after
    ///
    /// ```
    /// use senders::{RunLoop, schedule, sync_wait};
    /// let run_loop = RunLoop::new();
    /// run_loop.finish();
    /// assert_eq!(sync_wait(schedule(&run_loop.scheduler())).unwrap(), None);
    /// ```
    /// this completes stopped.
    pub fn finish(&self) {
        self.inner.finish();
    }

    /// The handle through which `sync_wait`'s receiver finishes this loop (see
    /// [`Finisher`]).
    pub(crate) fn finisher(&self) -> Finisher {
        Finisher { inner: Arc::as_ptr(&self.inner) }
    }

    /// A loop for `sync_wait` on this thread: the thread's cached one if it is free
    /// (not used by an outer `sync_wait` of this thread), else one of the loops nested
    /// waits of this thread used before, else a new one. Give it back with
    /// [`recycle`](Self::recycle).
    #[inline]
    pub(crate) fn for_sync_wait() -> RunLoop {
        #[cfg(not(loom))]
        if let Some(inner) = CACHE.with(|c| c.take()) {
            return RunLoop { inner };
        }
        Self::for_nested_sync_wait()
    }

    /// [`for_sync_wait`](Self::for_sync_wait) when the cached loop is taken: out of the
    /// common path.
    #[cold]
    fn for_nested_sync_wait() -> RunLoop {
        #[cfg(not(loom))]
        if let Some(inner) = NESTED.with(|n| n.borrow_mut().pop()) {
            return RunLoop { inner };
        }
        RunLoop::new()
    }

    /// Returns a finished, drained loop to this thread's cache (or, when a nested wait
    /// put one there already, to the nested waits' stack).
    pub(crate) fn recycle(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again: the handle moves out once. The
        // loop is finished and drained, so its `Drop` would have nothing to do.
        let inner = unsafe { ptr::read(&this.inner) };
        #[cfg(not(loom))]
        if Arc::strong_count(&inner) == 1 {
            inner.reset();
            if let Some(other) = CACHE.with(|c| c.replace(Some(inner))) {
                recycle_nested(other);
            }
        }
        // Under loom there is no cache: the handle just goes.
        #[cfg(loom)]
        drop(inner);
    }
}

/// Keeps a loop for the nested waits of this thread (out of the common path: a wait
/// that nests none finds the cache empty on its return).
#[cfg(not(loom))]
#[cold]
fn recycle_nested(inner: Arc<Inner>) {
    // During the thread's exit the stack may be gone already: then the loop is freed.
    let _ = NESTED.try_with(|n| n.borrow_mut().push(inner));
}

#[cfg(not(loom))]
std::thread_local! {
    /// The run loop `sync_wait` reuses on this thread.
    static CACHE: std::cell::Cell<Option<Arc<Inner>>> = const { std::cell::Cell::new(None) };
    /// The run loops nested `sync_wait`s of this thread reuse: as many as they ever
    /// nested deep, so that nested waits allocate no loop once warm.
    static NESTED: std::cell::RefCell<Vec<Arc<Inner>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What a `sync_wait` on a pool worker waits on (see `src/pool/README.md`, *Waiting on
/// a worker*): the completion's flag, and the run loop of the wait's environment, made
/// only when somebody asks for the environment's scheduler (most waits never do, and
/// then a wait that completes inline touches no shared word and no thread-local).
///
/// Lives in the waiting `sync_wait`'s frame, on the worker's stack.
pub(crate) struct WorkerWait {
    /// Set by the completion ([`set`](Self::set)).
    done: AtomicBool,
    /// The loop (an `Arc<Inner>` of this wait's own), or null until the environment's
    /// scheduler is first asked for. Published with `SeqCst` (see `scheduler`).
    run_loop: AtomicPtr<Inner>,
    /// The waiting worker.
    worker: *const WorkerThread,
    /// The waiting worker's thread mark, the loop's `runner` once it is made.
    mark: usize,
}

// SAFETY: shared only through the wait's environment and its receiver: the atomics, and
// the worker's pointer and mark, which are only read (the worker's state through
// `WakeWorker`, which keeps its registry alive).
unsafe impl Sync for WorkerWait {}
// SAFETY: as above.
unsafe impl Send for WorkerWait {}

impl WorkerWait {
    /// The wait of `worker`, the calling thread's worker state.
    #[inline]
    pub(crate) fn new(worker: &WorkerThread) -> Self {
        WorkerWait {
            done: AtomicBool::new(false),
            run_loop: AtomicPtr::new(ptr::null_mut()),
            worker,
            mark: thread_mark(),
        }
    }

    /// The environment's scheduler: this wait's loop, made on the first call (on any
    /// thread), then shared. The loop is run by the waiting worker, and a push from
    /// another thread wakes it (`Inner::push`).
    pub(crate) fn scheduler(&self) -> RunLoopScheduler {
        let inner = self.run_loop.load(Ordering::Acquire);
        if inner.is_null() {
            return self.make_loop();
        }
        // SAFETY: a non-null pointer is this wait's own reference to the loop, which it
        // keeps until the wait has returned, after which nobody asks for the scheduler.
        unsafe {
            Arc::increment_strong_count(inner);
            RunLoopScheduler { inner: Arc::from_raw(inner) }
        }
    }

    /// Makes the loop and publishes it, unless another thread did first.
    #[cold]
    fn make_loop(&self) -> RunLoopScheduler {
        let made = Arc::new(Inner::new());
        made.runner.store(self.mark, Ordering::Relaxed);
        made.waiter.store(self.worker.cast_mut(), Ordering::Relaxed);
        let own = Arc::into_raw(made.clone()).cast_mut();
        // `SeqCst`: the waiter's re-check before it sleeps reads this pointer after its
        // fence, and a push onto the loop comes after this in the order of `SeqCst`
        // operations, so the pusher's fence follows it too: either the pusher sees the
        // waiter's sleep bit or the waiter sees the pointer, and through it the push.
        match self.run_loop.compare_exchange(ptr::null_mut(), own, Ordering::SeqCst, Ordering::Acquire) {
            Ok(_) => RunLoopScheduler { inner: made },
            Err(_) => {
                // SAFETY: `own` came from `into_raw` above and was not published.
                drop(unsafe { Arc::from_raw(own) });
                drop(made);
                self.scheduler()
            }
        }
    }

    /// Sets the completion's flag and wakes the waiter if it sleeps. After the store
    /// the wait may be gone: nothing here touches it afterwards.
    ///
    /// Out of line, so that `sync_wait`'s completion off the pools stays small enough to
    /// inline.
    ///
    /// # Safety
    ///
    /// `this` is a live wait, not set yet, and this is its one `set`.
    #[inline(never)]
    pub(crate) unsafe fn set(this: *const Self) {
        // SAFETY: alive until the store below, by the caller's contract.
        let worker = unsafe { (*this).worker };
        if WorkerThread::current_ptr() == worker {
            // The waiter is this thread, running this: no wake-up to send.
            // SAFETY: as above.
            unsafe { (*this).done.store(true, Ordering::Release) };
            return;
        }
        // SAFETY: the worker waits for this flag, so it is alive in its loop.
        let wake = unsafe { WakeWorker::new(worker) };
        // SAFETY: as above; the wait may be gone right after this store.
        unsafe { (*this).done.store(true, Ordering::Release) };
        wake.wake();
    }

    /// Waits by working until the flag is set, then finishes the loop, if one was made,
    /// and runs what is still queued on it. `worker` is this wait's worker.
    pub(crate) fn wait(&self, worker: &WorkerThread) {
        debug_assert!(ptr::eq(worker, self.worker));
        if !self.done.load(Ordering::Acquire) {
            worker.wait_until(
                || self.done.load(Ordering::Acquire),
                || self.with_loop(Inner::run_one),
                || {
                    self.done.load(Ordering::Acquire)
                        || self.with_loop(|inner| inner.state.load(Ordering::Acquire) != 0)
                },
            );
        }
        let inner = self.run_loop.load(Ordering::Acquire);
        if !inner.is_null() {
            // SAFETY: this wait's own reference, given up here, once.
            self.finish_loop(worker, unsafe { Arc::from_raw(inner) });
        }
    }

    /// `f` of the loop, if it was made; false otherwise.
    #[inline]
    fn with_loop(&self, f: impl FnOnce(&Inner) -> bool) -> bool {
        // `SeqCst`: see `make_loop`.
        let inner = self.run_loop.load(Ordering::SeqCst);
        // SAFETY: this wait's own reference keeps the loop alive while it waits.
        !inner.is_null() && f(unsafe { &*inner })
    }

    /// Finishes the loop (later schedules on it complete stopped) and runs what is
    /// queued, working meanwhile, as `RunLoop::run` would.
    #[cold]
    fn finish_loop(&self, worker: &WorkerThread, inner: Arc<Inner>) {
        inner.finish();
        worker.wait_until(|| inner.done(), || inner.run_one(), || inner.state.load(Ordering::Acquire) != 0);
        // Finished: later pushes are refused without reading `waiter`, and the last push
        // read it under the lock, before its node was popped.
        inner.waiter.store(ptr::null_mut(), Ordering::Relaxed);
        inner.runner.store(0, Ordering::Release);
    }
}

/// What finishes the loop of a `sync_wait`: a pointer, not a counted handle, so that a
/// sender completing inline (on the waiting thread, the common case) costs no reference
/// count. The waiting thread keeps the loop alive until it sees `FINISHED`, so until
/// the finish the pointer is valid. After it, the loop may be gone as soon as the runner
/// sees it, unless the finish runs on the runner's own thread (the runner is then below
/// on this stack and cannot return meanwhile). So a finish from another thread first
/// takes a reference, while `FINISHED` is still clear, and drops it after notifying.
pub(crate) struct Finisher {
    inner: *const Inner,
}

// SAFETY: the pointer targets a `Sync` loop kept alive as described above; `finish` takes
// care of the other-thread case.
unsafe impl Send for Finisher {}
// SAFETY: a shared `Finisher` offers nothing.
unsafe impl Sync for Finisher {}

impl Finisher {
    /// Sets `FINISHED` and wakes the runner if it sleeps.
    ///
    /// # Safety
    ///
    /// The loop is not finished yet, its runner keeps it alive until it is, and this is
    /// the only finish of the loop (it is called once).
    pub(crate) unsafe fn finish(self) {
        // SAFETY: alive until finished, by the caller's contract.
        let inner = unsafe { &*self.inner };
        #[cfg(loom)]
        inner.finishing.fetch_add(1, Ordering::Relaxed);
        if inner.runner.load(Ordering::Relaxed) == thread_mark() {
            // The runner is this thread (thread marks are unique among live threads, and
            // only the runner's thread stores its own): it cannot free the loop during
            // this call.
            inner.finish();
            #[cfg(loom)]
            inner.finishing.fetch_sub(1, Ordering::Relaxed);
        } else {
            // SAFETY: not finished yet, so alive: a new reference may be taken.
            let keep = unsafe {
                Arc::increment_strong_count(self.inner);
                Arc::from_raw(self.inner)
            };
            keep.finish();
            #[cfg(loom)]
            keep.finishing.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The scheduler of a [`RunLoop`]. Cheap to clone; equal when it refers to the same loop.
///
/// `sync_wait` drives a run loop on the waiting thread, so that is where its work runs:
///
/// ```
/// use senders::{GetScheduler, RunLoopScheduler, SenderExt, read_env, sync_wait};
/// let here = read_env(GetScheduler).then(|s: RunLoopScheduler| s.is_current());
/// assert_eq!(sync_wait(here).unwrap(), Some(true));
/// ```
#[derive(Clone)]
pub struct RunLoopScheduler {
    inner: Arc<Inner>,
}

impl RunLoopScheduler {
    pub(crate) fn finish(&self) {
        self.inner.finish();
    }

    /// Whether the calling thread is the one currently running this loop.
    ///
    /// ```
    /// use senders::{GetScheduler, RunLoopScheduler, SenderExt, read_env, sync_wait_value};
    /// // `sync_wait` drives a run loop on this thread; its scheduler is the current one.
    /// let on_loop = sync_wait_value(read_env(GetScheduler).then(|s: RunLoopScheduler| s.is_current()));
    /// assert!(on_loop);
    /// ```
    pub fn is_current(&self) -> bool {
        self.inner.runner.load(Ordering::Acquire) == thread_mark()
    }
}

impl PartialEq for RunLoopScheduler {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl std::fmt::Debug for RunLoopScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunLoopScheduler")
    }
}

impl Scheduler for RunLoopScheduler {
    type Domain = NoDomain;
    type Sender = RunLoopSender;
    fn schedule(&self) -> RunLoopSender {
        RunLoopSender { sch: self.clone() }
    }
    fn is_current(&self) -> bool {
        RunLoopScheduler::is_current(self)
    }
}

/// The sender of `RunLoopScheduler::schedule()`.
#[must_use = "senders do nothing unless connected and started"]
#[derive(Clone)]
pub struct RunLoopSender {
    sch: RunLoopScheduler,
}

sender!(impl [] RunLoopSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = RunLoopScheduler;
    fn completion_scheduler(&self) -> RunLoopScheduler {
        self.sch.clone()
    }
});

impl<R: Receiver<(), Infallible> + Send> SenderTo<R> for RunLoopSender {
    type Operation = RunLoopOp<R>;
    fn connect(self, receiver: R) -> RunLoopOp<R> {
        RunLoopOp {
            node: Node { next: ptr::null_mut(), execute: RunLoopOp::<R>::execute },
            sch: self.sch,
            rcvr: Some(receiver),
            _pin: PhantomPinned,
        }
    }
}

/// The operation state of `schedule()` on a run loop; it is its own queue node.
#[repr(C)]
pub struct RunLoopOp<R> {
    node: Node, // first field: a `*mut Node` is a `*mut RunLoopOp<R>`
    sch: RunLoopScheduler,
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

// SAFETY: the node's links are only followed under the queue's mutex; the operation
// itself holds a receiver and a scheduler handle, both `Send` when `R` is.
unsafe impl<R: Send> Send for RunLoopOp<R> {}

impl<R: Receiver<(), Infallible>> RunLoopOp<R> {
    /// # Safety
    ///
    /// `node` points to the `node` field of a live, started `RunLoopOp<R>`, and this is
    /// the only call for it.
    unsafe fn execute(node: *mut Node) {
        let this = node.cast::<RunLoopOp<R>>();
        // SAFETY: `#[repr(C)]` puts `node` first, so the cast recovers the operation,
        // which the caller guarantees is alive; nobody else touches `rcvr` now.
        let rcvr = unsafe { (*this).rcvr.take() };
        if let Some(rcvr) = rcvr {
            complete(rcvr);
        }
    }
}

fn complete<R: Receiver<(), Infallible>>(rcvr: R) {
    if rcvr.env().stop_token().stop_requested() {
        rcvr.set_stopped();
    } else {
        rcvr.set_value(());
    }
}

impl<R: Receiver<(), Infallible>> OperationState for RunLoopOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: we never move out of the pinned operation; we only take its address
        // and, if the loop refuses the node, its receiver (not structurally pinned).
        let this = unsafe { self.get_unchecked_mut() };
        let node: *mut Node = &mut this.node;
        // DROP ORDER: this handle outlives the refusal's completion below; it holds the
        // loop (no user data), which is reference-counted.
        let inner = this.sch.inner.clone();
        if !inner.push(node)
            && let Some(rcvr) = this.rcvr.take()
        {
            rcvr.set_stopped();
        }
    }
}

#[cfg(all(test, loom))]
mod loom_tests;
