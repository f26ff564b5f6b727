//! [`StaticThreadPool`]: the workers' threads, their start (the builder) and their
//! shutdown.

use std::{fmt, io};

use super::deque::Worker;
use super::registry::{Registry, RegistryRef, WorkerThread};
use super::scheduler::PoolScheduler;
use crate::job::JobRef;
use crate::sync::thread;

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
    /// A worker thread could not be started: the operating system refused, or its name
    /// (from [`PoolBuilder::thread_name`]) contains a NUL byte (`InvalidInput`).
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
    pub(super) name: Option<NameFn>,
    pin: bool,
    stack_size: usize,
    latent_forks: bool,
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
            .field("latent_forks", &self.latent_forks)
            .finish()
    }
}

impl PoolBuilder {
    /// The number of worker threads; defaults to the number of logical CPUs. Zero makes
    /// [`build`](Self::build) fail with [`BuildError::ZeroThreads`].
    ///
    /// ```
    /// use senders::{BuildError, StaticThreadPool};
    /// let pool = StaticThreadPool::builder().num_threads(3).build()?;
    /// assert_eq!(pool.num_threads(), 3);
    /// assert!(matches!(StaticThreadPool::builder().num_threads(0).build(), Err(BuildError::ZeroThreads)));
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn num_threads(mut self, n: usize) -> Self {
        self.num_threads = Some(n);
        self
    }

