//! Async scopes (P3149R6): the counting scopes' state machine (one test per arrow),
//! `nest`, `spawn`, `spawn_future`, stop requests, panics, and the recursive tree
//! example on the pool.

mod common;

use common::{Tree, WaitProbe, all_visited_once, make_tree, panic_message, wait_for_stop};
use senders::consumers::SyncWaitReceiver;
use senders::domain::NoDomain;
use senders::schedulers::NoScheduler;
use senders::scope::{Association, FutureReceiver, JoinSender, ScopeAssociation, ScopeState, SpawnFuture};
use senders::*;
use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn leak<T>(t: T) -> &'static T {
    Box::leak(Box::new(t))
}

/// Polls `f` until it holds, for up to 10 s.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let t = Instant::now();
    while !f() {
        assert!(t.elapsed() < Duration::from_secs(10), "timed out waiting for: {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Runs `scope.join()` on another thread; returns a flag set when it completes.
fn join_in_background<'s>(s: &'s std::thread::Scope<'s, '_>, join: JoinSender<'s>) -> Arc<AtomicBool> {
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    s.spawn(move || {
        sync_wait(join).unwrap();
        d.store(true, Ordering::SeqCst);
    });
    done
}

// ---------------------------------------------------------------------------------------
// The state machine: one test per arrow of P3149R6's diagram.

#[test]
fn arrow_unused_to_open_by_try_associate() {
    let scope = SimpleCountingScope::new();
    assert_eq!(scope.state(), ScopeState::Unused);
    let a = scope.token().try_associate().unwrap();
    assert_eq!(scope.state(), ScopeState::Open);
    drop(a);
    sync_wait(scope.join()).unwrap();
}

#[test]
fn arrow_unused_to_unused_and_closed_by_close() {
    let scope = SimpleCountingScope::new();
    scope.close();
    assert_eq!(scope.state(), ScopeState::UnusedAndClosed);
    assert!(scope.token().try_associate().is_none());
    // Dropping in this state is allowed (the arrow to the end).
}

#[test]
fn arrow_unused_to_open_and_joining_then_joined_at_once() {
    let scope = SimpleCountingScope::new();
    // Count zero: the join passes through open-and-joining and completes inline.
    let here = std::thread::current().id();
    let ran_on = sync_wait(scope.join().then(|()| std::thread::current().id())).unwrap();
    assert_eq!(ran_on, Some(here));
    assert_eq!(scope.state(), ScopeState::Joined);
    assert!(scope.token().try_associate().is_none());
}

#[test]
fn arrow_open_to_closed_by_close() {
    let scope = SimpleCountingScope::new();
    let a = scope.token().try_associate().unwrap();
    scope.close();
    assert_eq!(scope.state(), ScopeState::Closed);
    assert!(scope.token().try_associate().is_none());
    drop(a);
    sync_wait(scope.join()).unwrap();
}

#[test]
fn arrow_open_to_open_and_joining_and_then_joined_when_the_count_reaches_zero() {
    let scope = SimpleCountingScope::new();
    let a = scope.token().try_associate().unwrap();
    std::thread::scope(|s| {
        let done = join_in_background(s, scope.join());
        eventually("open-and-joining", || scope.state() == ScopeState::OpenAndJoining);
        // Still open: associations succeed while joining.
        let b = scope.token().try_associate().expect("open-and-joining associates");
        drop(a);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!done.load(Ordering::SeqCst), "join completed with an association alive");
        drop(b);
        eventually("join completes", || done.load(Ordering::SeqCst));
    });
    assert_eq!(scope.state(), ScopeState::Joined);
}

#[test]
fn arrow_closed_to_closed_and_joining_and_then_joined() {
    let scope = SimpleCountingScope::new();
    let a = scope.token().try_associate().unwrap();
    scope.close();
    std::thread::scope(|s| {
        let done = join_in_background(s, scope.join());
        eventually("closed-and-joining", || scope.state() == ScopeState::ClosedAndJoining);
        assert!(scope.token().try_associate().is_none());
        drop(a);
        eventually("join completes", || done.load(Ordering::SeqCst));
    });
    assert_eq!(scope.state(), ScopeState::Joined);
}

#[test]
fn arrow_open_and_joining_to_closed_and_joining_by_close() {
    let scope = SimpleCountingScope::new();
    let a = scope.token().try_associate().unwrap();
    std::thread::scope(|s| {
        let done = join_in_background(s, scope.join());
        eventually("open-and-joining", || scope.state() == ScopeState::OpenAndJoining);
        scope.close();
        assert_eq!(scope.state(), ScopeState::ClosedAndJoining);
        assert!(scope.token().try_associate().is_none());
        drop(a);
        eventually("join completes", || done.load(Ordering::SeqCst));
    });
    assert_eq!(scope.state(), ScopeState::Joined);
}

#[test]
fn arrow_unused_and_closed_to_closed_and_joining_then_joined_at_once() {
    let scope = SimpleCountingScope::new();
    scope.close();
    sync_wait(scope.join()).unwrap();
    assert_eq!(scope.state(), ScopeState::Joined);
}

#[test]
fn a_second_join_after_joined_completes_inline() {
    let scope = CountingScope::new();
    spawn(just(()), scope.token());
    sync_wait(scope.join()).unwrap();
    sync_wait(scope.join()).unwrap();
    assert_eq!(scope.state(), ScopeState::Joined);
}

/// The arrows to the end: dropping in `Open` (or a joining state) aborts. Run in a child
/// process, since the abort ends it.
#[test]
fn dropping_an_unjoined_scope_aborts_the_process() {
    if std::env::var_os("SENDERS_SCOPE_ABORT_CHILD").is_some() {
        let scope = SimpleCountingScope::new();
        std::mem::forget(scope.token().try_associate());
        drop(scope);
        unreachable!("the drop must abort");
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "dropping_an_unjoined_scope_aborts_the_process", "--nocapture", "--test-threads=1"])
        .env("SENDERS_SCOPE_ABORT_CHILD", "1")
        .output()
        .unwrap();
    assert!(!out.status.success());
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(out.status.signal(), Some(6), "SIGABRT expected: {out:?}");
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("dropped in the Open state"), "{stderr}");
}

