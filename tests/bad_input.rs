//! Bad input (issue 12, item 4): every misuse gives a clear error, a documented panic,
//! a compile error or a documented abort, and nothing is lost: counts balance, joins
//! complete, and a panic reaches the waiter (`set_panic`, resumed by `sync_wait`)
//! instead of aborting or hanging.
//!
//! | input | behaviour | test |
//! |---|---|---|
//! | zero threads (`StaticThreadPool::new(0)`, `builder().num_threads(0)`) | `Err(BuildError::ZeroThreads)`, "a thread pool needs at least one thread" | `zero_threads_is_an_error` |
//! | zero shape in `bulk` (default and pool) | the function never runs; the value passes through | `bulk_with_zero_shape_*` |
//! | zero shape in `bulk_chunked` and `bulk_unchunked` (default and pool) | as for `bulk` | `every_bulk_form_with_zero_shape_*` |
//! | a huge shape (`usize::MAX`) in every bulk form (default and pool) | nothing overflows; an error of an early index ends the bulk with it, a stop request stops it, promptly | `every_bulk_form_with_a_huge_shape_*` |
//! | a `bulk` shape larger than the data its function indexes | the index panic is delivered (`set_panic`), on and off the pool | `bulk_shape_larger_than_the_data_*` |
//! | `bulk_each` "shape" vs data | there is no shape: it is the slice's length, so it cannot exceed the data; an empty slice runs nothing | `bulk_each_visits_exactly_the_slice` |
//! | `bulk_each` with a panicking `AsMut` (default and pool) | delivered with `set_panic` (was: unwound out of a completion) | `bulk_each_with_a_panicking_as_mut_*` |
//! | spawn (or `spawn_future`) of a sender whose `connect` panics (a user scheduler's sender) | the panic unwinds out of `spawn` (as in C++) after the association ended: the join completes (was: the join hung, the block leaked) | `spawn_of_a_sender_whose_connect_panics_*` |
//! | spawn into a closed scope | `spawn` returns `false`, the sender is dropped once, unrun; `spawn_future` completes stopped; join completes | `spawn_into_a_closed_scope_is_refused` |
//! | spawn into a joined scope | as closed | `spawn_into_a_joined_scope_is_refused` |
//! | spawn with the token of a dropped scope whose core was reused | refused (tokens carry a generation); the new scope is untouched | `a_stale_token_of_a_dropped_scope_is_refused` |
//! | a `let_async_scope` token outliving its scope | does not compile | `tests/ui/let_scope_token_escapes.rs` |
//! | `join` twice (in sequence, and two at once) | every join completes; the first panic of spawned work goes to exactly one join | `join_twice_*` |
//! | `join` started from inside the scope's own work | completes only after that work ends; blocking on it there deadlocks (documented in `join`'s "Deadlocks") | `a_join_started_inside_the_scopes_own_work_completes_after_it` |
//! | dropping a pool from one of its workers | the drop joins nobody; the workers run what is queued and end: every job runs once | `dropping_a_pool_from_its_own_worker_runs_all_queued_work` |
//! | a worker that drops its own pool, then waits on it (`sync_wait(schedule(..))` in the same job) | the worker is still one of the pool's until its loop ends, so the submission is queued there and the wait runs it (was: queued where nobody ran it, a hang; then: refused) | `a_worker_that_dropped_its_pool_and_waits_on_it_runs_the_work` |
//! | a naming function that panics, or a name with a NUL byte, in `PoolBuilder::build` | the panic unwinds out of `build` / `Err(BuildError::Spawn)` (`InvalidInput`), after the workers already started are stopped and joined (was: they leaked) | `a_panicking_thread_name_stops_the_started_workers`, `a_thread_name_with_a_nul_byte_is_an_error` |
//! | a `RunLoop` dropped before it finished, then scheduled on | `schedule` completes stopped (was: a hang); work queued before the drop runs in the drop | `a_dropped_run_loop_completes_schedule_stopped` |
//! | dropping a pool with queued and running work | the drop waits for running work, queued work runs exactly once, later submissions complete stopped | `dropping_a_pool_with_queued_and_running_work_loses_nothing` |
//! | awaiting a task twice | does not compile (`.await` moves the task) | `tests/ui/task_awaited_twice.rs` |
//! | a user scheduler panicking in `schedule()` / its sender's `connect` / `is_current` | `set_panic` through `starts_on`, a counting scope's join hop, `let_async_scope`'s final hop, a `Task`'s resumption and `change_scheduler`, `from_future`'s poll hop (each was an abort) | `a_panicking_scheduler_*` |
//! | ... in a first-stage `connect` inside `sync_wait`'s own `connect` | the panic unwinds out of `sync_wait` before anything starts | `a_panicking_connect_at_the_root_unwinds_to_the_caller` |
//! | ... in `connect` made inside another operation's `start` (`when_all`'s children, `stop_when`'s and `nest`'s child, the first stage of `let_*` and `continues_on`) | delivered with `set_panic`, inline and on the pool (was: an abort) | `a_panicking_connect_inside_another_start_is_delivered` |
//! | a panicking env query (`read_env` of a user query) | delivered with `set_panic` (was: abort under `sync_wait`) | `a_panicking_env_query_is_delivered` |
//! | a receiver that panics in its completion | the process aborts with a message (a completion must not unwind, DESIGN §2.4/§2.6) | `a_panicking_receiver_aborts_with_a_message` (in a subprocess) |

