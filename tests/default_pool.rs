//! The process-wide default pool (`parallel_scheduler`, `default_pool`).
//!
//! - identity: every call, from any thread, reaches the same pool and equal schedulers;
//! - its workers: one per logical CPU, named `senders-default-{i}`, and work scheduled
//!   on it runs there;
//! - `build_global` once the default pool is started is refused;
//! - its domain: `bulk` and `bulk_each` run in parallel on its workers, `when_all`
//!   forks onto them;
//! - spawning into a counting scope on it, and joining;
//! - a panic in its work reaches the caller and the pool keeps working;
//! - stop requests: already requested, and arriving while work runs on a worker.
//!
//! Every test of this binary shares the one default pool, as the tests of a user's
//! crate would. Configuring it before first use is tested in `default_pool_config.rs`,
//! a binary of its own.

// The default pool is not built under `--cfg loom` (see `src/pool/global.rs`).
#![cfg(not(loom))]

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    Names, QUIET, WaitProbe, panic_message, quiet_panics, serial, spin, thread_name, wait_for_stop, with_stop,
};
use senders::pool::GlobalPoolError;
use senders::pool::PoolDomain;
use senders::*;

/// Whether the current thread is a worker of the default pool.
fn on_default_worker() -> bool {
    thread::current().name().is_some_and(|n| n.starts_with("senders-default-"))
}

/// Asserts that every name is a default-pool worker's, and that there are several when
/// the machine has several CPUs.
fn assert_parallel_on_default_workers(names: &HashSet<String>, what: &str) {
    assert!(names.iter().all(|n| n.starts_with("senders-default-")), "{what}: ran off the default pool: {names:?}");
    if num_cpus::get() > 1 {
        assert!(names.len() > 1, "{what}: ran on one worker only: {names:?}");
    }
}

// ---------------------------------------------------------------------------------------
// identity and workers

#[test]
fn every_call_reaches_the_same_pool() {
    assert!(std::ptr::eq(default_pool(), default_pool()));
    assert_eq!(parallel_scheduler(), parallel_scheduler());
    assert_eq!(parallel_scheduler(), default_pool().scheduler());
    // Also from many threads at once, possibly racing the first start.
    let pools: Vec<usize> = thread::scope(|s| {
        let handles: Vec<_> =
            (0..8).map(|_| s.spawn(|| (std::ptr::from_ref(default_pool()) as usize, parallel_scheduler()))).collect();
        handles
            .into_iter()
            .map(|h| {
                let (pool, sch) = h.join().unwrap();
                assert_eq!(sch, parallel_scheduler());
                pool
            })
            .collect()
    });
    let mine = std::ptr::from_ref(default_pool()) as usize;
    assert!(pools.iter().all(|&p| p == mine), "{pools:?} vs {mine}");
    // A pool built by hand is another pool.
    let own = common::pool(1);
    assert_ne!(own.scheduler(), parallel_scheduler());
}

#[test]
fn it_has_one_worker_per_cpu() {
    assert_eq!(default_pool().num_threads(), num_cpus::get());
}

#[test]
fn work_runs_on_its_named_workers() {
    let sch = parallel_scheduler();
    assert!(!sch.is_current(), "the test thread is not a worker");
    let (name, current) =
        sync_wait(sch.schedule().then(|()| (thread_name(), parallel_scheduler().is_current()))).unwrap().unwrap();
    let name = name.unwrap();
    let index: usize = name.strip_prefix("senders-default-").expect("a default worker's name").parse().unwrap();
    assert!(index < num_cpus::get(), "{name}");
    assert!(current, "is_current on a worker of the default pool");
}

#[test]
fn build_global_once_started_is_refused() {
    let pool = default_pool();
    let r = StaticThreadPool::builder().num_threads(1).build_global();
    assert!(matches!(r, Err(GlobalPoolError::AlreadyStarted)), "{r:?}");
    assert!(std::ptr::eq(pool, default_pool()), "the default pool is left as it is");
    assert_eq!(default_pool().num_threads(), num_cpus::get());
    let msg = GlobalPoolError::AlreadyStarted.to_string();
    assert!(msg.contains("already started"), "{msg}");
}

// ---------------------------------------------------------------------------------------
// the pool's domain

/// The scheduler's domain is the pool's, statically.
fn pool_domain<S: Scheduler<Domain = PoolDomain>>(_: &S) {}

#[test]
fn bulk_on_it_runs_in_parallel_on_its_workers() {
    pool_domain(&parallel_scheduler());
    // Serial with the other test that asserts several workers ran, so that neither keeps
    // a worker busy while the other looks for a second one.
    let _one = serial();
    const N: usize = 20_000;
    let hits: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
    let names = Names::default();
    let (hits_ref, names_ref) = (&hits, &names);
    // Early: the predecessor completes on the default pool.
    let early = parallel_scheduler().schedule().bulk(N, move |i, ()| {
        spin(2);
        hits_ref[i].fetch_add(1, Ordering::Relaxed);
        if i.is_multiple_of(256) {
            names_ref.note();
        }
    });
    sync_wait(early).unwrap().unwrap();
    // Late: the bulk finds the pool's domain in the environment `starts_on` gives it.
    let late = starts_on(
        parallel_scheduler(),
        just(()).bulk(N, move |i, ()| {
            spin(2);
            hits_ref[i].fetch_add(1, Ordering::Relaxed);
            if i.is_multiple_of(256) {
                names_ref.note();
            }
        }),
    );
    sync_wait(late).unwrap().unwrap();
    assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 2), "every index once per bulk");
    assert_parallel_on_default_workers(&names.get(), "bulk");
}

