//! Behavioural tests of `StaticThreadPool` and its `PoolDomain`.
//!
//! - the builder: thread count, `ZeroThreads`, thread names, core pinning;
//! - `schedule()`: from outside and from inside a worker, many at once, stop requests;
//! - sleep and wake-up: an idle pool burns no CPU (measured per worker thread from
//!   `/proc`), also right after a burst, and wakes promptly; neither does a thread
//!   blocked in `sync_wait` nor an idle `SingleThreadContext` (their run loops spin
//!   only briefly before sleeping);
//! - shutdown: queued work runs, later submissions complete stopped, dropping the pool
//!   from one of its own workers does not deadlock;
//! - panics in pool work reach the caller and leave the workers alive;
//! - the pool's `bulk` (early and late): parallel, every index once, shapes 0 and 1,
//!   errors, panics, stop requests, and the same results as the default `bulk`;
//! - the pool's `when_all`: children forked onto different workers, deep trees, errors,
//!   stop requests, panics;
//! - fairness: while endless bulks keep every worker busy, a stop from a timer on the
//!   pool, a `timeout` on the pool and round trips from outside threads reach them;
//! - a randomized stress mix.
//!
//! Timing-sensitive and CPU-heavy tests hold [`serial`] so that they do not compete for
//! the (possibly two) cores with each other.

mod common;

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::{
    Meeting, Names, QUIET, SAFETY_TIMEOUT, WaitProbe, panic_message, quiet_panics, serial, spin, stop_probe,
    thread_name, wait_for_stop, with_stop,
};
use senders::*;

// ---------------------------------------------------------------------------------------
// helpers

/// A pool of `n` workers named `{prefix}-{i}`.
fn named_pool(n: usize, prefix: &str) -> StaticThreadPool {
    let prefix = prefix.to_owned();
    StaticThreadPool::builder().num_threads(n).thread_name(move |i| format!("{prefix}-{i}")).build().unwrap()
}

/// Whether the current thread is a worker named by [`named_pool`] with `prefix`.
fn on_worker(prefix: &str) -> bool {
    thread::current().name().is_some_and(|n| n.starts_with(&format!("{prefix}-")))
}

/// One counter per index, for "every index exactly once" checks.
fn counters(n: usize) -> Vec<AtomicUsize> {
    (0..n).map(|_| AtomicUsize::new(0)).collect()
}

/// The indices whose counter is not exactly one, for a readable failure message.
fn not_once(hits: &[AtomicUsize]) -> Vec<(usize, usize)> {
    hits.iter().enumerate().map(|(i, h)| (i, h.load(Ordering::Relaxed))).filter(|&(_, h)| h != 1).take(10).collect()
}

/// The number of indices visited at least once.
fn visited(hits: &[AtomicUsize]) -> usize {
    hits.iter().filter(|h| h.load(Ordering::Relaxed) > 0).count()
}

/// CPU time (user + system, in clock ticks) of the threads of this process whose name
/// starts with `prefix`, and how many such threads there are. Per thread rather than per
/// process, so that tests running in parallel do not count.
fn thread_cpu_ticks(prefix: &str) -> (usize, u64) {
    let mut threads = 0;
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = entry.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else { continue };
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else { continue };
        ticks += utime_plus_stime(&stat);
        threads += 1;
    }
    (threads, ticks)
}

/// Fields 14 (utime) and 15 (stime) of a `/proc/.../stat` line, summed.
fn utime_plus_stime(stat: &str) -> u64 {
    // Field 2 is the command in parentheses and may hold spaces: count from after it.
    let rest = &stat[stat.rfind(')').expect("stat format") + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // `fields[0]` is field 3, so fields 14 and 15 are at 11 and 12.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// CPU time of the whole process, in clock ticks.
fn process_cpu_ticks() -> u64 {
    utime_plus_stime(&std::fs::read_to_string("/proc/self/stat").unwrap())
}

/// Runs `f` on a fresh thread and returns its result, or `None` if it did not finish
/// within `timeout` (a deadlock then fails the test instead of hanging it).
fn within<T: Send + 'static>(timeout: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(timeout).ok()
}

// ---------------------------------------------------------------------------------------
// builder

#[test]
fn the_default_thread_count_is_the_number_of_cpus() {
    let pool = StaticThreadPool::builder().build().unwrap();
    assert_eq!(pool.num_threads(), num_cpus::get());
    assert_eq!(StaticThreadPool::new(3).unwrap().num_threads(), 3);
    assert_eq!(StaticThreadPool::builder().num_threads(1).build().unwrap().num_threads(), 1);
}

#[test]
fn default_worker_names_are_senders_worker_i() {
    let pool = StaticThreadPool::new(1).unwrap();
    let name = sync_wait(pool.scheduler().schedule().then(|()| thread_name()));
    assert_eq!(name, Ok(Some(Some("senders-worker-0".to_owned()))));
}

#[test]
fn zero_threads_is_a_build_error() {
    assert!(matches!(StaticThreadPool::builder().num_threads(0).build(), Err(BuildError::ZeroThreads)));
    let err = StaticThreadPool::new(0).unwrap_err();
    assert!(matches!(err, BuildError::ZeroThreads));
    assert_eq!(err.to_string(), "a thread pool needs at least one thread");
    let boxed: Box<dyn std::error::Error> = Box::new(err);
    assert!(boxed.source().is_none());
}

#[test]
fn thread_name_names_every_worker() {
    let asked = Arc::new(Mutex::new(Vec::new()));
    let asked2 = asked.clone();
    let pool = StaticThreadPool::builder()
        .num_threads(2)
        .thread_name(move |i| {
            asked2.lock().unwrap().push(i);
            format!("tn-{i}")
        })
        .build()
        .unwrap();
    assert_eq!(*asked.lock().unwrap(), [0, 1], "the name function is asked once per worker");
    let _serial = serial();
    // Work that both workers take part in: each iteration spins, so the second worker steals.
    let names = sync_wait(pool.scheduler().schedule().then(|()| Names::default()).bulk(20_000, |i, n: &Names| {
        spin(2);
        if i.is_multiple_of(256) {
            n.note();
        }
    }))
    .unwrap()
    .unwrap()
    .get();
    let expected: HashSet<String> = ["tn-0".to_owned(), "tn-1".to_owned()].into();
    assert_eq!(names, expected);
}

#[test]
fn pinned_pool_builds_and_runs_work() {
    let pool = StaticThreadPool::builder()
        .num_threads(2)
        .pin_to_cores(true)
        .thread_name(|i| format!("pin-{i}"))
        .build()
        .unwrap();
    assert_eq!(pool.num_threads(), 2);
    let r = sync_wait(pool.scheduler().schedule().then(|()| on_worker("pin")));
    assert_eq!(r, Ok(Some(true)));
    let hits = sync_wait(starts_on(
        pool.scheduler(),
        just(counters(5000)).bulk(5000, |i, h: &Vec<AtomicUsize>| {
            h[i].fetch_add(1, Ordering::Relaxed);
        }),
    ))
    .unwrap()
    .unwrap();
    assert!(not_once(&hits).is_empty());
}

#[test]
fn builder_and_pool_are_debug() {
    let b = format!("{:?}", StaticThreadPool::builder().num_threads(2));
    assert!(b.contains("num_threads: Some(2)"), "{b}");
    let pool = StaticThreadPool::new(2).unwrap();
    assert!(format!("{pool:?}").contains("num_threads: 2"));
}

// ---------------------------------------------------------------------------------------
// schedule

#[test]
fn schedule_from_outside_completes_on_a_worker() {
    let pool = named_pool(2, "out");
    assert!(!on_worker("out"));
    for _ in 0..100 {
        let r = sync_wait(pool.scheduler().schedule().then(|()| on_worker("out")));
        assert_eq!(r, Ok(Some(true)));
    }
}

#[test]
fn schedule_from_inside_a_worker_completes_on_a_worker() {
    let pool = named_pool(2, "in");
    let sch = pool.scheduler();
    for i in 0..100 {
        let sch2 = sch.clone();
        let r = sync_wait(
            sch.schedule()
                .then(move |()| (i, on_worker("in")))
                .let_value(move |(i, outer)| sch2.schedule().then(move |()| (i * 2, outer, on_worker("in")))),
        );
        assert_eq!(r, Ok(Some((i * 2, true, true))));
    }
}

#[test]
fn schedulers_of_the_same_pool_are_equal() {
    let a = common::pool(1);
    let b = common::pool(1);
    assert_eq!(a.scheduler(), a.scheduler());
    assert_eq!(a.scheduler(), a.scheduler().clone());
    assert_ne!(a.scheduler(), b.scheduler());
}

#[test]
fn many_schedules_from_outside_all_complete() {
    let _serial = serial();
    let pool = common::pool(2);
    let count = AtomicUsize::new(0);
    // 4 submitting threads, each 25,000 `schedule()`s, waited one by one.
    thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let sch = pool.scheduler();
                for _ in 0..25_000 {
                    let r = sync_wait(sch.schedule().then(|()| {
                        count.fetch_add(1, Ordering::Relaxed);
                    }));
                    assert_eq!(r, Ok(Some(())));
                }
            });
        }
    });
    assert_eq!(count.load(Ordering::Relaxed), 100_000);
}

