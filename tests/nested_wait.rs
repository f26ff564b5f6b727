//! `sync_wait` on a pool worker waits by working (issue 39): nested waits never hang
//! for lack of workers.
//!
//! - the nested fork-join `fib` (each call `sync_wait`s a `when_all` of two
//!   `schedule(sch).then(fib)` children) completes on 1, 2 and 64 workers;
//! - a chain of nested `sync_wait`s 10,000 deep completes on 1, 2 and 64 workers;
//! - a `bulk` whose iterations `sync_wait` an inner `bulk` on the same pool completes;
//! - a panic in a nested child resumes at its own `sync_wait`, and the pool goes on;
//! - a stop request reaches work nested under a waiting worker;
//! - work the waiting `sync_wait`'s own scheduler receives (`continues_on` its run loop),
//!   from the waiting worker or from another thread, runs on the waiting worker;
//! - a completion from outside the pool wakes a waiting worker that went to sleep, and
//!   a waiting worker with nothing to do burns no CPU.
//! - the limit (issue 46): a guard and a thread-local held across a wait are in reach
//!   of an unrelated job the waiting worker runs meanwhile (one that locks the same
//!   mutex deadlocks the thread: ignored, as it can only hang); released before the
//!   wait, the job takes the lock and the waiting job locks again after.
//!
//! Every test runs its work under [`within`], so a hang fails the test instead of
//! hanging the suite.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use common::{QUIET, SAFETY_TIMEOUT, cancel_on_stop, panic_message, quiet_panics, serial, thread_name, with_stop};
use senders::*;

/// How long a test's work may take before the test calls it a hang: generous, for a
/// loaded machine and debug builds.
const HANG: Duration = Duration::from_secs(60);

/// Runs `f` with `pool`'s scheduler on a fresh thread that owns the pool, and returns
/// its result, or panics if it did not finish within [`HANG`] (the thread and the pool
/// are left behind: the test fails instead of hanging in the pool's drop).
fn within<T: Send + 'static>(
    what: &str,
    pool: StaticThreadPool,
    f: impl FnOnce(PoolScheduler) -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(pool.scheduler())));
        drop(pool);
        let _ = tx.send(r);
    });
    match rx.recv_timeout(HANG) {
        Ok(Ok(v)) => v,
        Ok(Err(payload)) => std::panic::resume_unwind(payload),
        Err(_) => panic!("{what}: no completion within {HANG:?} (a hang)"),
    }
}

/// A pool of `n` workers named `nest-{i}`, with `stack` bytes of stack each.
fn pool_with_stack(n: usize, stack: usize) -> StaticThreadPool {
    StaticThreadPool::builder().num_threads(n).stack_size(stack).thread_name(|i| format!("nest-{i}")).build().unwrap()
}

fn pool(n: usize) -> StaticThreadPool {
    pool_with_stack(n, senders::pool::DEFAULT_STACK_SIZE)
}

/// The nested fork-join: every call waits for its two children.
fn fib(n: u64, sch: &PoolScheduler) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = (sch.clone(), sch.clone());
    let both = when_all((schedule(sch).then(move |()| fib(n - 1, &a)), schedule(sch).then(move |()| fib(n - 2, &b))));
    let (x, y) = sync_wait(both).unwrap().unwrap();
    x + y
}

fn nested_fib_on(workers: usize) {
    let pool = pool(workers);
    let v = within("nested fib", pool, move |sch| {
        let inner = sch.clone();
        sync_wait(schedule(&sch).then(move |()| fib(18, &inner))).unwrap().unwrap()
    });
    assert_eq!(v, 2584);
}

#[test]
fn nested_fork_join_completes_on_one_worker() {
    nested_fib_on(1);
}

#[test]
fn nested_fork_join_completes_on_two_workers() {
    nested_fib_on(2);
}

#[test]
fn nested_fork_join_completes_on_64_workers() {
    nested_fib_on(64);
}

