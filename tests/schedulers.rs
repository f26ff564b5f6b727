//! Behavioural tests of `schedule()` on every scheduler of the crate — `InlineScheduler`,
//! `RunLoop` and `SingleThreadContext` — and of the execution resources themselves:
//! where work runs, FIFO order, `finish`/drop draining queued work, scheduling after
//! shutdown, stop requests, and panics in work run on a resource.
//!
//! `schedule()` senders cannot fail (`Error = Infallible`), so they have no error path.

mod common;

use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use common::{Meeting, SAFETY_TIMEOUT, panic_message, thread_name, with_stop};
use senders::*;

/// Waits (up to the safety timeout) until `cond` holds.
fn wait_until(cond: impl Fn() -> bool) {
    let deadline = Instant::now() + SAFETY_TIMEOUT;
    while !cond() {
        assert!(Instant::now() < deadline, "condition not reached within the safety timeout");
        thread::sleep(Duration::from_millis(1));
    }
}

/// Calls `finish` on a run loop when dropped, so that a failing test does not leave a
/// scoped thread blocked in `run` forever.
struct FinishOnDrop<'a>(&'a RunLoop);
impl Drop for FinishOnDrop<'_> {
    fn drop(&mut self) {
        self.0.finish();
    }
}

// ---------------------------------------------------------------------------------------
// InlineScheduler

#[test]
fn inline_schedule_completes_on_the_starting_thread() {
    let caller = thread::current().id();
    assert_eq!(sync_wait(InlineScheduler.schedule().then(|()| thread::current().id())), Ok(Some(caller)));

    let ctx = SingleThreadContext::with_name("inline-host");
    let r = sync_wait(starts_on(ctx.scheduler(), InlineScheduler.schedule().then(|()| thread_name())));
    assert_eq!(r, Ok(Some(Some("inline-host".to_owned()))));
}

#[test]
fn inline_schedule_under_a_stop_request_completes_stopped() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let r = sync_wait(with_stop(&source, InlineScheduler.schedule().then(|()| -> i32 { panic!("must not run") })));
    assert_eq!(r, Ok(None));
}

#[test]
fn inline_schedule_then_panic_reaches_the_caller() {
    let msg = panic_message(|| sync_wait(InlineScheduler.schedule().then(|()| -> i32 { panic!("inline boom") })));
    assert_eq!(msg, "inline boom");
}

// ---------------------------------------------------------------------------------------
// RunLoop

#[test]
fn run_loop_runs_scheduled_work_on_the_thread_that_calls_run() {
    let run_loop = RunLoop::new();
    let sch = run_loop.scheduler();
    thread::scope(|s| {
        let runner = s.spawn(|| {
            run_loop.run();
            thread::current().id()
        });
        let r = {
            let _finish = FinishOnDrop(&run_loop);
            sync_wait(sch.schedule().then(|()| (thread::current().id(), sch.is_current())))
        };
        let runner_id = runner.join().unwrap();
        assert_eq!(r, Ok(Some((runner_id, true))));
    });
}

#[test]
fn run_loop_scheduler_is_not_current_outside_run() {
    let run_loop = RunLoop::new();
    assert!(!run_loop.scheduler().is_current());
}

#[test]
fn run_loop_runs_work_in_fifo_order() {
    let run_loop = RunLoop::new();
    let sch = run_loop.scheduler();
    let order = Mutex::new(Vec::new());
    let push = |i: usize| {
        let order = &order;
        move |()| order.lock().unwrap().push(i)
    };
    thread::scope(|s| {
        s.spawn(|| run_loop.run());
        let _finish = FinishOnDrop(&run_loop);
        // `when_all` starts its children in order, so the nodes are queued in order.
        let r = sync_wait(when_all((
            sch.schedule().then(push(0)),
            sch.schedule().then(push(1)),
            sch.schedule().then(push(2)),
            sch.schedule().then(push(3)),
        )));
        assert_eq!(r, Ok(Some(((), (), (), ()))));
    });
    assert_eq!(order.into_inner().unwrap(), [0, 1, 2, 3]);
}

#[test]
fn run_loop_finish_then_run_returns() {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let run_loop = RunLoop::new();
        run_loop.finish();
        run_loop.run();
        tx.send(()).unwrap();
    });
    rx.recv_timeout(SAFETY_TIMEOUT).expect("run() after finish() must return");
}

#[test]
fn run_loop_schedule_after_finish_completes_stopped() {
    let run_loop = RunLoop::new();
    run_loop.finish();
    let r = sync_wait(run_loop.scheduler().schedule().then(|()| -> i32 { panic!("must not run") }));
    assert_eq!(r, Ok(None));
}

#[test]
fn run_loop_drains_work_queued_before_finish() {
    let run_loop = RunLoop::new();
    let sch = run_loop.scheduler();
    let queued = AtomicBool::new(false);
    thread::scope(|s| {
        let waiter = s.spawn(|| {
            sync_wait(when_all((
                sch.schedule().then(|()| thread::current().id()),
                // Started after the first child has queued its node.
                just(()).then(|()| queued.store(true, Ordering::SeqCst)),
            )))
        });
        wait_until(|| queued.load(Ordering::SeqCst));
        run_loop.finish();
        run_loop.run(); // runs the queued item, then returns
        assert_eq!(waiter.join().unwrap(), Ok(Some((thread::current().id(), ()))));
    });
}

#[test]
fn run_loop_schedule_under_a_stop_request_completes_stopped() {
    let run_loop = RunLoop::new();
    let sch = run_loop.scheduler();
    let source = InplaceStopSource::new();
    source.request_stop();
    thread::scope(|s| {
        s.spawn(|| run_loop.run());
        let _finish = FinishOnDrop(&run_loop);
        let r = sync_wait(with_stop(&source, sch.schedule().then(|()| -> i32 { panic!("must not run") })));
        assert_eq!(r, Ok(None));
    });
}

