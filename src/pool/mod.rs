//! `StaticThreadPool`: a fixed set of work-stealing worker threads, and its scheduler.
//!
//! Each worker owns a LIFO deque (`crossbeam-deque`); work submitted from outside the
//! pool goes to a shared injector. An idle worker takes from its own deque, then a batch
//! from the injector, then steals from the others starting at a random victim; after a
//! short bounded spin it sleeps (see `README.md` beside this file for the sleep
//! protocol and why no wake-up is lost).
//!
//! | event | where the job goes | wake-up |
//! |---|---|---|
//! | `schedule()` started on a worker of this pool | that worker's deque | one sleeper, if any sleeps |
//! | `schedule()` started elsewhere | the injector | one sleeper, if any sleeps |
//! | `schedule()` started after shutdown began | nowhere: completes `set_stopped` inline | none |
//!
//! **Shutdown.** Dropping the pool stops outside submissions, lets the workers run
//! every job already queued (in any deque or the injector), and joins them. Work is
//! never lost: what was queued runs; what is submitted after shutdown began completes
//! stopped. (A worker leaving waits for outside submissions still in flight and looks
//! once more; `README.md`, "Shutdown".)
//!
//! **The default pool** (`global.rs`): a process-wide pool started on first use, reached
//! through `parallel_scheduler()` and `default_pool()`, configured once with
//! `PoolBuilder::build_global`, and never dropped.

mod deque;
mod domain;
#[cfg(not(loom))]
mod global;
mod lane;
mod refs;
mod registry;
mod sleep;

use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomPinned;
use std::pin::Pin;

use crate::env::Env;
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, Sender, SenderTo};
use crate::sync::thread;
use deque::Worker;
pub use domain::{
    EachKernel, ForkOnPool, Kernel, PoolBulk, PoolBulkEach, PoolBulkOp, PoolBulkReceiver, PoolDomain, SharedKernel,
};
#[cfg(not(loom))]
pub use global::{GlobalPoolError, default_pool, parallel_scheduler};
pub(crate) use refs::RegistryRef;
pub(crate) use registry::{JobRef, Registry, WorkerThread};

/// Why a pool could not be built.
///
/// ```
/// use senders::{BuildError, StaticThreadPool};
/// assert!(matches!(StaticThreadPool::new(0), Err(BuildError::ZeroThreads)));
/// ```
#[derive(Debug)]
pub enum BuildError {
    /// A pool needs at least one thread.
    ZeroThreads,
    /// The operating system refused to start a worker thread.
    Spawn(std::io::Error),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::ZeroThreads => f.write_str("a thread pool needs at least one thread"),
            BuildError::Spawn(e) => write!(f, "failed to spawn a worker thread: {e}"),
        }
    }
}

impl std::error::Error for BuildError {}

type NameFn = Box<dyn FnMut(usize) -> String>;

/// Builds a [`StaticThreadPool`].
///
/// ```
/// use senders::{StaticThreadPool, Scheduler, SenderExt, sync_wait};
/// let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("w{i}")).build()?;
/// let name = sync_wait(pool.scheduler().schedule().then(|()| {
///     std::thread::current().name().map(str::to_owned)
/// }));
/// assert!(name.unwrap().unwrap().unwrap().starts_with('w'));
/// # Ok::<(), senders::BuildError>(())
/// ```
#[must_use = "a builder does nothing until `build` is called"]
pub struct PoolBuilder {
    num_threads: Option<usize>,
    name: Option<NameFn>,
    pin: bool,
    stack_size: usize,
}

/// The default stack size of a worker thread. Operation states live inline and deep
/// sender trees make large ones (debug builds copy them on the stack as they are
/// connected); stack memory is only committed where it is touched.
pub const DEFAULT_STACK_SIZE: usize = 8 << 20;

impl fmt::Debug for PoolBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PoolBuilder")
            .field("num_threads", &self.num_threads)
            .field("pin", &self.pin)
            .field("stack_size", &self.stack_size)
            .finish()
    }
}

impl PoolBuilder {
    /// The number of worker threads; defaults to the number of logical CPUs. Zero makes
    /// [`build`](Self::build) fail with [`BuildError::ZeroThreads`].
    pub fn num_threads(mut self, n: usize) -> Self {
        self.num_threads = Some(n);
        self
    }