#[test]
fn schedule_under_a_stop_request_completes_stopped() {
    let pool = common::pool(1);
    let source = InplaceStopSource::new();
    source.request_stop();
    let ran = AtomicBool::new(false);
    let r = sync_wait(with_stop(&source, pool.scheduler().schedule().then(|()| ran.store(true, Ordering::SeqCst))));
    assert_eq!(r, Ok(None));
    assert!(!ran.load(Ordering::SeqCst));
    // Under a source that was not asked to stop, the same program runs.
    let source = InplaceStopSource::new();
    let r = sync_wait(with_stop(&source, pool.scheduler().schedule().then(|()| 5)));
    assert_eq!(r, Ok(Some(5)));
}

// ---------------------------------------------------------------------------------------
// sleep and wake-up

/// Asserts that the two workers named `prefix-*` use (almost) no CPU during one second.
fn assert_idle_workers_use_no_cpu(prefix: &str) {
    assert_idle_threads_use_no_cpu(prefix, 2);
}

/// Asserts that the `count` threads whose names start with `prefix` use (almost) no CPU
/// during one second.
fn assert_idle_threads_use_no_cpu(prefix: &str, count: usize) {
    // A new thread sets its OS name itself once it runs: wait until all have.
    let deadline = Instant::now() + SAFETY_TIMEOUT;
    let before = loop {
        let (threads, ticks) = thread_cpu_ticks(prefix);
        if threads == count {
            break ticks;
        }
        assert!(Instant::now() < deadline, "found {threads} threads named {prefix}*, expected {count}");
        thread::sleep(Duration::from_millis(5));
    };
    let process_before = process_cpu_ticks();
    thread::sleep(Duration::from_secs(1));
    let (_, after) = thread_cpu_ticks(prefix);
    let delta = after - before;
    eprintln!(
        "{prefix}: idle threads used {delta} ticks in 1 s (whole process, other tests included: {})",
        process_cpu_ticks() - process_before
    );
    assert!(delta <= 5, "idle threads {prefix}* used {delta} clock ticks in 1 s");
}

#[test]
fn an_idle_pool_uses_no_cpu() {
    let pool = named_pool(2, "idle1");
    assert_eq!(sync_wait(pool.scheduler().schedule().then(|()| 1)), Ok(Some(1)));
    assert_idle_workers_use_no_cpu("idle1");
}

#[test]
fn workers_go_back_to_sleep_after_a_burst() {
    let pool = named_pool(2, "idle2");
    let count = AtomicUsize::new(0);
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..5_000 {
                    sync_wait(pool.scheduler().schedule().then(|()| count.fetch_add(1, Ordering::Relaxed))).unwrap();
                }
            });
        }
    });
    assert_eq!(count.load(Ordering::Relaxed), 10_000);
    // And some parallel work, which keeps both workers stealing from each other.
    let hits = sync_wait(starts_on(
        pool.scheduler(),
        just(counters(50_000)).bulk(50_000, |i, h: &Vec<AtomicUsize>| {
            h[i].fetch_add(1, Ordering::Relaxed);
        }),
    ))
    .unwrap()
    .unwrap();
    assert!(not_once(&hits).is_empty());
    assert_idle_workers_use_no_cpu("idle2");
}

/// A thread blocked in `sync_wait` on long work looks for its completion only briefly
/// (the run loop spins for at most 3 µs before it sleeps), then sleeps: no CPU.
#[test]
fn a_thread_waiting_in_sync_wait_uses_no_cpu() {
    let pool = named_pool(1, "longjob");
    let sch = pool.scheduler();
    let waiter = thread::Builder::new()
        .name("syncwaiter".into())
        .spawn(move || sync_wait(sch.schedule().then(|()| thread::sleep(Duration::from_millis(1500)))))
        .unwrap();
    thread::sleep(Duration::from_millis(50));
    assert_idle_threads_use_no_cpu("syncwaiter", 1);
    assert_eq!(waiter.join().unwrap(), Ok(Some(())));
}

/// A pool with a thousand timers set an hour ahead, waiting: the timer thread sleeps until
/// the earliest deadline and the workers sleep too (nobody polls the clock). The timers
/// are then cancelled by a stop request and the scope joins at once.
#[test]
fn pending_timers_use_no_cpu() {
    let pool = named_pool(2, "idle3");
    let sch = pool.scheduler();
    let scope = CountingScope::new();
    // Spawned work is `'static`: the source it borrows is leaked.
    let cancel: &'static InplaceStopSource = Box::leak(Box::new(InplaceStopSource::new()));
    let fired = Arc::new(AtomicUsize::new(0));
    for i in 0..1000u64 {
        let fired = fired.clone();
        let timer = schedule_after(&sch, Duration::from_secs(3600 + i)).then(move |()| {
            fired.fetch_add(1, Ordering::Relaxed);
        });
        assert!(spawn(stop_when(timer, cancel.token()), scope.token()));
    }
    assert_idle_threads_use_no_cpu("senders-timer", 1);
    assert_idle_workers_use_no_cpu("idle3");
    let start = Instant::now();
    cancel.request_stop();
    sync_wait(scope.join()).unwrap();
    assert!(start.elapsed() < SAFETY_TIMEOUT);
    assert_eq!(fired.load(Ordering::Relaxed), 0);
}

/// A `SingleThreadContext` whose work is done spins for a moment, then sleeps: no CPU.
#[test]
fn an_idle_single_thread_context_uses_no_cpu() {
    let ctx = SingleThreadContext::with_name("idlectx");
    assert_eq!(sync_wait(ctx.scheduler().schedule().then(|()| 7)), Ok(Some(7)));
    assert_idle_threads_use_no_cpu("idlectx", 1);
}

#[test]
fn an_idle_pool_wakes_promptly() {
    let _serial = serial();
    let pool = named_pool(2, "wake");
    let sch = pool.scheduler();
    sync_wait(sch.schedule()).unwrap();
    for round in 0..3 {
        // Long enough for both workers to be asleep, not spinning.
        thread::sleep(Duration::from_millis(200));
        let t = Instant::now();
        let r = sync_wait(sch.schedule().then(|()| on_worker("wake")));
        let latency = t.elapsed();
        assert_eq!(r, Ok(Some(true)));
        assert!(latency < Duration::from_millis(50), "round {round}: woke after {latency:?}");
    }
}

/// Busy-waits for `n` spin-loop hints (a few nanoseconds each).
fn pause(n: u64) {
    for _ in 0..n {
        std::hint::spin_loop();
    }
}

#[test]
fn pushes_at_random_gaps_all_run() {
    let _serial = serial();
    // Off the pool, `when_all` starts its children in order on the calling thread, so the
    // pushes of one `when_all` below are separated by random pauses of up to a few tens
    // of microseconds: they reach workers that are running, spinning, going to sleep or
    // asleep. A job left queued with every worker asleep would stop the loop for good.
    // (Loom checks the protocol's races exhaustively; this checks the real pool.)
    for n in [1, 2] {
        let done = within(SAFETY_TIMEOUT, move || {
            let pool = StaticThreadPool::new(n).unwrap();
            let sch = pool.scheduler();
            let mut rng = Rng(0x1234_5678 + n as u64);
            for _ in 0..4_000 {
                let [a, b, c, d] = [(); 4].map(|()| rng.below(3000));
                let r = sync_wait(when_all((
                    sch.schedule(),
                    just(a).then(pause),
                    sch.schedule(),
                    just(b).then(pause),
                    sch.schedule(),
                    just(c).then(pause),
                    sch.schedule(),
                    just(d).then(pause),
                )));
                assert!(r.unwrap().is_some());
            }
        });
        assert!(done.is_some(), "{n} worker(s): a scheduled job was never run");
    }
}

// ---------------------------------------------------------------------------------------
// shutdown

