//! Behavioural tests of `when_all` and `when_all_with_variant`: the value tuple, the
//! completion rules (first error or panic wins, error beats stopped, stopped if any child
//! stopped and none failed), stop requests to the siblings of a failing child and from the
//! parent's environment, concurrency of children on different contexts, and the
//! environment the children see.
//!
//! The empty tuple, twelve children and a run-time number of children (a `Vec`) are in
//! `tests/when_all_vec.rs`.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::{
    Meeting, SAFETY_TIMEOUT, WaitProbe, cancel_on_stop, panic_message, stop_probe, thread_name, wait_for_stop,
    with_stop,
};
use senders::adaptors::StartsOn;
use senders::domain::NoDomain;
use senders::*;

/// A sibling that blocks `ctx`'s thread until it is asked to stop (recording that in
/// `probe`), then completes stopped.
fn blocked_sibling<'a, E>(
    ctx: &SingleThreadContext,
    probe: &'a WaitProbe,
) -> StartsOn<SingleThreadScheduler<NoDomain>, common::WaitForStop<'a, E>> {
    starts_on(ctx.scheduler(), wait_for_stop::<E>(probe))
}

/// A child that fails with the error `$error` once the blocked sibling watched by `$probe`
/// runs, so that the stop request reaches a running sibling, not one still being scheduled.
macro_rules! fail_once_started {
    ($probe:expr, $error:expr) => {
        just(()).with_error::<&'static str>().let_value(|()| {
            assert!($probe.wait_started(), "the blocked sibling did not start");
            just_error::<(), &'static str>($error)
        })
    };
}

// ---------------------------------------------------------------------------------------
// value path

#[test]
fn when_all_completes_with_the_tuple_of_values() {
    assert_eq!(sync_wait(when_all((just(1),))), Ok(Some((1,))));
    assert_eq!(sync_wait(when_all((just(1), just("a"), just(2.5)))), Ok(Some((1, "a", 2.5))));
}

#[test]
fn when_all_takes_up_to_eight_children() {
    let r = sync_wait(when_all((just(0), just(1), just(2), just(3), just(4), just(5), just(6), just(7))));
    assert_eq!(r, Ok(Some((0, 1, 2, 3, 4, 5, 6, 7))));
}

#[test]
fn when_all_of_children_on_other_threads_collects_their_values() {
    let a = SingleThreadContext::with_name("wa-a");
    let b = SingleThreadContext::with_name("wa-b");
    let r = sync_wait(when_all((
        a.scheduler().schedule().then(|()| thread_name()),
        b.scheduler().schedule().then(|()| thread_name()),
        just(3),
    )));
    assert_eq!(r, Ok(Some((Some("wa-a".to_owned()), Some("wa-b".to_owned()), 3))));
}

#[test]
fn when_all_of_children_completing_concurrently_is_reliable() {
    let a = SingleThreadContext::new();
    let b = SingleThreadContext::new();
    for i in 0..200 {
        let r = sync_wait(when_all((
            a.scheduler().schedule().then(move |()| i),
            b.scheduler().schedule().then(move |()| i * 2),
            just(i * 3),
        )));
        assert_eq!(r, Ok(Some((i, i * 2, i * 3))), "iteration {i}");
    }
}

#[test]
fn when_all_runs_children_on_different_contexts_concurrently() {
    let a = SingleThreadContext::with_name("overlap-a");
    let b = SingleThreadContext::with_name("overlap-b");
    let meeting = Meeting::default();
    // Each child blocks its own context's thread, then waits for the other one: both can
    // only succeed if they run at the same time.
    let child = |()| {
        std::thread::sleep(Duration::from_millis(50));
        meeting.meet(SAFETY_TIMEOUT)
    };
    let r = sync_wait(when_all((a.scheduler().schedule().then(child), b.scheduler().schedule().then(child))));
    assert_eq!(r, Ok(Some((true, true))), "the children did not overlap");
}

#[test]
fn when_all_children_share_an_error_type_via_with_error() {
    let r = sync_wait(when_all((just(1).with_error::<&str>(), just_error::<i32, &str>("e"))));
    assert_eq!(r, Err("e"));
    let r = sync_wait(when_all((just(1).with_error::<&str>(), just(2).with_error::<&str>())));
    assert_eq!(r, Ok(Some((1, 2))));
}

// ---------------------------------------------------------------------------------------
// error path

#[test]
fn when_all_first_error_wins() {
    let r = sync_wait(when_all((just_error::<i32, _>("first"), just_error::<i32, _>("second"))));
    assert_eq!(r, Err("first"));
    let r = sync_wait(when_all((
        just(1).with_error::<&str>(),
        just_error::<i32, _>("second"),
        just_error::<i32, _>("third"),
    )));
    assert_eq!(r, Err("second"));
}