#[test]
fn a_dropped_scope_leaves_its_tokens_harmless() {
    let token = {
        let scope = CountingScope::new();
        let t = scope.token();
        assert!(spawn(just(()), t));
        sync_wait(scope.join()).unwrap();
        t
    };
    // Its memory may now serve another scope: the old token must not associate with it.
    let other = CountingScope::new();
    assert!(token.try_associate().is_none());
    assert!(!spawn(just(()), token));
    assert_eq!(other.state(), ScopeState::Unused);
}

// ---------------------------------------------------------------------------------------
// spawn

#[test]
fn spawn_after_close_does_not_run_the_work() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    let ran = Arc::new(AtomicBool::new(false));
    scope.close();
    let r = ran.clone();
    assert!(!spawn(pool.scheduler().schedule().then(move |()| r.store(true, Ordering::SeqCst)), scope.token()));
    sync_wait(scope.join()).unwrap();
    // Give a wrongly queued job the chance to run.
    sync_wait(pool.scheduler().schedule()).unwrap();
    assert!(!ran.load(Ordering::SeqCst));
}

/// Spawns `n` counted jobs on `pool` into `scope`; returns how many were taken.
/// `refuse_after` is checked before each spawn: once it is set, a spawn must fail.
fn spawn_counted_n(
    pool: &StaticThreadPool,
    scope: &CountingScope,
    ran: &Arc<AtomicUsize>,
    n: usize,
    refuse_after: Option<&AtomicBool>,
) -> usize {
    let mut taken = 0;
    for i in 0..n {
        let must_fail = refuse_after.is_some_and(|f| f.load(Ordering::SeqCst));
        let ran = ran.clone();
        let ok = spawn(
            pool.scheduler().schedule().then(move |()| {
                ran.fetch_add(1, Ordering::Relaxed);
            }),
            scope.token(),
        );
        assert!(!(ok && must_fail), "spawn {i} taken after close returned");
        taken += usize::from(ok);
    }
    taken
}

/// Starts three outside threads that each spawn 10 counted jobs (fewer than a batch, so
/// each leaves credits), wait at `barrier` (which the caller also waits at), then spawn
/// `more`; their handles give how many spawns each had taken.
fn spawners_holding_credits<'s, 'e: 's>(
    s: &'s std::thread::Scope<'s, 'e>,
    pool: &'e StaticThreadPool,
    scope: &'e CountingScope,
    ran: &'e Arc<AtomicUsize>,
    barrier: &'e std::sync::Barrier,
    more: usize,
    refuse_after: Option<&'e AtomicBool>,
) -> Vec<std::thread::ScopedJoinHandle<'s, usize>> {
    (0..3)
        .map(|_| {
            s.spawn(move || {
                let before = spawn_counted_n(pool, scope, ran, 10, None);
                barrier.wait();
                before + spawn_counted_n(pool, scope, ran, more, refuse_after)
            })
        })
        .collect()
}

/// Threads outside the pool take associations in batches (one root update reserves
/// several, the rest are credits in a word of the scope's own): three of them hold
/// credits when a fourth closes the scope, and go on spawning. Every spawn taken runs
/// exactly once, every spawn made after `close` returned is refused, and the join
/// completes (`close` gave the credits back to the count).
#[test]
fn outside_spawns_holding_credits_racing_close_lose_nothing() {
    let pool = common::pool(2);
    for round in 0..20 {
        let scope = CountingScope::new();
        let ran = Arc::new(AtomicUsize::new(0));
        let closed = AtomicBool::new(false);
        let credits_held = std::sync::Barrier::new(4);
        let taken: usize = std::thread::scope(|s| {
            let spawners = spawners_holding_credits(s, &pool, &scope, &ran, &credits_held, 500, Some(&closed));
            credits_held.wait();
            scope.close();
            closed.store(true, Ordering::SeqCst);
            spawners.into_iter().map(|h| h.join().unwrap()).sum()
        });
        sync_wait(scope.join()).unwrap();
        assert_eq!(ran.load(Ordering::Relaxed), taken, "round {round}: every taken spawn ran once");
        assert_eq!(scope.state(), ScopeState::Joined);
    }
}

/// The same with a join instead of `close`: the join starts while three outside threads
/// hold credits and go on spawning (while it waits, associations are counted one root
/// update each, no batch). The join takes the credits back and completes once every
/// spawn taken has run; no spawn is refused, the scope being open and counted.
#[test]
fn outside_spawns_holding_credits_racing_the_join_are_all_waited_for() {
    let pool = common::pool(2);
    for round in 0..20 {
        let scope = CountingScope::new();
        let ran = Arc::new(AtomicUsize::new(0));
        // Held until the spawners are done, so the count cannot reach zero before.
        let anchor = scope.token().try_associate().expect("open");
        let credits_held = std::sync::Barrier::new(4);
        let taken: usize = std::thread::scope(|s| {
            let spawners = spawners_holding_credits(s, &pool, &scope, &ran, &credits_held, 300, None);
            credits_held.wait();
            let joined = join_in_background(s, scope.join());
            let taken = spawners.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(taken, 3 * 310, "round {round}: a spawn was refused");
            assert!(!joined.load(Ordering::SeqCst), "round {round}: joined while an association was held");
            drop(anchor);
            eventually("the join", || joined.load(Ordering::SeqCst));
            taken
        });
        assert_eq!(ran.load(Ordering::Relaxed), taken, "round {round}: every taken spawn ran before the join");
        assert_eq!(scope.state(), ScopeState::Joined);
    }
}

