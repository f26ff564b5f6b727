//! Behavioural tests of `let_value`, `let_error`, `let_stopped` (continuing with a sender
//! made from a completion) and of the adaptors that move work between execution
//! resources: `continues_on`, `schedule_from` and `starts_on`.
//!
//! Each is checked on the value, error and stopped paths and for panics (in the user
//! function, and coming from upstream), plus where the work runs and which scheduler the
//! inner sender sees as current.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;

use common::{panic_message, stop_probe, thread_name, with_stop};
use senders::domain::NoDomain;
use senders::factories::Just;
use senders::*;

type CtxScheduler = SingleThreadScheduler<NoDomain>;

// ---------------------------------------------------------------------------------------
// let_value

#[test]
fn let_value_continues_with_the_second_senders_value() {
    assert_eq!(sync_wait(just(3).let_value(|x| just(x * 2))), Ok(Some(6)));
    assert_eq!(sync_wait(just(3).let_value(|x| just(x * 2)).let_value(|x| just(x + 1))), Ok(Some(7)));
}

#[test]
fn let_value_second_sender_may_run_on_another_thread() {
    let ctx = SingleThreadContext::with_name("second");
    let r = sync_wait(just(3).let_value(|x| ctx.scheduler().schedule().then(move |()| (x + 1, thread_name()))));
    assert_eq!(r, Ok(Some((4, Some("second".to_owned())))));
}

#[test]
fn let_value_runs_f_on_the_thread_that_delivered_the_value() {
    let ctx = SingleThreadContext::with_name("first");
    let r = sync_wait(ctx.scheduler().schedule().let_value(|()| just(thread_name())));
    assert_eq!(r, Ok(Some(Some("first".to_owned()))));
}

#[test]
fn let_value_passes_the_first_error_through_without_calling_f() {
    let called = AtomicBool::new(false);
    let r = sync_wait(just_error::<i32, _>("first").let_value(|x| {
        called.store(true, Ordering::SeqCst);
        just(x).with_error::<&str>()
    }));
    assert_eq!(r, Err("first"));
    assert!(!called.load(Ordering::SeqCst));
}

#[test]
fn let_value_passes_the_first_stop_through_without_calling_f() {
    let called = AtomicBool::new(false);
    let r = sync_wait(just_stopped::<i32, Infallible>().let_value(|x| {
        called.store(true, Ordering::SeqCst);
        just(x)
    }));
    assert_eq!(r, Ok(None));
    assert!(!called.load(Ordering::SeqCst));
}

#[test]
fn let_value_second_sender_error_and_stop_are_the_result() {
    let r = sync_wait(just(1).with_error::<&str>().let_value(|_x| just_error::<i32, &str>("second")));
    assert_eq!(r, Err("second"));
    let r = sync_wait(just(1).let_value(|_x| just_stopped::<i32, Infallible>()));
    assert_eq!(r, Ok(None));
}

#[test]
fn let_value_panic_in_f_reaches_the_caller() {
    let msg = panic_message(|| sync_wait(just(1).let_value(|_x| -> Just<i32> { panic!("let_value boom") })));
    assert_eq!(msg, "let_value boom");
}

#[test]
fn let_value_panic_in_the_second_sender_reaches_the_caller() {
    let msg = panic_message(|| sync_wait(just(1).let_value(|x| just(x).then(|_x| -> i32 { panic!("second boom") }))));
    assert_eq!(msg, "second boom");
}

#[test]
fn let_value_passes_an_upstream_panic_through_without_calling_f() {
    let called = AtomicBool::new(false);
    let msg = panic_message(|| {
        sync_wait(just(()).then(|()| -> i32 { panic!("upstream") }).let_value(|x| {
            called.store(true, Ordering::SeqCst);
            just(x)
        }))
    });
    assert_eq!(msg, "upstream");
    assert!(!called.load(Ordering::SeqCst));
}

#[test]
fn let_value_second_sender_sees_the_predecessors_completion_scheduler() {
    let ctx = SingleThreadContext::with_name("completion");
    let sch = ctx.scheduler();
    let r = sync_wait(
        just(()).continues_on(sch.clone()).let_value(|()| read_env(GetScheduler)).then(|s: CtxScheduler| s == sch),
    );
    assert_eq!(r, Ok(Some(true)));
}