#[test]
fn when_all_error_beats_stopped() {
    let r = sync_wait(when_all((just_stopped::<i32, &str>(), just_error::<i32, _>("e"))));
    assert_eq!(r, Err("e"));
    let r = sync_wait(when_all((just_error::<i32, _>("e"), just_stopped::<i32, &str>())));
    assert_eq!(r, Err("e"));
}

#[test]
fn when_all_error_requests_stop_on_inline_siblings() {
    let seen = AtomicBool::new(false);
    let r = sync_wait(when_all((
        just_error::<bool, _>("e"),
        stop_probe::<&str>().then(|stopped| {
            seen.store(stopped, Ordering::SeqCst);
            stopped
        }),
    )));
    assert_eq!(r, Err("e"));
    assert!(seen.load(Ordering::SeqCst), "the sibling started after the failure must see a stop request");
}

#[test]
fn when_all_error_stops_a_running_sibling_on_another_context() {
    let ctx = SingleThreadContext::with_name("sibling");
    let probe = WaitProbe::default();
    let start = Instant::now();
    let r = sync_wait(when_all((blocked_sibling(&ctx, &probe), fail_once_started!(probe, "e"))));
    assert_eq!(r, Err("e"));
    assert!(probe.saw_stop(), "the running sibling was not asked to stop");
    assert!(start.elapsed() < SAFETY_TIMEOUT);
}

#[test]
fn when_all_failure_stops_a_sibling_inside_a_nested_when_all() {
    let ctx = SingleThreadContext::with_name("nested");
    let probe = WaitProbe::default();
    let r = sync_wait(when_all((
        when_all((blocked_sibling(&ctx, &probe), just(1).with_error::<&str>())),
        fail_once_started!(probe, "outer"),
    )));
    assert_eq!(r, Err("outer"));
    assert!(probe.saw_stop(), "the stop request was not forwarded into the nested when_all");
}

#[test]
fn when_all_nested_failure_propagates_out() {
    let r = sync_wait(when_all((
        just(1).with_error::<&str>(),
        when_all((just(2).with_error::<&str>(), just_error::<i32, _>("inner"))),
    )));
    assert_eq!(r, Err("inner"));
}

// ---------------------------------------------------------------------------------------
// stopped path

#[test]
fn when_all_is_stopped_if_a_child_stopped_and_none_failed() {
    let r = sync_wait(when_all((just(1), just_stopped::<i32, Infallible>())));
    assert_eq!(r, Ok(None));
    let r = sync_wait(when_all((just_stopped::<i32, Infallible>(), just(1))));
    assert_eq!(r, Ok(None));
}

#[test]
fn when_all_stopped_child_requests_stop_on_siblings() {
    let seen = AtomicBool::new(false);
    let r = sync_wait(when_all((
        just_stopped::<bool, Infallible>(),
        stop_probe::<Infallible>().then(|stopped| {
            seen.store(stopped, Ordering::SeqCst);
            stopped
        }),
    )));
    assert_eq!(r, Ok(None));
    assert!(seen.load(Ordering::SeqCst));
}

#[test]
fn when_all_children_see_no_stop_request_while_all_succeed() {
    let r = sync_wait(when_all((stop_probe::<Infallible>(), just(1), stop_probe::<Infallible>())));
    assert_eq!(r, Ok(Some((false, 1, false))));
}

#[test]
fn when_all_forwards_an_earlier_parent_stop_request_to_its_children() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let r = sync_wait(with_stop(&source, when_all((stop_probe::<Infallible>(), stop_probe::<Infallible>()))));
    assert_eq!(r, Ok(Some((true, true))));
}

#[test]
fn when_all_forwards_a_parent_stop_request_to_running_children() {
    let ctx = SingleThreadContext::with_name("forward");
    let source = InplaceStopSource::new();
    let probe = WaitProbe::default();
    let r = std::thread::scope(|s| {
        s.spawn(|| {
            assert!(probe.wait_started(), "the child did not start");
            source.request_stop();
        });
        sync_wait(with_stop(&source, when_all((blocked_sibling::<Infallible>(&ctx, &probe), just(1)))))
    });
    assert_eq!(r, Ok(None));
    assert!(probe.saw_stop());
}

#[test]
fn when_all_error_completes_a_cancellable_sibling_through_its_stop_callback() {
    let registered = AtomicBool::new(false);
    let r = sync_wait(when_all((cancel_on_stop::<&str>(&registered), just_error::<(), _>("e"))));
    assert_eq!(r, Err("e"));
    assert!(registered.load(Ordering::SeqCst));
}

