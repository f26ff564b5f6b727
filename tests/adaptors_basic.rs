//! Behavioural tests of the factories (`just`, `just_error`, `just_stopped`, `read_env`),
//! the single-channel adaptors (`then`, `upon_error`, `upon_stopped`, `bulk`), the channel
//! reshapers (`into_variant`, `stopped_as_optional`, `stopped_as_error`, `with_error`,
//! `map_error`), `write_env`, and `sync_wait`'s mapping of the four completion channels.
//!
//! Each algorithm is checked on the value, error and stopped paths, and for a panic in
//! its user function: the panic must reach the caller of `sync_wait` with its message.

mod common;

use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{panic_message, stop_probe, thread_name, with_stop};
use senders::*;

// ---------------------------------------------------------------------------------------
// just, just_error, just_stopped, sync_wait

#[test]
fn just_completes_with_its_value() {
    assert_eq!(sync_wait(just(5)), Ok(Some(5)));
    assert_eq!(sync_wait(just((1, "two", 3.0))), Ok(Some((1, "two", 3.0))));
    // A value that is neither `Copy` nor `Clone`-dependent is moved through.
    assert_eq!(sync_wait(just(String::from("moved"))), Ok(Some(String::from("moved"))));
}

#[test]
fn just_error_completes_with_its_error() {
    assert_eq!(sync_wait(just_error::<i32, _>("bad")), Err("bad"));
}

#[test]
fn just_stopped_completes_stopped() {
    assert_eq!(sync_wait(just_stopped::<i32, Infallible>()), Ok(None));
    assert_eq!(sync_wait(just_stopped::<i32, &str>()), Ok(None));
}

#[test]
fn sync_wait_resumes_a_panic_with_its_original_payload() {
    let payload = std::panic::catch_unwind(|| sync_wait(just(()).then(|()| -> i32 { std::panic::panic_any(42_u32) })))
        .expect_err("the panic must reach the caller of sync_wait");
    assert_eq!(payload.downcast_ref::<u32>(), Some(&42));
}

#[test]
fn sync_wait_env_scheduler_is_current_for_inline_work() {
    // The example of `read_env`'s documentation: the waiting thread is the loop's thread.
    let r = sync_wait(read_env(GetScheduler).then(|s: RunLoopScheduler| s.is_current()));
    assert_eq!(r, Ok(Some(true)));
}

#[test]
fn sync_wait_env_scheduler_runs_work_on_the_calling_thread() {
    let caller = std::thread::current().id();
    let r = sync_wait(read_env(GetScheduler).let_value(|s: RunLoopScheduler| {
        let again = s.clone();
        s.schedule().then(move |()| (std::thread::current().id(), again.is_current()))
    }));
    assert_eq!(r, Ok(Some((caller, true))));
}

#[test]
fn sync_wait_env_scheduler_is_not_current_on_another_thread() {
    let ctx = SingleThreadContext::new();
    let r = sync_wait(
        read_env(GetScheduler)
            .let_value(|s: RunLoopScheduler| ctx.scheduler().schedule().then(move |()| s.is_current())),
    );
    assert_eq!(r, Ok(Some(false)));
}

#[test]
fn sync_wait_env_never_requests_stop() {
    assert_eq!(sync_wait(stop_probe::<Infallible>()), Ok(Some(false)));
}

#[test]
fn sync_wait_lets_work_on_another_thread_borrow_the_callers_stack() {
    let ctx = SingleThreadContext::with_name("borrower");
    let data: Vec<i32> = (1..=3).collect();
    let mut out = Vec::new();
    let r = sync_wait(ctx.scheduler().schedule().then(|()| {
        out.push(data.iter().sum::<i32>());
        thread_name()
    }));
    assert_eq!(r, Ok(Some(Some("borrower".to_owned()))));
    assert_eq!(out, [6]);
}

// ---------------------------------------------------------------------------------------
// read_env

struct Tenant;
impl Query for Tenant {
    type Value = String;
}

struct Level;
impl Query for Level {
    type Value = u8;
}

#[test]
fn read_env_of_an_unanswered_user_query_is_none() {
    assert_eq!(sync_wait(read_env(Tenant)), Ok(Some(None)));
}