#[test]
fn spawn_from_a_worker_runs_on_the_pool_and_the_join_waits_for_all() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("sc{i}")).build().unwrap();
    let sch = pool.scheduler();
    let scope = SimpleCountingScope::new();
    let tok = scope.token();
    let on_pool = Arc::new(AtomicUsize::new(0));
    const N: usize = 10_000;
    let op = on_pool.clone();
    spawn(
        sch.schedule().then(move |()| {
            for _ in 0..N {
                let op = op.clone();
                spawn(
                    just(()).then(move |()| {
                        if std::thread::current().name().is_some_and(|n| n.starts_with("sc")) {
                            op.fetch_add(1, Ordering::SeqCst);
                        }
                    }),
                    tok,
                );
            }
        }),
        tok,
    );
    sync_wait(scope.join()).unwrap();
    assert_eq!(on_pool.load(Ordering::SeqCst), N, "every spawned job ran on a worker before the join");
}

/// A spawned `schedule().then(..)` from a worker: the pool queues the spawned operation
/// once and its `schedule()` then completes inline on the worker that took it. Every
/// node still runs on a worker, and a stop requested on the scope before the spawn makes
/// the taken operation complete stopped instead of running its continuation.
#[test]
fn a_spawned_schedule_from_a_worker_runs_on_the_pool_and_sees_the_scopes_stop() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("sf{i}")).build().unwrap();
    let sch = leak(pool.scheduler());
    let scope = CountingScope::new();
    let tok = scope.token();
    let ran = leak(AtomicUsize::new(0));
    let off_pool = leak(AtomicUsize::new(0));
    fn node(
        sch: &'static PoolScheduler,
        tok: CountingToken,
        depth: u32,
        ran: &'static AtomicUsize,
        off: &'static AtomicUsize,
    ) {
        ran.fetch_add(1, Ordering::SeqCst);
        if !std::thread::current().name().is_some_and(|n| n.starts_with("sf")) {
            off.fetch_add(1, Ordering::SeqCst);
        }
        if depth > 1 {
            for _ in 0..2 {
                spawn(sch.schedule().then(move |()| node(sch, tok, depth - 1, ran, off)), tok);
            }
        }
    }
    spawn(sch.schedule().then(move |()| node(sch, tok, 12, ran, off_pool)), tok);
    sync_wait(scope.join()).unwrap();
    assert_eq!(ran.load(Ordering::SeqCst), (1 << 12) - 1, "every node ran exactly once");
    assert_eq!(off_pool.load(Ordering::SeqCst), 0, "every node ran on a worker");

    // A job on a worker requests stop on its scope, then spawns: the spawn is accepted
    // (the scope is open), but the spawned schedule() completes stopped when taken, so
    // its continuation never runs.
    let scope = leak(CountingScope::new());
    let tok = scope.token();
    let inner_ran = leak(AtomicBool::new(false));
    let accepted = leak(AtomicBool::new(false));
    spawn(
        sch.schedule().then(move |()| {
            scope.request_stop();
            let inner = sch.schedule().then(move |()| inner_ran.store(true, Ordering::SeqCst));
            accepted.store(spawn(inner, tok), Ordering::SeqCst);
        }),
        tok,
    );
    sync_wait(scope.join()).unwrap();
    assert!(accepted.load(Ordering::SeqCst), "the scope was open: the spawn is accepted");
    assert!(!inner_ran.load(Ordering::SeqCst), "a stopped scope's work must not run");
}

#[test]
fn the_default_domain_runs_spawned_work_inline() {
    let scope = SimpleCountingScope::new();
    let here = std::thread::current().id();
    let same = Arc::new(AtomicBool::new(false));
    let s = same.clone();
    spawn(just(()).then(move |()| s.store(std::thread::current().id() == here, Ordering::SeqCst)), scope.token());
    assert!(same.load(Ordering::SeqCst));
    sync_wait(scope.join()).unwrap();
}

#[test]
fn a_spawned_panic_is_resumed_by_the_join_and_workers_survive() {
    let pool = common::pool(1);
    let scope = CountingScope::new();
    let ran = Arc::new(AtomicUsize::new(0));
    for i in 0..100 {
        let ran = ran.clone();
        spawn(
            pool.scheduler().schedule().then(move |()| {
                ran.fetch_add(1, Ordering::SeqCst);
                if i == 50 {
                    panic!("spawned boom")
                }
            }),
            scope.token(),
        );
    }
    let msg = panic_message(|| sync_wait(scope.join()));
    assert_eq!(msg, "spawned boom");
    assert_eq!(ran.load(Ordering::SeqCst), 100, "the other jobs ran");
    assert_eq!(sync_wait(pool.scheduler().schedule().then(|()| 5)).unwrap(), Some(5));
}

#[test]
fn the_join_completes_on_the_receivers_scheduler() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    let probe = leak(WaitProbe::default());
    spawn(starts_on(pool.scheduler(), wait_for_stop::<Infallible>(probe)), scope.token());
    assert!(probe.wait_started());
    let here = std::thread::current().id();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            scope.request_stop();
        });
        // The last dissociation happens on a worker; the join hops to sync_wait's loop.
        let ran_on = sync_wait(scope.join().then(|()| std::thread::current().id())).unwrap();
        assert_eq!(ran_on, Some(here));
    });
    assert!(probe.saw_stop());
}

// ---------------------------------------------------------------------------------------
// request_stop

#[test]
fn request_stop_reaches_running_work() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    let probes: Vec<&'static WaitProbe> = (0..2).map(|_| leak(WaitProbe::default())).collect();
    for p in &probes {
        spawn(starts_on(pool.scheduler(), wait_for_stop::<Infallible>(p)), scope.token());
    }
    for p in &probes {
        assert!(p.wait_started());
    }
    scope.request_stop();
    sync_wait(scope.join()).unwrap();
    assert!(probes.iter().all(|p| p.saw_stop()));
}