#[test]
fn run_loop_schedulers_compare_by_loop() {
    let a = RunLoop::new();
    let b = RunLoop::new();
    assert_eq!(a.scheduler(), a.scheduler());
    assert_eq!(a.scheduler(), a.scheduler().clone());
    assert_ne!(a.scheduler(), b.scheduler());
}

#[test]
fn run_loop_panic_in_work_reaches_the_caller_and_the_loop_keeps_running() {
    let run_loop = RunLoop::new();
    let sch = run_loop.scheduler();
    thread::scope(|s| {
        s.spawn(|| run_loop.run());
        let _finish = FinishOnDrop(&run_loop);
        let msg = panic_message(|| sync_wait(sch.schedule().then(|()| -> i32 { panic!("run loop boom") })));
        assert_eq!(msg, "run loop boom");
        assert_eq!(sync_wait(sch.schedule().then(|()| 5)), Ok(Some(5)));
    });
}

// ---------------------------------------------------------------------------------------
// SingleThreadContext

#[test]
fn single_thread_context_runs_work_on_its_named_thread() {
    let ctx = SingleThreadContext::with_name("worker-7");
    let r = sync_wait(ctx.scheduler().schedule().then(|()| thread_name()));
    assert_eq!(r, Ok(Some(Some("worker-7".to_owned()))));
}

#[test]
fn single_thread_context_new_runs_work_on_another_thread() {
    let ctx = SingleThreadContext::new();
    let caller = thread::current().id();
    let r = sync_wait(ctx.scheduler().schedule().then(|()| thread::current().id()));
    let id = r.unwrap().unwrap();
    assert_ne!(id, caller);
    // Always the same thread.
    assert_eq!(sync_wait(ctx.scheduler().schedule().then(|()| thread::current().id())), Ok(Some(id)));
}

#[test]
fn single_thread_context_with_domain_names_its_thread() {
    let ctx = SingleThreadContext::<DefaultDomain>::with_domain("domain-thread");
    let r = sync_wait(ctx.scheduler().schedule().then(|()| thread_name()));
    assert_eq!(r, Ok(Some(Some("domain-thread".to_owned()))));
}

#[test]
fn single_thread_context_schedule_after_drop_completes_stopped() {
    let ctx = SingleThreadContext::with_name("dropped");
    let sch = ctx.scheduler();
    drop(ctx);
    assert_eq!(sync_wait(sch.schedule()), Ok(None));
    let r = sync_wait(sch.schedule().then(|()| -> i32 { panic!("must not run after drop") }));
    assert_eq!(r, Ok(None));
}

#[test]
fn single_thread_context_schedule_under_a_stop_request_completes_stopped() {
    let ctx = SingleThreadContext::new();
    let source = InplaceStopSource::new();
    source.request_stop();
    let r = sync_wait(with_stop(&source, ctx.scheduler().schedule().then(|()| -> i32 { panic!("must not run") })));
    assert_eq!(r, Ok(None));
}

#[test]
fn single_thread_context_drop_runs_work_already_queued() {
    let ctx = SingleThreadContext::with_name("drain");
    let sch = ctx.scheduler();
    let busy = Meeting::default();
    let release = Meeting::default();
    let queued = AtomicBool::new(false);
    thread::scope(|s| {
        // Occupy the context's thread so that the next item stays queued.
        let blocker =
            s.spawn(|| sync_wait(sch.schedule().then(|()| busy.meet(SAFETY_TIMEOUT) && release.meet(SAFETY_TIMEOUT))));
        assert!(busy.meet(SAFETY_TIMEOUT), "the first work item did not start");
        let late = s.spawn(|| {
            sync_wait(when_all((
                sch.schedule().then(|()| thread_name()),
                just(()).then(|()| queued.store(true, Ordering::SeqCst)),
            )))
        });
        wait_until(|| queued.load(Ordering::SeqCst));
        let dropper = s.spawn(move || drop(ctx));
        thread::sleep(Duration::from_millis(20)); // let the drop call `finish` first
        assert!(release.meet(SAFETY_TIMEOUT));
        dropper.join().unwrap();
        assert_eq!(blocker.join().unwrap(), Ok(Some(true)));
        assert_eq!(late.join().unwrap(), Ok(Some((Some("drain".to_owned()), ()))));
    });
}

#[test]
fn single_thread_schedulers_compare_by_context() {
    let a = SingleThreadContext::new();
    let b = SingleThreadContext::new();
    assert_eq!(a.scheduler(), a.scheduler());
    assert_eq!(a.scheduler(), a.scheduler().clone());
    assert_ne!(a.scheduler(), b.scheduler());
}

#[test]
fn single_thread_context_panic_reaches_the_caller_and_the_thread_survives() {
    let ctx = SingleThreadContext::with_name("survivor");
    let msg = panic_message(|| sync_wait(ctx.scheduler().schedule().then(|()| -> i32 { panic!("ctx boom") })));
    assert_eq!(msg, "ctx boom");
    let r = sync_wait(ctx.scheduler().schedule().then(|()| thread_name()));
    assert_eq!(r, Ok(Some(Some("survivor".to_owned()))));
}

#[test]
fn schedule_free_function_is_the_schedulers_schedule() {
    let ctx = SingleThreadContext::with_name("free-fn");
    let r: Result<Option<Option<String>>, Infallible> = sync_wait(schedule(&ctx.scheduler()).then(|()| thread_name()));
    assert_eq!(r, Ok(Some(Some("free-fn".to_owned()))));
}
