//! Scope reductions: spawned work returns its values through its scope
//! (`let_async_scope_reduce`, `ReducingScope`). The values merge exactly across worker
//! counts and from `main`; errors, stop requests and panics win as in the plain scopes;
//! every accumulator and every value is dropped, whatever the outcome.

mod common;

use std::convert::Infallible;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicIsize, AtomicUsize, Ordering};

use common::{WaitProbe, panic_message, wait_for_stop, with_stop};
use senders::{
    CountingToken, InlineScheduler, InplaceStopSource, LetReduceToken, PoolScheduler, ReduceToken, ReducingScope,
    SenderExt, Spawnable, just, just_error, schedule, spawn, starts_on, sync_wait,
};

/// The counts [`live`] leaked, kept reachable so that a leak checker does not report them.
static LIVES: std::sync::Mutex<Vec<&'static AtomicIsize>> = std::sync::Mutex::new(Vec::new());

/// A count of live [`Val`]s and [`Acc`]s, leaked so that `'static` work may hold it.
fn live() -> &'static AtomicIsize {
    let count = Box::leak(Box::new(AtomicIsize::new(0)));
    LIVES.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(count);
    count
}

/// A value of spawned work that counts itself alive.
struct Val {
    n: u64,
    live: &'static AtomicIsize,
}

impl Val {
    fn new(n: u64, live: &'static AtomicIsize) -> Val {
        live.fetch_add(1, Ordering::SeqCst);
        Val { n, live }
    }
}

