//! Behavioural tests of `defer` and `fork_join`: when the children are built, the pair
//! of values, the error, stopped and panic paths (a panic in a builder included), stop
//! requests from the parent and to the sibling of a failing child, that the right child
//! is stealable on a pool, recursions on any number of workers, and that nothing leaks.

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use common::{DropCounter, Meeting, SAFETY_TIMEOUT, panic_message, pool, stop_probe, thread_name, with_stop};
use senders::factories::Just;
use senders::*;

#[test]
fn defer_builds_its_sender_when_connected_not_before() {
    let built = AtomicUsize::new(0);
    let sndr = defer(|| {
        built.fetch_add(1, Ordering::SeqCst);
        just(7)
    });
    assert_eq!(built.load(Ordering::SeqCst), 0);
    let _op = sndr.connect(common::Sink);
    assert_eq!(built.load(Ordering::SeqCst), 1, "connect builds the sender");
    assert_eq!(sync_wait(defer(|| just(1).then(|x| x + 1))), Ok(Some(2)));
}

#[test]
fn fork_join_builds_its_children_when_it_starts_and_completes_with_the_pair() {
    let built = AtomicUsize::new(0);
    let sndr = fork_join(
        || {
            built.fetch_add(1, Ordering::SeqCst);
            just(1)
        },
        || {
            built.fetch_add(1, Ordering::SeqCst);
            just("a")
        },
    );
    assert_eq!(built.load(Ordering::SeqCst), 0, "nothing is built before the start");
    assert_eq!(sync_wait(sndr), Ok(Some((1, "a"))));
    assert_eq!(built.load(Ordering::SeqCst), 2);
}

#[test]
fn fork_join_error_wins_and_asks_the_sibling_to_stop() {
    let seen = AtomicBool::new(false);
    let r = sync_wait(fork_join(
        || just_error::<u32, _>("e"),
        || {
            stop_probe::<&str>().then(|stopped| {
                seen.store(stopped, Ordering::SeqCst);
                stopped
            })
        },
    ));
    assert_eq!(r, Err("e"));
    assert!(seen.load(Ordering::SeqCst), "the right child must see the left one's failure as a stop request");
}

#[test]
fn fork_join_is_stopped_when_a_child_stops() {
    let r = sync_wait(fork_join(just_stopped::<u32, Infallible>, || just(2u32)));
    assert_eq!(r, Ok(None));
}

#[test]
fn fork_join_forwards_the_parents_stop_request_to_both_children() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let r = sync_wait(with_stop(&source, fork_join(stop_probe::<Infallible>, stop_probe::<Infallible>)));
    assert_eq!(r, Ok(Some((true, true))));
}

#[test]
fn a_panic_in_the_left_builder_is_delivered_and_the_right_one_never_runs() {
    let right_built = AtomicBool::new(false);
    let msg = panic_message(|| {
        sync_wait(fork_join(
            || -> Just<u32> { panic!("left builder") },
            || {
                right_built.store(true, Ordering::SeqCst);
                just(1u32)
            },
        ))
    });
    assert!(msg.contains("left builder"), "{msg}");
    assert!(!right_built.load(Ordering::SeqCst));
}

#[test]
fn a_panic_in_the_right_builder_is_delivered_and_the_left_child_never_starts() {
    let left_ran = AtomicBool::new(false);
    let msg = panic_message(|| {
        sync_wait(fork_join(
            || {
                just(()).then(|()| {
                    left_ran.store(true, Ordering::SeqCst);
                    1u32
                })
            },
            || -> Just<u32> { panic!("right builder") },
        ))
    });
    assert!(msg.contains("right builder"), "{msg}");
    assert!(!left_ran.load(Ordering::SeqCst), "no child starts when a builder panics");
}

#[test]
fn a_panic_in_a_child_on_the_pool_is_delivered_and_the_worker_survives() {
    let pool = pool(2);
    let msg = panic_message(|| {
        sync_wait(starts_on(
            pool.scheduler(),
            fork_join(|| just(1u32), || just(()).then(|()| -> u32 { panic!("right child") })),
        ))
    });
    assert!(msg.contains("right child"), "{msg}");
    let after = sync_wait(starts_on(pool.scheduler(), fork_join(|| just(1), || just(2))));
    assert_eq!(after, Ok(Some((1, 2))));
}

/// The left child runs on the worker that started the `fork_join` and waits until the
/// right child has run on another worker: only a stolen right child lets it go on.
#[test]
fn on_a_pool_the_right_child_is_stolen_by_another_worker() {
    let pool = StaticThreadPool::builder().num_threads(2).build().unwrap();
    let meeting = Meeting::default();
    let names = sync_wait(starts_on(
        pool.scheduler(),
        fork_join(
            || {
                just(()).then(|()| {
                    assert!(meeting.meet(SAFETY_TIMEOUT), "the right child was not run by another worker");
                    thread_name()
                })
            },
            || {
                just(()).then(|()| {
                    assert!(meeting.meet(SAFETY_TIMEOUT), "the left child did not run beside the right one");
                    thread_name()
                })
            },
        ),
    ))
    .unwrap()
    .unwrap();
    assert_ne!(names.0, names.1);
    assert!(names.0.is_some() && names.1.is_some());
}

fn fib(n: u64) -> AnySender<'static, u64> {
    if n < 2 {
        return just(n).boxed();
    }
    fork_join(move || fib(n - 1), move || fib(n - 2)).then(|(a, b)| a + b).boxed()
}

#[test]
fn a_fork_join_recursion_computes_the_same_value_on_any_pool_and_off_it() {
    assert_eq!(sync_wait(fib(18)), Ok(Some(2584)), "sequentially, off the pool");
    for n in [1, 2, 3, 8] {
        for latent in [false, true] {
            let pool = StaticThreadPool::builder().num_threads(n).latent_forks(latent).build().unwrap();
            assert_eq!(
                sync_wait(starts_on(pool.scheduler(), fib(22))),
                Ok(Some(17711)),
                "{n} workers, latent {latent}"
            );
        }
    }
}

#[test]
fn fork_join_drops_everything_it_holds_whether_it_runs_or_not() {
    let drops = Arc::new(AtomicUsize::new(0));
    let counter = || DropCounter(drops.clone());
    let (a, b) = (counter(), counter());
    drop(fork_join(move || just(a), move || just(b)));
    assert_eq!(drops.load(Ordering::SeqCst), 2, "an unstarted fork_join drops its builders");

    let pool = pool(2);
    let (a, b) = (counter(), counter());
    let pair = sync_wait(starts_on(pool.scheduler(), fork_join(move || just(a), move || just(b)))).unwrap().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 2, "the values are handed over, not dropped");
    drop(pair);
    assert_eq!(drops.load(Ordering::SeqCst), 4);
}
