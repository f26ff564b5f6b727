//! `when_any` and `when_any_iter`: the first completion decides (value, error, stopped or
//! panic), the others are stopped, the operation ends only after every child, a loser's
//! panic is never lost, a stop request from the receiver completes it stopped, children
//! completing inline at start and at the same time on two workers, bad input (a panicking
//! `connect`, no child). The races are model-checked in `tests/loom_when_any.rs`.

mod common;

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{
    DropCounter, PanicsInConnect, WaitProbe, cancel_on_stop, panic_message, thread_name, wait_for_stop, with_stop,
};
use senders::*;

/// Longer than any test may take: a child that waits this long must be stopped.
const HOUR: Duration = Duration::from_secs(3600);

#[test]
fn the_first_value_wins_and_a_pending_sibling_is_stopped_at_once() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let start = Instant::now();
    let slow = schedule_after(&sch, HOUR).then(|()| "slow");
    let fast = schedule(&sch).then(|()| "fast");
    assert_eq!(sync_wait(when_any((slow, fast))), Ok(Some("fast")));
    assert!(start.elapsed() < Duration::from_secs(10), "the loser was stopped, not waited for");
}

#[test]
fn a_child_completing_inline_at_start_wins_and_later_children_start_stopped() {
    // The first child completes inside `start`; the second then starts with a token that
    // is already stopped, so it completes stopped as soon as it registers.
    let registered = AtomicBool::new(false);
    assert_eq!(sync_wait(when_any((just(()), cancel_on_stop::<Infallible>(&registered)))), Ok(Some(())));
    assert!(registered.load(Ordering::SeqCst), "the second child was started");
    // Of two inline children, the first started wins.
    assert_eq!(sync_wait(when_any((just(1), just(2)))), Ok(Some(1)));
    assert_eq!(sync_wait(when_any((just(7),))), Ok(Some(7)));
}

#[test]
fn an_error_a_stop_or_a_panic_can_win() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let pending = || schedule_after(&sch, HOUR).then(|()| 0).with_error::<&str>();
    assert_eq!(sync_wait(when_any((pending(), just_error::<i32, &str>("bad")))), Err("bad"));
    assert_eq!(sync_wait(when_any((just_stopped::<i32, &str>(), pending()))), Ok(None));
    let panics = schedule(&sch).with_error::<&str>().then(|()| -> i32 { panic!("child panicked") });
    assert_eq!(panic_message(|| sync_wait(when_any((pending(), panics)))), "child panicked");
}

#[test]
fn a_losers_panic_replaces_the_winners_value() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    // The loser panics when it is stopped (its `upon_stopped` function).
    let loser = schedule_after(&sch, HOUR).then(|()| 0).upon_stopped(|| -> i32 { panic!("loser panicked") });
    assert_eq!(panic_message(|| sync_wait(when_any((loser, just(1))))), "loser panicked");
}

#[test]
fn a_losers_value_is_dropped_before_the_operation_completes() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let drops = Arc::new(AtomicUsize::new(0));
    let counter = DropCounter(drops.clone());
    // The winner completes inline at start; the loser ignores stop requests and completes
    // with a value later, on a worker.
    let loser = schedule(&sch).then(move |()| Some(counter));
    let seen = sync_wait(when_any((just(None), loser)).then(|v: Option<DropCounter>| v.is_none()));
    assert_eq!(seen, Ok(Some(true)));
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the loser's value was dropped before completion");
}

#[test]
fn the_operation_completes_only_after_every_child() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let ctx = SingleThreadContext::new();
    let probe = WaitProbe::default();
    let done = AtomicBool::new(false);
    // The loser blocks its thread until it sees the stop request, then records it.
    let loser = starts_on(ctx.scheduler(), wait_for_stop::<Infallible>(&probe)).then(|()| {
        done.store(true, Ordering::SeqCst);
    });
    let winner = schedule(&sch).then(|()| {
        assert!(probe.wait_started());
    });
    assert_eq!(sync_wait(when_any((loser, winner))), Ok(Some(())));
    assert!(probe.saw_stop(), "the loser was asked to stop and had finished");
    assert!(!done.load(Ordering::SeqCst), "the loser completed stopped, its `then` never ran");
}

#[test]
fn a_stop_request_before_start_completes_stopped_without_starting_children() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let started = AtomicBool::new(false);
    let child = just(()).then(|()| started.store(true, Ordering::SeqCst));
    assert_eq!(sync_wait(with_stop(&source, when_any((child, just(()))))), Ok(None));
    assert!(!started.load(Ordering::SeqCst));
}

#[test]
fn a_stop_request_while_running_reaches_every_child() {
    let a = SingleThreadContext::new();
    let b = SingleThreadContext::new();
    let (pa, pb) = (WaitProbe::default(), WaitProbe::default());
    let source = InplaceStopSource::new();
    std::thread::scope(|s| {
        let run = s.spawn(|| {
            let race = when_any((
                starts_on(a.scheduler(), wait_for_stop::<Infallible>(&pa)),
                starts_on(b.scheduler(), wait_for_stop::<Infallible>(&pb)),
            ));
            sync_wait(with_stop(&source, race))
        });
        assert!(pa.wait_started() && pb.wait_started());
        source.request_stop();
        assert_eq!(run.join().unwrap(), Ok(None));
    });
    assert!(pa.saw_stop() && pb.saw_stop());
}