mod common;

use common::{SAFETY_TIMEOUT, panic_message};
use senders::domain::NoDomain;
use senders::scope::ScopeState;
use senders::*;
use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// Helpers

/// A gate that threads wait at (up to the safety timeout) until it opens.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap() = true;
        self.cv.notify_all();
    }
    fn wait(&self) {
        let open = self.open.lock().unwrap();
        let (open, _) = self.cv.wait_timeout_while(open, SAFETY_TIMEOUT, |o| !*o).unwrap();
        assert!(*open, "the gate never opened");
    }
}

/// Counts its drops.
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The body of a bulk iteration that must not run.
fn no_iteration() {
    panic!("no iteration may run")
}

/// Waits (up to the safety timeout) until `cond` holds.
fn wait_until(mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + SAFETY_TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached in time");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Where a [`FaultyScheduler`] panics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// In `schedule()`.
    Schedule,
    /// In `connect` of the sender `schedule()` returned.
    Connect,
    /// In `is_current()`.
    IsCurrent,
}

struct Faults {
    fault: Fault,
    /// How many `schedule()` calls succeed before the fault is armed.
    after: usize,
    schedules: AtomicUsize,
}

/// A user scheduler that completes inline, and panics where its [`Fault`] says once
/// `after` schedules have been made.
#[derive(Clone)]
struct FaultyScheduler(Arc<Faults>);

impl FaultyScheduler {
    fn new(fault: Fault, after: usize) -> Self {
        FaultyScheduler(Arc::new(Faults { fault, after, schedules: AtomicUsize::new(0) }))
    }
    fn schedules(&self) -> usize {
        self.0.schedules.load(Ordering::SeqCst)
    }
}

impl PartialEq for FaultyScheduler {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Scheduler for FaultyScheduler {
    type Domain = NoDomain;
    type Sender = FaultySender;
    fn schedule(&self) -> FaultySender {
        let armed = self.0.schedules.fetch_add(1, Ordering::SeqCst) >= self.0.after;
        if armed && self.0.fault == Fault::Schedule {
            panic!("faulty schedule");
        }
        FaultySender { sch: self.clone(), panic_in_connect: armed && self.0.fault == Fault::Connect }
    }
    fn is_current(&self) -> bool {
        if self.0.fault == Fault::IsCurrent && self.schedules() >= self.0.after {
            panic!("faulty is_current");
        }
        false
    }
}

struct FaultySender {
    sch: FaultyScheduler,
    panic_in_connect: bool,
}

impl Sender for FaultySender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = false;
    type Domain = NoDomain;
    type CompletionScheduler = FaultyScheduler;
    fn completion_scheduler(&self) -> FaultyScheduler {
        self.sch.clone()
    }
}

impl<R: Receiver<(), Infallible>> SenderTo<R> for FaultySender {
    type Operation = FaultyOp<R>;
    fn connect(self, receiver: R) -> FaultyOp<R> {
        if self.panic_in_connect {
            panic!("faulty connect");
        }
        FaultyOp { rcvr: Some(receiver), _pin: PhantomPinned }
    }
}

struct FaultyOp<R> {
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible>> OperationState for FaultyOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `rcvr` is not structurally pinned; it is moved out, never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(rcvr) = this.rcvr.take() {
            rcvr.set_value(());
        }
    }
}

// ---------------------------------------------------------------------------------------
// The pool

#[test]
fn zero_threads_is_an_error() {
    let err = StaticThreadPool::new(0).unwrap_err();
    assert!(matches!(err, BuildError::ZeroThreads));
    assert_eq!(err.to_string(), "a thread pool needs at least one thread");
    let err = StaticThreadPool::builder().num_threads(0).build().unwrap_err();
    assert!(matches!(err, BuildError::ZeroThreads));
}

#[test]
fn dropping_a_pool_from_its_own_worker_runs_all_queued_work() {
    const JOBS: usize = 200;
    let pool = Arc::new(Mutex::new(Some(common::pool(2))));
    let sch = pool.lock().unwrap().as_ref().unwrap().scheduler();
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..JOBS).map(|_| AtomicUsize::new(0)).collect());
    let scope = SimpleCountingScope::new();
    let p = pool.clone();
    assert!(spawn(
        schedule(&sch).then(move |()| {
            let pool = p.lock().unwrap().take().expect("dropped once");
            drop(pool);
        }),
        scope.token()
    ));
    for i in 0..JOBS {
        let runs = runs.clone();
        // Refused work (submitted after the drop began) completes stopped: not run.
        spawn(
            schedule(&sch).then(move |()| {
                runs[i].fetch_add(1, Ordering::SeqCst);
            }),
            scope.token(),
        );
    }
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(()), "the join completes");
    assert!(pool.lock().unwrap().is_none(), "the worker dropped the pool");
    for (i, r) in runs.iter().enumerate() {
        assert!(r.load(Ordering::SeqCst) <= 1, "job {i} ran twice");
    }
    assert_eq!(sync_wait(schedule(&sch)).unwrap(), None, "after the drop, schedule completes stopped");
}

