//! Dropping a `StaticThreadPool` from inside one of its own jobs (issue 46): the drop
//! never joins a worker that waits for it, whichever worker runs it.
//!
//! - the stolen dropper: a job's nested `sync_wait(when_all((first, dropper)))`, where
//!   `first` runs inline long enough for another worker to steal `dropper`, on 2, 4 and
//!   64 workers;
//! - every other worker in a nested wait that completes only after the drop returns;
//! - queued work still runs after such a drop, submissions from outside afterwards
//!   complete stopped, and every worker thread ends.
//!
//! Every test runs its work under [`within`], so a hang fails the test instead of
//! hanging the suite.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex, mpsc};
use std::time::{Duration, Instant};

use senders::*;

/// How long a test's work may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(60);

/// Runs `f` on a thread of its own and returns its result, or fails if none comes
/// within [`HANG`].
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(HANG) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no result within {HANG:?} (a deadlock)"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

/// A pool whose workers are named `{tag}-{i}`, so that a test can see when its threads
/// have ended (Linux truncates a thread's name to 15 bytes).
fn named_pool(n: usize, tag: &'static str) -> StaticThreadPool {
    StaticThreadPool::builder().num_threads(n).thread_name(move |i| format!("{tag}-{i}")).build().unwrap()
}

/// The threads of this process whose name starts with `prefix` (Linux: from /proc).
#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.starts_with(prefix))
        .count()
}