/// `spawn_future` forwards the scope's stop into its work through the source of the
/// spawning worker's shard, and `nest` merges that shard's token: a stop request on the
/// scope must reach work associated on every worker (and from outside the pool), each
/// waiting in a stop callback that only the forwarded request completes.
#[test]
fn request_stop_reaches_spawned_futures_and_nested_work_associated_on_every_worker() {
    const WORKERS: usize = 4;
    let pool = StaticThreadPool::builder().num_threads(WORKERS).build().unwrap();
    let scope = CountingScope::new();
    let tk = scope.token();
    // A static, not `leak()`ed memory: memcheck (tools/valgrind.sh) runs this test.
    static REGISTERED: [AtomicBool; 4 * WORKERS + 2] = [const { AtomicBool::new(false) }; 4 * WORKERS + 2];
    let registered: Vec<&'static AtomicBool> = REGISTERED.iter().collect();
    let futures = Mutex::new(Vec::new());
    let nested = Mutex::new(Vec::new());
    let workers = Mutex::new(std::collections::HashSet::new());
    // Each index associates from whichever worker runs it (the bulk's indices are spread
    // over the workers, each waiting at a barrier until all have started).
    let started = std::sync::Barrier::new(WORKERS);
    sync_wait(schedule(&pool.scheduler()).bulk_unchunked(WORKERS, |i, ()| {
        started.wait();
        workers.lock().unwrap().insert(std::thread::current().id());
        for k in 0..4 {
            let flag = registered[4 * i + k];
            if k % 2 == 0 {
                futures.lock().unwrap().push(spawn_future(common::cancel_on_stop::<Infallible>(flag), tk));
            } else {
                nested.lock().unwrap().push(nest(common::cancel_on_stop::<Infallible>(flag), tk));
            }
        }
    }))
    .unwrap();
    assert_eq!(workers.lock().unwrap().len(), WORKERS, "every worker associated");
    // And from outside the pool (counted on the root).
    futures.lock().unwrap().push(spawn_future(common::cancel_on_stop::<Infallible>(registered[4 * WORKERS]), tk));
    nested.lock().unwrap().push(nest(common::cancel_on_stop::<Infallible>(registered[4 * WORKERS + 1]), tk));
    let futures = futures.into_inner().unwrap();
    // Each nested sender starts (and registers) on a thread of its own, so that none is
    // stopped by a sibling's completion: only the scope's request can reach it.
    let nested = nested.into_inner().unwrap();
    assert_eq!((futures.len(), nested.len()), (2 * WORKERS + 1, 2 * WORKERS + 1));
    let (done, results) = std::sync::mpsc::channel();
    for n in nested {
        let done = done.clone();
        std::thread::spawn(move || done.send(sync_wait(n)).unwrap());
    }
    let deadline = Instant::now() + common::SAFETY_TIMEOUT;
    while !registered.iter().all(|r| r.load(Ordering::SeqCst)) {
        assert!(Instant::now() < deadline, "the work did not start");
        std::thread::yield_now();
    }
    scope.request_stop();
    for _ in 0..2 * WORKERS + 1 {
        let r = results.recv_timeout(common::SAFETY_TIMEOUT).expect("a nested sender missed the scope's stop");
        assert_eq!(r, Ok(None));
    }
    // One future at a time, each with a deadline: a work the request missed never ends.
    for f in futures {
        let r = sync_wait(timeout(f, &pool.scheduler(), common::SAFETY_TIMEOUT));
        assert!(matches!(r, Ok(None)), "a spawned future missed the scope's stop: {r:?}");
    }
    sync_wait(scope.join()).unwrap();
}

#[test]
fn request_stop_reaches_nested_work_along_with_the_receivers_token() {
    let scope = CountingScope::new();
    let source = InplaceStopSource::new();
    // Neither token stopped: bulk runs.
    let n = sync_wait(nest(just(()).bulk(4, |_, _| ()), scope.token())).unwrap();
    assert_eq!(n, Some(()));
    // The receiver's token still reaches nested work.
    source.request_stop();
    let r = sync_wait(common::with_stop(&source, nest(just(()).bulk(10_000, |_, _| ()), scope.token()))).unwrap();
    assert_eq!(r, None);
    // And the scope's.
    scope.request_stop();
    let r = sync_wait(nest(just(()).bulk(10_000, |_, _| ()), scope.token())).unwrap();
    assert_eq!(r, None);
    sync_wait(scope.join()).unwrap();
}

#[test]
fn a_simple_scope_gives_no_stop_token() {
    let scope = SimpleCountingScope::new();
    let a = scope.token().try_associate().unwrap();
    assert!(!a.env().stop_token().stop_possible());
    drop(a);
    let c = CountingScope::new();
    let a = c.token().try_associate().unwrap();
    assert!(a.env().stop_token().stop_possible());
    drop(a);
    sync_wait(scope.join()).unwrap();
    sync_wait(c.join()).unwrap();
}

// ---------------------------------------------------------------------------------------
// nest

/// A receiver that records how its operation completed.
struct Record(Arc<Mutex<Vec<String>>>);

impl Receiver<i32, Infallible> for Record {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, v: i32) {
        self.0.lock().unwrap().push(format!("value {v}"));
    }
    fn set_error(self, e: Infallible) {
        match e {}
    }
    fn set_stopped(self) {
        self.0.lock().unwrap().push("stopped".into());
    }
    fn set_panic(self, _: Panic) {
        self.0.lock().unwrap().push("panic".into());
    }
}

/// A receiver that ignores its completion.
struct Ignore;

impl<V, E> Receiver<V, E> for Ignore {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, _: V) {}
    fn set_error(self, _: E) {}
    fn set_stopped(self) {}
    fn set_panic(self, _: Panic) {}
}