#[test]
fn let_value_second_sender_sees_the_parents_scheduler_when_the_predecessor_has_none() {
    let r = sync_wait(read_env(GetScheduler).let_value(|outer: RunLoopScheduler| {
        just(()).let_value(|()| read_env(GetScheduler)).then(move |inner: RunLoopScheduler| inner == outer)
    }));
    assert_eq!(r, Ok(Some(true)));
}

#[test]
fn let_value_second_sender_sees_the_parents_stop_token() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let r = sync_wait(with_stop(&source, just(()).let_value(|()| stop_probe::<Infallible>())));
    assert_eq!(r, Ok(Some(true)));
}

// ---------------------------------------------------------------------------------------
// let_error

#[test]
fn let_error_passes_a_value_through_without_calling_f() {
    let called = AtomicBool::new(false);
    let r = sync_wait(just(1).with_error::<&str>().let_error(|_e| {
        called.store(true, Ordering::SeqCst);
        just(0).with_error::<&str>()
    }));
    assert_eq!(r, Ok(Some(1)));
    assert!(!called.load(Ordering::SeqCst));
}

#[test]
fn let_error_continues_with_a_sender_made_from_the_error() {
    let r: Result<Option<i32>, Infallible> = sync_wait(just_error::<i32, _>(4).let_error(just));
    assert_eq!(r, Ok(Some(4)));
    let r = sync_wait(just_error::<i32, i32>(4).let_error(|e| just_error::<i32, String>(format!("wrapped {e}"))));
    assert_eq!(r, Err("wrapped 4".to_owned()));
}

#[test]
fn let_error_passes_a_stop_through_without_calling_f() {
    let called = AtomicBool::new(false);
    let r = sync_wait(just_stopped::<i32, &str>().let_error(|_e| {
        called.store(true, Ordering::SeqCst);
        just(0)
    }));
    assert_eq!(r, Ok(None));
    assert!(!called.load(Ordering::SeqCst));
}

#[test]
fn let_error_second_sender_may_stop() {
    let r = sync_wait(just_error::<i32, &str>("e").let_error(|_e| just_stopped::<i32, Infallible>()));
    assert_eq!(r, Ok(None));
}

#[test]
fn let_error_panic_in_f_reaches_the_caller() {
    let msg = panic_message(|| {
        sync_wait(just_error::<i32, &str>("e").let_error(|_e| -> Just<i32> { panic!("let_error boom") }))
    });
    assert_eq!(msg, "let_error boom");
}

#[test]
fn let_error_does_not_intercept_a_panic() {
    let called = AtomicBool::new(false);
    let msg = panic_message(|| {
        sync_wait(just(()).with_error::<&str>().then(|()| -> i32 { panic!("upstream") }).let_error(|_e| {
            called.store(true, Ordering::SeqCst);
            just(0)
        }))
    });
    assert_eq!(msg, "upstream");
    assert!(!called.load(Ordering::SeqCst));
}

// ---------------------------------------------------------------------------------------
// let_stopped

#[test]
fn let_stopped_passes_a_value_through_without_calling_f() {
    let called = AtomicBool::new(false);
    let r = sync_wait(just(1).let_stopped(|| {
        called.store(true, Ordering::SeqCst);
        just(0)
    }));
    assert_eq!(r, Ok(Some(1)));
    assert!(!called.load(Ordering::SeqCst));
}

#[test]
fn let_stopped_passes_an_error_through_without_calling_f() {
    let called = AtomicBool::new(false);
    let r = sync_wait(just_error::<i32, &str>("e").let_stopped(|| {
        called.store(true, Ordering::SeqCst);
        just(0).with_error::<&str>()
    }));
    assert_eq!(r, Err("e"));
    assert!(!called.load(Ordering::SeqCst));
}

#[test]
fn let_stopped_continues_with_a_sender_on_stop() {
    assert_eq!(sync_wait(just_stopped::<i32, Infallible>().let_stopped(|| just(7))), Ok(Some(7)));
    let r = sync_wait(just_stopped::<i32, &str>().let_stopped(|| just_error::<i32, &str>("after stop")));
    assert_eq!(r, Err("after stop"));
    let r = sync_wait(just_stopped::<i32, &str>().let_stopped(just_stopped::<i32, &str>));
    assert_eq!(r, Ok(None));
}

