//! A panic never aborts the process and never strands a waiter: panics in a value's
//! `Drop`, in a future's `Drop` and in a user's stop callback reach whoever waits (or,
//! where nobody waits, the scope's join), and every hold, count and forwarder is
//! released on the unwinding path too.

mod common;

use common::{cancel_on_stop, cancel_on_stop_then_panic, panic_message};
use senders::*;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

/// A value whose drop panics with `"drop"`.
struct PanicOnDrop;

impl Drop for PanicOnDrop {
    fn drop(&mut self) {
        panic!("drop");
    }
}

/// Spins until `flag` is set.
fn wait_for(flag: &AtomicBool) {
    while !flag.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
}

// ---------------------------------------------------------------------------------------
// Stop callbacks that panic, run by the crate's own stop requests.

#[test]
fn when_any_delivers_the_panic_of_a_losers_stop_callback() {
    let registered = AtomicBool::new(false);
    let msg = panic_message(|| sync_wait(when_any((cancel_on_stop_then_panic::<Infallible>(&registered), just(())))));
    assert_eq!(msg, "stop callback");
}

#[test]
fn when_all_on_the_pool_keeps_the_first_panic_when_a_stopped_siblings_callback_panics() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let registered = AtomicBool::new(false);
    let reg = &registered;
    let msg = panic_message(|| {
        sync_wait(when_all((
            starts_on(sch.clone(), cancel_on_stop_then_panic::<Infallible>(reg)),
            schedule(&sch).then(move |()| {
                wait_for(reg);
                panic!("sibling")
            }),
        )))
    });
    assert_eq!(msg, "sibling");
}

#[test]
fn timeout_delivers_the_panic_of_the_stopped_senders_callback() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let registered = AtomicBool::new(false);
    let msg = panic_message(|| {
        sync_wait(timeout(
            starts_on(sch.clone(), cancel_on_stop_then_panic::<Infallible>(&registered)),
            &sch,
            Duration::from_millis(10),
        ))
    });
    assert_eq!(msg, "stop callback");
}

/// `stop_when` forwards another thread's request into a `when_any` whose child's stop
/// callback panics: the waiter gets the panic (it is not stranded), and the requesting
/// thread's `request_stop` returns normally.
#[test]
fn a_stop_forwarded_through_stop_when_into_a_panicking_callback_reaches_the_waiter() {
    let source = InplaceStopSource::new();
    let (first, second) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        s.spawn(|| {
            wait_for(&first);
            wait_for(&second);
            source.request_stop();
        });
        let msg = panic_message(|| {
            sync_wait(stop_when(
                when_any((cancel_on_stop_then_panic::<Infallible>(&first), cancel_on_stop(&second))),
                source.token(),
            ))
        });
        assert_eq!(msg, "stop callback");
    });
}

/// A counting scope's `request_stop` runs a spawned sender's panicking stop callback:
/// the request returns, and the join resumes the panic.
#[test]
fn a_scope_stop_callbacks_panic_goes_to_the_join() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    spawn(starts_on(pool.scheduler(), cancel_on_stop_then_panic::<Infallible>(&REGISTERED)), scope.token());
    wait_for(&REGISTERED);
    scope.request_stop();
    assert_eq!(panic_message(|| sync_wait(scope.join())), "stop callback");
}

/// Dropping a `SpawnFuture` requests stop on its work; a panic of the work's stop
/// callback resumes in the drop, and the scope still joins.
#[test]
fn dropping_a_spawn_future_resumes_its_works_stop_callback_panic() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    let fut =
        spawn_future(starts_on(pool.scheduler(), cancel_on_stop_then_panic::<Infallible>(&REGISTERED)), scope.token());
    wait_for(&REGISTERED);
    assert_eq!(panic_message(move || drop(fut)), "stop callback");
    sync_wait(scope.join()).unwrap();
}

// ---------------------------------------------------------------------------------------
// Drops that panic.

/// The result of an abandoned `spawn_future` panics in its drop on a worker: the
/// counting scope's join resumes it, and the process goes on.
#[test]
fn an_abandoned_results_drop_panic_goes_to_the_counting_scopes_join() {
    let pool = common::pool(2);
    let scope = CountingScope::new();
    static RUNNING: Barrier = Barrier::new(2);
    let fut = spawn_future(
        schedule(&pool.scheduler()).then(|()| {
            RUNNING.wait();
            std::thread::sleep(Duration::from_millis(20));
            PanicOnDrop
        }),
        scope.token(),
    );
    RUNNING.wait();
    drop(fut);
    assert_eq!(panic_message(|| sync_wait(scope.join())), "drop");
}

