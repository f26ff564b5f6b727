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
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, SenderTo, sender};
use crate::sync::{Arc, AtomicUsize, Condvar, Mutex, Ordering, lock};

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
        drop(q);
        if sleeping {
            self.ready.notify_one();
        }
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
    pub fn new() -> Self {
        RunLoop { inner: Arc::new(Inner::new()) }
    }

    /// A scheduler whose `schedule()` completes on the thread running this loop. Once
    /// the loop is finished (or dropped), `schedule()` completes stopped.
    pub fn scheduler(&self) -> RunLoopScheduler {
        RunLoopScheduler { inner: self.inner.clone() }
    }

    /// Runs queued work on this thread until [`finish`](Self::finish) has been called
    /// and the queue is empty.
    ///
    /// A work item whose completion unwinds breaks the receiver contract (completions
    /// must not unwind); the process is aborted rather than leaving operation states
    /// half-completed.
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
    pub(crate) fn claim_current_thread(&self) {
        self.inner.runner.store(thread_mark(), Ordering::Release);
    }

    /// Asks [`run`](Self::run) to return once the queue is empty. Work scheduled after
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
    /// (not used by an outer `sync_wait` of this thread), else a new one. Give it back
    /// with [`recycle`](Self::recycle).
    pub(crate) fn for_sync_wait() -> RunLoop {
        #[cfg(not(loom))]
        if let Some(inner) = CACHE.with(|c| c.take()) {
            return RunLoop { inner };
        }
        RunLoop::new()
    }

    /// Returns a finished, drained loop to this thread's cache.
    pub(crate) fn recycle(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `this` is never used or dropped again: the handle moves out once. The
        // loop is finished and drained, so its `Drop` would have nothing to do.
        let inner = unsafe { ptr::read(&this.inner) };
        #[cfg(not(loom))]
        if Arc::strong_count(&inner) == 1 {
            inner.reset();
            CACHE.with(|c| c.set(Some(inner)));
        }
        // Under loom there is no cache: the handle just goes.
        #[cfg(loom)]
        drop(inner);
    }
}

#[cfg(not(loom))]
std::thread_local! {
    /// The run loop `sync_wait` reuses on this thread.
    static CACHE: std::cell::Cell<Option<Arc<Inner>>> = const { std::cell::Cell::new(None) };
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
mod loom_tests {
    //! The run loop's state word under loom: `run` racing `push` and `finish`. Checked: a
    //! node that `push` accepted runs exactly once before `run` returns, `run` returns
    //! once finished (no lost wake-up: loom reports a deadlock otherwise), and a refused
    //! node never runs.
    use super::*;
    use crate::sync::thread;
    use loom::sync::atomic::AtomicUsize as Count;

    #[repr(C)]
    struct TestNode {
        node: Node,
        ran: Arc<Count>,
    }

    unsafe fn execute(node: *mut Node) {
        // SAFETY: the node heads a `TestNode` that outlives the model's threads.
        unsafe { (*node.cast::<TestNode>()).ran.fetch_add(1, Ordering::AcqRel) };
    }

    fn model(pushes: bool) {
        loom::model(move || {
            let run_loop = RunLoop::new();
            let inner = run_loop.inner.clone();
            let ran = Arc::new(Count::new(0));
            let mut node = Box::new(TestNode { node: Node { next: ptr::null_mut(), execute }, ran: ran.clone() });
            let node_ptr = SendNode(&mut node.node);
            let other = thread::spawn(move || {
                let node_ptr = node_ptr;
                let accepted = pushes && inner.push(node_ptr.0);
                inner.finish();
                accepted
            });
            run_loop.run();
            let accepted = other.join().unwrap();
            assert_eq!(
                ran.load(Ordering::Acquire),
                usize::from(accepted),
                "an accepted node runs once, a refused one never"
            );
            drop(node);
        });
    }

    /// `sync_wait`'s finish from another thread races the runner, which may return and
    /// drop the loop as soon as it sees `FINISHED`, before the finisher's notification
    /// (after a spurious wake-up of its wait, which loom's condition variable does not
    /// produce: the runner here announces `SLEEPING` as `run` does, then returns on
    /// seeing `FINISHED` without waiting). The finisher's own reference keeps the loop
    /// alive through its notification; without it, the loop's drop (under loom) finds a
    /// finish in progress.
    #[test]
    fn a_finisher_on_another_thread_outlives_the_runner_s_return() {
        loom::model(|| {
            let run_loop = RunLoop::new();
            run_loop.claim_current_thread();
            let finisher = run_loop.finisher();
            let other = thread::spawn(move || {
                // SAFETY: the loop is not finished, its runner keeps it until it is, and
                // this is its one finish.
                unsafe { finisher.finish() }
            });
            let inner = &run_loop.inner;
            let q = lock(&inner.queue);
            inner.state.fetch_or(SLEEPING, Ordering::AcqRel);
            drop(q);
            while inner.state.load(Ordering::Acquire) & FINISHED == 0 {
                thread::yield_now();
            }
            drop(run_loop);
            other.join().unwrap();
        });
    }

    #[test]
    fn a_finisher_on_the_runner_s_thread_takes_no_reference() {
        loom::model(|| {
            let run_loop = RunLoop::new();
            run_loop.claim_current_thread();
            // SAFETY: as above, on the runner's own thread, before `run`.
            unsafe { run_loop.finisher().finish() };
            assert_eq!(Arc::strong_count(&run_loop.inner), 1);
            run_loop.run();
        });
    }

    struct SendNode(*mut Node);
    // SAFETY: the node outlives the model's threads.
    unsafe impl Send for SendNode {}

    #[test]
    fn finish_races_the_runner_going_to_sleep() {
        model(false);
    }

    #[test]
    fn a_push_then_finish_race_the_runner() {
        model(true);
    }

    #[test]
    fn a_push_races_a_finish_from_another_thread() {
        loom::model(|| {
            let run_loop = RunLoop::new();
            let (a, b) = (run_loop.inner.clone(), run_loop.inner.clone());
            let ran = Arc::new(Count::new(0));
            let mut node = Box::new(TestNode { node: Node { next: ptr::null_mut(), execute }, ran: ran.clone() });
            let node_ptr = SendNode(&mut node.node);
            let pusher = thread::spawn(move || {
                let node_ptr = node_ptr;
                a.push(node_ptr.0)
            });
            let finisher = thread::spawn(move || b.finish());
            run_loop.run();
            let accepted = pusher.join().unwrap();
            finisher.join().unwrap();
            assert_eq!(ran.load(Ordering::Acquire), usize::from(accepted));
            drop(node);
        });
    }
}