#[test]
fn let_stopped_panic_in_f_reaches_the_caller() {
    let msg = panic_message(|| {
        sync_wait(just_stopped::<i32, Infallible>().let_stopped(|| -> Just<i32> { panic!("let_stopped boom") }))
    });
    assert_eq!(msg, "let_stopped boom");
}

#[test]
fn let_stopped_does_not_intercept_a_panic() {
    let called = AtomicBool::new(false);
    let msg = panic_message(|| {
        sync_wait(just(()).then(|()| -> i32 { panic!("upstream") }).let_stopped(|| {
            called.store(true, Ordering::SeqCst);
            just(0)
        }))
    });
    assert_eq!(msg, "upstream");
    assert!(!called.load(Ordering::SeqCst));
}

// ---------------------------------------------------------------------------------------
// continues_on

#[test]
fn continues_on_delivers_the_value_on_the_target() {
    let ctx = SingleThreadContext::with_name("target");
    let r = sync_wait(just(1).continues_on(ctx.scheduler()).then(|x| (x, thread_name())));
    assert_eq!(r, Ok(Some((1, Some("target".to_owned())))));
}

#[test]
fn continues_on_moves_from_one_context_to_another() {
    let a = SingleThreadContext::with_name("from");
    let b = SingleThreadContext::with_name("to");
    let r = sync_wait(
        a.scheduler()
            .schedule()
            .then(|()| thread_name())
            .continues_on(b.scheduler())
            .then(|first| (first, thread_name())),
    );
    assert_eq!(r, Ok(Some((Some("from".to_owned()), Some("to".to_owned())))));
}

#[test]
fn continues_on_can_come_back_to_the_sync_wait_thread() {
    let ctx = SingleThreadContext::new();
    let caller = thread::current().id();
    let r = sync_wait(read_env(GetScheduler).let_value(|home: RunLoopScheduler| {
        ctx.scheduler().schedule().continues_on(home).then(|()| thread::current().id())
    }));
    assert_eq!(r, Ok(Some(caller)));
}

#[test]
fn continues_on_delivers_an_error_on_the_target() {
    let ctx = SingleThreadContext::with_name("err-target");
    let r = sync_wait(just_error::<i32, _>("e").continues_on(ctx.scheduler()).map_error(|e| (e, thread_name())));
    assert_eq!(r, Err(("e", Some("err-target".to_owned()))));
}

#[test]
fn continues_on_delivers_a_stop_on_the_target() {
    let ctx = SingleThreadContext::with_name("stop-target");
    let r =
        sync_wait(just_stopped::<Option<String>, Infallible>().continues_on(ctx.scheduler()).upon_stopped(thread_name));
    assert_eq!(r, Ok(Some(Some("stop-target".to_owned()))));
}

#[test]
fn continues_on_delivers_an_upstream_panic() {
    let ctx = SingleThreadContext::new();
    let msg = panic_message(|| {
        sync_wait(just(()).then(|()| -> i32 { panic!("before the hop") }).continues_on(ctx.scheduler()))
    });
    assert_eq!(msg, "before the hop");
}

#[test]
fn continues_on_panic_after_the_hop_reaches_the_caller() {
    let ctx = SingleThreadContext::new();
    let msg = panic_message(|| {
        sync_wait(just(1).continues_on(ctx.scheduler()).then(|_x| -> i32 { panic!("after the hop") }))
    });
    assert_eq!(msg, "after the hop");
}

#[test]
fn continues_on_a_dropped_context_completes_stopped() {
    let ctx = SingleThreadContext::new();
    let sch = ctx.scheduler();
    drop(ctx);
    let r = sync_wait(just(1).continues_on(sch).then(|_x| -> i32 { panic!("must not run") }));
    assert_eq!(r, Ok(None));
}

