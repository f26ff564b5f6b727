//! Timed scheduling and `timeout`: `schedule_at` / `schedule_after` on the pool, the run
//! loop, a single-thread context and inside a `Task`; completion on the scheduler's
//! thread, never before the deadline; a stop request completes a pending timer at once
//! (before start, while pending, from another thread, racing the deadline); deadlines
//! that have passed or cannot be represented; many timers; a pool dropped with timers
//! pending; a user scheduler made timed; `timeout`'s value, error, elapsed, stop and panic
//! paths; where continuations run (never on the timer thread: an inline one on a firing
//! thread, and one that blocks, even on another timer, delays no other timer);
//! `schedule_after`'s delay running from `start`. The timer thread's idle CPU is checked
//! in `tests/pool.rs`, the service's internals in `src/time/tests.rs`, its races in the
//! library's loom models.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use common::{WaitProbe, cancel_on_stop, panic_message, thread_name, wait_for_stop, with_stop};
use senders::time::{ScheduleAt, TimeoutError};
use senders::*;

const HOUR: Duration = Duration::from_secs(3600);
const MS: Duration = Duration::from_millis(1);
/// How long a test waits for what should take milliseconds before it fails.
const PATIENCE: Duration = Duration::from_secs(10);
/// The name of the timer service's firing threads.
const FIRING: &str = "senders-firing";

/// Runs `f` on a thread of its own and returns its result, or fails if none comes within
/// [`PATIENCE`]: a regression that hangs fails instead of hanging the test.
fn within<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(PATIENCE) {
        Ok(r) => r,
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no result within {PATIENCE:?}"),
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: panicked"),
    }
}

#[test]
fn schedule_after_completes_on_the_pool_after_the_delay() {
    let pool = common::pool(2);
    let start = Instant::now();
    let name = sync_wait(schedule_after(&pool.scheduler(), 20 * MS).then(|()| thread_name())).unwrap().unwrap();
    assert!(start.elapsed() >= 20 * MS);
    assert!(name.unwrap().starts_with("senders-worker"));
}

#[test]
fn schedule_at_completes_on_a_single_thread_context_and_on_the_run_loop() {
    let ctx = SingleThreadContext::with_name("timed");
    let deadline = Instant::now() + 10 * MS;
    let name = sync_wait(schedule_at(&ctx.scheduler(), deadline).then(|()| (Instant::now(), thread_name())));
    let (at, name) = name.unwrap().unwrap();
    assert!(at >= deadline);
    assert_eq!(name.as_deref(), Some("timed"));
    // `sync_wait`'s own run loop: the completion runs on the waiting thread.
    let me = thread_name();
    let on_loop = read_env(GetScheduler)
        .let_value(|s: RunLoopScheduler| schedule_after(&s, 10 * MS).then(move |()| (s.is_current(), thread_name())));
    assert_eq!(sync_wait(on_loop), Ok(Some((true, me))));
}

#[test]
fn a_deadline_that_passed_completes_at_once_and_one_too_far_never_does() {
    let pool = common::pool(1);
    let sch = pool.scheduler();
    let start = Instant::now();
    assert_eq!(sync_wait(schedule_at(&sch, start - Duration::from_secs(1))), Ok(Some(())));
    assert_eq!(sync_wait(schedule_after(&sch, Duration::ZERO)), Ok(Some(())));
    assert!(start.elapsed() < Duration::from_secs(5));
    // `Duration::MAX` cannot be added to an instant: the timer only ends by a stop.
    let source = InplaceStopSource::new();
    std::thread::scope(|s| {
        let run = s.spawn(|| sync_wait(stop_when(schedule_after(&sch, Duration::MAX), source.token())));
        std::thread::sleep(20 * MS);
        source.request_stop();
        assert_eq!(run.join().unwrap(), Ok(None));
    });
}