#[test]
fn read_env_of_a_written_user_query_is_its_value() {
    let r = sync_wait(read_env(Tenant).write_env(prop::<Tenant>("acme".to_owned())));
    assert_eq!(r, Ok(Some(Some("acme".to_owned()))));
}

// ---------------------------------------------------------------------------------------
// then

#[test]
fn then_maps_the_value() {
    assert_eq!(sync_wait(just(2).then(|x| x * 10)), Ok(Some(20)));
    assert_eq!(sync_wait(just(2).then(|x| x + 1).then(|x| x.to_string())), Ok(Some("3".to_owned())));
}

#[test]
fn then_passes_an_error_through_without_calling_f() {
    let r = sync_wait(just_error::<i32, _>("bad").then(|_x| -> i32 { panic!("then must not run on error") }));
    assert_eq!(r, Err("bad"));
}

#[test]
fn then_passes_stopped_through_without_calling_f() {
    let r = sync_wait(just_stopped::<i32, &str>().then(|_x| -> i32 { panic!("then must not run on stop") }));
    assert_eq!(r, Ok(None));
}

#[test]
fn then_panic_reaches_the_caller() {
    let msg = panic_message(|| sync_wait(just(1).then(|_x| -> i32 { panic!("then boom") })));
    assert_eq!(msg, "then boom");
}

#[test]
fn then_panic_stops_the_rest_of_the_chain() {
    let later = AtomicUsize::new(0);
    let msg = panic_message(|| {
        sync_wait(just(1).then(|_x| -> i32 { panic!("first") }).then(|x| {
            later.fetch_add(1, Ordering::SeqCst);
            x
        }))
    });
    assert_eq!(msg, "first");
    assert_eq!(later.load(Ordering::SeqCst), 0, "a then after a panic must not run");
}

#[test]
fn then_runs_on_the_thread_that_delivered_the_value() {
    let ctx = SingleThreadContext::with_name("then-thread");
    let r = sync_wait(ctx.scheduler().schedule().then(|()| thread_name()));
    assert_eq!(r, Ok(Some(Some("then-thread".to_owned()))));
}

// ---------------------------------------------------------------------------------------
// upon_error

#[test]
fn upon_error_passes_a_value_through() {
    let r = sync_wait(just(1).with_error::<&str>().upon_error(|_e| -> i32 { panic!("must not run on a value") }));
    assert_eq!(r, Ok(Some(1)));
}

#[test]
fn upon_error_turns_an_error_into_a_value() {
    let r: Result<Option<i32>, Infallible> =
        sync_wait(just_error::<i32, _>("bad").upon_error(|e: &str| e.len() as i32));
    assert_eq!(r, Ok(Some(3)));
}

#[test]
fn upon_error_passes_stopped_through() {
    let r = sync_wait(just_stopped::<i32, &str>().upon_error(|_e| -> i32 { panic!("must not run on stop") }));
    assert_eq!(r, Ok(None));
}

#[test]
fn upon_error_panic_reaches_the_caller() {
    let msg =
        panic_message(|| sync_wait(just_error::<i32, _>("bad").upon_error(|_e| -> i32 { panic!("upon_error boom") })));
    assert_eq!(msg, "upon_error boom");
}

#[test]
fn upon_error_does_not_intercept_a_panic() {
    let msg = panic_message(|| {
        sync_wait(
            just(())
                .with_error::<&str>()
                .then(|()| -> i32 { panic!("upstream panic") })
                .upon_error(|_e| -> i32 { panic!("upon_error must not see panics") }),
        )
    });
    assert_eq!(msg, "upstream panic");
}

// ---------------------------------------------------------------------------------------
// upon_stopped

#[test]
fn upon_stopped_passes_a_value_through() {
    let r = sync_wait(just(5).upon_stopped(|| -> i32 { panic!("must not run on a value") }));
    assert_eq!(r, Ok(Some(5)));
}

#[test]
fn upon_stopped_passes_an_error_through() {
    let r = sync_wait(just_error::<i32, _>("e").upon_stopped(|| -> i32 { panic!("must not run on an error") }));
    assert_eq!(r, Err("e"));
}

#[test]
fn upon_stopped_turns_stopped_into_a_value() {
    assert_eq!(sync_wait(just_stopped::<i32, &str>().upon_stopped(|| -1)), Ok(Some(-1)));
}