/// A sender of 7 whose operation records its destruction.
struct Seven(Arc<Mutex<Vec<String>>>);
struct SevenOp<R>(Option<R>, Arc<Mutex<Vec<String>>>, PhantomPinned);

impl Sender for Seven {
    type Value = i32;
    type Error = Infallible;
    const SENDS_STOPPED: bool = false;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}
impl<R: Receiver<i32, Infallible>> SenderTo<R> for Seven {
    type Operation = SevenOp<R>;
    fn connect(self, r: R) -> SevenOp<R> {
        SevenOp(Some(r), self.0, PhantomPinned)
    }
}
impl<R: Receiver<i32, Infallible>> OperationState for SevenOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: the receiver is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        this.0.take().unwrap().set_value(7);
    }
}
impl<R> Drop for SevenOp<R> {
    fn drop(&mut self) {
        self.1.lock().unwrap().push("child destroyed".into());
    }
}

#[test]
fn nest_holds_its_count_until_its_operation_is_destroyed_after_the_child() {
    let scope = SimpleCountingScope::new();
    let log = Arc::new(Mutex::new(Vec::new()));
    let sndr = nest(Seven(log.clone()), scope.token());
    assert!(sndr.is_associated());
    assert_eq!(scope.state(), ScopeState::Open);
    let mut op = Box::pin(sndr.connect(Record(log.clone())));
    // SAFETY: pinned in a box that is dropped only after completion.
    unsafe { op.as_mut().start() };
    assert_eq!(*log.lock().unwrap(), ["value 7"]);
    std::thread::scope(|s| {
        let done = join_in_background(s, scope.join());
        eventually("joining", || scope.state() == ScopeState::OpenAndJoining);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!done.load(Ordering::SeqCst), "completed but not destroyed: still associated");
        let l = log.clone();
        drop(op);
        l.lock().unwrap().push("op dropped".into());
        eventually("join completes", || done.load(Ordering::SeqCst));
    });
    assert_eq!(*log.lock().unwrap(), ["value 7", "child destroyed", "op dropped"]);
}

#[test]
fn an_unassociated_nest_completes_stopped_without_running_or_connecting_the_sender() {
    let scope = SimpleCountingScope::new();
    scope.close();
    let log = Arc::new(Mutex::new(Vec::new()));
    let sndr = nest(Seven(log.clone()), scope.token());
    assert!(!sndr.is_associated());
    assert_eq!(sync_wait(sndr).unwrap(), None);
    assert!(log.lock().unwrap().is_empty(), "the sender was never connected");
    sync_wait(scope.join()).unwrap();
}

#[test]
fn copying_a_nest_sender_reassociates_or_yields_an_unassociated_one() {
    let scope = SimpleCountingScope::new();
    let a = nest(just(5), scope.token());
    let b = a.clone();
    assert!(b.is_associated());
    scope.close();
    let c = a.clone();
    assert!(!c.is_associated(), "a copy after close is unassociated");
    assert_eq!(sync_wait(a).unwrap(), Some(5));
    assert_eq!(sync_wait(b).unwrap(), Some(5));
    assert_eq!(sync_wait(c).unwrap(), None);
    sync_wait(scope.join()).unwrap();
}

#[test]
fn a_dropped_nest_sender_dissociates() {
    let scope = SimpleCountingScope::new();
    let a = nest(just(1), scope.token());
    std::thread::scope(|s| {
        let done = join_in_background(s, scope.join());
        eventually("joining", || scope.state() == ScopeState::OpenAndJoining);
        drop(a);
        eventually("join completes", || done.load(Ordering::SeqCst));
    });
}

// ---------------------------------------------------------------------------------------
// spawn_future

#[test]
fn spawn_future_delivers_values_errors_stops_and_panics() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let scope = CountingScope::new();
    let v = spawn_future(sch.schedule().then(|()| 42), scope.token());
    let e =
        spawn_future(sch.schedule().with_error::<&str>().let_value(|()| just_error::<i32, &str>("bad")), scope.token());
    let st = spawn_future(sch.schedule().let_value(|()| just_stopped::<i32, Infallible>()), scope.token());
    let p = spawn_future(sch.schedule().then(|()| -> i32 { panic!("future boom") }), scope.token());
    assert_eq!(sync_wait(v).unwrap(), Some(42));
    assert_eq!(sync_wait(e), Err("bad"));
    assert_eq!(sync_wait(st).unwrap(), None);
    assert_eq!(panic_message(|| sync_wait(p)), "future boom");
    sync_wait(scope.join()).unwrap();
}

#[test]
fn spawn_future_result_ready_before_or_after_the_future_starts() {
    let scope = SimpleCountingScope::new();
    // Inline work: done before the future starts.
    let ready = spawn_future(just(1), scope.token());
    assert_eq!(sync_wait(ready).unwrap(), Some(1));
    // Pool work, consumed at once: usually still running when the future starts.
    let pool = common::pool(2);
    for i in 0..2000 {
        let f = spawn_future(pool.scheduler().schedule().then(move |()| i), scope.token());
        assert_eq!(sync_wait(f).unwrap(), Some(i));
    }
    sync_wait(scope.join()).unwrap();
}

#[test]
fn dropping_the_future_requests_stop_on_the_work() {
    let pool = common::pool(2);
    let scope = SimpleCountingScope::new();
    let probe = leak(WaitProbe::default());
    let fut = spawn_future(starts_on(pool.scheduler(), wait_for_stop::<Infallible>(probe)), scope.token());
    assert!(probe.wait_started());
    drop(fut);
    sync_wait(scope.join()).unwrap();
    assert!(probe.saw_stop());
}

