//! The pool's shared state, its worker threads, and the jobs they run.

use std::cell::Cell;
use std::ptr;

use crossbeam_utils::CachePadded;

use super::deque::{Injector, Steal, Stealer, Worker};
use super::lane::{self, LANES, Lane};
use super::refs::{Refs, RegistryRef};
use super::sleep::Sleep;
use crate::schedulers::run_loop::AbortOnUnwind;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, thread};

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

    /// A job that starts a spawned operation, marked so that the worker running it lets
    /// the operation's first `schedule()` on this pool complete inline (see
    /// [`WorkerThread::take_fresh`]): the spawn already went through a deque, so a second
    /// trip would only cost time. The mark is the low bit of `data`, used only when the
    /// pointer is even (the heap blocks of spawned operations are; an odd one is queued
    /// unmarked, which is merely slower).
    ///
    /// # Safety
    ///
    /// As for [`new`](Self::new).
    pub(crate) unsafe fn new_spawned(data: *const (), run: unsafe fn(*const ())) -> Self {
        let data = if data.addr() & FRESH == 0 { data.map_addr(|a| a | FRESH) } else { data };
        JobRef { data, run }
    }

    /// Runs the job; on `worker` (the running thread's worker state, if it is a worker
    /// of this pool) a spawned job's start is marked fresh while it runs. A job must not
    /// unwind (the crate's operations catch user panics); if one does, the process aborts
    /// rather than lose a completion silently.
    fn execute(self, worker: Option<&WorkerThread>) {
        let guard = AbortOnUnwind("a pool job unwound");
        let fresh = self.data.addr() & FRESH != 0;
        let data = self.data.map_addr(|a| a & !FRESH);
        if let (true, Some(w)) = (fresh, worker) {
            w.fresh.set(true);
        }
        // SAFETY: the `new` contract; each `JobRef` is executed once, with the pointer it
        // was made from (the mark removed).
        unsafe { (self.run)(data) };
        if let Some(w) = worker {
            w.fresh.set(false);
        }
        std::mem::forget(guard);
    }
}

