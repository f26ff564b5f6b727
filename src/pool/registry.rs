//! The pool's shared state (its queues: the workers' deques, the lanes and the injector;
//! sleep; shutdown), the handle that keeps it alive ([`RegistryRef`]), and the worker
//! threads' loop, which runs the jobs ([`JobRef`]) it finds.

use std::cell::Cell;
use std::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use super::deque::{Injector, Steal, Stealer, Worker};
use super::lane::{self, LANES, Lane};
use super::refs::Refs;
use super::sleep::Sleep;
use crate::job::JobRef;
use crate::panic::AbortOnUnwind;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, thread};

/// Runs `job`, taken from one of this pool's queues, on `worker` (the running thread's
/// worker state, if it is a worker of this pool): a spawned operation's job, tagged by
/// [`WorkerThread::push_spawned`], runs with the worker's `fresh` mark set (see
/// [`WorkerThread::take_fresh`]). A job must not unwind (the crate's operations catch
/// user panics); if one does, the process aborts rather than lose a completion silently.
fn run_job(job: JobRef, worker: Option<&WorkerThread>) {
    let guard = AbortOnUnwind("a pool job unwound");
    if let (true, Some(w)) = (job.is_tagged(), worker) {
        w.fresh.set(true);
    }
    job.execute();
    if let Some(w) = worker {
        w.fresh.set(false);
    }
    std::mem::forget(guard);
}