#[test]
fn a_stop_request_completes_a_pending_timer_at_once_on_the_requesting_thread() {
    let pool = common::pool(1);
    let source = InplaceStopSource::new();
    let completed_on = Mutex::new(None);
    let registered = AtomicBool::new(false);
    std::thread::scope(|s| {
        let run = s.spawn(|| {
            let timer = schedule_after(&pool.scheduler(), HOUR).upon_stopped(|| {
                *completed_on.lock().unwrap() = thread_name();
            });
            // `when_any` starts its children in order: once the second one has registered
            // its callback, the timer is pending.
            let marked = when_any((timer, cancel_on_stop::<Infallible>(&registered)));
            sync_wait(stop_when(marked, source.token()))
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        while !registered.load(Ordering::SeqCst) {
            assert!(Instant::now() < deadline, "the timer never started");
            std::thread::sleep(MS);
        }
        let start = Instant::now();
        std::thread::Builder::new()
            .name("stopper".into())
            .spawn_scoped(s, || source.request_stop())
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(run.join().unwrap(), Ok(None));
        assert!(start.elapsed() < Duration::from_secs(5));
    });
    assert_eq!(completed_on.lock().unwrap().as_deref(), Some("stopper"));
}

#[test]
fn a_stop_requested_before_start_completes_stopped_without_a_timer() {
    let pool = common::pool(1);
    let source = InplaceStopSource::new();
    source.request_stop();
    assert_eq!(sync_wait(with_stop(&source, schedule_after(&pool.scheduler(), HOUR))), Ok(None));
}

#[test]
fn stop_requests_racing_deadlines_complete_every_timer_once() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let (fired, stopped) = (AtomicUsize::new(0), AtomicUsize::new(0));
    for i in 0..300u64 {
        let source = InplaceStopSource::new();
        std::thread::scope(|s| {
            let run =
                s.spawn(|| sync_wait(stop_when(schedule_after(&sch, Duration::from_micros(i % 50)), source.token())));
            std::thread::sleep(Duration::from_micros(25));
            source.request_stop();
            match run.join().unwrap() {
                Ok(Some(())) => fired.fetch_add(1, Ordering::Relaxed),
                Ok(None) => stopped.fetch_add(1, Ordering::Relaxed),
                Err(e) => match e {},
            };
        });
    }
    assert_eq!(fired.load(Ordering::Relaxed) + stopped.load(Ordering::Relaxed), 300);
}

#[test]
fn many_timers_fire_each_once_and_none_early() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let scope = CountingScope::new();
    let (early, fired) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let start = Instant::now();
    for i in 0..20_000u64 {
        let deadline = start + Duration::from_micros((i * 7919) % 50_000);
        let (early, fired) = (early.clone(), fired.clone());
        let work = schedule_at(&sch, deadline).then(move |()| {
            if Instant::now() < deadline {
                early.fetch_add(1, Ordering::Relaxed);
            }
            fired.fetch_add(1, Ordering::Relaxed);
        });
        assert!(spawn(work, scope.token()));
    }
    sync_wait(scope.join()).unwrap();
    assert_eq!(fired.load(Ordering::Relaxed), 20_000);
    assert_eq!(early.load(Ordering::Relaxed), 0);
}

/// The hop onto a pool dropped before the deadline is refused on the timer thread: the
/// sender completes stopped, and on a firing thread, not on the timer thread.
#[test]
fn a_pool_dropped_with_pending_timers_completes_them_stopped() {
    let pool = common::pool(1);
    let scope = CountingScope::new();
    let ran = Arc::new(AtomicBool::new(false));
    let stopped_on = Arc::new(Mutex::new(None));
    let (ran2, stopped_on2) = (ran.clone(), stopped_on.clone());
    let timer = schedule_after(&pool.scheduler(), 50 * MS)
        .then(move |()| ran2.store(true, Ordering::SeqCst))
        .upon_stopped(move || *stopped_on2.lock().unwrap() = Some(thread_name()));
    let deadline = Instant::now() + 50 * MS;
    assert!(spawn(timer, scope.token()));
    drop(pool);
    let dropped_in_time = Instant::now() < deadline;
    assert_eq!(sync_wait(scope.join()), Ok(Some(())));
    // A timer never fires early: if the pool was gone before the deadline (the drop may
    // take longer under memcheck), the hop onto it completed stopped and `then` never ran.
    if dropped_in_time {
        assert!(!ran.load(Ordering::SeqCst));
        assert_eq!(stopped_on.lock().unwrap().clone(), Some(Some(FIRING.to_owned())));
    }
}

#[test]
fn timers_in_a_task() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let start = Instant::now();
    let task = Task::new(async move {
        schedule_after(&sch, 10 * MS).await?;
        let late = schedule_after(&sch, HOUR).then(|()| 1);
        let r = timeout(late, &sch, 10 * MS).await;
        Ok::<_, Infallible>(r)
    });
    let r = sync_wait(starts_on(pool.scheduler(), task)).unwrap().unwrap();
    assert_eq!(r, Err(TimeoutError::Elapsed));
    assert!(start.elapsed() >= 20 * MS && start.elapsed() < Duration::from_secs(10));
}

/// A user scheduler, timed through the crate's timers.
#[derive(Clone, PartialEq)]
struct Mine(PoolScheduler);

impl Scheduler for Mine {
    type Domain = <PoolScheduler as Scheduler>::Domain;
    type Sender = MineSender;
    fn schedule(&self) -> MineSender {
        MineSender(self.clone())
    }
}

/// `Mine`'s schedule sender: the pool's, reporting `Mine` as its scheduler.
struct MineSender(Mine);