/// `depth` nested `sync_wait`s, each waiting for a hop onto the pool that runs the next.
fn chain(depth: u32, sch: &PoolScheduler) -> u32 {
    if depth == 0 {
        return 0;
    }
    let inner = sch.clone();
    sync_wait(schedule(sch).then(move |()| chain(depth - 1, &inner))).unwrap().unwrap() + 1
}

/// Deep enough for 10,000 nested waits in a debug build, where each level takes a few
/// kilobytes of the worker's stack (release builds take far less: see `sync_wait`).
const DEEP_STACK: usize = 64 << 20;

/// The deepest nest the chains below build: 10,000 levels, or `SENDERS_TEST_NEST_DEPTH`.
/// tools/sanitizers.sh lowers it under ThreadSanitizer, whose runtime keeps a shadow call
/// stack of a fixed size per thread, about 130,000 frames, and corrupts its own memory
/// past it (a "SEGV on unknown address", or a hang): a debug build's nested wait is 25
/// frames a level, 250,000 for 10,000 levels.
fn max_depth() -> u32 {
    nest_depth_set().unwrap_or(10_000)
}

/// `SENDERS_TEST_NEST_DEPTH`, where it is set.
fn nest_depth_set() -> Option<u32> {
    std::env::var("SENDERS_TEST_NEST_DEPTH").ok().and_then(|s| s.parse().ok())
}

fn deep_chain_on(workers: usize) {
    let depth = max_depth();
    let pool = pool_with_stack(workers, DEEP_STACK);
    let v = within("nested chain", pool, move |sch| chain(depth, &sch));
    assert_eq!(v, depth);
}

#[test]
fn ten_thousand_nested_waits_complete_on_one_worker() {
    deep_chain_on(1);
}

#[test]
fn ten_thousand_nested_waits_complete_on_two_workers() {
    deep_chain_on(2);
}

#[test]
fn ten_thousand_nested_waits_complete_on_64_workers() {
    deep_chain_on(64);
}

#[test]
fn a_bulk_inside_a_bulk_completes() {
    for workers in [1, 2, 4] {
        let pool = pool(workers);
        let sums = within("bulk in bulk", pool, move |sch| {
            let inner_sch = sch.clone();
            let outer = schedule(&sch).then(|()| (0..16).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>()).bulk(
                16,
                move |i, sums: &Vec<AtomicUsize>| {
                    let hits: Vec<AtomicUsize> = (0..32).map(|_| AtomicUsize::new(0)).collect();
                    let inner = schedule(&inner_sch).bulk(32, |j, &()| {
                        hits[j].fetch_add(1, Ordering::Relaxed);
                    });
                    sync_wait(inner).unwrap().unwrap();
                    let total = hits.iter().filter(|h| h.load(Ordering::Relaxed) == 1).count();
                    sums[i].fetch_add(total, Ordering::Relaxed);
                },
            );
            sync_wait(outer).unwrap().unwrap()
        });
        let sums: Vec<usize> = sums.iter().map(|s| s.load(Ordering::Relaxed)).collect();
        assert_eq!(sums, vec![32; 16], "every inner index once, in every outer iteration");
    }
}

#[test]
fn a_panic_in_a_nested_child_resumes_at_its_own_sync_wait() {
    quiet_panics();
    let pool = pool(2);
    let (msg, after) = within("nested panic", pool, move |sch| {
        let inner = sch.clone();
        let outer = schedule(&sch).then(move |()| {
            let child = schedule(&inner).then(|()| -> u32 { panic!("{QUIET}: nested child") });
            let msg = panic_message(|| sync_wait(when_all((child, schedule(&inner).then(|()| 1u32)))));
            // The outer work goes on after its nested wait unwound.
            (msg, sync_wait(schedule(&inner).then(|()| 7)).unwrap().unwrap())
        });
        sync_wait(outer).unwrap().unwrap()
    });
    assert!(msg.contains("nested child"), "{msg}");
    assert_eq!(after, 7);
}