/// State shared by a pool's workers and schedulers.
pub(crate) struct Registry {
    injector: Injector<JobRef>,
    stealers: Box<[Stealer<JobRef>]>,
    pub(crate) sleep: Sleep,
    terminating: AtomicBool,
    /// Set once every worker has exited; jobs that run afterwards complete stopped.
    exited: AtomicBool,
    /// Submissions from outside the pool through the injector currently between their
    /// `terminating` check and the end of their push; an exiting worker, and shutdown
    /// before draining, wait for them (and for the lanes' `busy` flags).
    submitting: CachePadded<AtomicUsize>,
    /// Deques of their own for outside threads that submit (`lane.rs`).
    lanes: Box<[Lane]>,
    /// This registry's identity for the lanes' thread-local claims.
    id: u64,
    /// Held by a worker that saw `terminating` while it waits for the submissions in
    /// flight and looks for work a last time.
    exiting: Mutex<()>,
    /// How many handles ([`RegistryRef`]) keep this registry alive.
    pub(crate) refs: Refs,
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
            submitting: CachePadded::new(AtomicUsize::new(0)),
            lanes: (0..LANES).map(|_| Lane::new()).collect(),
            id: lane::next_id(),
            exiting: Mutex::new(()),
            refs: Refs::new(n),
        }
    }

    pub(crate) fn num_threads(&self) -> usize {
        self.stealers.len()
    }

    /// Queues `job`: on the calling worker's own deque if it is a worker of this pool,
    /// otherwise on the calling thread's lane (claimed on its first submission), or on
    /// the shared injector if it has none. Returns `false` (and does not queue) if the
    /// pool is shutting down.
    ///
    /// The caller need not hold a reference of its own beyond the call's start: the job
    /// may run, and free whatever kept the registry alive, as soon as it is queued. On a
    /// worker, the worker's own reference keeps the registry alive; outside, the wake-up
    /// happens while the lane's `busy` flag (or `submitting`) is raised, and the pool's
    /// `Drop` (which holds the pool's reference) waits for them to fall before it
    /// finishes.
    pub(crate) fn push(&self, job: JobRef) -> bool {
        if let Some(worker) = WorkerThread::current_of(self) {
            worker.push_local(job);
            return true;
        }
        if let Some(lane) = lane::claim(self.id, &self.lanes) {
            return self.push_lane(lane, job);
        }
        self.submitting.fetch_add(1, Ordering::SeqCst);
        crate::sync::seq_cst_accesses();
        let accepted = !self.terminating.load(Ordering::SeqCst);
        if accepted {
            self.injector.push(job);
            self.sleep.wake_one();
        }
        // The last touch of the registry by this call.
        self.submitting.fetch_sub(1, Ordering::SeqCst);
        accepted
    }

    /// `push` from an outside thread that holds `lane`: the lane's `busy` flag, which
    /// only this thread writes, in place of the `submitting` count, and a plain push.
    /// `busy` is raised before the look at `terminating` and lowered, with release,
    /// after the push and the wake-up; the light fence between the raise and the look
    /// pairs with the heavy fence of [`wait_for_submissions`](Self::wait_for_submissions)
    /// (the argument is in `src/pool/README.md`, *Lanes*).
    fn push_lane(&self, lane: &Lane, job: JobRef) -> bool {
        lane.busy.store(true, Ordering::Relaxed);
        crate::sync::light_fence();
        let accepted = !self.terminating.load(Ordering::SeqCst);
        if accepted {
            // SAFETY: `lane::claim` gave this thread the lane.
            unsafe { lane.push(job) };
            self.sleep.wake_one();
        }
        // The last touch of the registry by this call.
        lane.busy.store(false, Ordering::Release);
        accepted
    }

    /// Takes the oldest job of a lane that has one, moving part of the rest to `dest`.
    /// An empty lane costs two loads (`is_empty`), not a steal's epoch pin.
    fn steal_from_lanes(&self, dest: &Worker<JobRef>) -> Option<JobRef> {
        self.lanes
            .iter()
            .filter(|lane| !lane.stealer.is_empty())
            .find_map(|lane| steal_retrying(|| lane.stealer.steal_batch_and_pop(dest)))
    }

    /// Whether any queue visible to an idle worker holds work, or the pool is stopping.
    fn has_work(&self) -> bool {
        self.terminating.load(Ordering::SeqCst)
            || !self.injector.is_empty()
            || self.lanes.iter().any(|lane| !lane.stealer.is_empty())
            || self.stealers.iter().any(|s| !s.is_empty())
    }

    /// Starts shutting down: no more outside submissions, workers exit when idle.
    pub(crate) fn terminate(&self) {
        self.terminating.store(true, Ordering::SeqCst);
        self.sleep.wake_all();
    }

    /// Whether the workers are gone: a job running now runs on the thread dropping the
    /// pool, and should complete stopped rather than run user code there.
    #[inline]
    pub(crate) fn exited(&self) -> bool {
        self.exited.load(Ordering::Acquire)
    }

    /// Once `terminating` is seen: waits until no outside submission is between its
    /// `terminating` check and the end of its push. Every submission accepted before is
    /// then in the injector or a lane, visible to the caller; every later one sees
    /// `terminating` and is refused. Bounded: a submission in flight only pushes and
    /// wakes.
    fn wait_for_submissions(&self) {
        crate::sync::seq_cst_accesses();
        while self.submitting.load(Ordering::SeqCst) != 0 {
            crate::sync::spin_wait();
        }
        crate::sync::heavy_fence();
        for lane in &self.lanes {
            while lane.busy.load(Ordering::Acquire) {
                crate::sync::spin_wait();
            }
        }
    }

    /// After the workers have exited: completes what was submitted during shutdown.
    pub(crate) fn drain_after_exit(&self) {
        self.exited.store(true, Ordering::Release);
        self.wait_for_submissions();
        run_stopped(|| self.injector.steal());
        for lane in &self.lanes {
            run_stopped(|| lane.stealer.steal());
        }
    }
}

/// Runs every job `steal` takes, until it finds none, as jobs after the workers' exit.
fn run_stopped(steal: impl Fn() -> Steal<JobRef>) {
    while let Some(job) = steal_retrying(&steal) {
        run_job(job, None);
    }
}

/// What `steal` takes, retrying while it loses a race; `None` once the queue is empty.
fn steal_retrying(steal: impl Fn() -> Steal<JobRef>) -> Option<JobRef> {
    loop {
        match steal() {
            Steal::Success(job) => return Some(job),
            Steal::Retry => continue,
            Steal::Empty => return None,
        }
    }
}