#[test]
fn upon_stopped_panic_reaches_the_caller() {
    let msg = panic_message(|| {
        sync_wait(just_stopped::<i32, Infallible>().upon_stopped(|| -> i32 { panic!("upon_stopped boom") }))
    });
    assert_eq!(msg, "upon_stopped boom");
}

#[test]
fn upon_stopped_does_not_intercept_a_panic() {
    let msg = panic_message(|| {
        sync_wait(
            just(())
                .then(|()| -> i32 { panic!("upstream panic") })
                .upon_stopped(|| -> i32 { panic!("upon_stopped must not see panics") }),
        )
    });
    assert_eq!(msg, "upstream panic");
}

// ---------------------------------------------------------------------------------------
// into_variant

#[test]
fn into_variant_is_the_identity_on_every_channel() {
    assert_eq!(sync_wait(just(3).into_variant()), Ok(Some(3)));
    assert_eq!(sync_wait(just_error::<i32, _>("e").into_variant()), Err("e"));
    assert_eq!(sync_wait(just_stopped::<i32, &str>().into_variant()), Ok(None));
    let msg = panic_message(|| sync_wait(just(()).then(|()| -> i32 { panic!("through into_variant") }).into_variant()));
    assert_eq!(msg, "through into_variant");
}

// ---------------------------------------------------------------------------------------
// stopped_as_optional

#[test]
fn stopped_as_optional_wraps_a_value_in_some() {
    assert_eq!(sync_wait(just(4).stopped_as_optional()), Ok(Some(Some(4))));
}

#[test]
fn stopped_as_optional_turns_stopped_into_none() {
    assert_eq!(sync_wait(just_stopped::<i32, &str>().stopped_as_optional()), Ok(Some(None)));
}

#[test]
fn stopped_as_optional_passes_an_error_through() {
    assert_eq!(sync_wait(just_error::<i32, _>("e").stopped_as_optional()), Err("e"));
}

#[test]
fn stopped_as_optional_passes_a_panic_through() {
    let msg = panic_message(|| {
        sync_wait(just(()).then(|()| -> i32 { panic!("through stopped_as_optional") }).stopped_as_optional())
    });
    assert_eq!(msg, "through stopped_as_optional");
}

// ---------------------------------------------------------------------------------------
// stopped_as_error

#[test]
fn stopped_as_error_passes_a_value_through() {
    assert_eq!(sync_wait(just(4).with_error::<&str>().stopped_as_error("cancelled")), Ok(Some(4)));
}

#[test]
fn stopped_as_error_turns_stopped_into_the_error() {
    assert_eq!(sync_wait(just_stopped::<i32, &str>().stopped_as_error("cancelled")), Err("cancelled"));
}

#[test]
fn stopped_as_error_passes_the_original_error_through() {
    assert_eq!(sync_wait(just_error::<i32, _>("original").stopped_as_error("cancelled")), Err("original"));
}

#[test]
fn stopped_as_error_passes_a_panic_through() {
    let msg = panic_message(|| {
        sync_wait(
            just(())
                .with_error::<&str>()
                .then(|()| -> i32 { panic!("through stopped_as_error") })
                .stopped_as_error("cancelled"),
        )
    });
    assert_eq!(msg, "through stopped_as_error");
}

// ---------------------------------------------------------------------------------------
// with_error

#[test]
fn with_error_passes_a_value_through() {
    let r: Result<Option<i32>, String> = sync_wait(just(7).with_error::<String>());
    assert_eq!(r, Ok(Some(7)));
}

#[test]
fn with_error_passes_stopped_through() {
    assert_eq!(sync_wait(just_stopped::<i32, Infallible>().with_error::<String>()), Ok(None));
}

#[test]
fn with_error_passes_a_panic_through() {
    let msg =
        panic_message(|| sync_wait(just(()).then(|()| -> i32 { panic!("through with_error") }).with_error::<String>()));
    assert_eq!(msg, "through with_error");
}

#[test]
fn with_error_lets_an_infallible_sender_continue_into_a_failing_one() {
    let r = sync_wait(just(1).with_error::<&str>().let_value(|_x| just_error::<i32, &str>("later failure")));
    assert_eq!(r, Err("later failure"));
}