#[test]
fn dropping_the_pool_runs_the_work_already_queued() {
    const THREADS: usize = 3;
    const PER_THREAD: usize = 7 * 8 * 8;
    let pool = named_pool(1, "drain");
    let sch = pool.scheduler();
    let ran = AtomicUsize::new(0);
    let stopped = AtomicUsize::new(0);
    let queued = AtomicUsize::new(0);
    // Block the only worker until after the pool's drop has begun.
    let (started_tx, started_rx) = mpsc::channel::<()>();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let blocker = thread::spawn({
        let sch = sch.clone();
        move || {
            sync_wait(sch.schedule().then(move |()| {
                started_tx.send(()).unwrap();
                release_rx.recv_timeout(SAFETY_TIMEOUT).is_ok()
            }))
        }
    });
    started_rx.recv_timeout(SAFETY_TIMEOUT).expect("the blocking job did not start");
    thread::scope(|s| {
        let mut submitters = Vec::new();
        for _ in 0..THREADS {
            submitters.push(s.spawn(|| {
                let inc = |()| {
                    ran.fetch_add(1, Ordering::SeqCst);
                };
                let on_stop = || {
                    stopped.fetch_add(1, Ordering::SeqCst);
                };
                let leaf = || sch.schedule().then(&inc).upon_stopped(&on_stop);
                let l8 = || when_all((leaf(), leaf(), leaf(), leaf(), leaf(), leaf(), leaf(), leaf()));
                let l64 = || when_all((l8(), l8(), l8(), l8(), l8(), l8(), l8(), l8()));
                // Off the pool, `when_all` starts its children in order, so the last child
                // runs once all 448 schedules are queued.
                let signal = just(()).then(|()| {
                    queued.fetch_add(1, Ordering::SeqCst);
                });
                sync_wait(when_all((l64(), l64(), l64(), l64(), l64(), l64(), l64(), signal))).map(|v| v.is_some())
            }));
        }
        let deadline = Instant::now() + SAFETY_TIMEOUT;
        while queued.load(Ordering::SeqCst) < THREADS {
            assert!(Instant::now() < deadline, "the submissions were not queued");
            thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(ran.load(Ordering::SeqCst), 0, "the only worker is blocked");
        // Release the worker only once the drop below has started shutting down.
        let releaser = s.spawn(move || {
            thread::sleep(Duration::from_millis(100));
            release_tx.send(()).unwrap();
        });
        drop(pool);
        releaser.join().unwrap();
        for s in submitters {
            assert_eq!(s.join().unwrap(), Ok(true));
        }
    });
    assert_eq!(blocker.join().unwrap(), Ok(Some(true)));
    assert_eq!(stopped.load(Ordering::SeqCst), 0, "queued work must run, not complete stopped");
    assert_eq!(ran.load(Ordering::SeqCst), THREADS * PER_THREAD);
}

#[test]
fn scheduling_after_the_pool_is_dropped_completes_stopped() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    assert_eq!(sync_wait(sch.schedule()), Ok(Some(())));
    drop(pool);
    let ran = AtomicBool::new(false);
    assert_eq!(sync_wait(sch.schedule()), Ok(None));
    assert_eq!(sync_wait(sch.schedule().then(|()| ran.store(true, Ordering::SeqCst))), Ok(None));
    assert_eq!(sync_wait(starts_on(sch.clone(), just(1).then(|x| x + 1))), Ok(None));
    let r = sync_wait(starts_on(sch.clone(), just(()).bulk(10, |_, ()| ran.store(true, Ordering::SeqCst))));
    assert_eq!(r, Ok(None));
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn dropping_the_pool_while_others_submit_completes_every_submission() {
    let pool = common::pool(2);
    let ran = Arc::new(AtomicUsize::new(0));
    let mut submitters = Vec::new();
    for _ in 0..3 {
        let (sch, ran) = (pool.scheduler(), ran.clone());
        // Each submitter counts its `Ok(Some)` results until it sees a stopped one.
        submitters.push(thread::spawn(move || {
            let mut values = 0;
            loop {
                match sync_wait(sch.schedule().then(|()| ran.fetch_add(1, Ordering::SeqCst))) {
                    Ok(Some(_)) => values += 1,
                    Ok(None) => return values,
                }
            }
        }));
    }
    thread::sleep(Duration::from_millis(30));
    let dropped = within(SAFETY_TIMEOUT, move || drop(pool));
    assert!(dropped.is_some(), "dropping the pool hung");
    let mut values = 0;
    for s in submitters {
        values += s.join().unwrap();
    }
    assert!(values > 0);
    assert_eq!(ran.load(Ordering::SeqCst), values, "work that ran completed with its value");
}

#[test]
fn dropping_the_pool_from_one_of_its_workers_does_not_deadlock() {
    for n in [1, 2] {
        let r = within(SAFETY_TIMEOUT, move || {
            let pool = named_pool(n, "selfdrop");
            let sch = pool.scheduler();
            let r = sync_wait(sch.schedule().then(move |()| {
                let on = on_worker("selfdrop");
                drop(pool);
                on
            }));
            (r, sync_wait(sch.schedule()))
        });
        assert_eq!(r, Some((Ok(Some(true)), Ok(None))), "{n} worker(s): hung or wrong result");
    }
}

/// A one-thread pool whose worker, blocked in a job, drops the pool once two more
/// `schedule()`s from outside are queued behind it. Returns the result of the dropping
/// job and of the queued work, or `None` if either hung.
#[allow(clippy::type_complexity)]
fn drop_from_the_only_worker_with_queued_work()
-> Option<(Result<Option<()>, Infallible>, Result<Option<(i32, i32, ())>, Infallible>)> {
    within(SAFETY_TIMEOUT, || {
        let pool = named_pool(1, "selfdrain");
        let sch = pool.scheduler();
        let (started_tx, started_rx) = mpsc::channel::<()>();
        let (queued_tx, queued_rx) = mpsc::channel::<()>();
        let dropper = thread::spawn({
            let sch = sch.clone();
            move || {
                sync_wait(sch.schedule().then(move |()| {
                    started_tx.send(()).unwrap();
                    queued_rx.recv_timeout(SAFETY_TIMEOUT).unwrap();
                    drop(pool);
                }))
            }
        });
        started_rx.recv_timeout(SAFETY_TIMEOUT).unwrap();
        // Off the pool, `when_all` starts its children in order: the signal goes out once
        // both schedules are queued.
        let signal = just(()).then(move |()| queued_tx.send(()).unwrap());
        let r = sync_wait(when_all((sch.schedule().then(|()| 1), sch.schedule().then(|()| 2), signal)));
        (dropper.join().unwrap(), r)
    })
}

#[test]
fn dropping_the_pool_from_its_only_worker_completes_the_queued_work() {
    // However the queued work completes, it completes, and nothing hangs.
    let (dropper, r) = drop_from_the_only_worker_with_queued_work().expect("hung");
    assert_eq!(dropper, Ok(Some(())));
    assert!(matches!(r, Ok(Some((1, 2, ()))) | Ok(None)), "{r:?}");
}

#[test]
fn dropping_the_pool_from_its_only_worker_runs_the_queued_work() {
    // The module docs: dropping the pool lets the workers run every job already queued.
    let (dropper, r) = drop_from_the_only_worker_with_queued_work().expect("hung");
    assert_eq!(dropper, Ok(Some(())));
    assert_eq!(r, Ok(Some((1, 2, ()))), "the work queued before the drop did not run");
}

// ---------------------------------------------------------------------------------------
// panics

#[test]
fn a_panic_on_the_pool_reaches_the_caller_and_the_worker_survives() {
    quiet_panics();
    let pool = named_pool(1, "panic");
    let sch = pool.scheduler();
    let before = sync_wait(sch.schedule().then(|()| thread::current().id())).unwrap().unwrap();
    let msg = panic_message(|| sync_wait(sch.schedule().then(|()| -> i32 { panic!("{QUIET}: boom") })));
    assert_eq!(msg, format!("{QUIET}: boom"));
    let after = sync_wait(sch.schedule().then(|()| (thread::current().id(), thread_name()))).unwrap().unwrap();
    assert_eq!(after, (before, Some("panic-0".to_owned())), "the same worker thread runs later work");
}

#[test]
fn a_thousand_panics_in_a_row_leave_the_pool_working() {
    quiet_panics();
    let pool = named_pool(2, "panics");
    let sch = pool.scheduler();
    for i in 0..1000 {
        let msg = panic_message(|| sync_wait(sch.schedule().then(move |()| -> usize { panic!("{QUIET} {i}") })));
        assert_eq!(msg, format!("{QUIET} {i}"));
    }
    let r = sync_wait(when_all((sch.schedule().then(|()| on_worker("panics")), sch.schedule().then(|()| 7))));
    assert_eq!(r, Ok(Some((true, 7))));
}

// ---------------------------------------------------------------------------------------
// bulk

/// Where a bulk's predecessor completes, and so which domain runs the bulk.
#[derive(Clone, Copy, Debug)]
enum On<'p> {
    /// `pool.scheduler().schedule().then(|()| v).bulk(..)`: the pool's early bulk.
    Early(&'p StaticThreadPool),
    /// `starts_on(pool.scheduler(), just(v).bulk(..))`: the pool's bulk, found late.
    Late(&'p StaticThreadPool),
    /// `just(v).bulk(..)` under `sync_wait`: the default, sequential bulk.
    Default,
}

/// Runs `bulk(shape, f)` on the value `v`, placed as `on` says, under `stop` if given.
fn run_bulk<V, E, F>(on: On<'_>, stop: Option<&InplaceStopSource>, v: V, shape: usize, f: F) -> Result<Option<V>, E>
where
    V: Send + Sync,
    E: Send,
    F: Fn(usize, &V) -> Result<(), E> + Send + Sync,
{
    match (on, stop) {
        (On::Early(pool), None) => {
            sync_wait(pool.scheduler().schedule().then(move |()| v).with_error::<E>().bulk(shape, f))
        }
        (On::Early(pool), Some(src)) => {
            sync_wait(with_stop(src, pool.scheduler().schedule().then(move |()| v).with_error::<E>().bulk(shape, f)))
        }
        (On::Late(pool), None) => sync_wait(starts_on(pool.scheduler(), just(v).with_error::<E>().bulk(shape, f))),
        (On::Late(pool), Some(src)) => {
            sync_wait(with_stop(src, starts_on(pool.scheduler(), just(v).with_error::<E>().bulk(shape, f))))
        }
        (On::Default, None) => sync_wait(just(v).with_error::<E>().bulk(shape, f)),
        (On::Default, Some(src)) => sync_wait(with_stop(src, just(v).with_error::<E>().bulk(shape, f))),
    }
}

/// The three placements, for a pool.
fn placements(pool: &StaticThreadPool) -> [On<'_>; 3] {
    [On::Early(pool), On::Late(pool), On::Default]
}

/// The value of the bulk tests: a hit counter per index and the names of the threads
/// that ran iterations.
struct Hits {
    hits: Vec<AtomicUsize>,
    names: Names,
    tag: u64,
}

impl Hits {
    fn new(n: usize, tag: u64) -> Self {
        Hits { hits: counters(n), names: Names::default(), tag }
    }
    /// Counts iteration `i`, noting the thread every 256 iterations.
    fn hit(&self, i: usize) {
        self.hits[i].fetch_add(1, Ordering::Relaxed);
        if i.is_multiple_of(256) {
            self.names.note();
        }
    }
}

#[test]
fn pool_bulk_runs_on_several_workers_and_visits_every_index_once() {
    let _serial = serial();
    let pool = named_pool(2, "bulk");
    const N: usize = 20_000;
    for on in [On::Early(&pool), On::Late(&pool)] {
        let out = run_bulk::<_, Infallible, _>(on, None, Hits::new(N, 42), N, |i, h: &Hits| {
            spin(2);
            h.hit(i);
            Ok(())
        })
        .unwrap()
        .unwrap();
        assert_eq!(out.tag, 42, "{on:?}: the value is forwarded");
        assert_eq!(not_once(&out.hits), [], "{on:?}: every index exactly once");
        let names = out.names.get();
        let expected: HashSet<String> = ["bulk-0".to_owned(), "bulk-1".to_owned()].into();
        assert_eq!(names, expected, "{on:?}: both workers, and only workers, run iterations");
    }
}

#[test]
fn default_bulk_runs_sequentially_on_the_calling_thread() {
    let pool = named_pool(2, "unused");
    let me = thread_name();
    let out = run_bulk::<_, Infallible, _>(On::Default, None, Hits::new(5000, 1), 5000, |i, h: &Hits| {
        // Sequential: every earlier index is done.
        assert!(i == 0 || h.hits[i - 1].load(Ordering::Relaxed) == 1);
        h.hit(i);
        Ok(())
    })
    .unwrap()
    .unwrap();
    assert_eq!(not_once(&out.hits), []);
    assert_eq!(out.names.get(), HashSet::from([me.unwrap()]));
    drop(pool);
}

#[test]
fn pool_bulk_visits_every_index_once_for_shapes_around_the_split_size() {
    let pool = common::pool(2);
    for n in [1, 2, 1023, 1024, 1025, 2048, 2049, 4097, 65_537] {
        for on in placements(&pool) {
            let out = run_bulk::<_, Infallible, _>(on, None, Hits::new(n, 7), n, |i, h: &Hits| {
                h.hit(i);
                Ok(())
            })
            .unwrap()
            .unwrap();
            assert_eq!(out.tag, 7);
            assert_eq!(not_once(&out.hits), [], "{on:?}, shape {n}");
        }
    }
}

#[test]
fn bulk_of_shape_zero_never_calls_f_and_forwards_the_value() {
    let pool = common::pool(2);
    for on in placements(&pool) {
        let called = AtomicBool::new(false);
        let r = run_bulk::<_, &str, _>(on, None, vec![1, 2, 3], 0, |_, _: &Vec<i32>| {
            called.store(true, Ordering::SeqCst);
            Err("must not be called")
        });
        assert_eq!(r, Ok(Some(vec![1, 2, 3])), "{on:?}");
        assert!(!called.load(Ordering::SeqCst), "{on:?}");
    }
}

#[test]
fn bulk_of_shape_one_calls_f_once_with_index_zero() {
    let pool = named_pool(2, "one");
    for on in placements(&pool) {
        let calls = Mutex::new(Vec::new());
        let r = run_bulk::<_, Infallible, _>(on, None, 10, 1, |i, v: &i32| {
            calls.lock().unwrap().push((i, *v, on_worker("one")));
            Ok(())
        });
        assert_eq!(r, Ok(Some(10)), "{on:?}");
        let on_pool = !matches!(on, On::Default);
        assert_eq!(*calls.lock().unwrap(), [(0, 10, on_pool)], "{on:?}");
    }
}

#[test]
fn bulk_error_completes_with_it_and_stops_further_iterations() {
    // Serial: the bound on iterations after the error assumes the failing worker is not
    // descheduled between the kernel's error and the bulk recording it, which the other
    // tests of this binary, busy on every core, made happen (once in about thirty runs).
    let _serial = serial();
    let pool = common::pool(2);
    const N: usize = 1_000_000;
    for on in placements(&pool) {
        for bad in [10, N / 2 + 10, N - 1] {
            let hits = counters(N);
            let failed = AtomicBool::new(false);
            let after = AtomicUsize::new(0);
            let r = run_bulk(on, None, (), N, |i, ()| {
                if failed.load(Ordering::SeqCst) {
                    after.fetch_add(1, Ordering::Relaxed);
                }
                hits[i].fetch_add(1, Ordering::Relaxed);
                if i == bad {
                    failed.store(true, Ordering::SeqCst);
                    return Err(i);
                }
                Ok(())
            });
            assert_eq!(r, Err(bad), "{on:?}, failing at {bad}");
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) <= 1), "{on:?}: an index ran twice");
            let after = after.load(Ordering::Relaxed);
            if let On::Default = on {
                // Sequential: exactly the iterations up to the failing one.
                assert_eq!(visited(&hits), bad + 1);
                assert_eq!(after, 0);
            } else {
                // Parallel: iterations already under way may finish a block, no more.
                assert!(after < N / 100, "{on:?}: {after} iterations started after the error at {bad}");
                if bad == 10 {
                    // Index 10 is near the start of the first worker's own range.
                    assert!(visited(&hits) < N, "{on:?}: every iteration ran despite the error at {bad}");
                }
            }
        }
    }
}