    /// Names worker `i` with `name(i)`; defaults to `senders-worker-{i}`.
    pub fn thread_name(mut self, name: impl FnMut(usize) -> String + 'static) -> Self {
        self.name = Some(Box::new(name));
        self
    }

    /// The stack size of each worker thread, in bytes; defaults to
    /// [`DEFAULT_STACK_SIZE`] (8 MiB).
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Pins worker `i` to core `i % cores` (with `core_affinity`). Off by default; where
    /// the platform cannot report or set affinity, workers run unpinned.
    pub fn pin_to_cores(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Starts the workers.
    pub fn build(self) -> Result<StaticThreadPool, BuildError> {
        let n = self.num_threads.unwrap_or_else(num_cpus::get);
        if n == 0 {
            return Err(BuildError::ZeroThreads);
        }
        let deques: Vec<Worker<JobRef>> = (0..n).map(|_| Worker::new_lifo()).collect();
        let registry = RegistryRef::new(Registry::new(deques.iter().map(Worker::stealer).collect()));
        let cores = if self.pin { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
        let mut name = self.name.unwrap_or_else(|| Box::new(|i| format!("senders-worker-{i}")));
        let mut threads = Vec::with_capacity(n);
        for (index, deque) in deques.into_iter().enumerate() {
            let worker_registry = registry.clone();
            let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
            let spawned = thread::Builder::new().name(name(index)).stack_size(self.stack_size).spawn(move || {
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                WorkerThread::main_loop(worker_registry, index, deque);
            });
            match spawned {
                Ok(handle) => threads.push(handle),
                Err(e) => {
                    let partial = StaticThreadPool { registry, threads };
                    drop(partial);
                    return Err(BuildError::Spawn(e));
                }
            }
        }
        Ok(StaticThreadPool { registry, threads })
    }
}

/// A fixed set of work-stealing worker threads.
///
/// Its [`scheduler`](Self::scheduler) completes `schedule()` on a worker, and its
/// [`PoolDomain`] customizes the algorithms it runs. Dropping the pool runs the work
/// already queued, completes later submissions stopped, and joins the workers.
///
/// For parallel work without building a pool, use the process-wide default pool,
/// `parallel_scheduler()`; its docs (at `default_pool()`) say when a pool of your own is
/// the better choice.
///
/// ```
/// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait, when_all};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let sch = pool.scheduler();
/// let work = when_all((schedule(&sch).then(|()| 20), schedule(&sch).then(|()| 22))).then(|(a, b)| a + b);
/// assert_eq!(sync_wait(work).unwrap(), Some(42));
/// ```
pub struct StaticThreadPool {
    registry: RegistryRef,
    threads: Vec<thread::JoinHandle<()>>,
}

impl fmt::Debug for StaticThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticThreadPool").field("num_threads", &self.registry.num_threads()).finish()
    }
}

impl StaticThreadPool {
    /// A builder with the defaults: one thread per logical CPU, unpinned.
    pub fn builder() -> PoolBuilder {
        PoolBuilder { num_threads: None, name: None, pin: false, stack_size: DEFAULT_STACK_SIZE }
    }

    /// A pool with `n` workers and default settings.
    pub fn new(n: usize) -> Result<Self, BuildError> {
        Self::builder().num_threads(n).build()
    }

    /// The pool's scheduler. Cheap to clone; equal for the same pool.
    pub fn scheduler(&self) -> PoolScheduler {
        PoolScheduler { registry: self.registry.clone() }
    }

    /// The number of worker threads.
    pub fn num_threads(&self) -> usize {
        self.registry.num_threads()
    }
}

impl Drop for StaticThreadPool {
    fn drop(&mut self) {
        self.registry.terminate();
        let me = thread::current().id();
        for handle in self.threads.drain(..) {
            // A worker dropping the pool (from a job) cannot join itself.
            if handle.thread().id() != me {
                let _ = handle.join();
            }
        }
        // Dropped from one of its own workers: the others have exited; this one runs
        // what is still queued, so queued work runs here as it would have there.
        let this_worker = WorkerThread::current_of(&self.registry);
        if let Some(worker) = this_worker {
            worker.run_remaining();
        }
        self.registry.drain_after_exit();
        // Every worker but possibly this thread is joined; this one stops using its
        // shard; from now on the registry's count lives in one word.
        if let Some(worker) = this_worker {
            worker.stop_counting_refs();
        }
        self.registry.refs.fold();
    }
}