/// The same in a `let_async_scope`: the scope completes with the panic.
#[test]
fn an_abandoned_results_drop_panic_goes_to_let_async_scope() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let running = Barrier::new(2);
    let (sch_ref, running_ref) = (&sch, &running);
    let msg = panic_message(|| {
        sync_wait(just(()).let_async_scope(|tk, ()| {
            let fut = spawn_future(
                schedule(sch_ref).then(move |()| {
                    running_ref.wait();
                    std::thread::sleep(Duration::from_millis(20));
                    PanicOnDrop
                }),
                tk,
            );
            running.wait();
            drop(fut);
        }))
    });
    assert_eq!(msg, "drop");
}

/// A future whose drop panics, under `from_future`: `sync_wait` resumes the panic.
#[test]
fn from_future_delivers_the_panic_of_the_futures_drop() {
    struct Ready(PanicOnDrop);
    impl Future for Ready {
        type Output = u32;
        fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<u32> {
            Poll::Ready(7)
        }
    }
    assert_eq!(panic_message(|| sync_wait(from_future(Ready(PanicOnDrop)))), "drop");
    let pool = common::pool(2);
    let msg = panic_message(|| sync_wait(starts_on(pool.scheduler(), from_future(Ready(PanicOnDrop)))));
    assert_eq!(msg, "drop");
}

/// `when_all` drops the value of a child whose sibling failed before it completes (not
/// with the operation, after): the completion sees it gone, and a panic of its `Drop`
/// replaces the error.
#[test]
fn when_all_drops_a_siblings_value_before_completing_and_its_drop_panic_replaces_the_error() {
    let pool = common::pool(2);
    let live = common::Live::new();
    let failing = || starts_on(pool.scheduler(), just_error::<(), i32>(5));
    let both = when_all((just(live.track(())).with_error::<i32>(), failing())).then(|_| 0);
    let alive = sync_wait(both.upon_error(|_| live.alive()));
    assert_eq!(alive.unwrap(), Some(0), "the value was alive at the completion");
    let msg = panic_message(|| sync_wait(when_all((just(PanicOnDrop).with_error::<i32>(), failing()))));
    assert_eq!(msg, "drop");
}

/// `let_async_scope` drops its scoped value before it completes (not with the
/// operation, after): the completion sees it gone, and a panic of its `Drop` replaces
/// the value.
#[test]
fn let_async_scope_drops_its_value_before_completing_and_its_drop_panic_is_delivered() {
    let pool = common::pool(2);
    let live = common::Live::new();
    let scoped = just(live.track(())).let_async_scope(|_, _| just(())).then(|()| live.alive());
    assert_eq!(
        sync_wait(starts_on(pool.scheduler(), scoped)).unwrap(),
        Some(0),
        "the value was alive at the completion"
    );
    let scoped = just(PanicOnDrop).let_async_scope(|_, _| just(1));
    let msg = panic_message(|| sync_wait(starts_on(pool.scheduler(), scoped)));
    assert_eq!(msg, "drop");
}

/// A hop stopped by a stop request drops the value it carried inside a catch: the
/// `Drop`'s panic replaces the stop.
#[test]
fn a_stopped_hop_delivers_the_panic_of_its_values_drop() {
    let pool = common::pool(2);
    let source = InplaceStopSource::new();
    source.request_stop();
    let msg = panic_message(|| sync_wait(stop_when(just(PanicOnDrop).continues_on(pool.scheduler()), source.token())));
    assert_eq!(msg, "drop");
}

/// `then` on the error path drops its function; when that `Drop` panics, the error is
/// dropped too before the panic is delivered.
#[test]
fn an_error_is_dropped_before_the_panic_of_a_discarded_functions_drop_is_delivered() {
    let pool = common::pool(2);
    let live = common::Live::new();
    let error = live.track(1);
    let msg = panic_message(|| {
        let f = {
            let bomb = PanicOnDrop;
            move |()| drop(bomb)
        };
        sync_wait(starts_on(pool.scheduler(), just_error::<(), _>(error).then(f)))
    });
    assert_eq!(msg, "drop");
    live.assert_none_alive("when sync_wait returned");
}