#[test]
fn a_worker_that_dropped_its_pool_and_waits_on_it_runs_the_work() {
    let pool = Arc::new(Mutex::new(Some(common::pool(2))));
    let sch = pool.lock().unwrap().as_ref().unwrap().scheduler();
    let (p, sch2) = (pool.clone(), sch.clone());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let waited = sync_wait(schedule(&sch).then(move |()| {
            drop(p.lock().unwrap().take().expect("dropped once"));
            // The same job, on the worker that dropped the pool, waits on it.
            sync_wait(schedule(&sch2).then(|()| 1))
        }));
        tx.send(waited.unwrap()).unwrap();
    });
    let waited = rx.recv_timeout(SAFETY_TIMEOUT).expect("the worker waiting on its dropped pool hangs");
    assert!(matches!(waited, Some(Ok(Some(1)))), "the wait runs the work on its worker: {waited:?}");
}

/// The names of this process's threads (Linux: `/proc/self/task/*/comm`).
#[cfg(target_os = "linux")]
fn thread_names() -> Vec<String> {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|name| name.trim_end().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(target_os = "linux")]
#[test]
fn a_panicking_thread_name_stops_the_started_workers() {
    let msg = panic_message(|| {
        StaticThreadPool::builder()
            .num_threads(8)
            .thread_name(|i| if i == 5 { panic!("no name") } else { format!("leakcheck-{i}") })
            .build()
    });
    assert_eq!(msg, "no name");
    let leaked: Vec<_> = thread_names().into_iter().filter(|n| n.starts_with("leakcheck-")).collect();
    assert!(leaked.is_empty(), "workers left running: {leaked:?}");
}

#[cfg(target_os = "linux")]
#[test]
fn a_thread_name_with_a_nul_byte_is_an_error() {
    let built = StaticThreadPool::builder()
        .num_threads(4)
        .thread_name(|i| if i == 2 { "bad\0name".to_owned() } else { format!("nulcheck-{i}") })
        .build();
    match built {
        Err(BuildError::Spawn(e)) => assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput),
        other => panic!("expected a spawn error, got {other:?}"),
    }
    let leaked: Vec<_> = thread_names().into_iter().filter(|n| n.starts_with("nulcheck-")).collect();
    assert!(leaked.is_empty(), "workers left running: {leaked:?}");
}

#[test]
fn a_dropped_run_loop_completes_schedule_stopped() {
    let run_loop = RunLoop::new();
    let sch = run_loop.scheduler();
    // Queued before the drop: runs in the drop.
    let ran = Arc::new(AtomicBool::new(false));
    let scope = SimpleCountingScope::new();
    let r = ran.clone();
    assert!(spawn(schedule(&sch).then(move |()| r.store(true, Ordering::SeqCst)), scope.token()));
    drop(run_loop);
    assert!(ran.load(Ordering::SeqCst), "queued work runs in the drop");
    sync_wait(scope.join()).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(sync_wait(schedule(&sch))).unwrap());
    assert_eq!(rx.recv_timeout(SAFETY_TIMEOUT).expect("schedule on a dropped run loop hangs").unwrap(), None);
}

#[test]
fn dropping_a_pool_with_queued_and_running_work_loses_nothing() {
    const QUEUED: usize = 100;
    let pool = common::pool(1);
    let sch = pool.scheduler();
    let scope = SimpleCountingScope::new();
    let gate = Arc::new(Gate::default());
    let running = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let (g, r, f) = (gate.clone(), running.clone(), finished.clone());
    assert!(spawn(
        schedule(&sch).then(move |()| {
            r.store(true, Ordering::SeqCst);
            g.wait();
            f.store(true, Ordering::SeqCst);
        }),
        scope.token()
    ));
    let runs: Arc<Vec<AtomicUsize>> = Arc::new((0..QUEUED).map(|_| AtomicUsize::new(0)).collect());
    for i in 0..QUEUED {
        let runs = runs.clone();
        assert!(spawn(
            schedule(&sch).then(move |()| {
                runs[i].fetch_add(1, Ordering::SeqCst);
            }),
            scope.token()
        ));
    }
    wait_until(|| running.load(Ordering::SeqCst));
    let dropper = std::thread::spawn(move || drop(pool));
    std::thread::sleep(Duration::from_millis(20));
    assert!(!dropper.is_finished(), "the drop waits for the running job");
    gate.open();
    dropper.join().unwrap();
    assert!(finished.load(Ordering::SeqCst), "the running job finished before the drop returned");
    for (i, r) in runs.iter().enumerate() {
        assert_eq!(r.load(Ordering::SeqCst), 1, "queued job {i} ran exactly once");
    }
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(()));

    // Work submitted after the drop completes stopped: it never runs, and is counted out.
    let late = Arc::new(AtomicUsize::new(0));
    let l = late.clone();
    let scope = SimpleCountingScope::new();
    assert!(spawn(
        schedule(&sch).then(move |()| {
            l.fetch_add(1, Ordering::SeqCst);
        }),
        scope.token()
    ));
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(()));
    assert_eq!(late.load(Ordering::SeqCst), 0);
    assert_eq!(sync_wait(schedule(&sch)).unwrap(), None);
}

