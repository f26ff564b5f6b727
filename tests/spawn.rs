//! The `spawn` hook with a minimal scope stand-in: the default domain starts spawned work
//! inline; the pool's domain pushes it onto the current worker's deque; completions and
//! panics always reach the scope.

use senders::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
struct TestScope {
    done: AtomicUsize,
    panics: Mutex<Vec<String>>,
}

impl SpawnScope for TestScope {
    fn completed(&self, panic: Option<Panic>) {
        if let Some(p) = panic {
            self.panics.lock().unwrap().push(p.message().unwrap_or("?").to_owned());
        }
        self.done.fetch_add(1, Ordering::SeqCst);
    }
}

fn wait_for(scope: &TestScope, n: usize) {
    let t = Instant::now();
    while scope.done.load(Ordering::SeqCst) < n {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "only {} of {n} spawned operations completed",
            scope.done.load(Ordering::SeqCst)
        );
        std::thread::yield_now();
    }
}

#[test]
fn default_domain_runs_spawned_work_inline_and_reports_panics() {
    let scope = Arc::new(TestScope::default());
    let here = std::thread::current().id();
    let ran_here = Arc::new(AtomicUsize::new(0));
    let r = ran_here.clone();
    spawn(
        just(()).then(move |()| {
            if std::thread::current().id() == here {
                r.fetch_add(1, Ordering::SeqCst);
            }
        }),
        scope.clone(),
    );
    assert_eq!(ran_here.load(Ordering::SeqCst), 1, "inline on the spawning thread");
    spawn(just(()).then(|()| panic!("spawned boom")), scope.clone());
    spawn(just_stopped::<(), std::convert::Infallible>(), scope.clone());
    assert_eq!(scope.done.load(Ordering::SeqCst), 3);
    assert_eq!(*scope.panics.lock().unwrap(), ["spawned boom"]);
}

#[test]
fn pool_spawns_from_a_worker_run_on_the_pool_and_all_complete() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("sp{i}")).build().unwrap();
    let sch = pool.scheduler();
    let scope = Arc::new(TestScope::default());
    let on_pool = Arc::new(AtomicUsize::new(0));
    const N: usize = 10_000;
    let (s2, sc2, op2) = (sch.clone(), scope.clone(), on_pool.clone());
    // One spawned job that spawns N more from inside a worker.
    spawn(
        sch.schedule().then(move |()| {
            for _ in 0..N {
                let op = op2.clone();
                spawn(
                    s2.schedule().then(move |()| {
                        if std::thread::current().name().is_some_and(|n| n.starts_with("sp")) {
                            op.fetch_add(1, Ordering::SeqCst);
                        }
                    }),
                    sc2.clone(),
                );
            }
        }),
        scope.clone(),
    );
    wait_for(&scope, N + 1);
    assert_eq!(on_pool.load(Ordering::SeqCst), N);
    assert!(scope.panics.lock().unwrap().is_empty());
}

#[test]
fn pool_spawned_panics_reach_the_scope_and_workers_survive() {
    let pool = StaticThreadPool::new(1).unwrap();
    let scope = Arc::new(TestScope::default());
    for i in 0..100 {
        spawn(
            pool.scheduler().schedule().then(move |()| {
                if i % 10 == 0 {
                    panic!("p{i}")
                }
            }),
            scope.clone(),
        );
    }
    wait_for(&scope, 100);
    assert_eq!(scope.panics.lock().unwrap().len(), 10);
    assert_eq!(sync_wait(pool.scheduler().schedule().then(|()| 5)).unwrap(), Some(5));
}