#[test]
fn dropping_the_futures_operation_before_start_requests_stop() {
    let pool = common::pool(2);
    let scope = SimpleCountingScope::new();
    let probe = leak(WaitProbe::default());
    let fut = spawn_future(starts_on(pool.scheduler(), wait_for_stop::<Infallible>(probe)), scope.token());
    assert!(probe.wait_started());
    let op = fut.connect(Ignore);
    drop(op);
    sync_wait(scope.join()).unwrap();
    assert!(probe.saw_stop());
}

#[test]
fn a_stop_request_on_the_future_is_forwarded_and_completes_it_stopped() {
    let pool = common::pool(2);
    let scope = SimpleCountingScope::new();
    let probe = leak(WaitProbe::default());
    let fut = spawn_future(starts_on(pool.scheduler(), wait_for_stop::<Infallible>(probe)), scope.token());
    assert!(probe.wait_started());
    let source = InplaceStopSource::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(20));
            source.request_stop();
        });
        assert_eq!(sync_wait(common::with_stop(&source, fut)).unwrap(), None);
    });
    sync_wait(scope.join()).unwrap();
    assert!(probe.saw_stop());
}

#[test]
fn spawn_future_on_a_closed_scope_completes_stopped() {
    let scope = CountingScope::new();
    scope.close();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let fut = spawn_future(just(()).then(move |()| r.store(true, Ordering::SeqCst)), scope.token());
    assert_eq!(sync_wait(fut).unwrap(), None);
    assert!(!ran.load(Ordering::SeqCst));
    sync_wait(scope.join()).unwrap();
}

// ---------------------------------------------------------------------------------------
// P3149R6 "Recursively spawning work until completion", on the pool.

fn process_spawn(sch: PoolScheduler, token: CountingToken, t: &'static Tree) {
    spawn(
        sch.schedule().then(move |()| {
            if let Some(l) = &t.left {
                process_spawn(sch.clone(), token, l);
            }
            if let Some(r) = &t.right {
                process_spawn(sch.clone(), token, r);
            }
            t.visits.fetch_add(1, Ordering::SeqCst);
        }),
        token,
    );
}

#[test]
fn p3149_recursive_tree_with_spawn_visits_every_node_once() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    let tree = leak(make_tree(14));
    process_spawn(pool.scheduler(), scope.token(), tree);
    sync_wait(scope.join()).unwrap();
    assert_eq!(all_visited_once(tree), (1 << 15) - 1);
}

/// The `spawn_future` variant: each node's sender completes once its subtrees have.
fn process_future(sch: PoolScheduler, token: CountingToken, t: &'static Tree) -> SpawnFuture<(), Infallible> {
    let s2 = sch.clone();
    spawn_future(
        sch.schedule().let_value(move |()| {
            // A missing child is a trivial future, so both arms have one type.
            let child = |c: &'static Option<Box<Tree>>| match c.as_deref() {
                Some(c) => process_future(s2.clone(), token, c),
                None => spawn_future(just(()), token),
            };
            let (left, right) = (child(&t.left), child(&t.right));
            t.visits.fetch_add(1, Ordering::SeqCst);
            when_all((left, right)).then(|_| ())
        }),
        token,
    )
}

#[test]
fn p3149_recursive_tree_with_spawn_future_visits_every_node_once() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    let tree = leak(make_tree(12));
    let root = process_future(pool.scheduler(), scope.token(), tree);
    assert_eq!(sync_wait(root).unwrap(), Some(()));
    sync_wait(scope.join()).unwrap();
    assert_eq!(all_visited_once(tree), (1 << 13) - 1);
}

// ---------------------------------------------------------------------------------------
// Stress: a random tree of over a million spawns, random stop requests, a few panics.

struct Stress {
    /// Each node runs under one of these, picked at random; nodes stop random ones.
    sources: Vec<InplaceStopSource>,
    ran: AtomicUsize,
    stopped: AtomicUsize,
    panicked: AtomicUsize,
    spawned: AtomicUsize,
    refused: AtomicUsize,
}

/// Decorrelates a child's seed from its parent's sequence.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn stress_node(sch: PoolScheduler, token: CountingToken, st: &'static Stress, seed: u64, depth: u32) {
    st.spawned.fetch_add(1, Ordering::Relaxed);
    let s2 = sch.clone();
    let source = &st.sources[(seed % st.sources.len() as u64) as usize];
    let work = sch
        .schedule()
        .then(move |()| {
            let mut x = seed;
            let mut next = || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            // A branching factor of 0..=4 keeps the random tree alive until the cap.
            let children = if depth < 40 { next() % 5 } else { 0 };
            for _ in 0..children {
                if st.spawned.load(Ordering::Relaxed) < 1_100_000 {
                    stress_node(s2.clone(), token, st, splitmix(next()), depth + 1);
                }
            }
            if next() % 100_000 == 0 {
                st.sources[(next() % st.sources.len() as u64) as usize].request_stop();
            }
            if next() % 200_000 == 0 {
                st.panicked.fetch_add(1, Ordering::Relaxed);
                panic!("stress panic");
            }
            st.ran.fetch_add(1, Ordering::Relaxed);
        })
        .upon_stopped(move || {
            st.stopped.fetch_add(1, Ordering::Relaxed);
        });
    if !spawn(stop_when(work, source.token()), token) {
        st.refused.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
fn stress_a_million_random_spawns_with_stops_and_panics() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    let st = leak(Stress {
        sources: (0..64).map(|_| InplaceStopSource::new()).collect(),
        ran: AtomicUsize::new(0),
        stopped: AtomicUsize::new(0),
        panicked: AtomicUsize::new(0),
        spawned: AtomicUsize::new(0),
        refused: AtomicUsize::new(0),
    });
    for seed in 1..=64u64 {
        stress_node(pool.scheduler(), scope.token(), st, seed.wrapping_mul(0x9e37_79b9_7f4a_7c15), 0);
    }
    // Random-ish stop requests on (nested) single operations, while the tree grows.
    let stop_hits = Arc::new(AtomicUsize::new(0));
    for i in 0..200 {
        let source = InplaceStopSource::new();
        if i % 2 == 0 {
            source.request_stop();
        }
        let hit = stop_hits.clone();
        let r = sync_wait(common::with_stop(
            &source,
            nest(pool.scheduler().schedule().then(|()| 1), scope.token()).upon_stopped(move || {
                hit.fetch_add(1, Ordering::Relaxed);
                0
            }),
        ));
        assert!(r.is_ok());
    }
    // And one scope-wide stop once the tree is large (it may find nothing left to stop).
    let t = Instant::now();
    while st.spawned.load(Ordering::Relaxed) < 1_000_000 && t.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(5));
    }
    scope.request_stop();
    let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sync_wait(scope.join())));
    let spawned = st.spawned.load(Ordering::Relaxed);
    let accounted = st.ran.load(Ordering::Relaxed)
        + st.stopped.load(Ordering::Relaxed)
        + st.panicked.load(Ordering::Relaxed)
        + st.refused.load(Ordering::Relaxed);
    assert!(spawned >= 1_000_000, "{spawned} spawns");
    assert_eq!(accounted, spawned, "every node ran, stopped, panicked or was refused");
    eprintln!(
        "spawned {spawned} ran {} stopped {} panicked {} refused {}",
        st.ran.load(Ordering::Relaxed),
        st.stopped.load(Ordering::Relaxed),
        st.panicked.load(Ordering::Relaxed),
        st.refused.load(Ordering::Relaxed)
    );
    assert!(st.stopped.load(Ordering::Relaxed) > 0, "random stop requests reached queued work");
    assert!(stop_hits.load(Ordering::Relaxed) >= 100, "each requested stop reached its nested op");
    if st.panicked.load(Ordering::Relaxed) > 0 {
        let payload = joined.expect_err("the join resumes a spawned panic");
        assert_eq!(common::payload_message(&*payload), "stress panic");
    } else {
        joined.unwrap().unwrap();
    }
    assert_eq!(scope.state(), ScopeState::Joined);
}

