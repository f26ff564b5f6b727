//! The pool's shared state, its worker threads, and the jobs they run.

use std::cell::Cell;
use std::ptr;

use crossbeam_deque::{Injector, Steal, Stealer, Worker};

use super::sleep::Sleep;
use crate::schedulers::run_loop::AbortOnUnwind;
use crate::sync::{Arc, AtomicBool, AtomicUsize, Ordering};

/// A type-erased pointer to a job that lives elsewhere (usually inside a pinned
/// operation state), with the function that runs it.
///
/// Invariant: a `JobRef` is executed exactly once, and the job it points to stays alive
/// until then.
#[derive(Clone, Copy)]
pub(crate) struct JobRef {
    data: *const (),
    run: unsafe fn(*const ()),
}

// SAFETY: jobs are created only by operations whose connect required `Send` receivers
// (and `Send` data), so they may run on any worker.
unsafe impl Send for JobRef {}

impl JobRef {
    /// # Safety
    ///
    /// `run(data)` must be sound to call exactly once, from any thread; until then
    /// `data` stays valid.
    pub(crate) unsafe fn new(data: *const (), run: unsafe fn(*const ())) -> Self {
        JobRef { data, run }
    }

    /// Runs the job. A job must not unwind (the crate's operations catch user panics);
    /// if one does, the process aborts rather than lose a completion silently.
    fn execute(self) {
        let guard = AbortOnUnwind("a pool job unwound");
        // SAFETY: the `new` contract; each `JobRef` is executed once.
        unsafe { (self.run)(self.data) };
        std::mem::forget(guard);
    }
}

/// State shared by a pool's workers and schedulers.
pub(crate) struct Registry {
    injector: Injector<JobRef>,
    stealers: Box<[Stealer<JobRef>]>,
    pub(crate) sleep: Sleep,
    terminating: AtomicBool,
    /// Set once every worker has exited; jobs that run afterwards complete stopped.
    exited: AtomicBool,
    /// Submissions from outside the pool currently between their `terminating` check
    /// and their push; shutdown waits for them before draining.
    submitting: AtomicUsize,
}

impl Registry {
    pub(crate) fn new(stealers: Vec<Stealer<JobRef>>) -> Self {
        let n = stealers.len();
        Registry {
            injector: Injector::new(),
            stealers: stealers.into_boxed_slice(),
            sleep: Sleep::new(n),
            terminating: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            submitting: AtomicUsize::new(0),
        }
    }

    pub(crate) fn num_threads(&self) -> usize {
        self.stealers.len()
    }

    /// Queues `job`: on the calling worker's own deque if it is a worker of this pool,
    /// otherwise on the shared injector. Returns `false` (and does not queue) if the pool
    /// is shutting down.
    pub(crate) fn push(&self, job: JobRef) -> bool {
        if let Some(worker) = WorkerThread::current_of(self) {
            worker.deque.push(job);
        } else {
            self.submitting.fetch_add(1, Ordering::SeqCst);
            if self.terminating.load(Ordering::SeqCst) {
                self.submitting.fetch_sub(1, Ordering::SeqCst);
                return false;
            }
            self.injector.push(job);
            self.submitting.fetch_sub(1, Ordering::SeqCst);
        }
        self.sleep.wake_one();
        true
    }