/// An owning handle to a [`Registry`], like `Arc<Registry>` but counted in [`Refs`].
pub(crate) struct RegistryRef {
    ptr: NonNull<Registry>,
}

// SAFETY: a handle only gives shared access to the registry, which is `Send + Sync`, and
// its count is safe to update from any thread (the shard path is taken only by the
// shard's own worker).
unsafe impl Send for RegistryRef {}
// SAFETY: as above.
unsafe impl Sync for RegistryRef {}

impl RegistryRef {
    /// Moves `registry` to the heap with one reference: this handle.
    pub(crate) fn new(registry: Registry) -> Self {
        RegistryRef { ptr: NonNull::from(Box::leak(Box::new(registry))) }
    }

    /// Whether both handles refer to the same registry.
    pub(crate) fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.ptr == b.ptr
    }

    /// The registry's address.
    pub(crate) fn as_ptr(this: &Self) -> *const Registry {
        this.ptr.as_ptr()
    }

    /// The calling thread's shard in this registry's count, if it is one of its workers
    /// and the count is not folded yet.
    #[inline]
    fn own_shard(&self) -> Option<&AtomicUsize> {
        WorkerThread::current_of(self)?.refs_shard()
    }

    /// Frees the registry: out of line, as it happens once per pool.
    ///
    /// # Safety
    ///
    /// `ptr` is the registry allocated by [`new`](Self::new), and its last reference
    /// was just released.
    #[cold]
    #[inline(never)]
    unsafe fn free(ptr: NonNull<Registry>) {
        // SAFETY: the caller's contract; `new` allocated it with `Box`.
        drop(unsafe { Box::from_raw(ptr.as_ptr()) });
    }
}

impl std::ops::Deref for RegistryRef {
    type Target = Registry;
    fn deref(&self) -> &Registry {
        // SAFETY: this handle is one of the references that keep the registry alive.
        unsafe { self.ptr.as_ref() }
    }
}

impl Clone for RegistryRef {
    #[inline]
    fn clone(&self) -> Self {
        self.refs.acquire(self.own_shard());
        RegistryRef { ptr: self.ptr }
    }
}

impl Drop for RegistryRef {
    #[inline]
    fn drop(&mut self) {
        if self.refs.release(self.own_shard()) {
            // SAFETY: that was the last reference (after the fold, so no shard will be
            // written again).
            unsafe { Self::free(self.ptr) };
        }
    }
}

crate::sync::const_thread_local! {
    static CURRENT: Cell<*const WorkerThread> = Cell::new(ptr::null());
}

/// A worker thread's own state; lives on its stack for the thread's whole life.
pub(crate) struct WorkerThread {
    index: usize,
    registry: RegistryRef,
    deque: Worker<JobRef>,
    rng: Cell<u64>,
    /// Set while this worker starts a spawned operation it took from a queue.
    fresh: Cell<bool>,
    /// Taken-back jobs running nested on this worker's stack (see `take_back`).
    taken_back: Cell<u32>,
    /// This worker's shard of the registry's reference count (`refs.rs`), null once
    /// this thread, dropping the pool from a job, has stopped counting there.
    refs_shard: Cell<*const AtomicUsize>,
}

/// Rounds of looking for work before going to sleep (half spinning, half yielding).
#[cfg(not(loom))]
const SPIN_ROUNDS: usize = 64;
/// None under loom: every round would multiply the interleavings to explore, and the
/// sleep protocol must be correct without them.
#[cfg(loom)]
const SPIN_ROUNDS: usize = 0;

impl WorkerThread {
    /// The calling thread's worker state, if it is a worker of `registry`.
    #[inline]
    pub(crate) fn current_of(registry: &Registry) -> Option<&WorkerThread> {
        let ptr = CURRENT.with(Cell::get);
        // SAFETY: `CURRENT` is set only while `main_loop` runs on this thread, pointing at
        // its stack-owned `WorkerThread`, and the returned borrow cannot leave this thread
        // or outlive the caller's borrow of the registry that this worker keeps alive.
        let worker = unsafe { ptr.as_ref() }?;
        ptr::eq(RegistryRef::as_ptr(&worker.registry), registry).then_some(worker)
    }