// ---------------------------------------------------------------------------------------
// Regression: a stop request that completes the work inline must not free the block
// while the request still walks the block's stop source.

/// Work that stays pending until stopped, then completes stopped inline, from the stop
/// callback; `ran` records that it completed.
fn until_stop(
    registered: &'static AtomicBool,
    ran: &'static AtomicBool,
) -> impl SenderTo<FutureReceiver<(), Infallible, ScopeAssociation>, Value = (), Error = Infallible, Operation: Send>
+ Send
+ 'static {
    common::cancel_on_stop::<Infallible>(registered).upon_stopped(move || ran.store(true, Ordering::SeqCst))
}

static SECOND: Mutex<Option<SpawnFuture<(), Infallible>>> = Mutex::new(None);
static SECOND_REGISTERED: AtomicBool = AtomicBool::new(false);
static SECOND_RAN: AtomicBool = AtomicBool::new(false);

/// The receiver of the first future: on its stop, spawns a second future of the same
/// type (whose block reuses the first one's if it was freed early).
struct SpawnAgain {
    source: &'static InplaceStopSource,
    token: SimpleCountingToken,
}
impl Env for SpawnAgain {
    type Scheduler = NoScheduler;
    type Domain = NoDomain;
    fn scheduler(&self) -> NoScheduler {
        NoScheduler
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.source.token()
    }
}
impl Receiver<(), Infallible> for SpawnAgain {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, (): ()) {}
    fn set_error(self, e: Infallible) {
        match e {}
    }
    fn set_stopped(self) {
        *SECOND.lock().unwrap() = Some(spawn_future(until_stop(&SECOND_REGISTERED, &SECOND_RAN), self.token));
    }
    fn set_panic(self, p: Panic) {
        p.resume()
    }
}

#[test]
fn a_future_stopped_by_its_receiver_keeps_its_block_until_the_stop_request_returns() {
    static FIRST_REGISTERED: AtomicBool = AtomicBool::new(false);
    static FIRST_RAN: AtomicBool = AtomicBool::new(false);
    let scope = SimpleCountingScope::new();
    let outer: &'static InplaceStopSource = leak(InplaceStopSource::new());
    let fut = spawn_future(until_stop(&FIRST_REGISTERED, &FIRST_RAN), scope.token());
    let mut op = Box::pin(fut.connect(SpawnAgain { source: outer, token: scope.token() }));
    // SAFETY: pinned in its box, started once, dropped only after it completed (below).
    unsafe { op.as_mut().start() };
    assert!(FIRST_REGISTERED.load(Ordering::SeqCst));
    // The future's stop callback asks the work to stop; the work completes inline, inside
    // that request, and the future completes stopped (spawning the second future).
    outer.request_stop();
    assert!(FIRST_RAN.load(Ordering::SeqCst));
    assert!(SECOND_REGISTERED.load(Ordering::SeqCst), "the second future's work started");
    assert!(!SECOND_RAN.load(Ordering::SeqCst), "the second work was stopped by nobody");
    drop(SECOND.lock().unwrap().take()); // requests its stop: it completes
    assert!(SECOND_RAN.load(Ordering::SeqCst));
    drop(op);
    scope.close();
    sync_wait(scope.join()).unwrap();
}

/// Panics when dropped.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        panic!("spawned operation dropped");
    }
}

#[test]
fn a_panic_in_the_drop_of_a_spawned_operation_is_reported_at_the_join() {
    let pool = common::pool(1);
    for on_pool in [false, true] {
        let scope = CountingScope::new();
        // `let_value` keeps its function in the operation when the predecessor completes
        // stopped; the spawned operation's drop then drops it, and it panics.
        let guard = PanicsOnDrop;
        let work = just_stopped::<(), Infallible>().let_value(move |()| {
            drop(guard);
            just(())
        });
        if on_pool {
            assert!(spawn(starts_on(pool.scheduler(), work), scope.token()));
        } else {
            assert!(spawn(work, scope.token()));
        }
        let msg = panic_message(|| sync_wait(scope.join()));
        assert_eq!(msg, "spawned operation dropped", "on the pool: {on_pool}");
        // Every association ended: the scope joins again at once, and the worker lives.
        sync_wait(scope.join()).unwrap();
    }
    assert_eq!(sync_wait(schedule(&pool.scheduler()).then(|()| 1)), Ok(Some(1)));
}