// ---------------------------------------------------------------------------------------
// bulk and bulk_each

#[test]
fn bulk_with_zero_shape_runs_nothing_and_passes_the_value() {
    let v = sync_wait(just(7).bulk(0, |_, _: &i32| no_iteration()));
    assert_eq!(v.unwrap(), Some(7));
}

#[test]
fn bulk_with_zero_shape_on_the_pool_runs_nothing_and_passes_the_value() {
    let pool = common::pool(2);
    let v = sync_wait(schedule(&pool.scheduler()).then(|()| 7).bulk(0, |_, _: &i32| no_iteration()));
    assert_eq!(v.unwrap(), Some(7));
}

/// The three bulk forms with `shape` and a per-index function `f(i, source)`, on the
/// default domain (`pool: None`) or the pool's; each form under a stop source of its own
/// (`source`), which `f` may use.
fn each_bulk_form<E: Send>(
    pool: Option<&StaticThreadPool>,
    shape: usize,
    f: impl Fn(usize, &InplaceStopSource) -> Result<(), E> + Send + Sync + Copy,
) -> [Result<Option<()>, E>; 3] {
    let sources = [InplaceStopSource::new(), InplaceStopSource::new(), InplaceStopSource::new()];
    let [a, b, c] = &sources;
    macro_rules! run {
        ($start:expr) => {
            [
                sync_wait(common::with_stop(a, $start.bulk(shape, move |i, ()| f(i, a)))),
                sync_wait(common::with_stop(
                    b,
                    $start.bulk_chunked(shape, move |lo, hi, ()| (lo..hi).try_for_each(|i| f(i, b))),
                )),
                sync_wait(common::with_stop(c, $start.bulk_unchunked(shape, move |i, ()| f(i, c)))),
            ]
        };
    }
    match pool {
        Some(p) => run!(schedule(&p.scheduler()).with_error::<E>()),
        None => run!(just(()).with_error::<E>()),
    }
}

#[test]
fn every_bulk_form_with_zero_shape_runs_nothing_and_passes_the_value() {
    let pool = common::pool(2);
    for on in [None, Some(&pool)] {
        let r = each_bulk_form::<Infallible>(on, 0, |_, _| {
            no_iteration();
            Ok(())
        });
        assert_eq!(r, [Ok(Some(())); 3], "pool: {}", on.is_some());
    }
}

#[test]
fn every_bulk_form_with_a_huge_shape_fails_fast_with_an_early_error() {
    let pool = common::pool(2);
    let start = Instant::now();
    for on in [None, Some(&pool)] {
        let r = each_bulk_form(on, usize::MAX, |i, _| if i >= 3 { Err(i) } else { Ok(()) });
        for r in r {
            // The first error recorded wins: on the pool a piece stolen from far up the
            // range may fail first, in order only index 3 can.
            let e = r.expect_err("every index from 3 on fails");
            assert!(if on.is_some() { e >= 3 } else { e == 3 }, "pool: {}: {e}", on.is_some());
        }
    }
    assert!(start.elapsed() < SAFETY_TIMEOUT, "a huge bulk did not end promptly");
}

#[test]
fn every_bulk_form_with_a_huge_shape_stops_under_a_stop_request() {
    const FAR: usize = 1 << 20;
    let pool = common::pool(2);
    let start = Instant::now();
    for on in [None, Some(&pool)] {
        let r = each_bulk_form(on, usize::MAX, |i, source| {
            if i == 10 {
                source.request_stop();
            }
            // A bound for the one form that cannot see the request (below), which runs
            // the indices from 0 up. (The pool's pieces start far above it.)
            if i == FAR { Err(i) } else { Ok(()) }
        });
        // The default `bulk_chunked` makes one call for the whole shape, which cannot
        // see the request: stopping inside it is the function's business.
        let expected = if on.is_some() { [Ok(None), Ok(None), Ok(None)] } else { [Ok(None), Err(FAR), Ok(None)] };
        assert_eq!(r, expected, "pool: {}", on.is_some());
    }
    assert!(start.elapsed() < SAFETY_TIMEOUT, "a huge bulk did not stop promptly");
}