/// A stop request from another thread reaches a sender nested two waits deep on the
/// only worker, which sleeps meanwhile (nothing else to run): the request completes the
/// nested sender stopped on the requesting thread, and that completion wakes the waiter.
#[test]
fn a_stop_request_reaches_nested_work() {
    let pool = pool(1);
    let source = Arc::new(InplaceStopSource::new());
    let registered = Arc::new(AtomicBool::new(false));
    let (src, reg) = (source.clone(), registered.clone());
    let stopper = thread::spawn(move || {
        let deadline = Instant::now() + SAFETY_TIMEOUT;
        while !reg.load(Ordering::Acquire) {
            assert!(Instant::now() < deadline, "the nested work did not start");
            thread::sleep(Duration::from_millis(1));
        }
        thread::sleep(Duration::from_millis(50));
        src.request_stop();
    });
    let r = within("nested stop", pool, move |sch| {
        let inner = sch.clone();
        sync_wait(schedule(&sch).then(move |()| {
            let deeper = inner.clone();
            sync_wait(schedule(&inner).then(move |()| {
                let cancellable =
                    schedule(&deeper).let_value(|()| cancel_on_stop::<std::convert::Infallible>(&registered));
                sync_wait(with_stop(&source, cancellable)).unwrap()
            }))
            .unwrap()
            .unwrap()
        }))
        .unwrap()
        .unwrap()
    });
    stopper.join().unwrap();
    assert_eq!(r, None, "the nested wait completes stopped");
}

#[test]
fn work_for_the_waiting_run_loop_runs_on_the_waiting_worker() {
    let pool = pool(2);
    let outside = SingleThreadContext::new();
    let out = outside.scheduler();
    let (same, other) = within("run loop work", pool, move |sch| {
        let inner = sch.clone();
        sync_wait(schedule(&sch).then(move |()| {
            let me = thread_name();
            // From the waiting worker itself: the pool's work hops back to the wait's
            // own scheduler.
            let back_here = read_env(GetScheduler).let_value(move |home: RunLoopScheduler| {
                schedule(&inner).then(|()| thread_name()).continues_on(home).then(|n| (n, thread_name()))
            });
            let (_, here) = sync_wait(back_here).unwrap().unwrap();
            // From another thread: the outside context's completion hops back.
            let from_outside = read_env(GetScheduler).let_value(move |home: RunLoopScheduler| {
                out.schedule().then(|()| thread_name()).continues_on(home).then(|n| (n, thread_name()))
            });
            let (there, here2) = sync_wait(from_outside).unwrap().unwrap();
            assert_ne!(there, me, "the outside work ran on the outside thread");
            (here == me, here2 == me)
        }))
        .unwrap()
        .unwrap()
    });
    assert!(same, "work hopping to the waiting run loop from the pool runs on the waiting worker");
    assert!(other, "work hopping to the waiting run loop from outside runs on the waiting worker");
}

/// CPU time (user + system, in clock ticks) of this process's threads whose name starts
/// with `prefix`.
fn thread_cpu_ticks(prefix: &str) -> u64 {
    let mut ticks = 0;
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = entry.unwrap().path();
        let Ok(comm) = std::fs::read_to_string(dir.join("comm")) else { continue };
        if !comm.trim_end().starts_with(prefix) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(dir.join("stat")) else { continue };
        // Fields 14 and 15 (utime, stime), counted from after the command's parenthesis.
        let rest = &stat[stat.rfind(')').expect("stat format") + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        ticks += fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    }
    ticks
}

/// A waiting worker with nothing to run sleeps; a completion from another thread wakes
/// it, and meanwhile it burns no CPU.
#[test]
fn a_completion_from_outside_wakes_a_sleeping_waiter() {
    let _serial = serial();
    let pool = StaticThreadPool::builder().num_threads(1).thread_name(|i| format!("nidle-{i}")).build().unwrap();
    let outside = SingleThreadContext::new();
    let out = outside.scheduler();
    let (name, ticks) = within("outside completion", pool, move |sch| {
        sync_wait(schedule(&sch).then(move |()| {
            let late = out.schedule().then(move |()| {
                let before = thread_cpu_ticks("nidle-");
                thread::sleep(Duration::from_millis(500));
                (thread_name(), thread_cpu_ticks("nidle-") - before)
            });
            sync_wait(late).unwrap().unwrap()
        }))
        .unwrap()
        .unwrap()
    });
    assert!(!name.as_deref().unwrap_or("").starts_with("nidle-"), "it ran outside the pool");
    // Half a second is 50 ticks at the usual 100 Hz: a spinning waiter shows here.
    assert!(ticks <= 5, "the waiting worker burned {ticks} ticks in 500 ms with nothing to run");
}