/// Fails unless every thread named `tag-…` has ended within [`HANG`]: after a drop from
/// a worker the workers end themselves, the last one included.
fn assert_threads_end(tag: &str) {
    #[cfg(target_os = "linux")]
    {
        let prefix = format!("{tag}-");
        let deadline = Instant::now() + HANG;
        while threads_named(&prefix) != 0 {
            assert!(Instant::now() < deadline, "{tag}: worker threads still alive after the drop");
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The pool, shared with the job that drops it.
type Shared = Arc<Mutex<Option<StaticThreadPool>>>;

/// The program: a job runs `sync_wait(when_all((first, dropper)))`; `first`
/// runs inline for 2 ms, so another worker steals `dropper`, which drops the last
/// handle of the pool while the job's worker waits for it. Returns the thread that ran
/// the dropper and the one that waited.
fn stolen_dropper(n: usize, tag: &'static str) -> (String, String) {
    let pool: Shared = Arc::new(Mutex::new(Some(named_pool(n, tag))));
    let sch = pool.lock().unwrap().as_ref().unwrap().scheduler();
    let inner = sch.clone();
    let job = schedule(&sch).then(move |()| {
        let first = schedule(&inner).then(|()| std::thread::sleep(Duration::from_millis(2)));
        let dropper = schedule(&inner).then(move |()| {
            drop(pool.lock().unwrap().take());
            common::thread_name().unwrap()
        });
        let (_, dropped_on) = sync_wait(when_all((first, dropper))).unwrap().unwrap();
        (dropped_on, common::thread_name().unwrap())
    });
    sync_wait(job).unwrap().unwrap()
}

fn stolen_dropper_never_hangs(n: usize, tag: &'static str) {
    let mut stolen = 0;
    for _ in 0..20 {
        let (dropped_on, waited_on) = within("the stolen dropper", move || stolen_dropper(n, tag));
        assert!(dropped_on.starts_with(tag) && waited_on.starts_with(tag));
        stolen += usize::from(dropped_on != waited_on);
        assert_threads_end(tag);
    }
    // On a loaded machine a round may run the dropper on the waiting worker; most
    // rounds have it stolen, which is the case that hung.
    assert!(stolen > 0, "no round had the dropper stolen: the test tested nothing");
}

#[test]
fn a_stolen_dropper_never_hangs_on_2_workers() {
    stolen_dropper_never_hangs(2, "td2");
}

#[test]
fn a_stolen_dropper_never_hangs_on_4_workers() {
    stolen_dropper_never_hangs(4, "td4");
}

#[test]
fn a_stolen_dropper_never_hangs_on_64_workers() {
    stolen_dropper_never_hangs(64, "td64");
}

/// Every worker but the dropper's sits in a nested `sync_wait` for a sender that
/// completes only after the drop has returned (a thread outside the pool completes it
/// once the dropper says so). A barrier first puts the `n` jobs on `n` distinct workers.
/// The drop returns, the waits complete, and every thread ends.
fn every_other_worker_waits(n: usize, tag: &'static str) {
    let pool: Shared = Arc::new(Mutex::new(Some(named_pool(n, tag))));
    let sch = pool.lock().unwrap().as_ref().unwrap().scheduler();
    let outside = SingleThreadContext::new();
    let (dropped_tx, dropped_rx) = mpsc::channel::<()>();
    let dropped_rx = Arc::new(Mutex::new(dropped_rx));
    let barrier = Arc::new(Barrier::new(n));
    let waiting = Arc::new(AtomicUsize::new(0));
    let jobs = (0..n).map(|i| {
        let (pool, barrier, waiting, outside) = (pool.clone(), barrier.clone(), waiting.clone(), outside.scheduler());
        let (dropped_tx, dropped_rx) = (dropped_tx.clone(), dropped_rx.clone());
        schedule(&sch).then(move |()| {
            barrier.wait();
            if i == 0 {
                // The dropper: once every other worker is about to wait, drop the pool,
                // and only then let their waits complete.
                while waiting.load(Ordering::SeqCst) != n - 1 {
                    std::thread::yield_now();
                }
                std::thread::sleep(Duration::from_millis(5));
                drop(pool.lock().unwrap().take());
                for _ in 1..n {
                    dropped_tx.send(()).unwrap();
                }
                0
            } else {
                waiting.fetch_add(1, Ordering::SeqCst);
                let after_the_drop = schedule(&outside).then(move |()| {
                    dropped_rx.lock().unwrap().recv().unwrap();
                    i
                });
                sync_wait(after_the_drop).unwrap().unwrap()
            }
        })
    });
    let all = jobs.collect::<Vec<_>>();
    let done = within("every other worker in a nested wait", move || sync_wait(when_all_iter(all)));
    let values: Vec<usize> = done.unwrap().unwrap().into_iter().collect();
    assert_eq!(values, (0..n).collect::<Vec<_>>());
    assert_threads_end(tag);
}

#[test]
fn a_drop_while_every_other_worker_waits_for_it_returns() {
    for n in [2, 4, 16] {
        every_other_worker_waits(n, "tw");
    }
}

/// After a drop from a worker, the work already queued (here a tree of forks that the
/// dropping job made) still runs, on the workers; a submission from outside after the
/// drop completes stopped on the submitting thread.
#[test]
fn queued_work_runs_after_a_drop_from_a_worker_and_later_outside_work_completes_stopped() {
    let pool: Shared = Arc::new(Mutex::new(Some(named_pool(2, "tq"))));
    let sch = pool.lock().unwrap().as_ref().unwrap().scheduler();
    let ran = Arc::new(AtomicUsize::new(0));
    let scope = Arc::new(CountingScope::new());
    let (inner, ran2, scope2) = (sch.clone(), ran.clone(), scope.clone());
    let job = schedule(&sch).then(move |()| {
        for _ in 0..100 {
            let ran = ran2.clone();
            assert!(spawn(
                schedule(&inner).then(move |()| {
                    ran.fetch_add(1, Ordering::SeqCst);
                }),
                scope2.token()
            ));
        }
        drop(pool.lock().unwrap().take());
        // The job goes on after the drop, on its worker.
        common::thread_name().unwrap()
    });
    let name = within("a drop from a worker with work queued", move || sync_wait(job).unwrap().unwrap());
    assert!(name.starts_with("tq-"));
    within("the scope's join", move || sync_wait(scope.join()).unwrap());
    assert_eq!(ran.load(Ordering::SeqCst), 100, "work queued before the drop was lost or stopped");
    assert_threads_end("tq");
    let late = sync_wait(schedule(&sch).then(|()| ()));
    assert_eq!(late, Ok(None), "a submission after the pool is gone completes stopped");
}