// ---------------------------------------------------------------------------------------
// A completion from inside a forwarded stop request

/// A sender that, when stop is requested, completes stopped from inside its stop
/// callback (having dropped its own registration first, as the protocol asks) and then
/// lingers in the callback, so the stop request that ran it is still on the stack.
struct StopsInCallback<'a> {
    started: &'a AtomicBool,
    lingered: &'a AtomicBool,
}

impl Sender for StopsInCallback<'_> {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

type LingerCallback<'a> = StopCallback<'static, Box<dyn FnOnce() + Send + 'a>>;

struct StopsInCallbackOp<'a, R> {
    started: &'a AtomicBool,
    lingered: &'a AtomicBool,
    rcvr: Option<R>,
    callback: Option<LingerCallback<'a>>,
    _pin: PhantomPinned,
}

/// The operation, for the stop callback, which runs on the requesting thread.
struct OpPtr<T>(*mut T);
// SAFETY: the callback completes the receiver on the requesting thread (`R: Send`) and
// the operation lives until that completion.
unsafe impl<T> Send for OpPtr<T> {}

impl<'a, R: Receiver<(), Infallible> + Send + 'a> SenderTo<R> for StopsInCallback<'a> {
    type Operation = StopsInCallbackOp<'a, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        StopsInCallbackOp {
            started: self.started,
            lingered: self.lingered,
            rcvr: Some(receiver),
            callback: None,
            _pin: PhantomPinned,
        }
    }
}

impl<'a, R: Receiver<(), Infallible> + Send + 'a> OperationState for StopsInCallbackOp<'a, R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is moved out of the pinned operation; from here on it is only
        // reached through this pointer.
        let this: *mut Self = unsafe { self.get_unchecked_mut() };
        let op = OpPtr(this);
        // SAFETY: `this` is valid until the completion below. The token outlives the
        // callback, which is dropped before the operation completes.
        let (token, lingered) =
            unsafe { ((*this).rcvr.as_ref().unwrap().env().stop_token().detach(), (*this).lingered) };
        let on_stop: Box<dyn FnOnce() + Send + 'a> = Box::new(move || {
            let op = op;
            // SAFETY: the operation is alive until `set_stopped`; dropping our own
            // registration from inside the callback is allowed (the callback itself was
            // moved out of it to run).
            let rcvr = unsafe {
                (*op.0).callback = None;
                (*op.0).rcvr.take().unwrap()
            };
            rcvr.set_stopped();
            std::thread::sleep(Duration::from_millis(30));
            lingered.store(true, Ordering::SeqCst);
        });
        // SAFETY: as above; `lingered` outlives the operation, and the callback is
        // dropped (deregistered) before the operation completes. After `register` the
        // operation may have completed: it is not touched again.
        unsafe {
            (*this).started.store(true, Ordering::SeqCst);
            let callback = (*this).callback.insert(StopCallback::new(token, on_stop));
            Pin::new_unchecked(callback).register_unchecked();
        }
    }
}

/// Runs `work(started, lingered)` to completion on another thread, requests stop with
/// `stop` once it started, and checks that the operation completed (stopped) only after
/// the stop callback that completed it had returned: before the fix, `stop_when` (and
/// `nest`, built on it) handed the completion on at once, and the stop request, still
/// running on the requesting thread, then touched the freed operation.
///
/// `work` wraps its sender in an outer `stop_when` with the token it is given, whose
/// source never fires: the sender then runs under a receiver whose token can stop, so that `stop_when` merges two tokens and forwards: under
/// `sync_wait` alone it would hand the child the one token that can stop, and the child
/// would complete from inside that token's own stop request, as it may.
fn completes_after_the_stop_request<'a, S>(
    work: impl FnOnce(&'a AtomicBool, &'a AtomicBool, StopToken<'a>) -> S,
    stop: impl FnOnce(),
) where
    S: Sender<Value = (), Error = Infallible> + SenderTo<SyncWaitReceiver<(), Infallible>> + Send + 'a,
{
    let started = leak(AtomicBool::new(false));
    let lingered = leak(AtomicBool::new(false));
    let outer = leak(InplaceStopSource::new());
    let sndr = work(started, lingered, outer.token());
    std::thread::scope(|s| {
        let waiter = s.spawn(move || {
            let r = sync_wait(sndr);
            (r, lingered.load(Ordering::SeqCst))
        });
        eventually("the sender started", || started.load(Ordering::SeqCst));
        stop();
        let (r, lingered_first) = waiter.join().unwrap();
        assert_eq!(r, Ok(None));
        assert!(lingered_first, "completed while the forwarded stop request was still running");
    });
}

#[test]
fn stop_when_completes_only_after_a_forwarded_stop_request_returns() {
    for _ in 0..5 {
        let source = leak(InplaceStopSource::new());
        completes_after_the_stop_request(
            |started, lingered, outer| {
                stop_when(stop_when(StopsInCallback { started, lingered }, source.token()), outer)
            },
            || _ = source.request_stop(),
        );
    }
}

#[test]
fn nest_completes_only_after_the_scopes_stop_request_returns() {
    for _ in 0..5 {
        let scope = leak(CountingScope::new());
        completes_after_the_stop_request(
            |started, lingered, outer| stop_when(nest(StopsInCallback { started, lingered }, scope.token()), outer),
            || scope.request_stop(),
        );
        sync_wait(scope.join()).unwrap();
    }
}