#[test]
fn bulk_error_stops_iterations_on_the_other_worker() {
    let _serial = serial();
    let pool = StaticThreadPool::new(2).unwrap();
    const N: usize = 400_000;
    for on in [On::Early(&pool), On::Late(&pool)] {
        let hits = counters(N);
        let failed = AtomicBool::new(false);
        let after = AtomicUsize::new(0);
        let failing_thread = Mutex::new(None);
        // Index 0 fails once the other worker has demonstrably started (index N / 2 opens
        // the half that is pushed for stealing); every other iteration spins a little.
        let r = run_bulk(on, None, (), N, |i, ()| {
            if failed.load(Ordering::SeqCst) && Some(thread::current().id()) != *failing_thread.lock().unwrap() {
                after.fetch_add(1, Ordering::Relaxed);
            }
            hits[i].fetch_add(1, Ordering::Relaxed);
            if i == 0 {
                let deadline = Instant::now() + Duration::from_secs(1);
                while hits[N / 2].load(Ordering::Relaxed) == 0 && Instant::now() < deadline {
                    thread::yield_now();
                }
                *failing_thread.lock().unwrap() = Some(thread::current().id());
                failed.store(true, Ordering::SeqCst);
                return Err("fail");
            }
            spin(1);
            Ok(())
        });
        assert_eq!(r, Err("fail"), "{on:?}");
        assert_eq!(hits[N / 2].load(Ordering::Relaxed), 1, "{on:?}: the other worker never started");
        let after = after.load(Ordering::Relaxed);
        assert!(after < 10_000, "{on:?}: the other worker ran {after} iterations after the error");
        assert!(visited(&hits) < N / 2, "{on:?}: {} of {N} iterations ran", visited(&hits));
    }
}