/// A chain of `when_all`s, each with one child that hops onto the pool and builds the
/// next (no `sync_wait`): the hop of a first child completes inline (it starts on the
/// pool already) only up to a bounded nesting depth, beyond which it goes through the
/// worker's deque, so the chain's length does not grow the worker's stack. Without the
/// bound this overflows the stack (an abort).
#[test]
fn a_long_chain_of_first_children_hopping_onto_the_pool_keeps_the_stack_bounded() {
    fn hop_chain(n: u32, sch: PoolScheduler) -> AnySender<'static, u32> {
        if n == 0 {
            return just(0).boxed();
        }
        let next = sch.clone();
        when_all((schedule(&sch).let_value(move |()| hop_chain(n - 1, next.clone())),)).then(|(v,)| v + 1).boxed()
    }
    // Release builds: 200,000 levels on the default stack (without the bound they
    // overflow it from about 100,000). Debug builds take far more stack per level on
    // every path of this chain (its completions too, before this bound existed), so
    // there the chain is shorter and the stack larger, and the check weaker.
    let (len, stack) =
        if cfg!(debug_assertions) { (40_000, DEEP_STACK) } else { (200_000, senders::pool::DEFAULT_STACK_SIZE) };
    // Under a lowered nest depth (ThreadSanitizer's), four hops a level of it.
    let len = nest_depth_set().map_or(len, |depth| len.min(4 * depth));
    let pool = pool_with_stack(1, stack);
    let v = within("hop chain", pool, move |sch| sync_wait(starts_on(sch.clone(), hop_chain(len, sch))).unwrap());
    assert_eq!(v, Some(len));
}

// ---------------------------------------------------------------------------------------
// the limit: state held across a wait is in reach of the jobs the worker runs meanwhile

/// What [`held_across_a_wait`] saw: the order of the lock's users, whether the unrelated
/// job ran on the waiting worker, and whether it found the lock free and the waiting
/// job's thread-local value.
struct Seen {
    order: Vec<&'static str>,
    same_thread: bool,
    lock_was_free: bool,
    saw_waiters_local: bool,
}

std::thread_local! {
    /// A thread-local the waiting job sets for its wait (or restores before it).
    static TAG: std::cell::Cell<&'static str> = const { std::cell::Cell::new("none") };
}

/// On a one-worker pool, job A takes a lock and sets a thread-local, then waits for a
/// sender that completes only once job B, submitted from outside while A waits, has
/// run: so B runs on A's worker, inside A's wait. With `hold`, A keeps the guard and
/// the thread-local across the wait; without, it releases the guard and restores the
/// thread-local first (the safe pattern) and takes them again after. B only *tries*
/// the lock, so the unsafe form shows the limit instead of deadlocking on it.
fn held_across_a_wait(hold: bool) -> Seen {
    let shared = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (waiting_tx, waiting_rx) = mpsc::channel::<()>();
    let (b_ran_tx, b_ran_rx) = mpsc::channel::<()>();
    let outside = SingleThreadContext::new();
    let (outside_sch, shared_a) = (outside.scheduler(), shared.clone());
    within("a wait beside an unrelated job", pool(1), move |sch| {
        let a = schedule(&sch).then(move |()| {
            let mut guard = shared_a.lock().unwrap();
            guard.push("a before");
            TAG.with(|t| t.set("a's"));
            let b_done = schedule(&outside_sch).then(move |()| b_ran_rx.recv().unwrap());
            waiting_tx.send(()).unwrap();
            let held = if hold {
                sync_wait(b_done).unwrap().unwrap();
                guard
            } else {
                drop(guard);
                TAG.with(|t| t.set("none"));
                sync_wait(b_done).unwrap().unwrap();
                TAG.with(|t| t.set("a's"));
                shared_a.lock().unwrap()
            };
            let mut guard = held;
            guard.push("a after");
            TAG.with(|t| t.set("none"));
            std::thread::current().id()
        });
        let shared_b = shared.clone();
        let b = schedule(&sch).then(move |()| {
            let lock_was_free = match shared_b.try_lock() {
                Ok(mut guard) => {
                    guard.push("b");
                    true
                }
                Err(_) => false,
            };
            let saw_waiters_local = TAG.with(|t| t.get()) == "a's";
            b_ran_tx.send(()).unwrap();
            (std::thread::current().id(), lock_was_free, saw_waiters_local)
        });
        let a_thread = std::thread::spawn(move || sync_wait(a).unwrap().unwrap());
        waiting_rx.recv().unwrap();
        let (b_thread, lock_was_free, saw_waiters_local) = sync_wait(b).unwrap().unwrap();
        let a_thread = a_thread.join().unwrap();
        let order = std::mem::take(&mut *shared.lock().unwrap());
        Seen { order, same_thread: a_thread == b_thread, lock_was_free, saw_waiters_local }
    })
}