#[test]
fn continues_on_does_not_lose_a_panic_when_the_hop_is_stopped() {
    let ctx = SingleThreadContext::new();
    let sch = ctx.scheduler();
    drop(ctx);
    let msg = panic_message(|| sync_wait(just(()).then(|()| -> i32 { panic!("kept") }).continues_on(sch)));
    assert_eq!(msg, "kept");

    let source = InplaceStopSource::new();
    source.request_stop();
    let msg = panic_message(|| {
        sync_wait(with_stop(&source, just(()).then(|()| -> i32 { panic!("kept too") }).continues_on(InlineScheduler)))
    });
    assert_eq!(msg, "kept too");
}

// ---------------------------------------------------------------------------------------
// schedule_from

#[test]
fn schedule_from_delivers_the_value_on_the_target() {
    let ctx = SingleThreadContext::with_name("sf");
    let r = sync_wait(schedule_from(ctx.scheduler(), just(2)).then(|x| (x, thread_name())));
    assert_eq!(r, Ok(Some((2, Some("sf".to_owned())))));
}

#[test]
fn schedule_from_delivers_an_error_on_the_target() {
    let ctx = SingleThreadContext::with_name("sf-err");
    let r = sync_wait(schedule_from(ctx.scheduler(), just_error::<i32, _>("e")).map_error(|e| (e, thread_name())));
    assert_eq!(r, Err(("e", Some("sf-err".to_owned()))));
}

#[test]
fn schedule_from_delivers_a_stop() {
    let ctx = SingleThreadContext::with_name("sf-stop");
    let r = sync_wait(
        schedule_from(ctx.scheduler(), just_stopped::<Option<String>, Infallible>()).upon_stopped(thread_name),
    );
    assert_eq!(r, Ok(Some(Some("sf-stop".to_owned()))));
}

#[test]
fn schedule_from_delivers_a_panic() {
    let ctx = SingleThreadContext::new();
    let msg =
        panic_message(|| sync_wait(schedule_from(ctx.scheduler(), just(()).then(|()| -> i32 { panic!("sf boom") }))));
    assert_eq!(msg, "sf boom");
}

// ---------------------------------------------------------------------------------------
// starts_on

#[test]
fn starts_on_starts_the_child_on_the_target() {
    let ctx = SingleThreadContext::with_name("starter");
    let r = sync_wait(starts_on(ctx.scheduler(), just(()).then(|()| thread_name())));
    assert_eq!(r, Ok(Some(Some("starter".to_owned()))));
}

#[test]
fn starts_on_child_sees_the_target_as_current_scheduler() {
    let ctx = SingleThreadContext::new();
    let sch = ctx.scheduler();
    let r = sync_wait(starts_on(sch.clone(), read_env(GetScheduler)).then(|s: CtxScheduler| s == sch));
    assert_eq!(r, Ok(Some(true)));
}

#[test]
fn starts_on_passes_the_childs_error_and_stop() {
    let ctx = SingleThreadContext::new();
    assert_eq!(sync_wait(starts_on(ctx.scheduler(), just_error::<i32, _>("e"))), Err("e"));
    assert_eq!(sync_wait(starts_on(ctx.scheduler(), just_stopped::<i32, Infallible>())), Ok(None));
}

#[test]
fn starts_on_child_panic_reaches_the_caller() {
    let ctx = SingleThreadContext::new();
    let msg =
        panic_message(|| sync_wait(starts_on(ctx.scheduler(), just(()).then(|()| -> i32 { panic!("child boom") }))));
    assert_eq!(msg, "child boom");
}

#[test]
fn starts_on_a_dropped_context_completes_stopped_without_starting_the_child() {
    let ctx = SingleThreadContext::new();
    let sch = ctx.scheduler();
    drop(ctx);
    let started = AtomicBool::new(false);
    let r = sync_wait(starts_on(sch, just(()).then(|()| started.store(true, Ordering::SeqCst))));
    assert_eq!(r, Ok(None));
    assert!(!started.load(Ordering::SeqCst));
}

#[test]
fn starts_on_child_sees_the_parents_stop_token() {
    let ctx = SingleThreadContext::new();
    let source = InplaceStopSource::new();
    let r = sync_wait(with_stop(
        &source,
        starts_on(
            ctx.scheduler(),
            just(())
                .then(|()| {
                    source.request_stop();
                })
                .let_value(|()| stop_probe::<Infallible>()),
        ),
    ));
    assert_eq!(r, Ok(Some(true)));
}