#[test]
fn bulk_shape_larger_than_the_data_delivers_the_index_panic() {
    let ran = AtomicUsize::new(0);
    let msg = panic_message(|| {
        sync_wait(just(vec![1, 2, 3]).bulk(5, |i, v: &Vec<i32>| {
            ran.fetch_add(1, Ordering::SeqCst);
            assert!(v[i] > 0);
        }))
    });
    assert!(msg.contains("index out of bounds"), "{msg}");
    assert_eq!(ran.load(Ordering::SeqCst), 4, "iterations stop at the first panic");
}

#[test]
fn bulk_shape_larger_than_the_data_on_the_pool_delivers_the_index_panic() {
    let pool = common::pool(2);
    let msg = panic_message(|| {
        sync_wait(schedule(&pool.scheduler()).then(|()| vec![1u8; 100]).bulk(100_000, |i, v: &Vec<u8>| {
            assert!(v[i] > 0);
        }))
    });
    assert!(msg.contains("index out of bounds"), "{msg}");
    // The pool is intact after the failed bulk.
    assert_eq!(sync_wait(schedule(&pool.scheduler()).then(|()| 1)).unwrap(), Some(1));
}

#[test]
fn bulk_each_visits_exactly_the_slice() {
    let seen = AtomicUsize::new(0);
    let v = sync_wait(just(Vec::<u32>::new()).bulk_each(|_, _: &mut u32| no_iteration()));
    assert_eq!(v.unwrap(), Some(vec![]));
    let v = sync_wait(just(vec![1u32, 2, 3]).bulk_each(|i, x: &mut u32| {
        seen.fetch_add(1, Ordering::SeqCst);
        *x += i as u32;
    }));
    assert_eq!(v.unwrap(), Some(vec![1, 3, 5]));
    assert_eq!(seen.load(Ordering::SeqCst), 3);
}

/// A container whose `AsMut` (user code run by `bulk_each`) panics.
struct PanickyAsMut;

impl AsMut<[u32]> for PanickyAsMut {
    fn as_mut(&mut self) -> &mut [u32] {
        panic!("as_mut panicked")
    }
}

#[test]
fn bulk_each_with_a_panicking_as_mut_delivers_the_panic() {
    let msg = panic_message(|| sync_wait(just(PanickyAsMut).bulk_each(|_, _: &mut u32| ())));
    assert_eq!(msg, "as_mut panicked");
}

#[test]
fn bulk_each_with_a_panicking_as_mut_on_the_pool_delivers_the_panic() {
    let pool = common::pool(2);
    let sndr = schedule(&pool.scheduler()).then(|()| PanickyAsMut).bulk_each(|_, _: &mut u32| ());
    fn type_name_of<T>(_: &T) -> &'static str {
        std::any::type_name::<T>()
    }
    assert!(type_name_of(&sndr).contains("BulkEachKernel"), "the pool's bulk_each runs");
    let msg = panic_message(|| sync_wait(sndr));
    assert_eq!(msg, "as_mut panicked");
    assert_eq!(sync_wait(schedule(&pool.scheduler()).then(|()| 1)).unwrap(), Some(1));
}

// ---------------------------------------------------------------------------------------
// Scopes

#[test]
fn spawn_into_a_closed_scope_is_refused() {
    let scope = CountingScope::new();
    scope.close();
    let (ran, dropped) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicUsize::new(0)));
    let (r, d) = (ran.clone(), DropCount(dropped.clone()));
    let accepted = spawn(
        just(()).then(move |()| {
            let _d = d;
            r.store(true, Ordering::SeqCst);
        }),
        scope.token(),
    );
    assert!(!accepted, "spawn reports the refusal");
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the refused sender is dropped once");
    let fut = spawn_future(just(5), scope.token());
    assert_eq!(sync_wait(fut).unwrap(), None, "a refused spawn_future completes stopped");
    assert_eq!(scope.state(), ScopeState::UnusedAndClosed);
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(()));
}

#[test]
fn spawn_into_a_joined_scope_is_refused() {
    let scope = SimpleCountingScope::new();
    assert!(spawn(just(()), scope.token()));
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(()));
    assert_eq!(scope.state(), ScopeState::Joined);
    let dropped = Arc::new(AtomicUsize::new(0));
    let d = DropCount(dropped.clone());
    assert!(!spawn(just(()).then(move |()| drop(d)), scope.token()));
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert_eq!(sync_wait(spawn_future(just(1), scope.token())).unwrap(), None);
}

#[test]
fn a_stale_token_of_a_dropped_scope_is_refused() {
    let old = {
        let scope = SimpleCountingScope::new();
        assert!(spawn(just(()), scope.token()));
        let token = scope.token();
        sync_wait(scope.join()).unwrap();
        token
    };
    // New scopes on this thread may reuse the old one's core: the generation tells.
    let scopes: Vec<SimpleCountingScope> = (0..4).map(|_| SimpleCountingScope::new()).collect();
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    assert!(!spawn(just(()).then(move |()| r.store(true, Ordering::SeqCst)), old), "a stale token is refused");
    assert!(!ran.load(Ordering::SeqCst));
    for scope in &scopes {
        assert_eq!(scope.state(), ScopeState::Unused, "the new scopes are untouched");
        sync_wait(scope.join()).unwrap();
    }
}

