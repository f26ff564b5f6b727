//! The pool's shared state (its queues: the workers' deques, the lanes and the injector;
//! sleep; shutdown), the handle that keeps it alive ([`RegistryRef`]), and the worker
//! threads' loop, which runs the jobs ([`JobRef`]) it finds.

use std::cell::Cell;
use std::ptr::{self, NonNull};

use crossbeam_utils::CachePadded;

use super::deque::{Injector, Steal, Stealer, Worker};
use super::lane::{self, LANES, Lane};
use super::latent::LatentForks;
use super::refs::Refs;
use super::sleep::Sleep;
use crate::adaptors::when_all::{FRESH_HOP, NO_HOP, set_inline_hop};
use crate::job::JobRef;
use crate::panic::AbortOnUnwind;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, thread};

/// Runs `job`, taken from one of this pool's queues, on `worker` (the running thread's
/// worker state, if it is a worker of this pool): a spawned operation's job or a forked
/// child's, tagged by [`WorkerThread::push_spawned`] or the pool's `when_all`, runs with
/// the thread's inline hop open ([`FRESH_HOP`]), so that its first `schedule()`
/// on this pool completes inline. A job must not unwind (the crate's operations catch
/// user panics); if one does, the process aborts rather than lose a completion silently.
pub(super) fn run_job(job: JobRef, worker: Option<&WorkerThread>) {
    let guard = AbortOnUnwind("a pool job unwound");
    if job.is_tagged() && worker.is_some() {
        set_inline_hop(FRESH_HOP);
        job.execute();
        // Closed, so that the job's hop does not outlive it.
        set_inline_hop(NO_HOP);
    } else {
        // An untagged job leaves the hop as it finds it: one that a waiting worker runs
        // inside a tagged job (or a `when_all`'s first child) may take that one's hop,
        // which completes inline on the pool either way, once.
        job.execute();
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
    lanes: [Lane; LANES],
    /// This registry's identity for the lanes' thread-local claims.
    id: u64,
    /// Held by a worker that saw `terminating` while it waits for the submissions in
    /// flight and looks for work a last time.
    exiting: Mutex<()>,
    /// How many handles ([`RegistryRef`]) keep this registry alive.
    pub(crate) refs: Refs,
    /// Workers that looked for work and found none, and have not found any since
    /// (spinning or asleep): while it is not zero, a fork or a join publishes the oldest
    /// latent fork (see [`WorkerThread::fork`]). A hint, read and written `Relaxed`: no
    /// job depends on it to run, only on whether a second worker helps.
    pub(super) hungry: CachePadded<AtomicUsize>,
    /// Whether forks are held latent ([`PoolBuilder::latent_forks`](super::PoolBuilder::latent_forks)).
    latent_forks: bool,
    /// Workers whose loop has not ended yet.
    running: AtomicUsize,
    /// The workers' threads, indexed by worker, once a drop from one of the workers
    /// handed the end of shutdown to them ([`hand_over_shutdown`](Self::hand_over_shutdown)):
    /// the last worker whose loop ends takes them.
    handed_over: Mutex<Option<Vec<thread::JoinHandle<()>>>>,
}

impl Registry {
    pub(crate) fn new(stealers: Vec<Stealer<JobRef>>, latent_forks: bool) -> Self {
        let n = stealers.len();
        Registry {
            injector: Injector::new(),
            stealers: stealers.into_boxed_slice(),
            sleep: Sleep::new(n),
            terminating: AtomicBool::new(false),
            exited: AtomicBool::new(false),
            submitting: CachePadded::new(AtomicUsize::new(0)),
            lanes: std::array::from_fn(|_| Lane::new()),
            id: lane::next_id(),
            exiting: Mutex::new(()),
            refs: Refs::new(n),
            hungry: CachePadded::new(AtomicUsize::new(0)),
            latent_forks,
            running: AtomicUsize::new(n),
            handed_over: Mutex::new(None),
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
        lane.owner.busy.store(true, Ordering::Relaxed);
        crate::sync::light_fence();
        let accepted = !self.terminating.load(Ordering::SeqCst);
        if accepted {
            // SAFETY: `lane::claim` gave this thread the lane.
            unsafe { lane.push(job) };
            self.sleep.wake_one();
        }
        // The last touch of the registry by this call.
        lane.owner.busy.store(false, Ordering::Release);
        accepted
    }

    /// Takes the oldest job of a lane that has one, moving part of the rest to `dest`.
    /// An empty lane costs its `is_empty` (two loads and a fence), not a steal's epoch pin.
    fn steal_from_lanes(&self, dest: &Worker<JobRef>) -> Option<JobRef> {
        self.lanes
            .iter()
            .filter(|lane| !lane.stealer.is_empty())
            .find_map(|lane| steal_retrying(|| lane.stealer.steal_batch_and_pop(dest)))
    }

    /// Whether any queue visible to an idle worker holds work, or the pool is stopping.
    fn has_work(&self) -> bool {
        self.terminating.load(Ordering::SeqCst) || self.has_jobs()
    }

    /// Whether any queue visible to an idle worker holds work.
    pub(super) fn has_jobs(&self) -> bool {
        !self.injector.is_empty()
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
            while lane.owner.busy.load(Ordering::Acquire) {
                crate::sync::spin_wait();
            }
        }
    }

    /// The pool is dropped from one of its own workers, which must not join the others
    /// (one of them may be waiting for the job that drops the pool): starts shutting
    /// down and leaves its end to the workers. The last worker whose loop ends joins the
    /// others' `threads`, completes the late submissions stopped and folds the count
    /// ([`loop_ended`](Self::loop_ended)).
    pub(crate) fn hand_over_shutdown(&self, threads: Vec<thread::JoinHandle<()>>) {
        // Before `terminate`, and while the calling worker's loop still runs: the last
        // loop to end is later than this, and finds the threads.
        *crate::sync::lock(&self.handed_over) = Some(threads);
        self.terminate();
    }

    /// Worker `index`'s loop has ended and the thread is outside the pool (its shard and
    /// current worker cleared). The last worker to get here after a drop from a worker
    /// ([`hand_over_shutdown`](Self::hand_over_shutdown)) ends shutdown as the drop does
    /// from outside: joins the other workers, completes the late submissions stopped,
    /// and folds the count. Its own thread, which ends right after, is detached.
    #[cold]
    #[inline(never)]
    fn loop_ended(&self, index: usize) {
        // AcqRel: every worker's last shard write happens-before the fold below.
        if self.running.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let Some(threads) = crate::sync::lock(&self.handed_over).take() else {
            // Dropped from outside: the dropping thread joins the workers and ends
            // shutdown itself.
            return;
        };
        let mut own = None;
        for (i, handle) in threads.into_iter().enumerate() {
            // Every other loop has ended: each join waits only for a thread's return.
            if i == index {
                own = Some(handle);
            } else {
                let _ = handle.join();
            }
        }
        self.drain_after_exit();
        self.refs.fold();
        // Under loom the model joins this thread ([`join_handed_over_teardown`]): a
        // thread left running past the model's end reaches its per-execution statics
        // after they are gone. Outside loom it is detached.
        #[cfg(loom)]
        if let Some(own) = own {
            let mut handed = crate::sync::lock(&TEARDOWN.handle);
            *handed = Some(own);
            TEARDOWN.ready.notify_all();
        }
        #[cfg(not(loom))]
        drop(own);
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

/// Under loom, the thread of the last worker to end after a drop from a worker, which
/// ends shutdown ([`Registry::loop_ended`]), for the model to join.
#[cfg(loom)]
struct Teardown {
    handle: Mutex<Option<thread::JoinHandle<()>>>,
    ready: crate::sync::Condvar,
}

#[cfg(loom)]
loom::lazy_static! {
    static ref TEARDOWN: Teardown = Teardown { handle: Mutex::new(None), ready: crate::sync::Condvar::new() };
}

/// Under loom: waits until the last worker of a pool dropped from one of its own workers
/// has ended shutdown, and joins its thread, so that a model ends with every thread.
/// A model calls it once per pool dropped that way, after the drop.
#[cfg(loom)]
#[doc(hidden)]
pub fn join_handed_over_teardown() {
    let mut handed = crate::sync::lock(&TEARDOWN.handle);
    let handle = loop {
        match handed.take() {
            Some(handle) => break handle,
            None => handed = TEARDOWN.ready.wait(handed).unwrap_or_else(std::sync::PoisonError::into_inner),
        }
    };
    drop(handed);
    handle.join().expect("the last worker's thread panicked");
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
        let own = OWN_SHARD.with(Cell::get);
        if !ptr::eq(own.registry, self.ptr.as_ptr()) {
            return None;
        }
        // SAFETY: a shard set with its registry lives in it, and this handle keeps the
        // registry alive while the borrow, tied to the handle's, lasts.
        Some(unsafe { own.shard.as_ref() })
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
    pub(super) static CURRENT: Cell<*const WorkerThread> = Cell::new(ptr::null());
    /// The calling worker's shard of its registry's reference count (`refs.rs`), with
    /// that registry: set while the worker's loop runs, so that a handle finds its shard
    /// with one comparison.
    static OWN_SHARD: Cell<OwnShard> = Cell::new(NO_SHARD);
}

/// A worker's shard of its registry's reference count, and the registry.
#[derive(Clone, Copy)]
struct OwnShard {
    registry: *const Registry,
    /// Dangling while `registry` is null; never null, so that a found shard needs no test.
    shard: NonNull<AtomicUsize>,
}

/// No shard: outside the pools, or after the worker's loop ended.
const NO_SHARD: OwnShard = OwnShard { registry: ptr::null(), shard: NonNull::dangling() };

/// A worker thread's own state; lives on its stack for the thread's whole life.
pub(crate) struct WorkerThread {
    pub(super) index: usize,
    pub(super) registry: RegistryRef,
    deque: Worker<JobRef>,
    rng: Cell<u64>,
    /// Taken-back jobs running nested on this worker's stack (see `take_back`).
    taken_back: Cell<u32>,
    /// The forks this worker holds unpublished (`latent.rs`).
    latent: LatentForks,
    /// Whether it holds forks latent at all (the pool's option, copied here).
    pub(super) latent_forks: bool,
    /// Per lane, its count of pushes when this worker last found it empty: while the
    /// count is the same, the lane holds no job this worker has not seen taken.
    lanes_seen: [Cell<usize>; LANES],
    /// Where [`take_outside_work`](Self::take_outside_work) starts its next look: 0 for
    /// the injector, `1 + i` for lane `i`.
    next_outside: Cell<usize>,
    /// The countdown of [`find_work`](Self::find_work) for the looks of waits
    /// ([`wait_until`](Self::wait_until)): one for all the waits nested on this stack,
    /// so that waits which each look only a few times still look outside first at one
    /// look in [`OUTSIDE_INTERVAL`].
    pub(super) wait_until_outside: Cell<u32>,
}

/// A worker's loop takes work from outside the pool (the injector, the lanes) before its
/// own at one look for work in this many, so that outside work runs while every
/// worker's own deque stays busy (a long bulk, a spawn tree). tokio's workers look at
/// their shared queue every 61 tasks for the same reason; see `README.md`, *Fairness*,
/// for the cost and the bound.
#[cfg(not(loom))]
const OUTSIDE_INTERVAL: u32 = 61;
/// Under loom: small, so that a model of the guarantee stays small.
#[cfg(loom)]
const OUTSIDE_INTERVAL: u32 = 2;

/// Rounds of looking for work before going to sleep (half spinning, half yielding).
#[cfg(not(loom))]
pub(super) const SPIN_ROUNDS: usize = 64;
/// None under loom: every round would multiply the interleavings to explore, and the
/// sleep protocol must be correct without them.
#[cfg(loom)]
pub(super) const SPIN_ROUNDS: usize = 0;

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
    #[inline(always)]
    pub(crate) fn with_current<T>(f: impl FnOnce(Option<&WorkerThread>) -> T) -> T {
        let ptr = CURRENT.with(Cell::get);
        // SAFETY: as in `current_of`; the borrow does not leave `f`.
        f(unsafe { ptr.as_ref() })
    }

    pub(crate) fn index(&self) -> usize {
        self.index
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

    /// Forks the job that starts a spawned operation (on the deque, or latent as
    /// [`fork`](Self::fork) decides), tagged so that the worker running it lets the
    /// operation's first `schedule()` on this pool complete inline (see
    /// [`FRESH_HOP`]): the spawn already went through a queue, so a
    /// second trip would only cost time.
    #[inline]
    pub(crate) fn push_spawned(&self, job: JobRef) {
        self.fork(job.tagged());
    }

    /// Forks `job`. While this worker's deque is empty, the fork is published, so that a
    /// thief always finds something here (lazy binary splitting: a long child that forks
    /// no more, as in `when_all` of two expensive leaves, is stealable at once). With a
    /// job on the deque already, the fork is held latent, where only this worker sees
    /// it, while no worker is hungry. When one is, the oldest latent fork (the largest
    /// piece of work, since forks nest) is published instead and `job` is held, or `job`
    /// itself if none is held. So a hungry worker finds one more job to steal, and a
    /// fork that nobody needs costs no atomic read-modify-write, no fence and no shared
    /// write.
    #[inline]
    pub(crate) fn fork(&self, job: JobRef) {
        if self.latent_forks && !self.deque.is_empty() {
            return self.fork_latent(job);
        }
        self.push_local(job);
    }

    /// [`fork`](Self::fork) with latent forks on and a job on the deque: out of line, so
    /// that the default path inlines as small as before.
    #[inline(never)]
    fn fork_latent(&self, job: JobRef) {
        if self.registry.hungry.load(Ordering::Relaxed) == 0 {
            if let Some(oldest) = self.latent.push(job) {
                self.push_local(oldest);
            }
        } else {
            self.fork_for_the_hungry(job);
        }
    }

    /// [`fork_latent`](Self::fork_latent) while a worker is hungry.
    #[cold]
    #[inline(never)]
    fn fork_for_the_hungry(&self, job: JobRef) {
        let published = match self.latent.take_oldest() {
            Some(oldest) => {
                let evicted = self.latent.push(job);
                debug_assert!(evicted.is_none(), "one fork was just taken out: the ring has room");
                oldest
            }
            None => job,
        };
        self.push_local(published);
    }

    /// Publishes every latent fork, oldest first: before this worker blocks (a
    /// `sync_wait` or a run loop on a worker), when only other workers can run them.
    pub(crate) fn publish_latent(&self) {
        while let Some(job) = self.latent.take_oldest() {
            self.push_local(job);
        }
    }

    /// Takes back the newest fork if its data is `data` (a job this worker forked, still
    /// latent or on top of its deque: nobody stole it); otherwise leaves both as they
    /// were. With latent forks, a hungry worker is first given the oldest latent fork.
    #[inline]
    pub(crate) fn take_back(&self, data: *const ()) -> Option<JobRef> {
        if self.latent_forks {
            return self.take_back_latent(data);
        }
        self.take_back_published(data)
    }

    /// [`take_back`](Self::take_back) with latent forks on: out of line, as
    /// [`fork_latent`](Self::fork_latent).
    #[inline(never)]
    fn take_back_latent(&self, data: *const ()) -> Option<JobRef> {
        if self.registry.hungry.load(Ordering::Relaxed) != 0 {
            self.join_for_the_hungry(data);
        }
        if let Some(job) = self.latent.pop_if(data) {
            return Some(job);
        }
        self.take_back_published(data)
    }

    /// [`take_back`](Self::take_back) from the top of the deque.
    #[inline]
    fn take_back_published(&self, data: *const ()) -> Option<JobRef> {
        let job = self.deque.pop()?;
        if job.data() == data {
            return Some(job);
        }
        // Somebody else's job was on top (ours was stolen, or more was pushed since):
        // put it back, announced as any push is.
        self.push_local(job);
        None
    }

    /// A join is the other point where latent forks are published: a worker went hungry
    /// since the fork, whose first child forked no more (a leaf). Publishes the oldest
    /// latent fork (an ancestor's sibling, the largest piece held), unless that is the
    /// fork being joined, which this worker is about to run anyway.
    #[cold]
    #[inline(never)]
    fn join_for_the_hungry(&self, data: *const ()) {
        let Some(oldest) = self.latent.take_oldest() else { return };
        if oldest.data() == data {
            // Back where it was: it is the only fork held, so the ring is empty.
            let evicted = self.latent.push(oldest);
            debug_assert!(evicted.is_none(), "the ring was empty");
        } else {
            self.push_local(oldest);
        }
    }

    /// Whether work submitted from outside the pool may wait in the injector or a lane
    /// (a hint: loads only, no fence). A job that runs long (a bulk's chunk) asks
    /// between two pieces of its work; if so, it queues the rest of its work and calls
    /// [`yield_to_outside_work`](Self::yield_to_outside_work) (`README.md`, *Fairness*).
    #[inline]
    pub(crate) fn outside_work_waits(&self) -> bool {
        let registry = &self.registry;
        !registry.injector.is_empty()
            || registry.lanes.iter().zip(&self.lanes_seen).any(|(lane, seen)| lane.pushes() != seen.get())
    }

    /// Moves work from outside the pool, if any waits, to the top of this worker's deque,
    /// where the loop takes it next: for a long job that has just queued the rest of its
    /// own work and returns to the loop.
    #[cold]
    #[inline(never)]
    pub(crate) fn yield_to_outside_work(&self) {
        if let Some(job) = self.take_outside_work() {
            self.push_local(job);
        }
    }

    /// The jobs on this worker's own deque, for white-box tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn queued(&self) -> usize {
        self.deque.len()
    }

    /// Whether this worker runs a tagged job whose inline hop is still open, for
    /// white-box tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn is_fresh(&self) -> bool {
        crate::adaptors::when_all::inline_hop() == FRESH_HOP
    }

    /// How many taken-back jobs (and first hops of first children, see
    /// [`run_first_hop`](Self::run_first_hop)) are running nested on this worker's stack.
    pub(crate) fn taken_back_depth(&self) -> u32 {
        self.taken_back.get()
    }

    /// Runs a job from [`take_back`](Self::take_back) here, inline, as the worker loop
    /// would have.
    #[inline]
    pub(crate) fn run_taken_back(&self, job: JobRef) {
        debug_assert!(job.is_tagged(), "a taken-back job is a forked child's, tagged");
        self.taken_back.set(self.taken_back.get() + 1);
        // `run_job`'s tagged case, written out so that it inlines into the join with the
        // thread-local's address at hand.
        let guard = AbortOnUnwind("a pool job unwound");
        set_inline_hop(FRESH_HOP);
        job.execute();
        set_inline_hop(NO_HOP);
        std::mem::forget(guard);
        self.taken_back.set(self.taken_back.get() - 1);
    }

    /// Completes here, inline (`complete`), a `schedule()` on this pool that the first
    /// child of a `when_all` on the pool makes while this worker starts it
    /// ([`FIRST_HOP`](crate::adaptors::when_all::FIRST_HOP)): the child is on the pool
    /// already. Counted with the taken-back runs
    /// ([`taken_back_depth`](Self::taken_back_depth)), since it nests on this stack what
    /// a trip through the deque would have unwound.
    #[inline]
    pub(crate) fn run_first_hop(&self, complete: impl FnOnce()) {
        self.taken_back.set(self.taken_back.get() + 1);
        let guard = AbortOnUnwind("a pool job unwound");
        complete();
        std::mem::forget(guard);
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

    /// Local LIFO first (the latent ring, then the deque), then a batch from the
    /// injector, then a batch from a lane, then stealing from the other workers starting
    /// at a random victim; but one look in [`OUTSIDE_INTERVAL`], counted down in
    /// `until_outside`, takes work from outside the pool (the injector, a lane) first.
    /// The countdown (a local of the caller's loop, so a register) and the local pop are
    /// inlined into the run loop; the rest is out of line, so that the common case does
    /// not pay the search's prologue and epilogue.
    #[inline]
    pub(super) fn find_work(&self, until_outside: &mut u32) -> Option<JobRef> {
        match until_outside.checked_sub(1) {
            Some(left) => *until_outside = left,
            None => {
                *until_outside = OUTSIDE_INTERVAL - 1;
                return self.find_work_outside_first();
            }
        }
        self.find_work_local_first()
    }

    /// [`find_work`](Self::find_work) without the look outside first.
    #[inline]
    fn find_work_local_first(&self) -> Option<JobRef> {
        if let Some(job) = self.latent.pop() {
            return Some(job);
        }
        match self.deque.pop() {
            Some(job) => Some(job),
            None => self.find_work_elsewhere(),
        }
    }

    /// [`find_work`](Self::find_work) when its countdown ran out: work from outside the
    /// pool first, then as usual. The hint comes first: when nothing waits (the common
    /// case) the look is a few loads.
    #[cold]
    #[inline(never)]
    fn find_work_outside_first(&self) -> Option<JobRef> {
        if self.outside_work_waits()
            && let Some(job) = self.take_outside_work()
        {
            return Some(job);
        }
        self.find_work_local_first()
    }

    /// Takes a job submitted from outside the pool, for
    /// [`find_work_outside_first`](Self::find_work_outside_first) and
    /// [`yield_to_outside_work`](Self::yield_to_outside_work): the oldest job of the
    /// first of the injector and the lanes, in turn from where the last look that took
    /// one stopped, that holds one. So no outside queue is passed over for another that
    /// always holds work. One job, not a batch as the idle path takes: a busy worker
    /// that took batches at every look would pull outside work faster than it runs it,
    /// away from the workers that are idle.
    ///
    /// The injector's `is_empty` is two loads. A lane is looked at only if its count of
    /// pushes changed since the count read just before a steal of this worker found it
    /// empty (its `is_empty` or a steal takes a fence): the count is stored (release)
    /// after each push, so every job it counts was there for that steal to see, and any
    /// job pushed since has changed it.
    fn take_outside_work(&self) -> Option<JobRef> {
        let registry = &self.registry;
        let start = self.next_outside.get();
        for source in (start..=LANES).chain(0..start) {
            let job = if source == 0 {
                if registry.injector.is_empty() {
                    continue;
                }
                steal_retrying(|| registry.injector.steal())
            } else {
                let (lane, seen) = (&registry.lanes[source - 1], &self.lanes_seen[source - 1]);
                let pushes = lane.pushes();
                if pushes == seen.get() {
                    continue;
                }
                let job = steal_retrying(|| lane.stealer.steal());
                if job.is_none() {
                    seen.set(pushes);
                }
                job
            };
            if job.is_some() {
                self.next_outside.set((source + 1) % (LANES + 1));
                return job;
            }
        }
        None
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
        let refs_shard = NonNull::from(registry.refs.shard(index));
        let latent_forks = registry.latent_forks;
        let worker = WorkerThread {
            index,
            registry,
            deque,
            rng: Cell::new(0x9e37_79b9_7f4a_7c15 ^ ((index as u64 + 1) << 17)),
            taken_back: Cell::new(0),
            latent: LatentForks::new(),
            latent_forks,
            lanes_seen: std::array::from_fn(|_| Cell::new(0)),
            next_outside: Cell::new(0),
            wait_until_outside: Cell::new(OUTSIDE_INTERVAL - 1),
        };
        CURRENT.with(|c| c.set(&worker));
        OWN_SHARD.with(|s| s.set(OwnShard { registry: RegistryRef::as_ptr(&worker.registry), shard: refs_shard }));
        // The worker's shard slot in every scope, for as long as it runs.
        let _shard = super::shard_index::claim();
        crate::blocking::set_before_blocking(publish_latent_forks);
        // Whether this worker counts itself in `hungry`: from its first look that found
        // nothing to the next that finds a job. Only a pool with latent forks reads the
        // count, so only such a pool keeps it.
        let mut hungry = false;
        // Looks for work left before one that takes outside work first (`find_work`).
        let mut until_outside = OUTSIDE_INTERVAL - 1;
        let run = |job: JobRef, hungry: &mut bool| {
            if std::mem::take(hungry) {
                worker.registry.hungry.fetch_sub(1, Ordering::Relaxed);
            }
            run_job(job, Some(&worker));
        };
        loop {
            if let Some(job) = worker.find_work(&mut until_outside) {
                run(job, &mut hungry);
                continue;
            }
            if latent_forks && !std::mem::replace(&mut hungry, true) {
                worker.registry.hungry.fetch_add(1, Ordering::Relaxed);
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
                found = worker.find_work(&mut until_outside);
                if found.is_some() {
                    break;
                }
            }
            if let Some(job) = found {
                run(job, &mut hungry);
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
                    worker.find_work(&mut until_outside)
                };
                match found {
                    Some(job) => {
                        run(job, &mut hungry);
                        continue;
                    }
                    None => break,
                }
            }
            let registry = &worker.registry;
            registry.sleep.sleep(index, || registry.has_work());
        }
        if hungry {
            worker.registry.hungry.fetch_sub(1, Ordering::Relaxed);
        }
        OWN_SHARD.with(|s| s.set(NO_SHARD));
        CURRENT.with(|c| c.set(ptr::null()));
        worker.registry.loop_ended(index);
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

/// Publishes the calling worker's latent forks (any pool's), if it is a worker: it is
/// about to block, and only the other workers can run them meanwhile. Each worker sets
/// it as what its thread does before it blocks (`crate::blocking`).
fn publish_latent_forks() {
    WorkerThread::with_current(|worker| {
        if let Some(worker) = worker {
            worker.publish_latent();
        }
    });
}
