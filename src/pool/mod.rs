//! `StaticThreadPool`: a fixed set of work-stealing worker threads, its scheduler and its
//! domain.
//!
//! | file | what |
//! |---|---|
//! | `thread_pool.rs` | [`StaticThreadPool`], its builder and its shutdown |
//! | `scheduler.rs` | [`PoolScheduler`]: `schedule()`, whose operation is the job it queues |
//! | `domain.rs` | [`PoolDomain`]: the bulk algorithms, fork-join `when_all`, the `spawn` hook |
//! | `bulk.rs` | the bulk algorithms in parallel: kernels, adaptive splitting, completion |
//! | `registry.rs` | the shared state (queues, sleep, shutdown), the worker loop, and `RegistryRef`, the handle that keeps it alive |
//! | `wait.rs` | waiting by working: `sync_wait` on a worker runs the pool's jobs until its value comes, and `WakeWorker` wakes it |
//! | `refs.rs` | the registry's reference count, sharded per worker |
//! | `lane.rs` | deques of their own for outside threads that submit |
//! | `latent.rs` | a worker's latent forks: held privately, published when another worker is hungry |
//! | `sleep.rs` | idle workers' sleep and wake-up |
//! | `shard_index.rs` | each worker's index in every scope's shards, unique among live workers of all pools |
//! | `deque.rs` | the work-stealing deques (crossbeam's, or a loom model) |
//! | `global.rs` | the default pool |
//! | `tests.rs` | white-box tests of the queues, the reference count and the spawn hook |
//!
//! Each worker owns a LIFO deque (`crossbeam-deque`). A thread outside the pool submits
//! to a *lane* it claims on its first submission (a deque of its own, four per pool),
//! or, once every lane is taken, to a shared injector. An idle worker takes from its own
//! deque, then a batch from the injector, then a batch from a lane, then steals from the
//! others starting at a random victim; after a short bounded spin it sleeps (see
//! `README.md` beside this file for the queues, the sleep protocol and why no wake-up is
//! lost).
//!
//! | event | where the job goes | wake-up |
//! |---|---|---|
//! | `schedule()` started on a worker of this pool | that worker's deque | one sleeper, if any sleeps |
//! | `schedule()` started elsewhere | the thread's lane (the injector if no lane is free) | one sleeper, if any sleeps |
//! | `schedule()` started after shutdown began | nowhere: completes `set_stopped` inline | none |
//!
//! **Shutdown.** Dropping the pool stops outside submissions, lets the workers run
//! every job already queued (in any deque, lane or the injector), and joins them. Work
//! is never lost: what was queued runs; what is submitted after shutdown began completes
//! stopped. (A worker leaving waits for outside submissions still in flight and looks
//! once more; `README.md`, "Shutdown".)
//!
//! **The default pool** (`global.rs`): a process-wide pool started on first use, reached
//! through `parallel_scheduler()` and `default_pool()`, configured once with
//! `PoolBuilder::build_global`, and never dropped.

mod bulk;
mod deque;
mod domain;
#[cfg(not(loom))]
mod global;
mod lane;
mod latent;
mod refs;
mod registry;
mod scheduler;
pub(crate) mod shard_index;
mod sleep;
#[cfg(all(test, not(loom)))]
mod tests;
mod thread_pool;
mod wait;

pub use bulk::{
    BulkChunkedKernel, BulkChunksMutKernel, BulkEachKernel, BulkKernel, BulkUnchunkedKernel, Kernel, PoolBulk,
    PoolBulkOp, PoolBulkReceiver,
};
pub use domain::{ForkOnPool, PoolDomain};
#[cfg(not(loom))]
pub use global::{GlobalPoolError, default_pool, parallel_scheduler};
pub(crate) use registry::WorkerThread;
#[cfg(loom)]
#[doc(hidden)]
pub use registry::join_handed_over_teardown;
pub(crate) use wait::WakeWorker;

pub use scheduler::{PoolOp, PoolScheduler, PoolSender};
pub use thread_pool::{BuildError, DEFAULT_STACK_SIZE, PoolBuilder, StaticThreadPool};