/// The safe pattern: the waiting job releases its guard and restores its thread-local
/// before the wait, so the unrelated job that runs inside the wait, on the same thread,
/// takes the lock and sees a clean thread-local; the waiting job locks again after.
#[test]
fn a_guard_released_before_a_wait_lets_the_jobs_run_meanwhile_take_it() {
    let seen = held_across_a_wait(false);
    assert!(seen.same_thread, "the unrelated job ran on the waiting worker");
    assert!(seen.lock_was_free);
    assert!(!seen.saw_waiters_local);
    assert_eq!(seen.order, ["a before", "b", "a after"]);
}

/// The limit: a guard and a thread-local held across a wait on a worker are in reach of
/// an unrelated job that the worker runs inside the wait, on the same thread, although
/// the wait depends only on another thread. Here that job only tries the lock and finds
/// it held (by its own thread); had it called `lock`, the thread would deadlock on
/// itself ([`a_lock_held_across_a_wait_deadlocks_a_job_that_locks_it`]).
#[test]
fn a_guard_held_across_a_wait_is_in_reach_of_the_jobs_run_meanwhile() {
    let seen = held_across_a_wait(true);
    assert!(seen.same_thread, "the unrelated job ran on the waiting worker");
    assert!(!seen.lock_was_free, "the job run inside the wait found the waiting job's lock held");
    assert!(seen.saw_waiters_local, "the job run inside the wait saw the waiting job's thread-local");
    assert_eq!(seen.order, ["a before", "a after"]);
}

/// The program: a job holds a `std::sync::Mutex` across a nested `sync_wait`
/// that depends only on another thread, and the worker meanwhile runs a queued job
/// that locks the same mutex: the thread deadlocks on itself. It can only hang (or, as
/// std allows, panic), so it is ignored; `cargo test -- --ignored` shows the hang as a
/// failure of [`within`].
#[test]
#[ignore = "pins down the limit by hanging: the waiting worker deadlocks on its own lock"]
fn a_lock_held_across_a_wait_deadlocks_a_job_that_locks_it() {
    let shared = Arc::new(std::sync::Mutex::new(0));
    let (waiting_tx, waiting_rx) = mpsc::channel::<()>();
    let outside = SingleThreadContext::new();
    let outside_sch = outside.scheduler();
    within("a job that locks what a waiting job holds", pool(1), move |sch| {
        let held = shared.clone();
        let a = schedule(&sch).then(move |()| {
            let _guard = held.lock().unwrap();
            waiting_tx.send(()).unwrap();
            sync_wait(schedule(&outside_sch).then(|()| std::thread::sleep(Duration::from_millis(100)))).unwrap();
        });
        let a = std::thread::spawn(move || sync_wait(a));
        waiting_rx.recv().unwrap();
        let b = schedule(&sch).then(move |()| *shared.lock().unwrap() += 1);
        sync_wait(b).unwrap();
        a.join().unwrap().unwrap();
    });
}