    /// Names worker `i` with `name(i)`; defaults to `senders-worker-{i}`. A name with a
    /// NUL byte makes [`build`](Self::build) fail with [`BuildError::Spawn`]; a panic in
    /// `name` unwinds out of `build` after the workers already started are stopped and
    /// joined.
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait_value};
    /// let pool = StaticThreadPool::builder().num_threads(1).thread_name(|i| format!("solver-{i}")).build()?;
    /// let name = sync_wait_value(schedule(&pool.scheduler()).then(|()| std::thread::current().name().map(String::from)));
    /// assert_eq!(name.as_deref(), Some("solver-0"));
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn thread_name(mut self, name: impl FnMut(usize) -> String + 'static) -> Self {
        self.name = Some(Box::new(name));
        self
    }

    /// The stack size of each worker thread, in bytes; defaults to
    /// [`DEFAULT_STACK_SIZE`] (8 MiB).
    ///
    /// ```
    /// use senders::StaticThreadPool;
    /// // Deep recursion on the workers (nested waits, large operation states) needs room.
    /// let pool = StaticThreadPool::builder().num_threads(2).stack_size(64 << 20).build()?;
    /// # drop(pool);
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Self {
        self.stack_size = bytes;
        self
    }

    /// Pins worker `i` to core `i % cores` (with `core_affinity`). Off by default; where
    /// the platform cannot report or set affinity, workers run unpinned.
    ///
    /// ```
    /// use senders::StaticThreadPool;
    /// let pool = StaticThreadPool::builder().num_threads(2).pin_to_cores(true).build()?;
    /// assert_eq!(pool.num_threads(), 2);
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn pin_to_cores(mut self, pin: bool) -> Self {
        self.pin = pin;
        self
    }

    /// Whether a fork-join on a worker (`when_all`'s children) and a `spawn` from a
    /// worker hold their forks *latent* while the worker's deque already holds a job:
    /// on the worker's private ring,
    /// published for stealing only when another worker is hungry (seen at the worker's
    /// next fork or join) or this one is about to block in a run loop. Off
    /// by default: every fork then goes on the worker's deque at once, as `rayon::join`
    /// does. The switch exists to compare the two in one run (`benches/pool.rs`);
    /// `docs/PERFORMANCE.md` has the numbers.
    ///
    /// With latent forks, a first child that blocks its worker in code of its own (a
    /// lock, a channel) until a nested sibling has run waits until a fork or join of
    /// that worker publishes the sibling; nothing else does, so if the blocked child
    /// makes none, it waits forever (with the default, an idle worker steals the
    /// sibling). The same holds for a job that spawns work and then blocks in its own
    /// code until that work has run. (Waiting in `sync_wait` is safe: the waiting
    /// worker runs its latent forks itself.) This hazard, for a gain measured only on
    /// spawn-heavy trees, is why the
    /// option is off by default.
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait, when_all};
    /// let pool = StaticThreadPool::builder().num_threads(2).latent_forks(true).build()?;
    /// let sch = pool.scheduler();
    /// let both = when_all((schedule(&sch).then(|()| 1), schedule(&sch).then(|()| 2)));
    /// assert_eq!(sync_wait(both).unwrap(), Some((1, 2)));
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn latent_forks(mut self, latent: bool) -> Self {
        self.latent_forks = latent;
        self
    }

    /// Starts the workers.
    ///
    /// # Errors
    ///
    /// [`BuildError::ZeroThreads`] for zero workers; [`BuildError::Spawn`] when the
    /// operating system refuses a thread or a name holds a NUL byte. Workers already
    /// started are stopped and joined before the error returns.
    ///
    /// ```
    /// use senders::{BuildError, StaticThreadPool};
    /// let refused = StaticThreadPool::builder().num_threads(2).thread_name(|_| "a\0b".into()).build();
    /// assert!(matches!(refused, Err(BuildError::Spawn(_))));
    /// ```
    pub fn build(self) -> Result<StaticThreadPool, BuildError> {
        let n = self.num_threads.unwrap_or_else(num_cpus::get);
        if n == 0 {
            return Err(BuildError::ZeroThreads);
        }
        let deques: Vec<Worker<JobRef>> = (0..n).map(|_| Worker::new_lifo()).collect();
        let registry = RegistryRef::new(Registry::new(deques.iter().map(Worker::stealer).collect(), self.latent_forks));
        let cores = if self.pin { core_affinity::get_core_ids().unwrap_or_default() } else { Vec::new() };
        let mut name = self.name.unwrap_or_else(|| Box::new(|i| format!("senders-worker-{i}")));
        // The pool owns each worker as soon as it starts: if a later one fails, or the
        // naming function panics, dropping the partial pool stops and joins those
        // already running.
        let mut pool = StaticThreadPool { registry, threads: Vec::with_capacity(n) };
        for (index, deque) in deques.into_iter().enumerate() {
            let worker_registry = pool.registry.clone();
            let core = (!cores.is_empty()).then(|| cores[index % cores.len()]);
            let worker_name = name(index);
            if worker_name.contains('\0') {
                let e = io::Error::new(io::ErrorKind::InvalidInput, "a worker's name contains a NUL byte");
                return Err(BuildError::Spawn(e));
            }
            let spawned = thread::Builder::new().name(worker_name).stack_size(self.stack_size).spawn(move || {
                if let Some(core) = core {
                    core_affinity::set_for_current(core);
                }
                WorkerThread::main_loop(worker_registry, index, deque);
            });
            pool.threads.push(spawned.map_err(BuildError::Spawn)?);
        }
        Ok(pool)
    }
}

/// A fixed set of work-stealing worker threads.
///
/// Its [`scheduler`](Self::scheduler) completes `schedule()` on a worker, and its
/// [`PoolDomain`](super::PoolDomain) customizes the algorithms it runs. Dropping the pool runs the work
/// already queued and completes later submissions stopped; dropped from outside the
/// pool, it joins the workers, and dropped from one of its own jobs, it leaves the
/// workers to end themselves (see its `Drop`).
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
    pub(super) registry: RegistryRef,
    threads: Vec<thread::JoinHandle<()>>,
}

impl fmt::Debug for StaticThreadPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticThreadPool").field("num_threads", &self.registry.num_threads()).finish()
    }
}

impl StaticThreadPool {
    /// A builder with the defaults: one thread per logical CPU, unpinned.
    ///
    /// ```
    /// use senders::StaticThreadPool;
    /// let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("io-{i}")).build()?;
    /// assert_eq!(pool.num_threads(), 2);
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn builder() -> PoolBuilder {
        PoolBuilder { num_threads: None, name: None, pin: false, stack_size: DEFAULT_STACK_SIZE, latent_forks: false }
    }