#[test]
fn when_all_forwards_a_parent_stop_to_children_that_complete_inside_their_stop_callbacks() {
    for round in 0..50 {
        let source = InplaceStopSource::new();
        let (a, b) = (AtomicBool::new(false), AtomicBool::new(false));
        let done = AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                let deadline = Instant::now() + SAFETY_TIMEOUT;
                while !(a.load(Ordering::SeqCst) && b.load(Ordering::SeqCst)) {
                    assert!(Instant::now() < deadline, "the children did not register");
                    std::thread::yield_now();
                }
                source.request_stop();
                // Watchdog: a stop that does not complete the operation would hang the test.
                while !done.load(Ordering::SeqCst) {
                    if Instant::now() >= deadline {
                        eprintln!("round {round}: when_all did not complete after the stop request");
                        std::process::abort();
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            });
            let r = sync_wait(with_stop(
                &source,
                when_all((cancel_on_stop::<Infallible>(&a), cancel_on_stop::<Infallible>(&b))),
            ));
            done.store(true, Ordering::SeqCst);
            r
        });
        assert_eq!(r, Ok(None), "round {round}");
    }
}

// ---------------------------------------------------------------------------------------
// panics

#[test]
fn when_all_child_panic_reaches_the_caller() {
    let msg = panic_message(|| sync_wait(when_all((just(1), just(()).then(|()| -> i32 { panic!("child boom") })))));
    assert_eq!(msg, "child boom");
}

#[test]
fn when_all_child_panic_on_another_thread_reaches_the_caller() {
    let ctx = SingleThreadContext::new();
    let msg = panic_message(|| {
        sync_wait(when_all((just(1), ctx.scheduler().schedule().then(|()| -> i32 { panic!("remote boom") }))))
    });
    assert_eq!(msg, "remote boom");
}

#[test]
fn when_all_panic_stops_a_running_sibling() {
    let ctx = SingleThreadContext::with_name("sibling");
    let probe = WaitProbe::default();
    let msg = panic_message(|| {
        sync_wait(when_all((
            blocked_sibling::<Infallible>(&ctx, &probe),
            just(()).then(|()| {
                assert!(probe.wait_started(), "the blocked sibling did not start");
                panic!("child boom")
            }),
        )))
    });
    assert_eq!(msg, "child boom");
    assert!(probe.saw_stop(), "the running sibling was not asked to stop");
}

#[test]
fn when_all_panic_beats_stopped() {
    let msg = panic_message(|| {
        sync_wait(when_all((just_stopped::<i32, Infallible>(), just(()).then(|()| -> i32 { panic!("beats stop") }))))
    });
    assert_eq!(msg, "beats stop");
}

#[test]
fn when_all_first_failure_wins_between_error_and_panic() {
    let r = sync_wait(when_all((
        just_error::<i32, _>("error first"),
        just(()).with_error::<&str>().then(|()| -> i32 { panic!("second") }),
    )));
    assert_eq!(r, Err("error first"));
    let msg = panic_message(|| {
        sync_wait(when_all((
            just(()).with_error::<&str>().then(|()| -> i32 { panic!("panic first") }),
            just_error::<i32, _>("second"),
        )))
    });
    assert_eq!(msg, "panic first");
}

// ---------------------------------------------------------------------------------------
// environment

struct Label;
impl Query for Label {
    type Value = &'static str;
}

#[test]
fn when_all_children_see_the_parents_scheduler_and_queries() {
    let r = sync_wait(
        read_env(GetScheduler)
            .let_value(|outer: RunLoopScheduler| {
                when_all((read_env(GetScheduler), read_env(Label)))
                    .then(move |(inner, label): (RunLoopScheduler, Option<&str>)| (inner == outer, label))
            })
            .write_env(prop::<Label>("outer")),
    );
    assert_eq!(r, Ok(Some((true, Some("outer")))));
}

// ---------------------------------------------------------------------------------------
// when_all_with_variant

#[test]
fn when_all_with_variant_behaves_as_when_all() {
    assert_eq!(sync_wait(when_all_with_variant((just(1), just("a")))), Ok(Some((1, "a"))));
    assert_eq!(sync_wait(when_all_with_variant((just(1).with_error::<&str>(), just_error::<i32, _>("e")))), Err("e"));
    assert_eq!(sync_wait(when_all_with_variant((just(1), just_stopped::<i32, Infallible>()))), Ok(None));
    let msg = panic_message(|| {
        sync_wait(when_all_with_variant((just(1), just(()).then(|()| -> i32 { panic!("variant boom") }))))
    });
    assert_eq!(msg, "variant boom");
}