    /// Runs `f` with the calling thread's worker state, for any pool.
    #[inline]
    pub(crate) fn with_current<T>(f: impl FnOnce(Option<&WorkerThread>) -> T) -> T {
        let ptr = CURRENT.with(Cell::get);
        // SAFETY: as in `current_of`; the borrow does not leave `f`.
        f(unsafe { ptr.as_ref() })
    }

    pub(crate) fn index(&self) -> usize {
        self.index
    }

    /// This worker's shard of its registry's reference count, until
    /// [`stop_counting_refs`](Self::stop_counting_refs).
    #[inline]
    pub(crate) fn refs_shard(&self) -> Option<&AtomicUsize> {
        // SAFETY: the shard lives in the registry, which this worker keeps alive, and
        // the borrow is tied to this worker's.
        unsafe { self.refs_shard.get().as_ref() }
    }

    /// From now on this worker counts its registry references in the outside word: the
    /// pool is being dropped from one of its jobs, and its count is about to be folded.
    pub(crate) fn stop_counting_refs(&self) {
        self.refs_shard.set(ptr::null());
    }

    /// Whether a `schedule()` on this pool, started now, may complete inline: true once
    /// while this worker starts a spawned operation taken from a queue (the spawn itself
    /// was the hop onto the pool). Clears the mark.
    pub(crate) fn take_fresh(&self) -> bool {
        self.fresh.replace(false)
    }

    pub(crate) fn registry(&self) -> &RegistryRef {
        &self.registry
    }

    /// Pushes a job on this worker's own deque (for stealing) and wakes a sleeper.
    #[inline]
    pub(crate) fn push_local(&self, job: JobRef) {
        self.deque.push(job);
        self.registry.sleep.wake_one();
    }

    /// Pushes the job that starts a spawned operation, tagged so that the worker running
    /// it lets the operation's first `schedule()` on this pool complete inline (see
    /// [`take_fresh`](Self::take_fresh)): the spawn already went through a deque, so a
    /// second trip would only cost time.
    #[inline]
    pub(crate) fn push_spawned(&self, job: JobRef) {
        self.push_local(job.tagged());
    }

    /// Pops the job on top of this worker's deque if its data is `data` (a job this
    /// worker pushed, still there: nobody stole it); otherwise leaves the deque as it
    /// was.
    #[inline]
    pub(crate) fn take_back(&self, data: *const ()) -> Option<JobRef> {
        let job = self.deque.pop()?;
        if job.data() == data {
            return Some(job);
        }
        // Somebody else's job was on top (ours was stolen, or more was pushed since):
        // put it back, announced as any push is.
        self.push_local(job);
        None
    }