impl Sender for MineSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = <PoolScheduler as Scheduler>::Domain;
    type CompletionScheduler = Mine;
    fn completion_scheduler(&self) -> Mine {
        self.0.clone()
    }
}

impl<R: Receiver<(), Infallible>> SenderTo<R> for MineSender
where
    <PoolScheduler as Scheduler>::Sender: SenderTo<R>,
{
    type Operation = <<PoolScheduler as Scheduler>::Sender as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        (self.0).0.schedule().connect(receiver)
    }
}

impl TimedScheduler for Mine {
    type TimedSender = ScheduleAt<Self>;
    fn schedule_at(&self, deadline: Instant) -> ScheduleAt<Self> {
        ScheduleAt::new(self.clone(), Some(deadline))
    }
    fn schedule_after(&self, delay: Duration) -> ScheduleAt<Self> {
        ScheduleAt::after(self.clone(), delay)
    }
}

#[test]
fn a_user_scheduler_is_timed_through_schedule_at() {
    let pool = common::pool(1);
    let mine = Mine(pool.scheduler());
    let start = Instant::now();
    let name = sync_wait(schedule_after(&mine, 10 * MS).then(|()| thread_name())).unwrap().unwrap();
    assert!(start.elapsed() >= 10 * MS);
    assert!(name.unwrap().starts_with("senders-worker"));
}

// ---------------------------------------------------------------------------------------
// where continuations run

/// The inline scheduler made timed (`ScheduleAt::new`, as its docs show) runs its
/// continuation on a firing thread, not on the timer thread; a task's scheduler over the
/// inline scheduler does too. A continuation that waits for another timer
/// (`sync_wait(schedule_after(..))` inside it) therefore gets it, and timers keep firing
/// afterwards. (On the timer thread, it waited for itself: that timer, and every later
/// one in the process, never fired.)
#[test]
fn an_inline_timed_continuation_runs_on_a_firing_thread_and_may_wait_for_a_timer() {
    let pool = common::pool(1);
    let sch = pool.scheduler();
    let (name, inner) = within("an inline continuation that waits for a pool timer", move || {
        let work = ScheduleAt::new(InlineScheduler, Some(Instant::now() + 50 * MS)).then(move |()| {
            let inner = sync_wait(schedule_after(&sch, 5 * MS).then(|()| thread_name()));
            (thread_name(), inner)
        });
        sync_wait(work).unwrap().unwrap()
    });
    assert_eq!(name.as_deref(), Some(FIRING));
    assert!(inner.unwrap().unwrap().unwrap().starts_with("senders-worker"));
    let erased = senders::task::TaskScheduler::new(InlineScheduler);
    let name = within("a task's scheduler over the inline scheduler", move || {
        sync_wait(schedule_after(&erased, 20 * MS).then(|()| thread_name())).unwrap().unwrap()
    });
    assert_eq!(name.as_deref(), Some(FIRING));
    let sch = pool.scheduler();
    assert_eq!(within("a later timer", move || sync_wait(schedule_after(&sch, MS))), Ok(Some(())));
}

/// While an inline continuation blocks on its firing thread, a pool timer and another
/// inline timer (on another firing thread) still fire. (The delays are long enough that
/// no deadline passes before its timer is set, which would run the continuation on the
/// starting thread.)
#[test]
fn a_blocked_inline_continuation_delays_no_other_timer() {
    let pool = common::pool(1);
    let (entered_tx, entered) = mpsc::channel();
    let (release, released) = mpsc::channel::<()>();
    let blocked = std::thread::spawn(move || {
        let blocking = ScheduleAt::after(InlineScheduler, 20 * MS).then(move |()| {
            entered_tx.send(thread_name()).unwrap();
            // Until the test releases it (or ends).
            let _ = released.recv();
        });
        sync_wait(blocking)
    });
    let first = entered.recv_timeout(PATIENCE).expect("the blocking continuation never ran");
    let sch = pool.scheduler();
    let on_pool =
        within("a pool timer", move || sync_wait(schedule_after(&sch, 5 * MS).then(|()| thread_name()))).unwrap();
    assert!(on_pool.unwrap().unwrap().starts_with("senders-worker"));
    let second = within("a second inline timer", || {
        sync_wait(ScheduleAt::after(InlineScheduler, 20 * MS).then(|()| thread_name())).unwrap().unwrap()
    });
    assert_eq!(second.as_deref(), Some(FIRING));
    assert_eq!(first.as_deref(), Some(FIRING));
    release.send(()).unwrap();
    assert_eq!(blocked.join().unwrap(), Ok(Some(())));
}

// ---------------------------------------------------------------------------------------
// schedule_after's delay runs from start