#[test]
fn join_twice_in_sequence_completes_both_and_delivers_the_panic_once() {
    let scope = SimpleCountingScope::new();
    spawn(just(()).then(|()| panic!("spawned work panicked")), scope.token());
    assert_eq!(panic_message(|| sync_wait(scope.join())), "spawned work panicked");
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(()), "the second join completes, without the panic");
    assert_eq!(scope.state(), ScopeState::Joined);
}

#[test]
fn join_twice_at_once_completes_both() {
    let pool = common::pool(1);
    let scope = SimpleCountingScope::new();
    let gate = Arc::new(Gate::default());
    let g = gate.clone();
    spawn(schedule(&pool.scheduler()).then(move |()| g.wait()), scope.token());
    let results = std::thread::scope(|s| {
        let joins: Vec<_> = (0..2).map(|_| s.spawn(|| sync_wait(scope.join()))).collect();
        wait_until(|| scope.state() == ScopeState::OpenAndJoining);
        std::thread::sleep(Duration::from_millis(10));
        gate.open();
        joins.into_iter().map(|j| j.join().unwrap().unwrap()).collect::<Vec<_>>()
    });
    assert_eq!(results, vec![Some(()), Some(())]);
}

#[test]
fn a_join_started_inside_the_scopes_own_work_completes_after_it() {
    // `&'static` so that the join sender can be spawned; leaking a scope is safe.
    let scope: &'static SimpleCountingScope = Box::leak(Box::new(SimpleCountingScope::new()));
    let outer = SimpleCountingScope::new();
    let outer_token = outer.token();
    let joined = Arc::new(AtomicBool::new(false));
    let j = joined.clone();
    let seen_inside = Arc::new(AtomicBool::new(true));
    let s = seen_inside.clone();
    assert!(spawn(
        just(()).then(move |()| {
            let j2 = j.clone();
            // Spawned work has no scheduler: the join gets one to complete on.
            let join = starts_on(InlineScheduler, scope.join());
            assert!(spawn(join.then(move |()| j2.store(true, Ordering::SeqCst)), outer_token));
            // The join waits for this very work: it cannot complete while it runs (a
            // `sync_wait` on it here would deadlock).
            std::thread::sleep(Duration::from_millis(20));
            s.store(j.load(Ordering::SeqCst), Ordering::SeqCst);
        }),
        scope.token()
    ));
    assert!(!seen_inside.load(Ordering::SeqCst), "the join did not complete inside the work");
    assert!(joined.load(Ordering::SeqCst), "the join completed once the work ended");
    assert_eq!(scope.state(), ScopeState::Joined);
    assert_eq!(sync_wait(outer.join()).unwrap(), Some(()));
}

// ---------------------------------------------------------------------------------------
// Panicking user schedulers and env queries

#[test]
fn a_panicking_scheduler_in_starts_on_is_delivered() {
    for fault in [Fault::Schedule, Fault::Connect] {
        let ran = AtomicBool::new(false);
        let msg = panic_message(|| {
            sync_wait(starts_on(FaultyScheduler::new(fault, 0), just(()).then(|()| ran.store(true, Ordering::SeqCst))))
        });
        assert_eq!(msg, if fault == Fault::Schedule { "faulty schedule" } else { "faulty connect" });
        assert!(!ran.load(Ordering::SeqCst), "the child never runs");
    }
}

#[test]
fn a_panicking_scheduler_in_continues_on_is_delivered() {
    for fault in [Fault::Schedule, Fault::Connect] {
        let msg = panic_message(|| sync_wait(just(1).continues_on(FaultyScheduler::new(fault, 0))));
        assert_eq!(msg, if fault == Fault::Schedule { "faulty schedule" } else { "faulty connect" });
    }
}

#[test]
fn a_panicking_connect_at_the_root_unwinds_to_the_caller() {
    // `sync_wait` connects its sender before starting anything: the panic leaves it.
    let sch = FaultyScheduler::new(Fault::Connect, 0);
    assert_eq!(panic_message(|| sync_wait(schedule(&sch))), "faulty connect");
    let sch = FaultyScheduler::new(Fault::Schedule, 0);
    assert_eq!(panic_message(|| schedule(&sch)), "faulty schedule");
}