/// The mark of [`JobRef::new_spawned`] in a job's data pointer.
const FRESH: usize = 1;

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
    /// otherwise on the shared injector. Returns `false` (and does not queue) if the pool
    /// is shutting down.
    ///
    /// The caller need not hold a reference of its own beyond the call's start: the job
    /// may run, and free whatever kept the registry alive, as soon as it is queued. On a
    /// worker, the worker's own reference keeps the registry alive; outside, the wake-up
    /// happens while `submitting` is raised, and the pool's `Drop` (which holds the
    /// pool's reference) waits for `submitting` to fall before it finishes.
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
    /// then in the injector, visible to the caller; every later one sees `terminating`
    /// and is refused. Bounded: a submission in flight only pushes and wakes.
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
        job.execute(None);
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

    /// Pops the job on top of this worker's deque if its data is `data` (a job this
    /// worker pushed, still there: nobody stole it); otherwise leaves the deque as it
    /// was.
    #[inline]
    pub(crate) fn take_back(&self, data: *const ()) -> Option<JobRef> {
        let job = self.deque.pop()?;
        if job.data == data {
            return Some(job);
        }
        // Somebody else's job was on top (ours was stolen, or more was pushed since):
        // put it back, announced as any push is.
        self.push_local(job);
        None
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
        job.execute(Some(self));
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
    /// others' deques) until none is left. Used when the pool is dropped from this
    /// worker, which cannot join itself: queued work must still run, not be cancelled.
    pub(crate) fn run_remaining(&self) {
        while let Some(job) = self.find_work() {
            job.execute(Some(self));
        }
    }

    /// Local LIFO first, then a batch from the injector, then stealing from the other
    /// workers starting at a random victim. The local pop is inlined into the run loop;
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
        let _slot = crate::scope::slot::claim();
        loop {
            if let Some(job) = worker.find_work() {
                job.execute(Some(&worker));
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
                job.execute(Some(&worker));
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
                        job.execute(Some(&worker));
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

#[cfg(all(test, not(loom)))]
mod tests {
    //! White-box tests of where `Registry::push` and `WorkerThread::push_local` queue a
    //! job: a worker's own deque when pushed from one of this pool's workers, the calling
    //! thread's lane otherwise (the shared injector once every lane is taken), and
    //! nowhere once shutdown began (outside submissions only).
    //!
    //! Jobs here must not panic (an unwinding job aborts the process), so they report
    //! what they observed over a channel and the test thread asserts.

    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::AtomicUsize;
    use std::sync::{Arc, mpsc};
    use std::time::Duration;

    use super::*;
    use crate::pool::StaticThreadPool;

    const TIMEOUT: Duration = Duration::from_secs(5);

    type Thunk = Box<dyn FnOnce() + Send>;

    /// Runs the boxed thunk that `data` points to, once.
    ///
    /// # Safety
    ///
    /// `data` comes from `Box::into_raw(Box<Thunk>)` in [`job`]; called once.
    unsafe fn run_thunk(data: *const ()) {
        // SAFETY: the caller's contract: we own the box and free it here.
        let f = unsafe { Box::from_raw(data.cast_mut().cast::<Thunk>()) };
        f();
    }

    /// A heap-allocated job that runs `f` once (and leaks if never run).
    fn job(f: impl FnOnce() + Send + 'static) -> JobRef {
        let boxed: Box<Thunk> = Box::new(Box::new(f));
        // SAFETY: `run_thunk` frees exactly this box, once; the thunk is `Send`, so it
        // may run on any thread.
        unsafe { JobRef::new(Box::into_raw(boxed).cast(), run_thunk) }
    }

    /// The registry of `pool` (the field is private to `crate::pool`).
    fn registry_of(pool: &StaticThreadPool) -> RegistryRef {
        pool.registry.clone()
    }

    /// Blocks the only worker of a one-thread pool until the returned sender is dropped
    /// or sent to; returns once the worker is inside the blocking job.
    fn block_worker(registry: &Registry) -> mpsc::Sender<()> {
        let (release_tx, release_rx) = mpsc::channel::<()>();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        assert!(registry.push(job(move || {
            let _ = started_tx.send(());
            let _ = release_rx.recv_timeout(TIMEOUT);
        })));
        started_rx.recv_timeout(TIMEOUT).expect("the blocking job did not start");
        release_tx
    }

    /// Queue lengths seen from inside a job: (own deque, own stealer, injector).
    type Lens = (usize, usize, usize);

    #[test]
    fn push_from_a_worker_goes_to_its_own_deque() {
        let pool = StaticThreadPool::new(1).unwrap();
        let registry = registry_of(&pool);
        let (tx, rx) = mpsc::channel::<(Option<usize>, Lens, bool, Lens)>();
        let (ran_tx, ran_rx) = mpsc::channel::<Option<usize>>();
        let r = registry.clone();
        assert!(registry.push(job(move || {
            let lens = |w: &WorkerThread| (w.deque.len(), r.stealers[w.index].len(), r.injector.len());
            let Some(worker) = WorkerThread::current_of(&r) else {
                let _ = tx.send((None, (0, 0, 0), false, (0, 0, 0)));
                return;
            };
            let before = lens(worker);
            let r2 = r.clone();
            let pushed = r.push(job(move || {
                let _ = ran_tx.send(WorkerThread::current_of(&r2).map(WorkerThread::index));
            }));
            let after = lens(worker);
            let _ = tx.send((Some(worker.index), before, pushed, after));
        })));
        let (index, before, pushed, after) = rx.recv_timeout(TIMEOUT).expect("the job did not run");
        assert_eq!(index, Some(0), "the job must run on worker 0");
        assert_eq!(before, (0, 0, 0));
        assert!(pushed, "a push from a worker is accepted");
        assert_eq!(after, (1, 1, 0), "the job must be on the worker's own deque, not the injector");
        assert_eq!(ran_rx.recv_timeout(TIMEOUT).expect("the pushed job did not run"), Some(0));
    }

    #[test]
    fn push_local_goes_to_the_own_deque() {
        let pool = StaticThreadPool::new(1).unwrap();
        let registry = registry_of(&pool);
        let (tx, rx) = mpsc::channel::<Option<(Lens, Lens)>>();
        let (ran_tx, ran_rx) = mpsc::channel::<()>();
        let r = registry.clone();
        assert!(registry.push(job(move || {
            let sent = WorkerThread::current_of(&r).map(|w| {
                let before = (w.deque.len(), r.stealers[w.index].len(), r.injector.len());
                w.push_local(job(move || {
                    let _ = ran_tx.send(());
                }));
                (before, (w.deque.len(), r.stealers[w.index].len(), r.injector.len()))
            });
            let _ = tx.send(sent);
        })));
        let (before, after) = rx.recv_timeout(TIMEOUT).expect("the job did not run").expect("not on a worker");
        assert_eq!(before, (0, 0, 0));
        assert_eq!(after, (1, 1, 0));
        ran_rx.recv_timeout(TIMEOUT).expect("the locally pushed job did not run");
    }

    /// A spawned `schedule()` from a worker is queued once: when the worker takes the
    /// spawned operation, its `schedule()` completes inline (nothing is pushed again) and
    /// uses up the mark, and a spawn from inside it is queued as usual.
    #[test]
    fn a_spawned_schedule_is_queued_once_and_the_mark_does_not_outlive_it() {
        use crate::{Scheduler, SenderExt, SimpleCountingScope, spawn, sync_wait};
        let pool = StaticThreadPool::new(1).unwrap();
        let registry = registry_of(&pool);
        let sch = pool.scheduler();
        let scope = SimpleCountingScope::new();
        let tok = scope.token();
        let (tx, rx) = mpsc::channel::<(&'static str, usize)>();
        let deque_len = move |r: &RegistryRef| WorkerThread::current_of(r).map_or(usize::MAX, |w| w.deque.len());
        let (r, s2) = (registry.clone(), sch.clone());
        spawn(
            sch.schedule().then(move |()| {
                let (r2, tx2, s3) = (r.clone(), tx.clone(), s2.clone());
                spawn(
                    s2.schedule().then(move |()| {
                        // Taken from the deque and completed inline: nothing queued.
                        let _ = tx2.send(("spawned", deque_len(&r2)));
                        // The mark was used up by that schedule().
                        let mark = WorkerThread::current_of(&r2).is_none_or(|w| w.fresh.get());
                        let _ = tx2.send(("mark", usize::from(mark)));
                        // The spawn below is queued (it is not the one being started).
                        let r3 = r2.clone();
                        let tx3 = tx2.clone();
                        spawn(
                            s3.schedule().then(move |()| {
                                let _ = tx3.send(("nested", deque_len(&r3)));
                            }),
                            tok,
                        );
                        let _ = tx2.send(("after nested spawn", deque_len(&r2)));
                    }),
                    tok,
                );
                let _ = tx.send(("after spawn", deque_len(&r)));
            }),
            tok,
        );
        sync_wait(scope.join()).unwrap();
        let seen: Vec<_> = rx.try_iter().collect();
        assert_eq!(
            seen,
            [("after spawn", 1), ("spawned", 0), ("mark", 0), ("after nested spawn", 1), ("nested", 0)],
            "one deque entry per spawn, none for the schedule() it starts with"
        );
    }

    /// Jobs queued on the registry's lanes.
    fn in_lanes(registry: &Registry) -> usize {
        registry.lanes.iter().map(|lane| lane.stealer.len()).sum()
    }

    #[test]
    fn push_from_outside_goes_to_the_threads_lane() {
        let pool = StaticThreadPool::new(1).unwrap();
        let registry = registry_of(&pool);
        assert!(WorkerThread::current_of(&registry).is_none(), "the test thread is no worker");
        let release = block_worker(&registry);
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..2 {
            let ran2 = ran.clone();
            assert!(registry.push(job(move || _ = ran2.fetch_add(1, Ordering::SeqCst))));
        }
        assert_eq!(in_lanes(&registry), 2, "an outside push goes to the thread's lane");
        assert_eq!(registry.lanes.iter().filter(|lane| !lane.stealer.is_empty()).count(), 1, "one lane");
        assert_eq!(registry.injector.len(), 0, "not to the injector");
        assert_eq!(registry.stealers[0].len(), 0, "and not to a worker's deque");
        assert_eq!(ran.load(Ordering::SeqCst), 0);
        drop(release);
        drop(pool);
        assert_eq!(ran.load(Ordering::SeqCst), 2, "the queued jobs ran before the pool was dropped");
    }

    #[test]
    fn outside_threads_beyond_the_lanes_use_the_injector_and_exited_threads_jobs_run() {
        let pool = StaticThreadPool::new(1).unwrap();
        let registry = registry_of(&pool);
        let release = block_worker(&registry);
        let ran = Arc::new(AtomicUsize::new(0));
        // One thread after the other, each pushing once and exiting.
        for _ in 0..LANES + 1 {
            let (r, ran2) = (registry.clone(), ran.clone());
            std::thread::spawn(move || assert!(r.push(job(move || _ = ran2.fetch_add(1, Ordering::SeqCst)))))
                .join()
                .unwrap();
        }
        // The test thread holds a lane too (`block_worker` pushed from it).
        assert_eq!(in_lanes(&registry), LANES - 1, "one job in each other lane");
        assert_eq!(registry.injector.len(), 2, "the threads that found no lane used the injector");
        drop(release);
        drop(pool);
        assert_eq!(ran.load(Ordering::SeqCst), LANES + 1, "every job ran, also those of exited threads");
    }

    #[test]
    fn push_from_a_worker_of_another_pool_goes_to_a_lane_of_that_pool() {
        let a = StaticThreadPool::new(1).unwrap();
        let b = StaticThreadPool::new(1).unwrap();
        let (ra, rb) = (registry_of(&a), registry_of(&b));
        let release_b = block_worker(&rb);
        let (tx, rx) = mpsc::channel::<Option<(bool, usize, usize)>>();
        let (ran_tx, ran_rx) = mpsc::channel::<bool>();
        let (ra2, rb2) = (ra.clone(), rb.clone());
        assert!(ra.push(job(move || {
            let sent = WorkerThread::current_of(&ra2).map(|w| {
                // On a worker of `a`, but not of `b`.
                let foreign = WorkerThread::current_of(&rb2).is_none();
                let rb3 = rb2.clone();
                let pushed = rb2.push(job(move || {
                    let _ = ran_tx.send(WorkerThread::current_of(&rb3).is_some());
                }));
                (foreign && pushed, w.deque.len(), in_lanes(&rb2))
            });
            let _ = tx.send(sent);
        })));
        let (ok, own_len, lane_len) = rx.recv_timeout(TIMEOUT).expect("job did not run").expect("not on a");
        assert!(ok);
        assert_eq!(own_len, 0, "a push to another pool must not land on this worker's deque");
        assert_eq!(lane_len, 1, "it goes to a lane of the other pool");
        drop(release_b);
        assert!(ran_rx.recv_timeout(TIMEOUT).expect("job did not run on b"), "it runs on a worker of b");
    }

    #[test]
    fn after_shutdown_began_outside_pushes_are_refused_and_worker_pushes_still_run() {
        let pool = StaticThreadPool::new(1).unwrap();
        let registry = registry_of(&pool);
        let (tx, rx) = mpsc::channel::<(bool, bool)>();
        let r = registry.clone();
        let inner_ran = Arc::new(AtomicBool::new(false));
        let inner = inner_ran.clone();
        assert!(registry.push(job(move || {
            // Wait until the pool is being dropped.
            let deadline = std::time::Instant::now() + TIMEOUT;
            while !r.terminating.load(Ordering::SeqCst) && std::time::Instant::now() < deadline {
                std::thread::yield_now();
            }
            let r2 = r.clone();
            // A push from the worker during shutdown is queued and runs, with workers
            // still alive (not `exited`).
            let pushed = r.push(job(move || inner.store(!r2.exited(), Ordering::SeqCst)));
            let _ = tx.send((r.terminating.load(Ordering::SeqCst), pushed));
        })));
        drop(pool);
        let (terminating, pushed) = rx.recv_timeout(TIMEOUT).unwrap();
        assert!(terminating && pushed);
        assert!(inner_ran.load(Ordering::SeqCst), "work queued by a worker during shutdown ran before drop returned");
        assert!(registry.exited());
        let refused = Arc::new(AtomicBool::new(true));
        let r = refused.clone();
        assert!(
            !registry.push(job(move || r.store(false, Ordering::SeqCst))),
            "an outside push after shutdown is refused"
        );
        assert_eq!(registry.injector.len(), 0);
        assert!(refused.load(Ordering::SeqCst));
    }
}