// ---------------------------------------------------------------------------------------
// map_error

#[test]
fn map_error_passes_a_value_through() {
    let r: Result<Option<i32>, String> =
        sync_wait(just(1).with_error::<i32>().map_error(|_e| -> String { panic!("must not run on a value") }));
    assert_eq!(r, Ok(Some(1)));
}

#[test]
fn map_error_maps_the_error_and_its_type() {
    let r: Result<Option<()>, String> = sync_wait(just_error::<(), i32>(2).map_error(|e| format!("code {e}")));
    assert_eq!(r, Err("code 2".to_owned()));
}

#[test]
fn map_error_passes_stopped_through() {
    let r = sync_wait(just_stopped::<(), i32>().map_error(|_e| -> String { panic!("must not run on stop") }));
    assert_eq!(r, Ok(None));
}

#[test]
fn map_error_panic_reaches_the_caller() {
    let msg =
        panic_message(|| sync_wait(just_error::<(), i32>(2).map_error(|_e| -> String { panic!("map_error boom") })));
    assert_eq!(msg, "map_error boom");
}

#[test]
fn map_error_does_not_intercept_a_panic() {
    let msg = panic_message(|| {
        sync_wait(
            just(())
                .with_error::<i32>()
                .then(|()| -> i32 { panic!("upstream panic") })
                .map_error(|_e| -> String { panic!("map_error must not see panics") }),
        )
    });
    assert_eq!(msg, "upstream panic");
}

// ---------------------------------------------------------------------------------------
// bulk

/// A bulk iteration that fails the test if it is ever called.
fn bulk_must_not_run<V>(i: usize, _: &V) {
    panic!("bulk iteration {i} must not run");
}

#[test]
fn bulk_visits_every_index_exactly_once_and_forwards_the_value() {
    const N: usize = 300;
    let hits: Vec<AtomicUsize> = (0..N).map(|_| AtomicUsize::new(0)).collect();
    let r = sync_wait(just(String::from("value")).bulk(N, |i, v: &String| {
        assert_eq!(v, "value");
        hits[i].fetch_add(1, Ordering::SeqCst);
    }));
    assert_eq!(r, Ok(Some(String::from("value"))));
    for (i, h) in hits.iter().enumerate() {
        assert_eq!(h.load(Ordering::SeqCst), 1, "index {i}");
    }
}

#[test]
fn default_bulk_runs_the_iterations_in_order() {
    let order = Mutex::new(Vec::new());
    let r = sync_wait(just(()).bulk(100, |i, _: &()| order.lock().unwrap().push(i)));
    assert_eq!(r, Ok(Some(())));
    assert_eq!(order.into_inner().unwrap(), (0..100).collect::<Vec<_>>());
}

#[test]
fn bulk_of_shape_zero_never_calls_f_and_forwards_the_value() {
    let r = sync_wait(just(9).bulk(0, bulk_must_not_run));
    assert_eq!(r, Ok(Some(9)));
}

#[test]
fn bulk_error_at_index_k_stops_further_iterations() {
    let visited = Mutex::new(Vec::new());
    let r = sync_wait(just(()).with_error::<usize>().bulk(100, |i, _: &()| {
        visited.lock().unwrap().push(i);
        if i == 7 { Err(i) } else { Ok(()) }
    }));
    assert_eq!(r, Err(7));
    assert_eq!(visited.into_inner().unwrap(), (0..=7).collect::<Vec<_>>());
}

#[test]
fn bulk_panic_at_index_k_reaches_the_caller_and_stops_further_iterations() {
    let visited = AtomicUsize::new(0);
    let msg = panic_message(|| {
        sync_wait(just(()).bulk(100, |i, _: &()| {
            visited.fetch_add(1, Ordering::SeqCst);
            if i == 3 {
                panic!("bulk boom at {i}");
            }
        }))
    });
    assert_eq!(msg, "bulk boom at 3");
    assert_eq!(visited.load(Ordering::SeqCst), 4);
}

#[test]
fn bulk_passes_a_predecessor_error_through_without_calling_f() {
    let r = sync_wait(just_error::<i32, _>("e").bulk(10, bulk_must_not_run));
    assert_eq!(r, Err("e"));
}

