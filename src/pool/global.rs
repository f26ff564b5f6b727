//! The default pool: a process-wide `StaticThreadPool`, started on first use (the role
//! of P2079's `parallel_scheduler` and of stdexec's system context).
//!
//! One `OnceLock` holds it. It is never dropped, so its scheduler can be handed out as
//! a plain `PoolScheduler` (the pool's domain applies) and every `'static` reference to
//! it stays valid for the rest of the process. Not built under `--cfg loom`: the loom
//! models build their own pools inside `loom::model`, and a process-wide pool of loom
//! threads would outlive the model that created them.

use std::fmt;
use std::sync::OnceLock;

use super::{BuildError, PoolBuilder, PoolScheduler, StaticThreadPool};

/// The default pool, once started.
static DEFAULT_POOL: OnceLock<StaticThreadPool> = OnceLock::new();

/// The name of worker `i` of the default pool, unless [`PoolBuilder::build_global`] was
/// given other names.
fn default_name(i: usize) -> String {
    format!("senders-default-{i}")
}

/// The scheduler of the process-wide default pool, started on the first call.
///
/// This is the role of P2079's `parallel_scheduler` (stdexec's system context): parallel
/// work without building a pool. It is an ordinary [`PoolScheduler`], so the pool's
/// domain ([`PoolDomain`](crate::pool::PoolDomain)) applies: `bulk` and `bulk_each` run in
/// parallel, `when_all` forks its children onto the workers, and `spawn` from a worker
/// queues on that worker's deque. Every call returns a scheduler of the same pool (they
/// compare equal). See [`default_pool`] for how the pool is started, configured and
/// ended, and when to build your own [`StaticThreadPool`] instead.
///
/// # Panics
///
/// If the pool is not started yet and the operating system refuses to start its worker
/// threads. The pool is then still not started, and a later call tries again.
///
/// # Examples
///
/// A parallel `bulk_each` over a vector:
///
/// ```
/// use senders::{Scheduler, SenderExt, parallel_scheduler, sync_wait};
///
/// let squares = parallel_scheduler()
///     .schedule()
///     .then(|()| (0..100_000u64).collect::<Vec<_>>())
///     .bulk_each(|_, x: &mut u64| *x *= *x);
/// let squares = sync_wait(squares).unwrap().unwrap();
/// assert_eq!(squares[300], 90_000);
/// ```
///
/// A recursive fork-join: on the pool, `when_all` forks the two children onto its
/// workers.
///
/// ```
/// use senders::{Task, parallel_scheduler, starts_on, sync_wait, when_all};
///
/// fn fib(n: u32) -> Task<'static, u64> {
///     Task::new(async move {
///         if n < 2 {
///             return Ok(u64::from(n));
///         }
///         let (a, b) = when_all((fib(n - 1), fib(n - 2))).await?;
///         Ok(a + b)
///     })
/// }
///
/// assert_eq!(sync_wait(starts_on(parallel_scheduler(), fib(20))).unwrap(), Some(6765));
/// ```
pub fn parallel_scheduler() -> PoolScheduler {
    default_pool().scheduler()
}

/// The process-wide default pool, started on the first call; its scheduler is
/// [`parallel_scheduler`].
///
/// **Starting.** No thread exists until the first call of `default_pool` or
/// [`parallel_scheduler`]. That call starts one worker per logical CPU
/// (`num_cpus::get()`), named `senders-default-{i}`, with the defaults of
/// [`StaticThreadPool::builder`]. Concurrent first calls start it once: the others wait
/// for it. To choose the thread count, names, stack size or pinning, call
/// [`PoolBuilder::build_global`] before anything uses the default pool. The crate reads
/// no environment variable; a program that wants one reads it and calls `build_global`.
///
/// **Ending.** The default pool lives until the process exits and is never dropped, so
/// its workers are never joined. Work still queued or running on it when the process
/// exits (when `main` returns or `std::process::exit` is called) is not run to
/// completion: the operating system ends the workers with the process. Work that someone
/// waits for is not affected: `sync_wait` on the default pool blocks until the work
/// completes, and a joined scope has no work left. Only detached work (`spawn` into a
/// scope nobody joins before exiting) can be cut short. A worker idles asleep on a
/// condition variable and uses no CPU.
///
/// **When to build your own [`StaticThreadPool`] instead:**
///
/// - *Isolation*: work of one component must not queue behind, or compete for workers
///   with, work of another (a latency-sensitive service beside batch jobs, or a library
///   that should not occupy its users' default pool).
/// - *Placement*: pinned workers, another thread count or stack size per use, or a
///   pool on a subset of the cores. (`build_global` sets these once for the whole
///   process.)
/// - *Shutdown*: dropping your own pool runs everything already queued and (dropped
///   from outside the pool) joins its workers, so no work is cut short and no thread
///   outlives it; later submissions complete stopped. The default pool offers neither.
/// - *Tests that need a fresh pool*: a known thread count or names, idle workers at the
///   start, or the shutdown behaviour. Tests in one binary share the default pool.
/// - *Nested pools*: jobs that block their worker in code of their own until other work
///   finishes (a lock, a channel) can occupy every worker of the pool that work needs,
///   and deadlock; give the inner work a pool of its own. (A `sync_wait` inside a job
///   does not block: the waiting worker runs the pool's work meanwhile.)
///
/// # Panics
///
/// As [`parallel_scheduler`].
///
/// ```
/// use senders::{Scheduler, SenderExt, default_pool, sync_wait};
///
/// let pool = default_pool();
/// assert_eq!(pool.num_threads(), num_cpus::get());
/// let name = sync_wait(pool.scheduler().schedule().then(|()| {
///     std::thread::current().name().map(str::to_owned)
/// }));
/// assert!(name.unwrap().unwrap().unwrap().starts_with("senders-default-"));
/// ```
pub fn default_pool() -> &'static StaticThreadPool {
    DEFAULT_POOL.get_or_init(|| {
        StaticThreadPool::builder()
            .thread_name(default_name)
            .build()
            .unwrap_or_else(|e| panic!("senders: cannot start the default pool: {e}"))
    })
}