    /// A pool with `n` workers and default settings.
    ///
    /// # Errors
    ///
    /// As [`PoolBuilder::build`]: zero workers, or a thread the system refuses.
    ///
    /// ```
    /// use senders::{BuildError, StaticThreadPool};
    /// assert_eq!(StaticThreadPool::new(4)?.num_threads(), 4);
    /// assert!(matches!(StaticThreadPool::new(0), Err(BuildError::ZeroThreads)));
    /// # Ok::<(), BuildError>(())
    /// ```
    pub fn new(n: usize) -> Result<Self, BuildError> {
        Self::builder().num_threads(n).build()
    }

    /// The pool's scheduler. Cheap to clone; equal for the same pool.
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait_value};
    /// let pool = StaticThreadPool::new(2)?;
    /// let (sch, same) = (pool.scheduler(), pool.scheduler());
    /// assert!(sch == same);
    /// let on_worker = sync_wait_value(schedule(&sch).then(|()| std::thread::current().id()));
    /// assert_ne!(on_worker, std::thread::current().id());
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn scheduler(&self) -> PoolScheduler {
        PoolScheduler::new(self.registry.clone())
    }

    /// The number of worker threads.
    ///
    /// ```
    /// use senders::StaticThreadPool;
    /// assert_eq!(StaticThreadPool::new(3)?.num_threads(), 3);
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn num_threads(&self) -> usize {
        self.registry.num_threads()
    }
}

/// Shuts the pool down. No new work from outside the pool is accepted (a later
/// submission completes stopped, on the submitting thread); the work already queued
/// runs, and so does what it forks or spawns on the workers.
///
/// **From outside the pool** (any thread that is not one of its workers), the drop
/// waits: it joins every worker, once no work is left, then completes stopped what was
/// submitted while they exited. So it must not run where a worker of this pool waits
/// for it (a job of another pool, say, that a worker here waits for in `sync_wait`):
/// that worker never exits, and the drop never returns.
///
/// **From one of its own jobs** (on a worker), the drop waits for nothing: it marks the
/// pool as shutting down, wakes the sleeping workers and returns, and the job goes on.
/// Joining there could deadlock: another worker may be in a nested `sync_wait` for a
/// `when_all` whose child is the job that drops the pool. The rest is left to the
/// workers, this one included once the job returns to it: each runs work until none is
/// left anywhere and its loop ends (a worker in a nested wait first finishes that wait),
/// and the last loop to end joins the other workers' threads, completes the late
/// submissions stopped, and ends its own thread without a join. So once the drop
/// returns, queued work still runs, and the threads end a moment later; a process that
/// exits meanwhile ends them with it.
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait, when_all};
/// use std::sync::{Arc, Mutex};
/// let pool = Arc::new(Mutex::new(Some(StaticThreadPool::new(2)?)));
/// let sch = pool.lock().unwrap().as_ref().unwrap().scheduler();
/// let first = schedule(&sch).then(|()| 1);
/// let dropper = schedule(&sch).then(move |()| drop(pool.lock().unwrap().take()));
/// // Whichever worker runs `dropper`, the drop returns while the other waits for it.
/// let work = schedule(&sch).then(move |()| sync_wait(when_all((first, dropper))).unwrap().map(|(a, _)| a));
/// assert_eq!(sync_wait(work).unwrap(), Some(Some(1)));
/// # Ok::<(), senders::BuildError>(())
/// ```
impl Drop for StaticThreadPool {
    fn drop(&mut self) {
        if WorkerThread::current_of(&self.registry).is_some() {
            self.registry.hand_over_shutdown(std::mem::take(&mut self.threads));
            return;
        }
        self.registry.terminate();
        for handle in self.threads.drain(..) {
            let _ = handle.join();
        }
        self.registry.drain_after_exit();
        // Every worker is joined: from now on the registry's count lives in one word.
        self.registry.refs.fold();
    }
}