#[test]
fn bulk_passes_a_predecessor_stop_through_without_calling_f() {
    let r = sync_wait(just_stopped::<i32, Infallible>().bulk(10, bulk_must_not_run));
    assert_eq!(r, Ok(None));
}

#[test]
fn bulk_passes_a_predecessor_panic_through_without_calling_f() {
    let msg =
        panic_message(|| sync_wait(just(()).then(|()| -> i32 { panic!("before bulk") }).bulk(10, bulk_must_not_run)));
    assert_eq!(msg, "before bulk");
}

#[test]
fn bulk_under_a_stopped_env_completes_stopped_without_calling_f() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let r = sync_wait(with_stop(&source, just(1).bulk(10, bulk_must_not_run)));
    assert_eq!(r, Ok(None));
}

#[test]
fn bulk_stops_soon_after_a_stop_request_during_the_iterations() {
    const N: usize = 10_000;
    let source = InplaceStopSource::new();
    let visited = AtomicUsize::new(0);
    let r = sync_wait(with_stop(
        &source,
        just(()).bulk(N, |i, _: &()| {
            visited.fetch_add(1, Ordering::SeqCst);
            if i == 10 {
                source.request_stop();
            }
        }),
    ));
    assert_eq!(r, Ok(None), "a stop request during bulk completes it stopped");
    let visited = visited.load(Ordering::SeqCst);
    // The stop token is checked every 64 iterations: the iterations up to the next check
    // still run, none after it.
    assert!((11..=64).contains(&visited), "visited {visited} iterations");
}

// ---------------------------------------------------------------------------------------
// write_env

#[test]
fn write_env_forwards_every_channel() {
    let p = || prop::<Level>(1);
    assert_eq!(sync_wait(just(1).write_env(p())), Ok(Some(1)));
    assert_eq!(sync_wait(just_error::<i32, _>("e").write_env(p())), Err("e"));
    assert_eq!(sync_wait(just_stopped::<i32, &str>().write_env(p())), Ok(None));
    let msg = panic_message(|| sync_wait(just(()).then(|()| -> i32 { panic!("through write_env") }).write_env(p())));
    assert_eq!(msg, "through write_env");
}

#[test]
fn write_env_inner_write_of_the_same_query_wins() {
    let r = sync_wait(read_env(Level).write_env(prop::<Level>(1)).write_env(prop::<Level>(2)));
    assert_eq!(r, Ok(Some(Some(1))));
}

#[test]
fn write_env_keeps_outer_answers_to_other_queries() {
    let r =
        sync_wait(
            when_all((read_env(Level), read_env(Tenant)))
                .write_env(prop::<Tenant>("inner".to_owned()))
                .write_env(prop::<Level>(3)),
        );
    assert_eq!(r, Ok(Some((Some(3), Some("inner".to_owned())))));
}

#[test]
fn write_env_is_visible_only_to_the_wrapped_sender() {
    let r = sync_wait(when_all((read_env(Level).write_env(prop::<Level>(1)), read_env(Level))));
    assert_eq!(r, Ok(Some((Some(1), None))));
}

#[test]
fn write_env_is_visible_through_then_and_let_value() {
    let r = sync_wait(
        just(10).then(|x| x + 1).let_value(|x| read_env(Level).then(move |l| (x, l))).write_env(prop::<Level>(5)),
    );
    assert_eq!(r, Ok(Some((11, Some(5)))));
}

#[test]
fn write_env_keeps_the_stop_token() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let r = sync_wait(with_stop(&source, stop_probe::<Infallible>().write_env(prop::<Level>(1))));
    assert_eq!(r, Ok(Some(true)));
}

/// `write_env` around work that crosses threads: the query written outside answers the
/// child on the other thread (every query forwards through every adaptor).
#[test]
fn write_env_around_cross_thread_work() {
    struct Level;
    impl Query for Level {
        type Value = u8;
    }
    let ctx = SingleThreadContext::new();
    let r = sync_wait(starts_on(ctx.scheduler(), read_env(Level)).write_env(prop::<Level>(1)));
    assert_eq!(r, Ok(Some(Some(1))));
    let r = sync_wait(read_env(Level).continues_on(ctx.scheduler()).write_env(prop::<Level>(2)));
    assert_eq!(r, Ok(Some(Some(2))));
}