#[test]
fn bulk_panic_reaches_the_caller() {
    quiet_panics();
    let pool = common::pool(2);
    for on in placements(&pool) {
        for bad in [0, 5000, 99_999] {
            let msg = panic_message(|| {
                run_bulk::<_, Infallible, _>(on, None, (), 100_000, |i, ()| {
                    if i == bad {
                        panic!("{QUIET} at {i}");
                    }
                    Ok(())
                })
            });
            assert_eq!(msg, format!("{QUIET} at {bad}"), "{on:?}");
        }
    }
    // The pool still works.
    assert_eq!(sync_wait(pool.scheduler().schedule().then(|()| 1)), Ok(Some(1)));
}

/// An error that counts how many of its kind are alive.
#[derive(Debug)]
struct Counted {
    index: usize,
    live: Arc<AtomicUsize>,
}

impl Counted {
    fn new(index: usize, live: &Arc<AtomicUsize>) -> Self {
        live.fetch_add(1, Ordering::SeqCst);
        Counted { index, live: live.clone() }
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn when_two_iterations_fail_exactly_one_error_is_reported() {
    let _serial = serial();
    let pool = common::pool(2);
    const N: usize = 100_000;
    for on in [On::Early(&pool), On::Late(&pool)] {
        for round in 0..5 {
            let live = Arc::new(AtomicUsize::new(0));
            let meeting = Meeting::default();
            let failures = AtomicUsize::new(0);
            // Index 0 (kept by the first worker) and index N - 1 (in the half pushed for
            // stealing) meet, so that both fail at the same time when they run in parallel.
            let r = run_bulk(on, None, (), N, |i, ()| {
                if i == 0 || i == N - 1 {
                    meeting.meet(Duration::from_millis(300));
                    failures.fetch_add(1, Ordering::SeqCst);
                    return Err(Counted::new(i, &live));
                }
                Ok(())
            });
            let err = r.expect_err("the bulk must fail");
            assert!(err.index == 0 || err.index == N - 1, "{on:?}: {err:?}");
            assert_eq!(live.load(Ordering::SeqCst), 1, "{on:?} round {round}: the other error was not dropped");
            drop(err);
            assert_eq!(live.load(Ordering::SeqCst), 0);
            assert!((1..=2).contains(&failures.load(Ordering::SeqCst)));
        }
    }
    let live = Arc::new(AtomicUsize::new(0));
    let r = run_bulk(
        On::Default,
        None,
        (),
        N,
        |i, ()| {
            if i == 0 || i == N - 1 { Err(Counted::new(i, &live)) } else { Ok(()) }
        },
    );
    assert_eq!(r.expect_err("must fail").index, 0, "the default bulk stops at the first failure");
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn bulk_under_a_stop_request_made_before_it_runs_completes_stopped() {
    let pool = common::pool(2);
    for on in placements(&pool) {
        let source = InplaceStopSource::new();
        source.request_stop();
        let called = AtomicBool::new(false);
        let r = run_bulk::<_, &str, _>(on, Some(&source), 5, 100_000, |_, _: &i32| {
            called.store(true, Ordering::SeqCst);
            Ok(())
        });
        assert_eq!(r, Ok(None), "{on:?}");
        assert!(!called.load(Ordering::SeqCst), "{on:?}: no iteration runs under a stop request");
    }
}

#[test]
fn bulk_under_a_stop_request_made_while_it_runs_completes_stopped() {
    let pool = common::pool(2);
    const N: usize = 1_000_000;
    for on in placements(&pool) {
        let source = InplaceStopSource::new();
        let hits = counters(N);
        let after = AtomicUsize::new(0);
        let r = run_bulk::<_, &str, _>(on, Some(&source), (), N, |i, ()| {
            if source.stop_requested() {
                after.fetch_add(1, Ordering::Relaxed);
            }
            hits[i].fetch_add(1, Ordering::Relaxed);
            if i == 0 {
                source.request_stop();
            }
            Ok(())
        });
        assert_eq!(r, Ok(None), "{on:?}");
        let after = after.load(Ordering::Relaxed);
        assert!(after < N / 100, "{on:?}: {after} iterations started after the stop request");
        assert!(visited(&hits) < N, "{on:?}: every iteration ran despite the stop request");
        assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) <= 1));
    }
}