impl Drop for Val {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An accumulator that is neither `Copy`, `Clone` nor `Default`, and counts itself alive.
struct Acc {
    sum: u64,
    count: u64,
    live: &'static AtomicIsize,
}

impl Acc {
    fn new(live: &'static AtomicIsize) -> Acc {
        live.fetch_add(1, Ordering::SeqCst);
        Acc { sum: 0, count: 0, live }
    }
}

impl Drop for Acc {
    fn drop(&mut self) {
        self.live.fetch_sub(1, Ordering::SeqCst);
    }
}

fn fold(acc: &mut Acc, v: Val) {
    acc.sum += v.n;
    acc.count += 1;
}

fn merge(mut a: Acc, b: Acc) -> Acc {
    a.sum += b.sum;
    a.count += b.count;
    a
}

type LetTk<'s, 'e, Sch = PoolScheduler, E = Infallible> = LetReduceToken<'s, 'e, Sch, Val, E>;

/// A heap-numbered binary tree of `n` nodes: node `i` returns `i` and spawns `2i` and
/// `2i + 1`.
fn let_node<'s, 'e>(
    tk: LetTk<'s, 'e>,
    sch: &'s PoolScheduler,
    i: u64,
    n: u64,
    live: &'static AtomicIsize,
) -> impl Spawnable<LetTk<'s, 'e>> {
    schedule(sch).then(move |()| {
        for c in [2 * i, 2 * i + 1] {
            if c <= n {
                spawn(let_node(tk, sch, c, n, live), tk);
            }
        }
        Val::new(i, live)
    })
}

type CountTk = ReduceToken<CountingToken, Val>;

fn counting_node(
    tk: CountTk,
    sch: PoolScheduler,
    i: u64,
    n: u64,
    live: &'static AtomicIsize,
) -> impl Spawnable<CountTk> {
    schedule(&sch.clone()).then(move |()| {
        for c in [2 * i, 2 * i + 1] {
            if c <= n {
                spawn(counting_node(tk, sch.clone(), c, n, live), tk);
            }
        }
        Val::new(i, live)
    })
}

const NODES: u64 = 3000;

#[test]
fn let_async_scope_reduce_merges_a_tree_exactly_on_1_2_and_4_workers() {
    for workers in [1, 2, 4] {
        let pool = common::pool(workers);
        let sch = pool.scheduler();
        let live = live();
        let sch_ref = &sch;
        let work = just(()).let_async_scope_reduce(
            move || Acc::new(live),
            fold,
            merge,
            move |tk, ()| _ = spawn(let_node(tk, sch_ref, 1, NODES, live), tk),
        );
        let acc = sync_wait(starts_on(sch.clone(), work)).unwrap().expect("not stopped");
        assert_eq!((acc.sum, acc.count), (NODES * (NODES + 1) / 2, NODES), "{workers} workers");
        drop(acc);
        assert_eq!(live.load(Ordering::SeqCst), 0, "every value and accumulator dropped ({workers} workers)");
    }
}

#[test]
fn a_reducing_scope_join_merges_a_tree_exactly_on_1_2_and_4_workers() {
    for workers in [1, 2, 4] {
        let pool = common::pool(workers);
        let live = live();
        let mut scope = ReducingScope::new(move || Acc::new(live), fold, merge);
        // Spawned from `main` (no worker slot), the tree's nodes on the workers.
        spawn(counting_node(scope.token(), pool.scheduler(), 1, NODES, live), scope.token());
        let acc = sync_wait(scope.join()).unwrap().expect("not stopped");
        assert_eq!((acc.sum, acc.count), (NODES * (NODES + 1) / 2, NODES), "{workers} workers");
        drop(acc);
        drop(scope);
        assert_eq!(live.load(Ordering::SeqCst), 0, "every value and accumulator dropped ({workers} workers)");
    }
}

#[test]
fn values_completed_on_main_fold_into_the_shared_slot() {
    let live = live();
    // No pool: `sync_wait` runs the body on `main`, and `just` completes inline there.
    let work = just(()).let_async_scope_reduce(
        move || Acc::new(live),
        fold,
        merge,
        move |tk, ()| {
            for i in 1..=100 {
                spawn(just(()).then(move |()| Val::new(i, live)), tk);
            }
        },
    );
    let acc = sync_wait(work).unwrap().unwrap();
    assert_eq!((acc.sum, acc.count), (5050, 100));
    drop(acc);
    assert_eq!(live.load(Ordering::SeqCst), 0);

    // A counting scope fed from `main` and from workers at once.
    let pool = common::pool(2);
    let mut scope = ReducingScope::new(move || Acc::new(live), fold, merge);
    for i in 1..=100 {
        spawn(just(()).then(move |()| Val::new(i, live)), scope.token());
        spawn(schedule(&pool.scheduler()).then(move |()| Val::new(1000 * i, live)), scope.token());
    }
    let acc = sync_wait(scope.join()).unwrap().unwrap();
    assert_eq!((acc.sum, acc.count), (5050 * 1001, 200));
    drop(acc);
    drop(scope);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn nothing_folded_merges_to_init_and_a_second_join_starts_from_init() {
    let mut scope = ReducingScope::new(|| 7u64, |a: &mut u64, v: u64| *a += v, |a, b| a + b - 7);
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(7), "init() when nothing was folded");
    let mut scope2 = ReducingScope::new(|| 0u64, |a: &mut u64, v: u64| *a += v, |a, b| a + b);
    spawn(just(5u64), scope2.token());
    assert_eq!(sync_wait(scope2.join()).unwrap(), Some(5));
    assert_eq!(sync_wait(scope2.join()).unwrap(), Some(0), "the first join took the accumulators");
    drop(scope);
}

#[test]
fn unit_work_through_the_plain_token_is_joined_and_not_folded() {
    let pool = common::pool(2);
    let ran = std::sync::Arc::new(AtomicUsize::new(0));
    let mut scope = ReducingScope::new(|| 0u64, |a: &mut u64, v: u64| *a += v, |a, b| a + b);
    let tk = scope.token();
    for _ in 0..50 {
        let ran = ran.clone();
        spawn(
            schedule(&pool.scheduler()).then(move |()| {
                std::thread::sleep(std::time::Duration::from_micros(200));
                ran.fetch_add(1, Ordering::SeqCst);
            }),
            tk.token(),
        );
        spawn(schedule(&pool.scheduler()).then(|()| 2u64), tk);
    }
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(100));
    assert_eq!(ran.load(Ordering::SeqCst), 50, "the join waited for the plain work too");
}