#[test]
fn a_panicking_scheduler_in_the_join_hop_is_delivered_and_the_join_completes() {
    for fault in [Fault::Schedule, Fault::Connect] {
        let pool = common::pool(1);
        let scope = SimpleCountingScope::new();
        let gate = Arc::new(Gate::default());
        let g = gate.clone();
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        spawn(
            schedule(&pool.scheduler()).then(move |()| {
                g.wait();
                r.fetch_add(1, Ordering::SeqCst);
            }),
            scope.token(),
        );
        // `starts_on` makes the faulty scheduler the join's scheduler; its first schedule
        // (the start) succeeds, the join's hop back to it panics.
        let sch = FaultyScheduler::new(fault, 1);
        let msg = std::thread::scope(|s| {
            s.spawn(|| {
                wait_until(|| scope.state() == ScopeState::OpenAndJoining);
                gate.open();
            });
            panic_message(|| sync_wait(starts_on(sch.clone(), scope.join())))
        });
        assert_eq!(msg, if fault == Fault::Schedule { "faulty schedule" } else { "faulty connect" });
        assert_eq!(sch.schedules(), 2, "the hop was attempted");
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert_eq!(scope.state(), ScopeState::Joined);
        assert_eq!(sync_wait(scope.join()).unwrap(), Some(()));
    }
}

#[test]
fn a_panicking_scheduler_in_let_async_scopes_final_hop_is_delivered() {
    for fault in [Fault::Schedule, Fault::Connect] {
        let ran = AtomicUsize::new(0);
        let ran_ref = &ran;
        let sch = FaultyScheduler::new(fault, 1);
        let msg = panic_message(|| {
            sync_wait(starts_on(
                sch.clone(),
                just(()).let_async_scope(move |tk, ()| {
                    spawn(
                        just(()).then(move |()| {
                            ran_ref.fetch_add(1, Ordering::SeqCst);
                        }),
                        tk,
                    );
                    just(5)
                }),
            ))
        });
        assert_eq!(msg, if fault == Fault::Schedule { "faulty schedule" } else { "faulty connect" });
        assert_eq!(sch.schedules(), 2, "the final hop was attempted");
        assert_eq!(ran.load(Ordering::SeqCst), 1, "the spawned work ran before the completion");
    }
}

#[test]
fn a_panicking_scheduler_when_a_task_resumes_is_delivered() {
    let pool = common::pool(1);
    for (fault, expected) in [
        (Fault::IsCurrent, "faulty is_current"),
        (Fault::Schedule, "faulty schedule"),
        (Fault::Connect, "faulty connect"),
    ] {
        let pool_sch = pool.scheduler();
        let after_await = Arc::new(AtomicBool::new(false));
        let a = after_await.clone();
        // The task's home is the faulty scheduler (from `starts_on`); an awaited sender
        // that completes on the pool once the poll has returned (the sleep) makes the
        // task resume through the scheduler. A completion that beats the poll's return
        // is taken inline without a resumption, so several awaits make the suspension
        // certain in practice, even on a loaded machine.
        let task = Task::<i32, Infallible>::new(async move {
            for _ in 0..10 {
                schedule(&pool_sch).then(|()| std::thread::sleep(Duration::from_millis(20))).await?;
            }
            a.store(true, Ordering::SeqCst);
            Ok(1)
        });
        let msg = panic_message(|| sync_wait(starts_on(FaultyScheduler::new(fault, 1), task)));
        assert_eq!(msg, expected);
        assert!(!after_await.load(Ordering::SeqCst), "the task was not resumed");
    }
}

#[test]
fn a_panicking_scheduler_in_change_scheduler_is_delivered() {
    for (fault, expected) in [
        (Fault::IsCurrent, "faulty is_current"),
        (Fault::Schedule, "faulty schedule"),
        (Fault::Connect, "faulty connect"),
    ] {
        let moved = Arc::new(AtomicBool::new(false));
        let m = moved.clone();
        let task = Task::<i32, Infallible>::new(async move {
            let _previous = change_scheduler(FaultyScheduler::new(fault, 0)).await;
            m.store(true, Ordering::SeqCst);
            Ok(1)
        });
        assert_eq!(panic_message(|| sync_wait(task)), expected);
        assert!(!moved.load(Ordering::SeqCst), "the task did not go on");
    }
}

/// A user query whose answer panics when cloned (as `read_env` does to answer).
struct Boom;

#[derive(Debug)]
struct PanicsOnClone;

impl Clone for PanicsOnClone {
    fn clone(&self) -> Self {
        panic!("query answer clone panicked")
    }
}

impl Query for Boom {
    type Value = PanicsOnClone;
}

#[test]
fn a_panicking_env_query_is_delivered() {
    let sndr = read_env::<Boom, Option<PanicsOnClone>>(Boom).write_env(prop::<Boom>(PanicsOnClone));
    assert_eq!(panic_message(|| sync_wait(sndr)), "query answer clone panicked");
}

// ---------------------------------------------------------------------------------------
// A panicking receiver: abort, checked in a subprocess

/// Set in the child process of `a_panicking_receiver_aborts_with_a_message`.
const CHILD_VAR: &str = "SENDERS_BAD_INPUT_CHILD";

/// A user receiver whose value completion panics: a contract violation.
struct PanickingReceiver;

impl Receiver<(), Infallible> for PanickingReceiver {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, (): ()) {
        panic!("the receiver panicked");
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {}
    fn set_panic(self, _panic: Panic) {}
}