    /// Whether any queue visible to an idle worker holds work, or the pool is stopping.
    fn has_work(&self) -> bool {
        self.terminating.load(Ordering::SeqCst)
            || !self.injector.is_empty()
            || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Starts shutting down: no more outside submissions, workers exit when idle.
    pub(crate) fn terminate(&self) {
        self.terminating.store(true, Ordering::SeqCst);
        self.sleep.wake_all();
    }

    /// Whether the workers are gone: a job running now runs on the thread dropping the
    /// pool, and should complete stopped rather than run user code there.
    pub(crate) fn exited(&self) -> bool {
        self.exited.load(Ordering::Acquire)
    }

    /// After the workers have exited: completes what was submitted during shutdown.
    pub(crate) fn drain_after_exit(&self) {
        self.exited.store(true, Ordering::Release);
        while self.submitting.load(Ordering::SeqCst) != 0 {
            crate::sync::spin_wait();
        }
        loop {
            match self.injector.steal() {
                Steal::Success(job) => job.execute(),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
    }
}

thread_local! {
    static CURRENT: Cell<*const WorkerThread> = const { Cell::new(ptr::null()) };
}

/// A worker thread's own state; lives on its stack for the thread's whole life.
pub(crate) struct WorkerThread {
    index: usize,
    registry: Arc<Registry>,
    deque: Worker<JobRef>,
    rng: Cell<u64>,
}

/// Iterations of looking for work before going to sleep.
const SPIN_ROUNDS: usize = 64;

impl WorkerThread {
    /// The calling thread's worker state, if it is a worker of `registry`.
    pub(crate) fn current_of(registry: &Registry) -> Option<&WorkerThread> {
        let ptr = CURRENT.with(Cell::get);
        // SAFETY: `CURRENT` is set only while `main_loop` runs on this thread, pointing at
        // its stack-owned `WorkerThread`, and the returned borrow cannot leave this thread
        // or outlive the caller's borrow of the registry that this worker keeps alive.
        let worker = unsafe { ptr.as_ref() }?;
        ptr::eq(Arc::as_ptr(&worker.registry), registry).then_some(worker)
    }

    /// Runs `f` with the calling thread's worker state, for any pool.
    pub(crate) fn with_current<T>(f: impl FnOnce(Option<&WorkerThread>) -> T) -> T {
        let ptr = CURRENT.with(Cell::get);
        // SAFETY: as in `current_of`; the borrow does not leave `f`.
        f(unsafe { ptr.as_ref() })
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    pub(crate) fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Pushes a job on this worker's own deque (for stealing) and wakes a sleeper.
    pub(crate) fn push_local(&self, job: JobRef) {
        self.deque.push(job);
        self.registry.sleep.wake_one();
    }

    fn next_random(&self) -> usize {
        // xorshift64*: a cheap, per-worker sequence for the steal order.
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as usize
    }

    /// Local LIFO first, then a batch from the injector, then stealing from the other
    /// workers starting at a random victim.
    fn find_work(&self) -> Option<JobRef> {
        if let Some(job) = self.deque.pop() {
            return Some(job);
        }
        loop {
            match self.registry.injector.steal_batch_and_pop(&self.deque) {
                Steal::Success(job) => return Some(job),
                Steal::Retry => continue,
                Steal::Empty => break,
            }
        }
        let n = self.registry.stealers.len();
        let start = self.next_random() % n.max(1);
        let mut retry = true;
        while retry {
            retry = false;
            for i in (start..n).chain(0..start) {
                if i == self.index {
                    continue;
                }
                match self.registry.stealers[i].steal() {
                    Steal::Success(job) => return Some(job),
                    Steal::Retry => retry = true,
                    Steal::Empty => {}
                }
            }
        }
        None
    }

    /// Runs jobs until the pool terminates and no work is left anywhere.
    pub(crate) fn main_loop(registry: Arc<Registry>, index: usize, deque: Worker<JobRef>) {
        let worker = WorkerThread {
            index,
            registry,
            deque,
            rng: Cell::new(0x9e37_79b9_7f4a_7c15 ^ ((index as u64 + 1) << 17)),
        };
        CURRENT.with(|c| c.set(&worker));
        loop {
            if let Some(job) = worker.find_work() {
                job.execute();
                continue;
            }
            let mut found = None;
            for _ in 0..SPIN_ROUNDS {
                std::hint::spin_loop();
                found = worker.find_work();
                if found.is_some() {
                    break;
                }
            }
            if let Some(job) = found {
                job.execute();
                continue;
            }
            if worker.registry.terminating.load(Ordering::SeqCst) {
                break;
            }
            let registry = &worker.registry;
            registry.sleep.sleep(index, || registry.has_work());
        }
        CURRENT.with(|c| c.set(ptr::null()));
    }
}