/// Senders are lazy: a `schedule_after` made, left idle longer than its delay, and then
/// started still waits its whole delay, on every timed scheduler of the crate, a user's
/// (through `ScheduleAt::after`) and the inline scheduler made timed.
#[test]
fn schedule_after_waits_its_delay_from_start_not_from_when_it_is_made() {
    const DELAY: Duration = Duration::from_millis(100);
    let pool = common::pool(1);
    let ctx = SingleThreadContext::new();
    let task_sch = senders::task::TaskScheduler::new(pool.scheduler());
    let run_loop = RunLoop::new();
    let (on_pool, on_ctx, on_task, on_loop, on_mine, inline) = (
        schedule_after(&pool.scheduler(), DELAY),
        schedule_after(&ctx.scheduler(), DELAY),
        schedule_after(&task_sch, DELAY),
        schedule_after(&run_loop.scheduler(), DELAY),
        schedule_after(&Mine(pool.scheduler()), DELAY),
        ScheduleAt::after(InlineScheduler, DELAY),
    );
    std::thread::sleep(DELAY + 50 * MS);
    let waited = |what: &str, start: Instant, r: Result<Option<()>, Infallible>| {
        let took = start.elapsed();
        assert_eq!(r, Ok(Some(())), "{what}");
        assert!(took >= DELAY, "{what}: completed {took:?} after its start, not {DELAY:?}");
    };
    let start = Instant::now();
    waited("pool", start, sync_wait(on_pool));
    let start = Instant::now();
    waited("single-thread context", start, sync_wait(on_ctx));
    let start = Instant::now();
    waited("task scheduler", start, sync_wait(on_task));
    let start = Instant::now();
    waited("user scheduler", start, sync_wait(on_mine));
    let start = Instant::now();
    waited("inline scheduler", start, sync_wait(inline));
    // The run loop's timer completes on the thread that runs the loop.
    std::thread::scope(|s| {
        s.spawn(|| run_loop.run());
        let start = Instant::now();
        waited("run loop", start, sync_wait(on_loop));
        run_loop.finish();
    });
}

// ---------------------------------------------------------------------------------------
// timeout

#[test]
fn timeout_passes_a_result_that_comes_in_time() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let start = Instant::now();
    assert_eq!(sync_wait(timeout(schedule(&sch).then(|()| 5).with_error::<&str>(), &sch, HOUR)), Ok(Some(5)));
    let failing = schedule(&sch).with_error::<&str>().let_value(|()| just_error::<i32, _>("bad"));
    assert_eq!(sync_wait(timeout(failing, &sch, HOUR)), Err(TimeoutError::Failed("bad")));
    let stopped = just_stopped::<i32, &str>();
    assert_eq!(sync_wait(timeout(stopped, &sch, HOUR)), Ok(None));
    // The hour-long timers were cancelled, not waited for.
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn timeout_stops_a_sender_that_is_too_slow_and_waits_for_it() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let ctx = SingleThreadContext::new();
    let probe = WaitProbe::default();
    let slow = starts_on(ctx.scheduler(), wait_for_stop::<()>(&probe));
    let start = Instant::now();
    assert_eq!(sync_wait(timeout(slow, &sch, 20 * MS)), Err(TimeoutError::Elapsed));
    assert!(start.elapsed() >= 20 * MS);
    // Started (as natively, where 20 ms is ample), it saw the stop and had finished; under
    // memcheck the hop onto the context may still have been queued, and was stopped.
    assert!(probe.saw_stop() || !probe.started(), "the slow sender was stopped, and had finished");
    // A sender that completes only when stopped, started inline before the timer.
    let registered = AtomicBool::new(false);
    let start = Instant::now();
    assert_eq!(sync_wait(timeout(cancel_on_stop::<()>(&registered), &sch, 20 * MS)), Err(TimeoutError::Elapsed));
    assert!(registered.load(Ordering::SeqCst) && start.elapsed() >= 20 * MS);
}

#[test]
fn timeout_under_a_stop_request_completes_stopped_and_delivers_panics() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let source = InplaceStopSource::new();
    source.request_stop();
    let work = schedule_after(&sch, HOUR).with_error::<()>();
    assert_eq!(sync_wait(with_stop(&source, timeout(work, &sch, HOUR))), Ok(None));
    let panics = schedule(&sch).with_error::<()>().then(|()| -> i32 { panic!("work panicked") });
    assert_eq!(panic_message(|| sync_wait(timeout(panics, &sch, HOUR))), "work panicked");
    let e: Box<dyn std::error::Error> = Box::new(TimeoutError::<std::fmt::Error>::Elapsed);
    assert_eq!(e.to_string(), "the time limit passed");
}