/// The scheduler of a [`StaticThreadPool`]; its domain is [`PoolDomain`].
///
/// ```
/// use senders::{Scheduler, SenderExt, StaticThreadPool, just, starts_on, sync_wait};
/// let pool = StaticThreadPool::new(1).unwrap();
/// let sch = pool.scheduler();
/// let on_pool = starts_on(sch.clone(), just(()).then(move |()| sch.is_current()));
/// assert_eq!(sync_wait(on_pool).unwrap(), Some(true));
/// ```
#[derive(Clone)]
pub struct PoolScheduler {
    registry: RegistryRef,
}

impl PartialEq for PoolScheduler {
    fn eq(&self, other: &Self) -> bool {
        RegistryRef::ptr_eq(&self.registry, &other.registry)
    }
}

impl fmt::Debug for PoolScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PoolScheduler")
    }
}

impl Scheduler for PoolScheduler {
    type Domain = PoolDomain;
    type Sender = PoolSender;
    #[inline]
    fn schedule(&self) -> PoolSender {
        PoolSender { sch: self.clone() }
    }
    fn is_current(&self) -> bool {
        WorkerThread::current_of(&self.registry).is_some()
    }
}

/// The sender of `PoolScheduler::schedule()`: completes on a worker of the pool.
#[must_use = "senders do nothing unless connected and started"]
#[derive(Clone)]
pub struct PoolSender {
    sch: PoolScheduler,
}

impl Sender for PoolSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = PoolDomain;
    type CompletionScheduler = PoolScheduler;
    fn completion_scheduler(&self) -> PoolScheduler {
        self.sch.clone()
    }
}

impl<R: Receiver<(), Infallible> + Send> SenderTo<R> for PoolSender {
    type Operation = PoolOp<R>;
    fn connect(self, receiver: R) -> PoolOp<R> {
        PoolOp { registry: self.sch.registry, rcvr: Some(receiver), _pin: PhantomPinned }
    }
}

/// The operation state of `schedule()` on the pool. It is the job itself: scheduling
/// allocates nothing.
pub struct PoolOp<R> {
    registry: RegistryRef,
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible>> PoolOp<R> {
    /// # Safety
    ///
    /// `data` points to a live, started `PoolOp<R>`; called once.
    #[inline]
    unsafe fn run(data: *const ()) {
        let this = data.cast_mut().cast::<PoolOp<R>>();
        // SAFETY: the job's operation is alive until it completes, which is now; nobody
        // else touches `rcvr` or reads `registry` concurrently.
        let (rcvr, exited) = unsafe { ((*this).rcvr.take(), (*this).registry.exited()) };
        let Some(rcvr) = rcvr else { return };
        if exited || rcvr.env().stop_token().stop_requested() {
            rcvr.set_stopped();
        } else {
            rcvr.set_value(());
        }
    }
}

impl<R: Receiver<(), Infallible>> OperationState for PoolOp<R> {
    #[inline]
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is moved out of the pinned operation; we take its address.
        let this = unsafe { self.get_unchecked_mut() };
        let data: *const Self = this;
        // SAFETY: the operation is pinned and, by `start`'s contract, alive until it
        // completes, which only the job does; `run` matches `data`'s type.
        let job = unsafe { JobRef::new(data.cast(), Self::run) };
        // Once queued, the job may run and free this operation (and its registry
        // reference) at once. On a worker of this pool, the worker's own handle keeps the registry alive, so
        // the common case touches no shared reference count.
        if let Some(worker) = WorkerThread::current_of(&this.registry) {
            if worker.take_fresh() {
                // The first `schedule()` of a spawned operation this worker just took from
                // a queue: it is already on the pool, and was queued once; complete now.
                // SAFETY: the job was never queued, so this is its one run.
                unsafe { Self::run(data.cast()) };
            } else {
                worker.push_local(job);
            }
            return;
        }
        // No clone of the registry reference for the push: `Registry::push` keeps the
        // registry alive for its own duration, even if the job runs and frees this
        // operation first (see there).
        let registry: *const Registry = &*this.registry;
        // SAFETY: the registry is alive now (this operation holds a reference), and
        // `push` does not need it to stay alive beyond its start.
        if !unsafe { &*registry }.push(job) {
            // SAFETY: the push was refused, so the job will never run; we still own it.
            let rcvr = unsafe { (*data.cast_mut()).rcvr.take() };
            if let Some(rcvr) = rcvr {
                rcvr.set_stopped();
            }
        }
    }
}