#[test]
fn bulk_each_on_it_mutates_every_element_once() {
    let v = sync_wait(
        parallel_scheduler().schedule().then(|()| vec![1u64; 100_000]).bulk_each(|i, x: &mut u64| *x += i as u64),
    )
    .unwrap()
    .unwrap();
    assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64 + 1));
}

#[test]
fn when_all_on_it_forks_onto_its_workers() {
    // Serial with the bulk test above, for the same reason.
    let _one = serial();
    let sch = parallel_scheduler();
    let names = Names::default();
    // Each leaf waits, up to a deadline, until a second worker has run a leaf too: the
    // children are forked, so another worker takes one as soon as it is free, however
    // loaded the machine is (a fixed spin let one worker run all four whenever the
    // other was descheduled meanwhile). A `when_all` that ran its children one after
    // another on one thread would reach the deadline and fail the assertion.
    let deadline = Instant::now() + Duration::from_secs(20);
    let several = num_cpus::get() > 1;
    let leaf = || {
        sch.schedule().then(|()| {
            names.note();
            while several && names.get().len() < 2 && Instant::now() < deadline {
                thread::yield_now();
            }
        })
    };
    let r = sync_wait(starts_on(sch.clone(), when_all((leaf(), leaf(), leaf(), leaf()))));
    assert_eq!(r, Ok(Some(((), (), (), ()))));
    assert_parallel_on_default_workers(&names.get(), "when_all");
}

// ---------------------------------------------------------------------------------------
// scopes

#[test]
fn spawn_into_a_counting_scope_on_it_and_join() {
    const N: usize = 2000;
    static RAN: AtomicUsize = AtomicUsize::new(0);
    static OFF_POOL: AtomicBool = AtomicBool::new(false);
    let scope = CountingScope::new();
    let token = scope.token();
    let sch = parallel_scheduler();
    for _ in 0..N {
        let started = spawn(
            sch.schedule().then(|()| {
                if !on_default_worker() {
                    OFF_POOL.store(true, Ordering::Relaxed);
                }
                RAN.fetch_add(1, Ordering::Relaxed);
            }),
            token,
        );
        assert!(started);
    }
    // Spawning from a worker too: the pool's spawn hook queues on that worker's deque.
    sync_wait(sch.schedule().then(move |()| {
        for _ in 0..N {
            let work = parallel_scheduler().schedule().then(|()| {
                RAN.fetch_add(1, Ordering::Relaxed);
            });
            assert!(spawn(work, token));
        }
    }))
    .unwrap();
    sync_wait(scope.join()).unwrap();
    assert_eq!(RAN.load(Ordering::Relaxed), 2 * N);
    assert!(!OFF_POOL.load(Ordering::Relaxed), "spawned work ran off the default pool");
}

// ---------------------------------------------------------------------------------------
// panics

#[test]
fn a_panic_in_its_work_reaches_the_caller_and_the_pool_survives() {
    quiet_panics();
    let sch = parallel_scheduler();
    for i in 0..2 * num_cpus::get() {
        let msg = panic_message(|| sync_wait(sch.schedule().then(move |()| -> usize { panic!("{QUIET} {i}") })));
        assert_eq!(msg, format!("{QUIET} {i}"));
    }
    let msg = panic_message(|| {
        sync_wait(sch.schedule().bulk(10_000, |i, ()| {
            if i == 5000 {
                panic!("{QUIET} in bulk");
            }
        }))
    });
    assert_eq!(msg, format!("{QUIET} in bulk"));
    let r = sync_wait(when_all((sch.schedule().then(|()| on_default_worker()), sch.schedule().then(|()| 7))));
    assert_eq!(r, Ok(Some((true, 7))), "later work still runs on the default workers");
}

// ---------------------------------------------------------------------------------------
// stop requests

#[test]
fn schedule_under_a_stop_request_completes_stopped() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let ran = AtomicBool::new(false);
    let r = sync_wait(with_stop(&source, parallel_scheduler().schedule().then(|()| ran.store(true, Ordering::SeqCst))));
    assert_eq!(r, Ok(None));
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn a_stop_request_reaches_work_running_on_it() {
    let probe = WaitProbe::default();
    let source = InplaceStopSource::new();
    let r = thread::scope(|s| {
        s.spawn(|| {
            assert!(probe.wait_started(), "the work did not start");
            source.request_stop();
        });
        sync_wait(with_stop(
            &source,
            starts_on(parallel_scheduler(), wait_for_stop::<std::convert::Infallible>(&probe)),
        ))
    });
    assert_eq!(r, Ok(None));
    assert!(probe.saw_stop(), "the running work saw the stop request");
}