#[test]
fn a_closed_reducing_scope_refuses_work_and_drops_it_unrun() {
    let live = live();
    let mut scope = ReducingScope::new(move || Acc::new(live), fold, merge);
    scope.close();
    let v = Val::new(1, live);
    assert!(!spawn(just(v), scope.token()));
    assert_eq!(live.load(Ordering::SeqCst), 0, "the refused work's value is dropped");
    let acc = sync_wait(scope.join()).unwrap().unwrap();
    assert_eq!(acc.count, 0);
    drop(acc);
    drop(scope);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn an_error_in_spawned_work_wins_stops_the_rest_and_drops_the_accumulators() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let live = live();
    let probe = WaitProbe::default();
    let (sch_ref, probe_ref) = (&sch, &probe);
    let work = just(()).with_error::<&'static str>().let_async_scope_reduce(
        move || Acc::new(live),
        fold,
        merge,
        move |tk, ()| {
            for i in 0..100 {
                spawn(schedule(sch_ref).then(move |()| Val::new(i, live)).with_error::<&'static str>(), tk);
            }
            // Waits for the scope's stop, which only the error requests.
            spawn(
                starts_on(sch_ref.clone(), wait_for_stop::<&'static str>(probe_ref)).then(move |()| Val::new(0, live)),
                tk,
            );
            spawn(
                schedule(sch_ref).with_error::<&'static str>().let_value(move |()| {
                    assert!(probe_ref.wait_started());
                    just_error::<Val, _>("disk full")
                }),
                tk,
            );
        },
    );
    assert_eq!(sync_wait(starts_on(sch.clone(), work)).map(|v| v.map(|a| a.count)), Err("disk full"));
    assert!(probe.saw_stop(), "the error requested stop on the other work");
    assert_eq!(live.load(Ordering::SeqCst), 0, "every partial accumulator and value dropped");
}