#[test]
fn a_stop_request_after_a_value_won_completes_stopped() {
    // The reference's rule: the receiver asked to stop before the last child finished, so
    // the winner's value is dropped and the operation completes stopped.
    let pool = common::pool(1);
    let ctx = SingleThreadContext::new();
    let source = InplaceStopSource::new();
    let (loser_running, won) = (AtomicBool::new(false), AtomicBool::new(false));
    std::thread::scope(|s| {
        let run = s.spawn(|| {
            // The loser, once running, ignores its own stop request: it runs until the
            // receiver's source is stopped (or a safety timeout).
            let loser = schedule(&ctx.scheduler()).then(|()| {
                loser_running.store(true, Ordering::SeqCst);
                let deadline = Instant::now() + Duration::from_secs(10);
                while !source.stop_requested() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(1));
                }
                2
            });
            // The winner completes once the loser runs.
            let winner = schedule(&pool.scheduler()).then(|()| {
                while !loser_running.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
                won.store(true, Ordering::SeqCst);
                1
            });
            sync_wait(with_stop(&source, when_any((loser, winner))))
        });
        while !won.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
        source.request_stop();
        assert_eq!(run.join().unwrap(), Ok(None));
    });
}

#[test]
fn a_panicking_connect_is_delivered_and_nothing_starts() {
    let started = AtomicBool::new(false);
    let first = just(()).then(|()| {
        started.store(true, Ordering::SeqCst);
        1
    });
    let msg = panic_message(|| sync_wait(when_any((first, PanicsInConnect))));
    assert!(msg.contains("connect"), "{msg}");
    assert!(!started.load(Ordering::SeqCst));
}

#[test]
fn the_run_time_form_races_any_number_and_none_completes_stopped() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let children: Vec<AnySender<'_, usize>> = (0..16)
        .map(|i| {
            if i == 11 {
                schedule(&sch).then(move |()| i).boxed()
            } else {
                schedule_after(&sch, HOUR).then(move |()| i).boxed()
            }
        })
        .collect();
    let start = Instant::now();
    assert_eq!(sync_wait(when_any_iter(children)), Ok(Some(11)));
    assert!(start.elapsed() < Duration::from_secs(10));
    assert_eq!(sync_wait(when_any_iter(Vec::<AnySender<'_, usize>>::new())), Ok(None));
    // A panic in the middle of connecting the children: those connected are dropped.
    let drops = Arc::new(AtomicUsize::new(0));
    let counter = DropCounter(drops.clone());
    let mut mixed: Vec<AnySender<'_, i32>> = vec![just(()).then(move |()| drop(counter)).then(|()| 1).boxed()];
    mixed.push(PanicsInConnect.boxed());
    assert!(panic_message(|| sync_wait(when_any_iter(mixed))).contains("connect"));
    assert_eq!(drops.load(Ordering::SeqCst), 1);
}

#[test]
fn children_finishing_together_on_two_workers_complete_it_once() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let seen = Mutex::new([0usize; 2]);
    for _ in 0..2000 {
        let a = schedule(&sch).then(|()| 0usize);
        let b = schedule(&sch).then(|()| 1usize);
        let winner = sync_wait(when_any((a, b))).unwrap().unwrap();
        seen.lock().unwrap()[winner] += 1;
    }
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen[0] + seen[1], 2000);
}

#[test]
fn nested_races_are_stoppable() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let pending = || schedule_after(&sch, HOUR);
    let race = when_any((when_any((pending(), pending())), pending(), just(()), pending()));
    let start = Instant::now();
    assert_eq!(sync_wait(race), Ok(Some(())));
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn children_on_three_threads_race_safely() {
    let ctxs = [SingleThreadContext::new(), SingleThreadContext::new(), SingleThreadContext::new()];
    let ran = AtomicUsize::new(0);
    for _ in 0..200 {
        let race = when_any((
            schedule(&ctxs[0].scheduler()).then(|()| ran.fetch_add(1, Ordering::SeqCst)),
            schedule(&ctxs[1].scheduler()).then(|()| ran.fetch_add(1, Ordering::SeqCst)),
            schedule(&ctxs[2].scheduler()).then(|()| ran.fetch_add(1, Ordering::SeqCst)),
        ));
        assert!(sync_wait(race).unwrap().is_some());
    }
    assert!(ran.load(Ordering::SeqCst) >= 200);
}

#[test]
fn the_children_see_the_receivers_scheduler_and_queries() {
    let pool = common::pool(1);
    let on = sync_wait(starts_on(
        pool.scheduler(),
        when_any((read_env(GetScheduler).then(|s: PoolScheduler| s.is_current()),)),
    ));
    assert_eq!(on, Ok(Some(true)));
    let name = sync_wait(when_any((schedule(&pool.scheduler()).then(|()| thread_name()),))).unwrap().unwrap();
    assert!(name.unwrap().starts_with("senders-worker"));
}