/// Why [`PoolBuilder::build_global`] did not install a default pool.
#[derive(Debug)]
pub enum GlobalPoolError {
    /// The default pool was already started, by an earlier `build_global` or by a
    /// use of [`default_pool`] or [`parallel_scheduler`]. It is left as it is.
    AlreadyStarted,
    /// The pool could not be built (for example zero threads).
    Build(BuildError),
}

impl fmt::Display for GlobalPoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GlobalPoolError::AlreadyStarted => f.write_str("the default pool is already started"),
            GlobalPoolError::Build(e) => write!(f, "cannot build the default pool: {e}"),
        }
    }
}

impl std::error::Error for GlobalPoolError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            GlobalPoolError::AlreadyStarted => None,
            GlobalPoolError::Build(e) => Some(e),
        }
    }
}

impl PoolBuilder {
    /// Builds the pool and makes it the process-wide default pool ([`default_pool`],
    /// [`parallel_scheduler`]), which then lives until the process exits.
    ///
    /// Workers not named with [`thread_name`](Self::thread_name) are named
    /// `senders-default-{i}`. Fails with [`GlobalPoolError::AlreadyStarted`] if the
    /// default pool is already started (by an earlier `build_global`, or by any use of
    /// the default pool); the pool built here is then dropped and the default pool left
    /// as it is. Zero threads is `GlobalPoolError::Build(BuildError::ZeroThreads)`, and
    /// the default pool is then not started.
    ///
    /// ```
    /// use senders::pool::GlobalPoolError;
    /// use senders::{BuildError, StaticThreadPool, default_pool};
    ///
    /// // Zero threads is refused, and starts nothing.
    /// let zero = StaticThreadPool::builder().num_threads(0).build_global();
    /// assert!(matches!(zero, Err(GlobalPoolError::Build(BuildError::ZeroThreads))));
    ///
    /// // Early in `main`, before anything uses the default pool.
    /// let pool = StaticThreadPool::builder().num_threads(3).build_global()?;
    /// assert_eq!(pool.num_threads(), 3);
    /// assert!(std::ptr::eq(pool, default_pool()));
    ///
    /// // Once started, the default pool cannot be replaced.
    /// let again = StaticThreadPool::builder().num_threads(5).build_global();
    /// assert!(matches!(again, Err(GlobalPoolError::AlreadyStarted)));
    /// assert_eq!(default_pool().num_threads(), 3);
    /// # Ok::<(), GlobalPoolError>(())
    /// ```
    pub fn build_global(mut self) -> Result<&'static StaticThreadPool, GlobalPoolError> {
        if DEFAULT_POOL.get().is_some() {
            return Err(GlobalPoolError::AlreadyStarted);
        }
        if self.name.is_none() {
            self = self.thread_name(default_name);
        }
        let pool = self.build().map_err(GlobalPoolError::Build)?;
        // Another thread may have started the default pool while this one was building;
        // `set` then hands the new pool back, and dropping it joins its idle workers.
        DEFAULT_POOL.set(pool).map_err(|_| GlobalPoolError::AlreadyStarted)?;
        Ok(DEFAULT_POOL.get().expect("the default pool was just set"))
    }
}