#[test]
fn a_stop_request_completes_stopped_and_drops_the_partial_accumulators() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let live = live();
    let probe = WaitProbe::default();
    let source = InplaceStopSource::new();
    let (sch_ref, probe_ref, source_ref) = (&sch, &probe, &source);
    let work = just(()).let_async_scope_reduce(
        move || Acc::new(live),
        fold,
        merge,
        move |tk, ()| {
            for i in 0..100 {
                spawn(schedule(sch_ref).then(move |()| Val::new(i, live)), tk);
            }
            spawn(
                starts_on(sch_ref.clone(), wait_for_stop::<Infallible>(probe_ref)).then(move |()| Val::new(0, live)),
                tk,
            );
            spawn(
                schedule(sch_ref).then(move |()| {
                    assert!(probe_ref.wait_started());
                    source_ref.request_stop();
                    Val::new(1, live)
                }),
                tk,
            );
        },
    );
    let got = sync_wait(with_stop(&source, starts_on(sch.clone(), work)));
    assert!(matches!(got, Ok(None)), "a missing value completes the scope stopped");
    assert!(probe.saw_stop());
    assert_eq!(live.load(Ordering::SeqCst), 0, "the partial accumulators are dropped");

    // The counting scope: its `request_stop` makes the join complete stopped.
    let mut scope = ReducingScope::new(move || Acc::new(live), fold, merge);
    spawn(schedule(&pool.scheduler()).then(move |()| Val::new(3, live)), scope.token());
    scope.request_stop();
    spawn(schedule(&pool.scheduler()).then(move |()| Val::new(4, live)), scope.token());
    assert!(sync_wait(scope.join()).unwrap().is_none());
    drop(scope);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn panics_in_spawned_work_in_init_in_fold_and_in_merge_are_delivered_and_nothing_leaks() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let live = live();
    let sch_ref = &sch;

    // In spawned work: delivered after the join, and it stops the rest.
    let work = just(()).with_error::<&'static str>().let_async_scope_reduce(
        move || Acc::new(live),
        fold,
        merge,
        move |tk, ()| {
            for i in 0..20 {
                spawn(schedule(sch_ref).then(move |()| Val::new(i, live)).with_error::<&'static str>(), tk);
            }
            spawn(schedule(sch_ref).then(|()| -> Val { panic!("node failed") }).with_error::<&'static str>(), tk);
        },
    );
    assert_eq!(panic_message(|| sync_wait(starts_on(sch.clone(), work))), "node failed");
    assert_eq!(live.load(Ordering::SeqCst), 0);

    // In `fold`: reported as the work's panic; the other values still drop.
    let work = just(()).let_async_scope_reduce(
        move || Acc::new(live),
        |acc: &mut Acc, v: Val| {
            assert!(v.n != 13, "fold failed");
            fold(acc, v)
        },
        merge,
        move |tk, ()| {
            for i in 0..20 {
                spawn(schedule(sch_ref).then(move |()| Val::new(i, live)), tk);
            }
        },
    );
    assert_eq!(panic_message(|| sync_wait(starts_on(sch.clone(), work))), "fold failed");
    assert_eq!(live.load(Ordering::SeqCst), 0);

    // In `init` and in `merge`, on a counting scope.
    let mut scope =
        ReducingScope::new(|| -> u64 { panic!("init failed") }, |a: &mut u64, v: u64| *a += v, |a, b| a + b);
    spawn(schedule(&pool.scheduler()).then(|()| 1u64), scope.token());
    assert_eq!(panic_message(|| sync_wait(scope.join())), "init failed");
    let mut scope =
        ReducingScope::new(move || Acc::new(live), fold, |_: Acc, _: Acc| -> Acc { panic!("merge failed") });
    for i in 0..200 {
        spawn(schedule(&pool.scheduler()).then(move |()| Val::new(i, live)), scope.token());
        spawn(just(()).then(move |()| Val::new(i, live)), scope.token()); // the shared slot
    }
    assert_eq!(panic_message(|| sync_wait(scope.join())), "merge failed");
    drop(scope);
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

#[test]
fn the_work_and_its_values_borrow_from_the_stack() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let words: Vec<String> = (0..64).map(|i| format!("w{i}")).collect();
    let (words_ref, sch_ref) = (&words, &sch);
    // The values are `&str`s into `words`; the accumulator a `Vec` of them.
    let work = just(()).let_async_scope_reduce(
        Vec::new,
        |acc: &mut Vec<&str>, w: &str| acc.push(w),
        |mut a, b| {
            a.extend(b);
            a
        },
        move |tk, ()| {
            for w in words_ref {
                spawn(schedule(sch_ref).then(move |()| w.as_str()), tk);
            }
        },
    );
    let mut got = sync_wait(starts_on(sch.clone(), work)).unwrap().unwrap();
    got.sort();
    let mut want: Vec<&str> = words.iter().map(String::as_str).collect();
    want.sort();
    assert_eq!(got, want);
}

static REENTRANT: OnceLock<ReduceToken<CountingToken, u64>> = OnceLock::new();

#[test]
fn a_fold_that_completes_more_work_inline_folds_it_into_the_shared_slot() {
    let pool = common::pool(2);
    // The fold of a 1 spawns a 100 that runs inline (the inline scheduler's domain) and
    // is folded while the worker's slot is busy.
    let mut scope = ReducingScope::new(
        || 0u64,
        |a: &mut u64, v: u64| {
            *a += v;
            if v == 1 {
                assert!(spawn(starts_on(InlineScheduler, just(100u64)), *REENTRANT.get().unwrap()));
            }
        },
        |a, b| a + b,
    );
    REENTRANT.set(scope.token()).unwrap();
    for _ in 0..10 {
        spawn(schedule(&pool.scheduler()).then(|()| 1u64), scope.token());
    }
    assert_eq!(sync_wait(scope.join()).unwrap(), Some(1010));
}