// ---------------------------------------------------------------------------------------
// User data a completion discards (a function it does not call, a value it does not
// deliver) is dropped before the receiver downstream completes, and a panic in its
// `Drop` becomes the completion.

/// Calls its function when dropped.
struct OnDrop<F: FnMut() + Send>(F);

impl<F: FnMut() + Send> Drop for OnDrop<F> {
    fn drop(&mut self) {
        (self.0)()
    }
}

/// A value whose `Drop` panics with `msg`.
fn panics_on_drop(msg: &'static str) -> OnDrop<impl FnMut() + Send + Sync + Clone> {
    OnDrop(move || panic!("{msg}"))
}

#[test]
fn a_discarded_function_is_dropped_before_the_completion_downstream() {
    let log = Mutex::new(Vec::new());
    let dropped = OnDrop(|| log.lock().unwrap().push("dropped"));
    let work = just_stopped::<(), Infallible>()
        .then(move |()| drop(dropped))
        .upon_stopped(|| log.lock().unwrap().push("completed"));
    assert_eq!(sync_wait(work), Ok(Some(())));
    assert_eq!(*log.lock().unwrap(), ["dropped", "completed"]);
}

#[test]
fn a_panic_in_the_drop_of_a_discarded_function_becomes_the_completion() {
    macro_rules! check {
        ($name:expr, $work:expr) => {
            assert_eq!(panic_message(|| sync_wait($work)), "discarded", $name)
        };
    }
    let d = || panics_on_drop("discarded");
    check!(
        "then, error path",
        just_error::<(), _>(1).then({
            let d = d();
            move |()| drop(d)
        })
    );
    check!(
        "then, stopped path",
        just_stopped::<(), Infallible>().then({
            let d = d();
            move |()| drop(d)
        })
    );
    check!(
        "upon_error, value path",
        just(()).with_error::<i32>().upon_error({
            let d = d();
            move |_| drop(d)
        })
    );
    check!(
        "upon_stopped, value path",
        just(()).upon_stopped({
            let d = d();
            move || drop(d)
        })
    );
    check!(
        "upon_stopped, error path",
        just_error::<(), _>(1).upon_stopped({
            let d = d();
            move || drop(d)
        })
    );
    check!(
        "map_error, value path",
        just(()).with_error::<i32>().map_error({
            let d = d();
            move |e| {
                drop(d);
                e
            }
        })
    );
    check!(
        "map_error, stopped path",
        just_stopped::<(), i32>().map_error({
            let d = d();
            move |e| {
                drop(d);
                e
            }
        })
    );
    check!(
        "bulk, value path",
        just(()).bulk(3, {
            let d = d();
            move |_, _: &()| {
                let _ = &d;
            }
        })
    );
    check!(
        "bulk, stopped path",
        just_stopped::<(), Infallible>().bulk(3, {
            let d = d();
            move |_, _: &()| {
                let _ = &d;
            }
        })
    );
    check!(
        "bulk_each, value path",
        just(vec![1, 2]).bulk_each({
            let d = d();
            move |_, x: &mut i32| {
                let _ = &d;
                *x += 1
            }
        })
    );
    check!("stopped_as_error, value path", just(()).with_error::<OnDrop<_>>().stopped_as_error(d()));
    // The first panic wins: the discarded function's is dropped.
    let msg = panic_message(|| {
        sync_wait(just(()).then(|()| panic!("first")).then({
            let d = d();
            move |()| drop(d)
        }))
    });
    assert_eq!(msg, "first");
}

#[test]
fn a_panic_in_the_drop_of_a_written_answer_becomes_the_completion() {
    struct Guarded;
    impl Query for Guarded {
        type Value = std::sync::Arc<OnDrop<fn()>>;
    }
    let answer = std::sync::Arc::new(OnDrop((|| panic!("answer dropped")) as fn()));
    let msg = panic_message(|| sync_wait(just(1).write_env(prop::<Guarded>(answer))));
    assert_eq!(msg, "answer dropped");
}

