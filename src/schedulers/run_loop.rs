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

use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::ptr;

use crate::domain::NoDomain;
use crate::env::Env;
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, Sender, SenderTo};
use crate::sync::{Arc, Condvar, Mutex, lock, thread};

/// A queue node: the head of every run-loop operation state.
pub(crate) struct Node {
    next: *mut Node,
    /// Runs the operation owning this node. Called exactly once.
    execute: unsafe fn(*mut Node),
}

struct Queue {
    head: *mut Node,
    tail: *mut Node,
    finishing: bool,
    runner: Option<thread::ThreadId>,
}

// SAFETY: the raw pointers are queue links to operation states whose connect required
// a `Send` receiver; they are only followed by the thread that pops them, under the
// mutex.
unsafe impl Send for Queue {}

pub(crate) struct Inner {
    queue: Mutex<Queue>,
    ready: Condvar,
}

impl Inner {
    /// Enqueues `node`, or returns false if the loop is finishing.
    fn push(&self, node: *mut Node) -> bool {
        let mut q = lock(&self.queue);
        if q.finishing {
            return false;
        }
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
        drop(q);
        self.ready.notify_one();
        true
    }

    fn pop(q: &mut Queue) -> *mut Node {
        let node = q.head;
        if !node.is_null() {
            // SAFETY: `node` is queued and alive; we hold the lock.
            q.head = unsafe { (*node).next };
            if q.head.is_null() {
                q.tail = ptr::null_mut();
            }
        }
        node
    }

    fn finish(&self) {
        lock(&self.queue).finishing = true;
        self.ready.notify_all();
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

impl RunLoop {
    /// A new, empty run loop.
    pub fn new() -> Self {
        RunLoop {
            inner: Arc::new(Inner {
                queue: Mutex::new(Queue {
                    head: ptr::null_mut(),
                    tail: ptr::null_mut(),
                    finishing: false,
                    runner: None,
                }),
                ready: Condvar::new(),
            }),
        }
    }

    /// A scheduler whose `schedule()` completes on the thread running this loop.
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
        let mut q = lock(&self.inner.queue);
        q.runner = Some(thread::current().id());
        loop {
            let node = Inner::pop(&mut q);
            if !node.is_null() {
                drop(q);
                let guard = AbortOnUnwind("a run-loop work item unwound");
                // SAFETY: `node` was pushed by a started operation that stays alive until
                // its `execute` runs, and it is popped exactly once.
                unsafe { ((*node).execute)(node) };
                std::mem::forget(guard);
                q = lock(&self.inner.queue);
            } else if q.finishing {
                q.runner = None;
                return;
            } else {
                q = match self.inner.ready.wait(q) {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
            }
        }
    }

    /// Marks the calling thread as the one running this loop before [`run`](Self::run)
    /// is entered, so work started inline first (as `sync_wait` does) sees its
    /// scheduler as current.
    pub(crate) fn claim_current_thread(&self) {
        lock(&self.inner.queue).runner = Some(thread::current().id());
    }

    /// Asks [`run`](Self::run) to return once the queue is empty. Work scheduled after
    /// this completes stopped.
    pub fn finish(&self) {
        self.inner.finish();
    }
}

/// Aborts the process if dropped during an unwind through code that must not unwind.
pub(crate) struct AbortOnUnwind(pub(crate) &'static str);

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        eprintln!("senders: {}; aborting (completions and `start` must not unwind)", self.0);
        std::process::abort();
    }
}

/// The scheduler of a [`RunLoop`]. Cheap to clone; equal when it refers to the same loop.
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
        lock(&self.inner.queue).runner == Some(thread::current().id())
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

impl Sender for RunLoopSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = RunLoopScheduler;
    fn completion_scheduler(&self) -> RunLoopScheduler {
        self.sch.clone()
    }
}

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
        let inner = this.sch.inner.clone();
        if !inner.push(node)
            && let Some(rcvr) = this.rcvr.take()
        {
            rcvr.set_stopped();
        }
    }
}
