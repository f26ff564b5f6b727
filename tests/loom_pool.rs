//! Loom models of the whole pool: a real `StaticThreadPool` with two workers (their
//! find-work loop, the sleep protocol, shutdown) together with a counting scope's spawn,
//! stop and join, rather than each protocol alone.
//!
//! Under `--cfg loom` the pool's queues are a loom-mutex model of the crossbeam subset
//! it uses (`src/pool/deque.rs`), workers do not spin before sleeping, and the
//! per-thread and process-wide tables (current worker, shard slots, recycled scope
//! cores) are per loom thread or per execution.
//!
//! Run with `tools/loom.sh loom_pool` (`LOOM_MAX_PREEMPTIONS=2`, release).
#![cfg(loom)]

mod whole_pool {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    use senders::{CountingScope, PoolScheduler, SenderExt, StaticThreadPool, schedule, spawn, sync_wait};

    /// What the jobs of a model did: ran their body, or completed stopped.
    #[derive(Clone, Default)]
    struct Tally {
        ran: Arc<AtomicUsize>,
        stopped: Arc<AtomicUsize>,
    }

    impl Tally {
        fn ran(&self) -> usize {
            self.ran.load(Ordering::Relaxed)
        }
        fn stopped(&self) -> usize {
            self.stopped.load(Ordering::Relaxed)
        }
    }

    /// Spawns a `schedule()` on `pool` that counts into `tally` whichever way it
    /// completes; returns whether the scope took it.
    fn spawn_counted(sch: &PoolScheduler, scope: &CountingScope, tally: &Tally) -> bool {
        let (ran, stopped) = (tally.ran.clone(), tally.stopped.clone());
        spawn(
            schedule(sch)
                .then(move |()| {
                    ran.fetch_add(1, Ordering::Relaxed);
                })
                .upon_stopped(move || {
                    stopped.fetch_add(1, Ordering::Relaxed);
                }),
            scope.token(),
        )
    }

    /// (A) Two jobs spawned from outside, joined from outside: both run exactly once
    /// and the join returns (a lost wake-up would leave loom with every thread blocked).
    #[test]
    fn outside_spawns_then_join() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let scope = CountingScope::new();
            let tally = Tally::default();
            for _ in 0..2 {
                assert!(spawn_counted(&pool.scheduler(), &scope, &tally));
            }
            sync_wait(scope.join()).unwrap();
            assert_eq!((tally.ran(), tally.stopped()), (2, 0));
            drop(pool);
        });
    }
}