#[test]
fn a_panic_in_a_discarded_drop_on_the_pool_reaches_the_caller_and_the_worker_survives() {
    let pool = common::pool(1);
    let sch = pool.scheduler();
    let source = InplaceStopSource::new();
    source.request_stop();
    // The pool sees the stop and completes stopped; `then`'s function is discarded there.
    let d = panics_on_drop("discarded on a worker");
    let msg = panic_message(|| sync_wait(stop_when(schedule(&sch).then(move |()| drop(d)), source.token())));
    assert_eq!(msg, "discarded on a worker");
    assert_eq!(sync_wait(schedule(&sch).then(|()| 7)), Ok(Some(7)));
}

#[test]
fn bulk_drops_a_value_it_does_not_deliver_before_completing_on_and_off_the_pool() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    fn failing<T>(i: usize, _: &T) -> Result<(), i32> {
        if i == 5_000 { Err(1) } else { Ok(()) }
    }
    for on_pool in [false, true] {
        let log = Mutex::new(Vec::new());
        let value = OnDrop(|| log.lock().unwrap().push("dropped"));
        let done = |e: i32| log.lock().unwrap().push(if e == 1 { "completed" } else { "wrong error" });
        let result = if on_pool {
            let start = schedule(&sch).with_error::<i32>().then(move |()| value);
            sync_wait(start.bulk(10_000, failing).then(|_| ()).upon_error(done))
        } else {
            let start = just(()).with_error::<i32>().then(move |()| value);
            sync_wait(start.bulk(10_000, failing).then(|_| ()).upon_error(done))
        };
        assert_eq!(result, Ok(Some(())));
        assert_eq!(*log.lock().unwrap(), ["dropped", "completed"], "on the pool: {on_pool}");
    }
    // A panic in the undelivered value's `Drop` replaces the error.
    for on_pool in [false, true] {
        let msg = if on_pool {
            let start = schedule(&sch).with_error::<i32>().then(|()| panics_on_drop("value dropped"));
            panic_message(|| sync_wait(start.bulk(10_000, failing).then(|_| ())))
        } else {
            let start = just(()).with_error::<i32>().then(|()| panics_on_drop("value dropped"));
            panic_message(|| sync_wait(start.bulk(10_000, failing).then(|_| ())))
        };
        assert_eq!(msg, "value dropped", "on the pool: {on_pool}");
    }
}

/// A query that tells whether the receiver's stop token is the expected one.
struct TokenIs<'a>(StopToken<'a>);

impl<E: Env + ?Sized> senders::env::EnvQuery<E> for TokenIs<'_> {
    type Output = bool;
    fn ask(&self, env: &E) -> bool {
        env.stop_token() == self.0
    }
}

#[test]
fn stop_when_with_a_token_that_cannot_stop_is_the_identity() {
    let parent = InplaceStopSource::new();
    let given = InplaceStopSource::new();
    // The given token can never stop: the child sees its receiver's token itself.
    let sees_parent = stop_when(read_env(TokenIs(parent.token())), StopToken::never());
    assert_eq!(sync_wait(with_stop(&parent, sees_parent)), Ok(Some(true)));
    // The receiver's token can never stop (`sync_wait`'s): the child sees the given one.
    assert_eq!(sync_wait(stop_when(read_env(TokenIs(given.token())), given.token())), Ok(Some(true)));
    // Both can stop: the child sees a merged token, neither of the two.
    let merged = stop_when(read_env(TokenIs(given.token())), given.token());
    assert_eq!(sync_wait(with_stop(&parent, merged)), Ok(Some(false)));
    let merged = stop_when(read_env(TokenIs(parent.token())), given.token());
    assert_eq!(sync_wait(with_stop(&parent, merged)), Ok(Some(false)));
    // Passed through, the token still carries its request.
    given.request_stop();
    assert_eq!(sync_wait(stop_when(read_env(StopRequested), given.token())), Ok(Some(true)));
    assert_eq!(sync_wait(with_stop(&given, stop_when(read_env(StopRequested), StopToken::never()))), Ok(Some(true)));
}

/// A query that tells whether the receiver's stop token has been asked to stop.
struct StopRequested;

impl<E: Env + ?Sized> senders::env::EnvQuery<E> for StopRequested {
    type Output = bool;
    fn ask(&self, env: &E) -> bool {
        env.stop_token().stop_requested()
    }
}