    /// The jobs on this worker's own deque, for white-box tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn queued(&self) -> usize {
        self.deque.len()
    }

    /// Whether this worker's `fresh` mark is set, for white-box tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_fresh(&self) -> bool {
        self.fresh.get()
    }

    /// How many taken-back jobs are running nested on this worker's stack.
    pub(crate) fn taken_back_depth(&self) -> u32 {
        self.taken_back.get()
    }

    /// Runs a job from [`take_back`](Self::take_back) here, inline, as the worker loop
    /// would have.
    #[inline]
    pub(crate) fn run_taken_back(&self, job: JobRef) {
        self.taken_back.set(self.taken_back.get() + 1);
        run_job(job, Some(self));
        self.taken_back.set(self.taken_back.get() - 1);
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

    /// Runs every job this worker can still find (its own deque, the injector, the
    /// lanes, the others' deques) until none is left. Used when the pool is dropped from this
    /// worker, which cannot join itself: queued work must still run, not be cancelled.
    pub(crate) fn run_remaining(&self) {
        while let Some(job) = self.find_work() {
            run_job(job, Some(self));
        }
    }

    /// Local LIFO first, then a batch from the injector, then a batch from a lane, then
    /// stealing from the other workers starting at a random victim. The local pop is inlined into the run loop;
    /// the rest is out of line, so that the common case does not pay the search's
    /// prologue and epilogue.
    #[inline]
    fn find_work(&self) -> Option<JobRef> {
        match self.deque.pop() {
            Some(job) => Some(job),
            None => self.find_work_elsewhere(),
        }
    }

    /// [`find_work`](Self::find_work) once the local deque is empty.
    #[inline(never)]
    fn find_work_elsewhere(&self) -> Option<JobRef> {
        if let Some(job) = steal_retrying(|| self.registry.injector.steal_batch_and_pop(&self.deque)) {
            return Some(job);
        }
        if let Some(job) = self.registry.steal_from_lanes(&self.deque) {
            return Some(job);
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
    pub(crate) fn main_loop(registry: RegistryRef, index: usize, deque: Worker<JobRef>) {
        let refs_shard: *const AtomicUsize = registry.refs.shard(index);
        let worker = WorkerThread {
            index,
            registry,
            deque,
            rng: Cell::new(0x9e37_79b9_7f4a_7c15 ^ ((index as u64 + 1) << 17)),
            fresh: Cell::new(false),
            taken_back: Cell::new(0),
            refs_shard: Cell::new(refs_shard),
        };
        CURRENT.with(|c| c.set(&worker));
        // The worker's shard slot in every scope, for as long as it runs.
        let _shard = crate::scope::shard_index::claim();
        loop {
            if let Some(job) = worker.find_work() {
                run_job(job, Some(&worker));
                continue;
            }
            let mut found = None;
            for round in 0..SPIN_ROUNDS {
                // Short spins first, then yields: a worker stays awake for tens of
                // microseconds (a round trip from outside the pool then finds it awake)
                // but still goes to sleep soon when the pool is idle.
                if round < SPIN_ROUNDS / 2 {
                    std::hint::spin_loop();
                } else {
                    thread::yield_now();
                }
                found = worker.find_work();
                if found.is_some() {
                    break;
                }
            }
            if let Some(job) = found {
                run_job(job, Some(&worker));
                continue;
            }
            if worker.registry.terminating.load(Ordering::SeqCst) {
                // An outside submission that saw `terminating` false may still be on its
                // way into the injector, and it must run, not be left to the pool's drop
                // to complete stopped: wait for those in flight, then look once more
                // (see README.md, "Shutdown").
                // One worker at a time: the others block rather than spin beside it.
                let found = {
                    let _one = crate::sync::lock(&worker.registry.exiting);
                    worker.registry.wait_for_submissions();
                    worker.find_work()
                };
                match found {
                    Some(job) => {
                        run_job(job, Some(&worker));
                        continue;
                    }
                    None => break,
                }
            }
            let registry = &worker.registry;
            registry.sleep.sleep(index, || registry.has_work());
        }
        CURRENT.with(|c| c.set(ptr::null()));
    }
}

/// What white-box tests (`tests.rs`) look at.
#[cfg(all(test, not(loom)))]
impl Registry {
    /// Jobs in the injector.
    pub(super) fn queued_in_injector(&self) -> usize {
        self.injector.len()
    }

    /// Jobs in the lanes, and how many lanes hold some.
    pub(super) fn queued_in_lanes(&self) -> (usize, usize) {
        let lens = self.lanes.iter().map(|lane| lane.stealer.len());
        (lens.clone().sum(), lens.filter(|&n| n > 0).count())
    }

    /// Jobs on worker `index`'s deque, as thieves see it.
    pub(super) fn queued_on_worker(&self, index: usize) -> usize {
        self.stealers[index].len()
    }

    /// Whether shutdown began.
    pub(super) fn is_terminating(&self) -> bool {
        self.terminating.load(Ordering::SeqCst)
    }
}