#[test]
fn pool_and_default_bulk_agree() {
    let pool = common::pool(2);
    // Sum of i * v over 0..n, collected per index, then compared.
    for n in [0, 1, 3, 1500, 30_000] {
        let results: Vec<(u64, Vec<usize>)> = placements(&pool)
            .into_iter()
            .map(|on| {
                let out = run_bulk::<_, Infallible, _>(on, None, (3usize, counters(n)), n, |i, (v, sums)| {
                    sums[i].fetch_add(i * v, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap()
                .unwrap();
                (out.0 as u64, out.1.iter().map(|s| s.load(Ordering::Relaxed)).collect())
            })
            .collect();
        assert_eq!(results[0], results[2], "early pool bulk vs default, shape {n}");
        assert_eq!(results[1], results[2], "late pool bulk vs default, shape {n}");
    }
    // Error, panic and stop outcomes, likewise.
    quiet_panics();
    for on in placements(&pool) {
        assert_eq!(run_bulk(on, None, 1, 3000, |i, _: &i32| if i == 2500 { Err(i) } else { Ok(()) }), Err(2500));
        let msg = panic_message(|| {
            run_bulk::<_, (), _>(on, None, 1, 3000, |i, _: &i32| {
                assert!(i != 1200, "{QUIET}: 1200");
                Ok(())
            })
        });
        assert_eq!(msg, format!("{QUIET}: 1200"));
        let source = InplaceStopSource::new();
        source.request_stop();
        assert_eq!(run_bulk::<_, (), _>(on, Some(&source), 1, 3000, |_, _: &i32| Ok(())), Ok(None));
    }
}

// ---------------------------------------------------------------------------------------
// when_all

#[test]
fn when_all_children_overlap_on_different_workers() {
    let _serial = serial();
    let pool = named_pool(2, "wa");
    // Each child waits for the other: both meet only if they run at the same time.
    let meeting = Meeting::default();
    let child = |()| (meeting.meet(Duration::from_secs(10)), thread_name());
    let r = sync_wait(starts_on(pool.scheduler(), when_all((just(()).then(child), just(()).then(child)))));
    let ((met_a, a), (met_b, b)) = r.unwrap().unwrap();
    assert!(met_a && met_b, "the children did not overlap");
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(a.starts_with("wa-") && b.starts_with("wa-"), "{a}, {b}");
    assert_ne!(a, b, "the children ran on the same worker");
}

#[test]
fn when_all_children_meet_on_the_pool() {
    // The children can only both succeed if they run at the same time.
    let pool = common::pool(2);
    let meeting = Meeting::default();
    let child = |()| meeting.meet(Duration::from_secs(2));
    for _ in 0..20 {
        let meeting2 = Meeting::default();
        let child2 = |()| meeting2.meet(Duration::from_secs(2));
        let r = sync_wait(starts_on(pool.scheduler(), when_all((just(()).then(child2), just(()).then(child2)))));
        assert_eq!(r, Ok(Some((true, true))));
    }
    let r =
        sync_wait(pool.scheduler().schedule().let_value(|()| when_all((just(()).then(child), just(()).then(child)))));
    assert_eq!(r, Ok(Some((true, true))), "when_all after a pool schedule forks too");
}

fn add((a, b): (usize, usize)) -> usize {
    a + b
}

/// A binary `when_all` tree with one level per token, whose leaves are `just(1)`.
macro_rules! tree {
    () => { just(1usize) };
    ($x:tt $($rest:tt)*) => { when_all((tree!($($rest)*), tree!($($rest)*))).then(add) };
}

/// A pool of two workers named `{prefix}-{i}` that holds its nested forks latent.
fn latent_pool(prefix: &str) -> StaticThreadPool {
    let prefix = prefix.to_owned();
    StaticThreadPool::builder()
        .num_threads(2)
        .latent_forks(true)
        .thread_name(move |i| format!("{prefix}-{i}"))
        .build()
        .unwrap()
}

/// A binary tree of `AnySender`s of depth `d` whose leaves spin for `leaf` and record
/// the worker that ran them.
fn recorded_tree(d: u32, leaf: Duration, ran: Arc<Mutex<HashSet<String>>>) -> AnySender<'static, usize> {
    if d == 0 {
        return just(())
            .then(move |()| {
                let t = Instant::now();
                while t.elapsed() < leaf {
                    std::hint::spin_loop();
                }
                ran.lock().unwrap().insert(thread_name().unwrap_or_default());
                1
            })
            .boxed();
    }
    let r2 = ran.clone();
    just(())
        .let_value(move |()| when_all((recorded_tree(d - 1, leaf, ran), recorded_tree(d - 1, leaf, r2))).then(add))
        .boxed()
}

#[test]
fn latent_forks_reach_a_worker_that_goes_hungry_later() {
    let _serial = serial();
    let pool = latent_pool("hungry");
    for _ in 0..3 {
        let ran = Arc::new(Mutex::new(HashSet::new()));
        // The outermost fork hands the other worker a trivial child; the big tree's forks
        // are held latent while this worker's deque holds a job and nobody is hungry,
        // and must be published (for an empty deque, or a hungry worker at a fork or a
        // join), or the other worker runs no leaf.
        let tree = recorded_tree(8, Duration::from_micros(50), ran.clone());
        let r = sync_wait(starts_on(pool.scheduler(), when_all((tree, just(0usize)))));
        assert_eq!(r, Ok(Some((256, 0))));
        let ran = ran.lock().unwrap();
        assert_eq!(ran.len(), 2, "the leaves ran on {ran:?}: the hungry worker got no latent fork");
    }
}

/// A worker that waits in `sync_wait` runs its own latent fork: the fork is popped from
/// its ring first thing in its wait, as the worker loop would. Here the fork is what the
/// wait waits for, and the other worker is busy.
#[test]
fn a_worker_waiting_in_sync_wait_runs_its_own_latent_fork() {
    let _serial = serial();
    let pool = latent_pool("blocks");
    let outside = SingleThreadContext::new();
    for _ in 0..3 {
        let b_busy = Arc::new(AtomicBool::new(false));
        let y_ran = Arc::new(AtomicBool::new(false));
        // The other worker is kept busy (the outermost fork's last child) while the
        // first child forks `x` and `y`: `y` is then held latent. `x` waits in
        // `sync_wait` until `y` has run, on an outside thread, so its worker runs `y`
        // while it waits.
        let (b1, b2) = (b_busy.clone(), b_busy.clone());
        let (y1, y2) = (y_ran.clone(), y_ran.clone());
        let sch = outside.scheduler();
        let x = just(()).then(move |()| {
            let wait = sch.schedule().then(move |()| {
                let t = Instant::now();
                while !y1.load(Ordering::Acquire) && t.elapsed() < Duration::from_secs(10) {
                    thread::yield_now();
                }
                y1.load(Ordering::Acquire)
            });
            (sync_wait(wait).unwrap().unwrap(), thread_name())
        });
        let y = just(()).then(move |()| {
            y2.store(true, Ordering::Release);
            thread_name()
        });
        let first = just(()).then(move |()| while !b1.load(Ordering::Acquire) {}).let_value(move |()| when_all((x, y)));
        let busy = just(()).then(move |()| {
            b2.store(true, Ordering::Release);
            thread::sleep(Duration::from_millis(50));
        });
        // Three children: `busy` is forked first, so a thief takes it (thieves take the
        // oldest); `filler` stays on this worker's deque, so the nested fork of `y` is not
        // published for an empty deque.
        let filler = just(());
        let r = within(SAFETY_TIMEOUT, {
            let sch = pool.scheduler();
            move || sync_wait(starts_on(sch, when_all((first, filler, busy))))
        });
        let (((y_seen, x_on), y_on), (), ()) = r.expect("deadlock").unwrap().unwrap();
        assert!(y_seen, "the waiting worker's latent fork never ran");
        assert_eq!(x_on, y_on, "the waiting worker ran its own latent fork");
    }
}

/// The same for a spawn: `first` spawns `y` onto the pool while its worker's deque holds
/// `filler` and the other worker is busy, so `y` is held latent, and then waits in
/// `sync_wait` until `y` has run: its worker runs `y` while it waits.
#[test]
fn a_worker_waiting_in_sync_wait_runs_its_own_latent_spawn() {
    let _serial = serial();
    let pool = latent_pool("blocks-spawn");
    let outside = SingleThreadContext::new();
    // Static, so that a failure below (which leaves `y` unjoined) fails the test instead
    // of aborting in the scope's drop.
    static SCOPE: std::sync::LazyLock<CountingScope> = std::sync::LazyLock::new(CountingScope::new);
    let scope = &*SCOPE;
    for _ in 0..3 {
        let b_busy = Arc::new(AtomicBool::new(false));
        let y_on = Arc::new(Mutex::new(None::<Option<String>>));
        let (b1, b2) = (b_busy.clone(), b_busy.clone());
        let (y1, y2) = (y_on.clone(), y_on.clone());
        let (sch, pool_sch, tok) = (outside.scheduler(), pool.scheduler(), scope.token());
        let first = just(()).then(move |()| {
            while !b1.load(Ordering::Acquire) {}
            let y = schedule(&pool_sch).then(move |()| *y2.lock().unwrap() = Some(thread_name()));
            let spawned = spawn(y, tok);
            let wait = sch.schedule().then(move |()| {
                let t = Instant::now();
                while y1.lock().unwrap().is_none() && t.elapsed() < Duration::from_secs(10) {
                    thread::yield_now();
                }
                y1.lock().unwrap().clone()
            });
            (spawned, sync_wait(wait).unwrap().unwrap(), thread_name())
        });
        let busy = just(()).then(move |()| {
            b2.store(true, Ordering::Release);
            thread::sleep(Duration::from_millis(50));
        });
        let r = within(SAFETY_TIMEOUT, {
            let sch = pool.scheduler();
            move || sync_wait(starts_on(sch, when_all((first, just(()), busy))))
        });
        let ((spawned, y_on, x_on), (), ()) = r.expect("deadlock").unwrap().unwrap();
        assert!(spawned);
        let y_on = y_on.expect("the waiting worker's latent spawn never ran");
        assert_eq!(y_on, x_on, "the waiting worker ran its own latent spawn");
    }
    sync_wait(scope.join()).unwrap();
}

#[test]
fn a_join_gives_a_hungry_worker_the_oldest_latent_fork() {
    let _serial = serial();
    let pool = latent_pool("joins");
    for _ in 0..3 {
        let b_busy = Arc::new(AtomicBool::new(false));
        let b1 = b_busy.clone();
        // `q` and then `leaf2` are forked while the other worker is busy and this
        // worker's deque holds `filler`: both are held latent. The other worker then
        // takes `filler` and goes hungry while `leaf1` runs. This worker forks no more,
        // so only the join after `leaf1` can publish `q` (the oldest fork held) for it,
        // which it steals while this worker runs `leaf2`.
        let leaf = |ms| {
            just(()).then(move |()| {
                thread::sleep(Duration::from_millis(ms));
                thread_name()
            })
        };
        let p = when_all((leaf(100), leaf(50)));
        let q = leaf(0);
        let first = just(()).then(move |()| while !b1.load(Ordering::Acquire) {}).let_value(move |()| when_all((p, q)));
        let busy = just(()).then(move |()| {
            b_busy.store(true, Ordering::Release);
            thread::sleep(Duration::from_millis(20));
        });
        let r = sync_wait(starts_on(pool.scheduler(), when_all((first, just(()), busy))));
        let (((leaf1, leaf2), q), (), ()) = r.unwrap().unwrap();
        assert_eq!(leaf1, leaf2, "the worker took its own fork back");
        assert_ne!(leaf1, q, "the oldest latent fork was not published at the join");
    }
}

/// A spawn tree of `2^(d+1) - 1` nodes into `tok`'s scope, each node spawned onto the
/// pool, counted, and noted if it ran off the pool's workers (named `spawns-*`).
fn spawn_node(sch: PoolScheduler, tok: CountingToken, d: u32, nodes: &'static [AtomicUsize; 2]) {
    let on_worker = thread_name().is_some_and(|n| n.starts_with("spawns-"));
    nodes[usize::from(!on_worker)].fetch_add(1, Ordering::Relaxed);
    if d > 0 {
        for _ in 0..2 {
            let s = sch.clone();
            assert!(spawn(schedule(&sch).then(move |()| spawn_node(s, tok, d - 1, nodes)), tok));
        }
    }
}

#[test]
fn latent_and_published_spawns_run_every_node_of_a_spawn_tree_on_any_number_of_workers() {
    static NODES: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];
    for latent in [true, false] {
        for n in [1, 2, 3, 8] {
            let pool = StaticThreadPool::builder()
                .num_threads(n)
                .latent_forks(latent)
                .thread_name(|i| format!("spawns-{i}"))
                .build()
                .unwrap();
            NODES.iter().for_each(|c| c.store(0, Ordering::Relaxed));
            let scope = CountingScope::new();
            let (sch, tok) = (pool.scheduler(), scope.token());
            assert!(spawn(schedule(&pool.scheduler()).then(move |()| spawn_node(sch, tok, 10, &NODES)), tok));
            sync_wait(scope.join()).unwrap();
            let counts = NODES.each_ref().map(|c| c.load(Ordering::Relaxed));
            assert_eq!(counts, [2047, 0], "latent {latent}, {n} workers: [on the pool, elsewhere]");
        }
    }
}

#[test]
fn latent_and_published_forks_compute_the_same_trees_on_any_number_of_workers() {
    for latent in [true, false] {
        for n in [1, 2, 3, 8] {
            let pool = StaticThreadPool::builder().num_threads(n).latent_forks(latent).build().unwrap();
            let r = sync_wait(starts_on(pool.scheduler(), tree!(x x x x x x x x x x)));
            assert_eq!(r, Ok(Some(1024)), "latent {latent}, {n} workers");
            let ran = Arc::new(Mutex::new(HashSet::new()));
            let r = sync_wait(starts_on(pool.scheduler(), recorded_tree(10, Duration::ZERO, ran)));
            assert_eq!(r, Ok(Some(1024)), "latent {latent}, {n} workers, erased");
        }
    }
}

#[test]
fn a_when_all_tree_of_256_leaves_sums_correctly_on_the_pool() {
    let pool = common::pool(2);
    for _ in 0..20 {
        let r = sync_wait(starts_on(pool.scheduler(), tree!(x x x x x x x x)));
        assert_eq!(r, Ok(Some(256)));
    }
    // Also with the tree started from inside a worker by a `let_value`.
    let r = sync_wait(pool.scheduler().schedule().let_value(|()| tree!(x x x x x x x x)));
    assert_eq!(r, Ok(Some(256)));
}

#[test]
fn a_when_all_tree_of_depth_10_sums_correctly_on_the_pool() {
    let pool = common::pool(2);
    for _ in 0..20 {
        let r = sync_wait(starts_on(pool.scheduler(), tree!(x x x x x x x x x x)));
        assert_eq!(r, Ok(Some(1024)));
    }
    let r = sync_wait(pool.scheduler().schedule().let_value(|()| tree!(x x x x x x x x x x)));
    assert_eq!(r, Ok(Some(1024)));
}

#[test]
fn when_all_on_the_pool_first_error_wins_and_stops_the_siblings() {
    let pool = common::pool(2);
    for _ in 0..5 {
        let probe = WaitProbe::default();
        let t = Instant::now();
        // The first child blocks its worker until it is asked to stop; the second, forked
        // to the other worker, fails once the first runs.
        let r = sync_wait(starts_on(
            pool.scheduler(),
            when_all((
                wait_for_stop::<&str>(&probe),
                just(()).with_error::<&str>().let_value(|()| {
                    assert!(probe.wait_started(), "the blocked sibling did not start");
                    just_error::<(), &str>("first")
                }),
            )),
        ));
        assert_eq!(r, Err("first"));
        assert!(probe.saw_stop(), "the running sibling was not asked to stop");
        assert!(t.elapsed() < SAFETY_TIMEOUT);
    }
    // When the stopped sibling then fails too, the first error still wins.
    let probe = WaitProbe::default();
    let r = sync_wait(starts_on(
        pool.scheduler(),
        when_all((
            wait_for_stop::<&str>(&probe).let_stopped(|| just_error::<(), &str>("second")),
            just(()).with_error::<&str>().let_value(|()| {
                assert!(probe.wait_started(), "the blocked sibling did not start");
                just_error::<(), &str>("first")
            }),
        )),
    ));
    assert_eq!(r, Err("first"));
    assert!(probe.saw_stop());
}

#[test]
fn when_all_on_the_pool_forwards_a_parent_stop_request_to_running_children() {
    let pool = common::pool(2);
    let source = InplaceStopSource::new();
    let (a, b) = (WaitProbe::default(), WaitProbe::default());
    thread::scope(|s| {
        s.spawn(|| {
            assert!(a.wait_started() && b.wait_started(), "the children did not both start");
            source.request_stop();
        });
        let r = sync_wait(with_stop(
            &source,
            starts_on(pool.scheduler(), when_all((wait_for_stop::<Infallible>(&a), wait_for_stop::<Infallible>(&b)))),
        ));
        assert_eq!(r, Ok(None));
    });
    assert!(a.saw_stop() && b.saw_stop());
    // Children started after the request see it.
    let r = sync_wait(with_stop(&source, when_all((stop_probe::<Infallible>(), stop_probe::<Infallible>()))));
    assert_eq!(r, Ok(Some((true, true))));
}

#[test]
fn a_panic_in_a_when_all_child_on_the_pool_reaches_the_caller() {
    quiet_panics();
    let pool = common::pool(2);
    for first in [true, false] {
        let msg = panic_message(|| {
            sync_wait(starts_on(
                pool.scheduler(),
                when_all((
                    just(1).then(move |x| if first { panic!("{QUIET} in child") } else { x }),
                    just(2).then(move |x| if !first { panic!("{QUIET} in child") } else { x }),
                    just(3),
                )),
            ))
        });
        assert_eq!(msg, format!("{QUIET} in child"));
    }
    assert_eq!(sync_wait(starts_on(pool.scheduler(), when_all((just(1), just(2))))), Ok(Some((1, 2))));
}

// ---------------------------------------------------------------------------------------
// fairness: work from outside the pool runs while the workers' own deques stay busy

/// How long an endless bulk of the fairness tests may run before it gives up: far more
/// than the milliseconds the outside work needs to reach it, far less than forever.
const ENDLESS_LIMIT: Duration = Duration::from_secs(2);

/// The error of an endless bulk that gave up.
#[derive(Debug, PartialEq)]
struct GaveUp;

thread_local! {
    /// The last endless bulk ([`Endless::run`]) that ran an index on this thread.
    static ENDLESS_SEEN: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// What an endless bulk shares with its test: when it began, and on how many threads it
/// has run.
struct Endless {
    start: Instant,
    run: usize,
    threads: AtomicUsize,
}

impl Endless {
    fn new() -> Arc<Self> {
        static RUNS: AtomicUsize = AtomicUsize::new(1);
        Arc::new(Endless {
            start: Instant::now(),
            run: RUNS.fetch_add(1, Ordering::Relaxed),
            threads: AtomicUsize::new(0),
        })
    }

    /// Iteration `i`: every 64 indices, notes the thread and ends the bulk with
    /// [`GaveUp`] once [`ENDLESS_LIMIT`] has passed, so that a test whose stop never
    /// arrives fails instead of running forever.
    fn step(&self, i: usize) -> Result<(), GaveUp> {
        if !i.is_multiple_of(64) {
            return Ok(());
        }
        if ENDLESS_SEEN.replace(self.run) != self.run {
            self.threads.fetch_add(1, Ordering::SeqCst);
        }
        if self.start.elapsed() > ENDLESS_LIMIT { Err(GaveUp) } else { Ok(()) }
    }

    /// Waits until the bulk runs on `n` threads (each worker's deque then holds its
    /// pieces), or until it gave up.
    fn wait_for_threads(&self, n: usize) {
        while self.threads.load(Ordering::SeqCst) < n && self.start.elapsed() < ENDLESS_LIMIT {
            thread::yield_now();
        }
    }
}

/// The bulk forms of the fairness tests.
const FORMS: [&str; 3] = ["bulk", "bulk_chunked", "bulk_unchunked"];

/// `form` over `0..usize::MAX` (`bulk_chunked`'s function loops over its chunk) after a
/// `schedule()` on `sch`: the workers run it until it is stopped or gives up.
fn endless_bulk(sch: &PoolScheduler, form: &str, e: &Arc<Endless>) -> AnySender<'static, (), GaveUp> {
    let on_pool = schedule(sch).with_error::<GaveUp>();
    let e = e.clone();
    match form {
        "bulk" => on_pool.bulk(usize::MAX, move |i, _: &()| e.step(i)).boxed(),
        "bulk_chunked" => on_pool
            .bulk_chunked(usize::MAX, move |lo: usize, hi: usize, _: &()| (lo..hi).try_for_each(|i| e.step(i)))
            .boxed(),
        "bulk_unchunked" => on_pool.bulk_unchunked(usize::MAX, move |i, _: &()| e.step(i)).boxed(),
        other => unreachable!("no bulk form {other}"),
    }
}

/// A stop requested by a timer on the pool itself reaches an endless bulk on that pool:
/// the timer is set once both workers run the bulk, and its hop onto the pool is queued
/// from the timer thread, outside the pool, while both workers' deques hold pieces.
#[test]
fn a_stop_from_a_timer_on_the_pool_ends_an_endless_bulk() {
    let _serial = serial();
    let pool = StaticThreadPool::new(2).unwrap();
    let sch = pool.scheduler();
    for form in FORMS {
        let e = Endless::new();
        let source = InplaceStopSource::new();
        let r = thread::scope(|s| {
            s.spawn(|| {
                e.wait_for_threads(2);
                sync_wait(schedule_after(&sch, Duration::from_millis(1)).then(|()| source.request_stop()))
            });
            sync_wait(stop_when(endless_bulk(&sch, form, &e), source.token()))
        });
        assert_eq!(r, Ok(None), "{form}: stopped by the timer, after {:?}", e.start.elapsed());
        assert!(e.start.elapsed() < ENDLESS_LIMIT);
    }
}

/// `timeout` on the pool around an endless bulk on the same pool fires (its timer's hop
/// is queued, from the timer thread, once both workers run the bulk).
#[test]
fn a_timeout_on_the_pool_ends_an_endless_bulk() {
    let _serial = serial();
    let pool = StaticThreadPool::new(2).unwrap();
    let sch = pool.scheduler();
    for form in FORMS {
        let e = Endless::new();
        let r = sync_wait(timeout(endless_bulk(&sch, form, &e), &sch, Duration::from_millis(50)));
        let took = e.start.elapsed();
        assert_eq!(r, Err(time::TimeoutError::Elapsed), "{form}");
        assert!(took < ENDLESS_LIMIT, "{form}: the timeout fired after {took:?}");
    }
}

/// While an endless bulk runs on both workers, round trips onto the pool from threads
/// outside it complete: from more threads than the pool has lanes, so through the lanes
/// and through the injector.
#[test]
fn round_trips_from_outside_complete_while_an_endless_bulk_runs() {
    let _serial = serial();
    let pool = StaticThreadPool::new(2).unwrap();
    let sch = pool.scheduler();
    for form in FORMS {
        let e = Endless::new();
        let source = InplaceStopSource::new();
        thread::scope(|s| {
            let run = s.spawn(|| sync_wait(stop_when(endless_bulk(&sch, form, &e), source.token())));
            e.wait_for_threads(2);
            let trips: Vec<_> = (0..6).map(|_| s.spawn(|| sync_wait(schedule(&sch)))).collect();
            for trip in trips {
                assert_eq!(trip.join().unwrap(), Ok(Some(())), "{form}");
            }
            let took = e.start.elapsed();
            source.request_stop();
            assert_eq!(run.join().unwrap(), Ok(None), "{form}: the bulk was stopped, not given up");
            assert!(took < ENDLESS_LIMIT, "{form}: the round trips took {took:?}");
        });
    }
}

// ---------------------------------------------------------------------------------------
// stress

/// xorshift64*: a small deterministic generator for the stress mix.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn stress_random_mix_of_bulk_when_all_and_schedule() {
    let _serial = serial();
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let seed = 0x5eed_1234_abcd_0001;
    let mut rng = Rng(seed);
    for iter in 0..200 {
        let ctx = format!("seed {seed:#x}, iteration {iter}");
        match rng.below(5) {
            0 | 1 => {
                let n = rng.below(5000) as usize;
                let on = if rng.below(2) == 0 { On::Early(&pool) } else { On::Late(&pool) };
                let out = run_bulk::<_, Infallible, _>(on, None, Hits::new(n, iter), n, |i, h: &Hits| {
                    h.hit(i);
                    Ok(())
                })
                .unwrap()
                .unwrap();
                assert_eq!(out.tag, iter, "{ctx}");
                assert_eq!(not_once(&out.hits), [], "{ctx}: {on:?}, shape {n}");
            }
            2 => {
                let n = 1 + rng.below(5000) as usize;
                let bad = rng.below(n as u64) as usize;
                let on = if rng.below(2) == 0 { On::Early(&pool) } else { On::Late(&pool) };
                let r = run_bulk(on, None, (), n, |i, ()| if i == bad { Err(i) } else { Ok(()) });
                assert_eq!(r, Err(bad), "{ctx}: {on:?}, shape {n}");
            }
            3 => {
                let r = sync_wait(starts_on(sch.clone(), tree!(x x x x x x)));
                assert_eq!(r, Ok(Some(64)), "{ctx}");
                // Two bulks in parallel under a when_all.
                let (n1, n2) = (rng.below(5000) as usize, rng.below(5000) as usize);
                let f = |i: usize, h: &Hits| h.hit(i);
                let r = sync_wait(starts_on(
                    sch.clone(),
                    when_all((just(Hits::new(n1, 1)).bulk(n1, f), just(Hits::new(n2, 2)).bulk(n2, f))),
                ))
                .unwrap()
                .unwrap();
                assert_eq!((r.0.tag, r.1.tag), (1, 2), "{ctx}");
                assert_eq!(not_once(&r.0.hits), [], "{ctx}: first bulk, shape {n1}");
                assert_eq!(not_once(&r.1.hits), [], "{ctx}: second bulk, shape {n2}");
            }
            _ => {
                let k = 1 + rng.below(200) as usize;
                let count = AtomicUsize::new(0);
                thread::scope(|s| {
                    for part in [k / 2, k - k / 2] {
                        let (sch, count) = (&sch, &count);
                        s.spawn(move || {
                            for _ in 0..part {
                                let r = sync_wait(sch.schedule().then(|()| count.fetch_add(1, Ordering::Relaxed)));
                                assert!(matches!(r, Ok(Some(_))));
                            }
                        });
                    }
                });
                assert_eq!(count.load(Ordering::Relaxed), k, "{ctx}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// many workers on few cores

/// `fib(n)` with both calls in a `when_all` of `AnySender`s.
fn fib_node(n: u64) -> AnySender<'static, u64> {
    if n < 2 {
        return just(n).boxed();
    }
    just(()).let_value(move |()| when_all((fib_node(n - 1), fib_node(n - 2))).then(|(a, b)| a + b)).boxed()
}

/// 64 workers on CI's two cores, with forks published and latent: every worker is
/// preempted often, so steals, sleeps, wake-ups and hunger interleave far more than
/// with one worker per core. Fork-join, a run-time fan-out, spawns into a scope, a bulk
/// and a race each complete with the right values, and the pool shuts down.
#[test]
fn an_oversubscribed_pool_of_64_workers_runs_every_algorithm() {
    let _serial = serial();
    for latent in [false, true] {
        let pool = StaticThreadPool::builder().num_threads(64).latent_forks(latent).build().unwrap();
        let sch = pool.scheduler();
        assert_eq!(sync_wait(starts_on(sch.clone(), fib_node(18))), Ok(Some(2584)), "latent {latent}");
        let fan = when_all_iter((0..200u64).map(|i| schedule(&sch).then(move |()| i).boxed()));
        assert_eq!(sync_wait(fan), Ok(Some((0..200).collect::<Vec<_>>())), "latent {latent}");
        let scope = CountingScope::new();
        let ran = Arc::new(AtomicUsize::new(0));
        for _ in 0..2000 {
            let ran = ran.clone();
            let one = schedule(&sch).let_value(|()| when_all((fib_node(4), fib_node(3)))).then(move |_| {
                ran.fetch_add(1, Ordering::Relaxed);
            });
            assert!(spawn(one, scope.token()));
        }
        sync_wait(scope.join()).unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), 2000, "latent {latent}: every spawn ran once");
        let hits = Arc::new(counters(10_000));
        let h = hits.clone();
        let bulk = schedule(&sch).then(move |()| h).bulk(10_000, |i, h: &Arc<Vec<AtomicUsize>>| {
            h[i].fetch_add(1, Ordering::Relaxed);
        });
        sync_wait(bulk).unwrap();
        assert_eq!(not_once(&hits), [], "latent {latent}: every index once");
        let race =
            when_any((schedule(&sch).then(|()| 1), schedule_after(&sch, Duration::from_secs(3600)).then(|()| 2)));
        assert_eq!(sync_wait(race), Ok(Some(1)), "latent {latent}");
        drop(pool);
    }
}