/// Runs this test binary again with only `test` selected and [`CHILD_VAR`] set, and
/// returns the child's exit signal and stderr.
fn run_child(test: &str) -> (Option<i32>, String) {
    use std::os::unix::process::ExitStatusExt;
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_VAR, "1")
        .output()
        .unwrap();
    (out.status.signal(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_panicking_receiver_aborts_with_a_message() {
    if std::env::var_os(CHILD_VAR).is_some() {
        let pool = common::pool(1);
        let mut op = Box::pin(schedule(&pool.scheduler()).connect(PanickingReceiver));
        // SAFETY: the operation is pinned in its box and kept alive (leaked below) until
        // it completes; it is started once.
        unsafe { op.as_mut().start() };
        std::thread::sleep(SAFETY_TIMEOUT);
        std::mem::forget(op);
        return;
    }
    let (signal, stderr) = run_child("a_panicking_receiver_aborts_with_a_message");
    assert_eq!(signal, Some(SIGABRT), "SIGABRT expected; stderr:\n{stderr}");
    assert!(stderr.contains("the receiver panicked"), "the panic is reported:\n{stderr}");
    assert!(stderr.contains("senders: a pool job unwound; aborting"), "the abort is explained:\n{stderr}");
}

#[test]
fn a_panicking_connect_inside_another_start_is_delivered() {
    // `when_all` connects its children when it starts, `stop_when` (and `nest` through
    // it) its child, `let_value` and `continues_on` their predecessor: a panic there
    // completes the operation with it, inline and on the pool, and the scope's count
    // balances.
    let pool = common::pool(2);
    let sch = FaultyScheduler::new(Fault::Connect, 0);
    assert_eq!(panic_message(|| sync_wait(when_all((schedule(&sch), just(1))))), "faulty connect");
    assert_eq!(panic_message(|| sync_wait(when_all((just(1), schedule(&sch))))), "faulty connect");
    let on_pool = starts_on(pool.scheduler(), when_all((just(1), schedule(&sch))));
    assert_eq!(panic_message(|| sync_wait(on_pool)), "faulty connect");
    let source = InplaceStopSource::new();
    assert_eq!(panic_message(|| sync_wait(stop_when(schedule(&sch), source.token()))), "faulty connect");
    let scope = CountingScope::new();
    assert_eq!(panic_message(|| sync_wait(nest(schedule(&sch), scope.token()))), "faulty connect");
    sync_wait(scope.join()).unwrap();
    // The first stage of `let_*` and of `continues_on`: `f` never runs.
    let ran = AtomicBool::new(false);
    let first = schedule(&sch).let_value(|()| {
        ran.store(true, Ordering::SeqCst);
        just(())
    });
    assert_eq!(panic_message(|| sync_wait(first)), "faulty connect");
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(panic_message(|| sync_wait(schedule(&sch).continues_on(pool.scheduler()))), "faulty connect");
    assert_eq!(sch.schedules(), 7);
}

/// `SIGABRT` on Linux (and every platform this crate is tested on).
const SIGABRT: i32 = 6;

#[test]
fn a_panicking_scheduler_when_a_future_is_polled_is_delivered() {
    for (fault, expected) in [(Fault::Schedule, "faulty schedule"), (Fault::Connect, "faulty connect")] {
        let polled = Arc::new(AtomicBool::new(false));
        let p = polled.clone();
        let fut = from_future(async move {
            p.store(true, Ordering::SeqCst);
            1
        });
        // `starts_on`'s own schedule succeeds; the hop that would poll the future panics.
        let sch = FaultyScheduler::new(fault, 1);
        assert_eq!(panic_message(|| sync_wait(starts_on(sch.clone(), fut))), expected);
        assert_eq!(sch.schedules(), 2, "the poll's hop was attempted");
        assert!(!polled.load(Ordering::SeqCst), "the future was not polled");
    }
}

#[test]
fn spawn_of_a_sender_whose_connect_panics_unwinds_to_the_caller_and_the_join_completes() {
    // Leaked (which is safe) so that a regression fails the test instead of hanging it
    // or aborting at the scope's drop.
    let scope: &'static SimpleCountingScope = Box::leak(Box::new(SimpleCountingScope::new()));
    let observer: &'static SimpleCountingScope = Box::leak(Box::new(SimpleCountingScope::new()));
    let sch = FaultyScheduler::new(Fault::Connect, 0);
    assert_eq!(panic_message(|| spawn(schedule(&sch), scope.token())), "faulty connect");
    assert_eq!(panic_message(|| spawn_future(schedule(&sch), scope.token())), "faulty connect");
    assert_eq!(scope.state(), ScopeState::Open, "the associations were made");
    let joined = Arc::new(AtomicBool::new(false));
    let j = joined.clone();
    spawn(starts_on(InlineScheduler, scope.join()).then(move |()| j.store(true, Ordering::SeqCst)), observer.token());
    assert!(joined.load(Ordering::SeqCst), "the association ended: the join completed at once");
    assert_eq!(scope.state(), ScopeState::Joined);
    assert_eq!(sync_wait(observer.join()).unwrap(), Some(()));
}
