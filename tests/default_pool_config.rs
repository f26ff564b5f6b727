//! Starting and configuring the default pool, in a process of its own (the one test of
//! this binary): no thread exists before first use, zero threads is refused and starts
//! nothing, `build_global` sets the thread count and keeps the default names, and a
//! second configuration is refused.

// The default pool is not built under `--cfg loom` (see `src/pool/global.rs`).
#![cfg(not(loom))]

use std::time::{Duration, Instant};

use senders::{
    BuildError, Scheduler, SenderExt, StaticThreadPool, default_pool, parallel_scheduler, pool::GlobalPoolError,
    sync_wait,
};

/// The number of threads of this process whose name starts with `senders-default` (Linux
/// truncates names to 15 bytes, which is exactly that prefix); `None` elsewhere.
fn default_worker_threads() -> Option<usize> {
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    let mut n = 0;
    for task in tasks {
        let comm = std::fs::read_to_string(task.ok()?.path().join("comm")).ok()?;
        if comm.starts_with("senders-default") {
            n += 1;
        }
    }
    Some(n)
}

/// [`default_worker_threads`] once it reaches `n` or five seconds pass: a new thread sets
/// its own name as it starts, so the count trails the pool's start.
fn default_worker_threads_reaching(n: usize) -> Option<usize> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let seen = default_worker_threads();
        if seen == Some(n) || Instant::now() >= deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn the_default_pool_is_lazy_and_configured_once_before_first_use() {
    let linux = cfg!(target_os = "linux");
    if linux {
        assert_eq!(default_worker_threads(), Some(0), "no default worker before first use");
    }

    let zero = StaticThreadPool::builder().num_threads(0).build_global();
    assert!(matches!(zero, Err(GlobalPoolError::Build(BuildError::ZeroThreads))), "{zero:?}");
    let msg = zero.unwrap_err().to_string();
    assert!(msg.contains("at least one thread"), "{msg}");
    if linux {
        assert_eq!(default_worker_threads(), Some(0), "a refused configuration starts nothing");
    }

    let pool = StaticThreadPool::builder().num_threads(3).build_global().unwrap();
    assert_eq!(pool.num_threads(), 3);
    assert!(std::ptr::eq(pool, default_pool()));
    assert_eq!(parallel_scheduler(), pool.scheduler());
    if linux {
        assert_eq!(default_worker_threads_reaching(3), Some(3));
    }
    let name = sync_wait(parallel_scheduler().schedule().then(|()| std::thread::current().name().map(str::to_owned)))
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(["senders-default-0", "senders-default-1", "senders-default-2"].contains(&name.as_str()), "{name}");

    let again = StaticThreadPool::builder().num_threads(1).build_global();
    assert!(matches!(again, Err(GlobalPoolError::AlreadyStarted)), "{again:?}");
    assert_eq!(default_pool().num_threads(), 3, "the first configuration stays");
    if linux {
        assert_eq!(default_worker_threads(), Some(3), "a refused configuration starts no thread");
    }
}
