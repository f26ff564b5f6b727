//! `when_all` over a run-time number of children (a `Vec`, or `when_all_iter`), and the
//! tuple forms' edges (no child, twelve): values in the children's order, the first
//! error or stop wins and stops the others, panics and parent stop requests, inline and
//! on the pool (where the children are handed out by halves).

mod common;

use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{QUIET, panic_message, quiet_panics, stop_probe, thread_name, with_stop};
use senders::*;

fn named_pool(n: usize, prefix: &'static str) -> StaticThreadPool {
    StaticThreadPool::builder().num_threads(n).thread_name(move |i| format!("{prefix}-{i}")).build().unwrap()
}

#[test]
fn the_empty_tuple_completes_with_unit_at_once() {
    assert_eq!(sync_wait(when_all(())), Ok(Some(())));
    let pool = common::pool(2);
    assert_eq!(sync_wait(starts_on(pool.scheduler(), when_all(()))), Ok(Some(())));
    assert_eq!(sync_wait(when_all(()).then(|()| 5)), Ok(Some(5)));
}

#[test]
fn a_tuple_of_twelve_collects_every_value_in_order() {
    let twelve =
        (just(0), just(1), just(2), just(3), just(4), just(5), just(6), just(7), just(8), just(9), just(10), just(11));
    let r = sync_wait(when_all(twelve)).unwrap().unwrap();
    assert_eq!(r, (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let s = |i: u32| schedule(&sch).then(move |()| i);
    let r = sync_wait(when_all((s(0), s(1), s(2), s(3), s(4), s(5), s(6), s(7), s(8), s(9), s(10), s(11))));
    assert_eq!(r.unwrap().unwrap(), (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
}

#[test]
fn an_empty_vec_completes_with_an_empty_vec_at_once() {
    assert_eq!(sync_wait(when_all(Vec::<senders::factories::Just<u8>>::new())), Ok(Some(vec![])));
    assert_eq!(sync_wait(when_all_iter(std::iter::empty::<AnySender<u8>>())), Ok(Some(vec![])));
    let pool = common::pool(2);
    assert_eq!(sync_wait(starts_on(pool.scheduler(), when_all(Vec::<AnySender<u8>>::new()))), Ok(Some(vec![])));
}

#[test]
fn a_vec_collects_its_values_in_order_inline_and_on_the_pool() {
    let r = sync_wait(when_all((0..100).map(just).collect::<Vec<_>>()));
    assert_eq!(r.unwrap().unwrap(), (0..100).collect::<Vec<_>>());
    let pool = named_pool(2, "vec");
    let sch = pool.scheduler();
    let names = Mutex::new(HashSet::new());
    let names_ref = &names;
    let children = (0..1000u64).map(|i| {
        schedule(&sch).then(move |()| {
            names_ref.lock().unwrap().insert(thread_name().unwrap_or_default());
            i * 2
        })
    });
    let r = sync_wait(when_all_iter(children)).unwrap().unwrap();
    assert_eq!(r, (0..1000).map(|i| i * 2).collect::<Vec<_>>());
    assert!(names.lock().unwrap().iter().all(|n| n.starts_with("vec-")), "the children ran on the pool");
}

/// A tree whose nodes have a run-time number of children, summed through `when_all` of
/// `AnySender`s on the pool (the 8-ary tree of the bench, small).
fn node(depth: u32, value: u64) -> AnySender<'static, u64> {
    if depth == 0 {
        return just(value).boxed();
    }
    when_all_iter((0..8).map(move |i| node(depth - 1, value * 8 + i))).then(|v| v.iter().sum::<u64>()).boxed()
}

#[test]
fn an_eight_ary_tree_sums_through_run_time_when_alls_on_the_pool() {
    let pool = common::pool(2);
    // Depth 4: 4096 leaves, valued 0..4096.
    let sum = sync_wait(starts_on(pool.scheduler(), node(4, 0))).unwrap().unwrap();
    assert_eq!(sum, (0..4096).sum::<u64>());
    assert_eq!(sync_wait(node(3, 0)).unwrap().unwrap(), (0..512).sum::<u64>(), "and inline");
}

#[test]
fn the_first_error_wins_and_the_others_see_a_stop_request() {
    let children: Vec<AnySender<'_, bool, &str>> = vec![
        stop_probe::<&str>().boxed(),
        just_error::<bool, _>("first").boxed(),
        just_error::<bool, _>("second").boxed(),
        stop_probe::<&str>().boxed(),
    ];
    let seen = AtomicUsize::new(0);
    let probed: Vec<_> = children
        .into_iter()
        .map(|c| {
            let seen = &seen;
            c.then(move |stopped| {
                if stopped {
                    seen.fetch_add(1, Ordering::SeqCst);
                }
                stopped
            })
            .boxed()
        })
        .collect();
    assert_eq!(sync_wait(when_all(probed)), Err("first"));
    assert_eq!(seen.load(Ordering::SeqCst), 1, "the probe started after the failure saw the stop request");
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let failing = (0..64).map(|i| {
        schedule(&sch).then(move |()| i).with_error::<u32>().let_value(move |i| {
            if i == 40 { just_error::<u32, u32>(i).boxed() } else { just(i).with_error::<u32>().boxed() }
        })
    });
    assert_eq!(sync_wait(when_all_iter(failing)), Err(40));
}

#[test]
fn a_stopped_child_makes_it_stopped_and_stops_the_others() {
    let children =
        vec![just(false).boxed(), just_stopped::<bool, Infallible>().boxed(), stop_probe::<Infallible>().boxed()];
    assert_eq!(sync_wait(when_all(children)), Ok(None));
}

#[test]
fn a_panic_in_a_child_is_delivered() {
    quiet_panics();
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let msg = panic_message(|| {
        sync_wait(when_all_iter((0..20).map(|i| {
            schedule(&sch).then(move |()| {
                assert!(i != 13, "{QUIET}: child 13");
                i
            })
        })))
    });
    assert_eq!(msg, format!("{QUIET}: child 13"));
}

#[test]
fn a_parent_stop_request_reaches_every_child() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let probes: Vec<_> = (0..5).map(|_| stop_probe::<Infallible>()).collect();
    assert_eq!(sync_wait(with_stop(&source, when_all(probes))), Ok(Some(vec![true; 5])));
}

/// Values that count their live copies: a failed `when_all` must drop each value its
/// children delivered exactly once (a double drop would read below zero, a leak above).
#[derive(Debug)]
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(live: &'a AtomicUsize) -> Self {
        live.fetch_add(1, Ordering::SeqCst);
        Counted(live)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[test]
fn the_values_of_a_failed_run_time_when_all_are_dropped_once_inline_and_on_the_pool() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let live = AtomicUsize::new(0);
    for on_pool in [false, true] {
        let live = &live;
        let sch = &sch;
        let children = move || {
            (0..40u32).map(move |i| {
                let value = just(()).with_error::<u32>().let_value(move |()| {
                    if i == 29 {
                        just_error::<Counted<'_>, u32>(i).boxed()
                    } else {
                        just(Counted::new(live)).with_error::<u32>().boxed()
                    }
                });
                if on_pool { starts_on(sch.clone(), value).boxed() } else { value.boxed() }
            })
        };
        assert_eq!(sync_wait(when_all_iter(children())).unwrap_err(), 29);
        assert_eq!(live.load(Ordering::SeqCst), 0, "every delivered value was dropped once (on_pool: {on_pool})");
        assert_eq!(sync_wait(when_all(children().collect::<Vec<_>>())).unwrap_err(), 29);
        assert_eq!(live.load(Ordering::SeqCst), 0, "the same through a Vec (on_pool: {on_pool})");
        let values = sync_wait(when_all_iter(children().take(20))).unwrap().unwrap();
        assert_eq!(live.load(Ordering::SeqCst), 20, "a successful one hands every value over");
        drop(values);
        assert_eq!(live.load(Ordering::SeqCst), 0);
    }
}

#[test]
fn when_all_iter_takes_iterators_without_a_size_hint_in_order() {
    // `filter` gives no lower bound: the senders are collected as they come, growing
    // their block.
    let evens = (0..1000u32).filter(|i| i % 2 == 0).map(just);
    let values = sync_wait(when_all_iter(evens)).unwrap().unwrap();
    assert_eq!(values, (0..1000).filter(|i| i % 2 == 0).collect::<Vec<_>>());
    // Zero-sized senders and values.
    let units = sync_wait(when_all_iter(std::iter::repeat_n((), 300).map(just))).unwrap().unwrap();
    assert_eq!(units.len(), 300);
}

#[test]
fn a_panic_while_collecting_the_senders_is_delivered_and_drops_those_already_made() {
    quiet_panics();
    let live = AtomicUsize::new(0);
    let pool = common::pool(2);
    for on_pool in [false, true] {
        let live = &live;
        let children = when_all_iter((0..50).map(move |i| {
            assert!(i != 37, "{QUIET}: sender 37");
            just(Counted::new(live))
        }));
        assert_eq!(live.load(Ordering::SeqCst), 0, "nothing is made before the start");
        let msg = if on_pool {
            panic_message(|| sync_wait(starts_on(pool.scheduler(), children)))
        } else {
            panic_message(|| sync_wait(children))
        };
        assert_eq!(msg, format!("{QUIET}: sender 37"), "on_pool: {on_pool}");
        assert_eq!(live.load(Ordering::SeqCst), 0, "the 37 senders made were dropped (on_pool: {on_pool})");
    }
    // Dropped unconnected, or connected and never started: nothing is made.
    drop(when_all_iter((0..10).map(|_| just(Counted::new(&live)))));
    assert_eq!(live.load(Ordering::SeqCst), 0);
}

/// A panic in the iterator of a node deep in a recursion fails the whole tree with that
/// panic, and the pool's workers survive it.
#[test]
fn a_panic_in_a_nested_iterator_reaches_the_root_on_the_pool() {
    quiet_panics();
    fn node(depth: u32, id: u64) -> AnySender<'static, u64> {
        if depth == 0 {
            return just(1).boxed();
        }
        when_all_iter((0..8).map(move |i| {
            assert!(id != 77 || i != 5, "{QUIET}: node 77's sixth child");
            node(depth - 1, id * 8 + i)
        }))
        .then(|v| v.iter().sum::<u64>())
        .boxed()
    }
    let pool = common::pool(2);
    let msg = panic_message(|| sync_wait(starts_on(pool.scheduler(), node(4, 1))));
    assert_eq!(msg, format!("{QUIET}: node 77's sixth child"));
    assert_eq!(sync_wait(starts_on(pool.scheduler(), node(3, 1000))), Ok(Some(512)), "the pool still runs");
}

/// The natural recursion: building the sender of a tree builds its root only; each
/// node makes its children's senders when it starts.
mod lazy {
    use super::*;

    /// A node of an 8-ary tree, counting every sender made in `built`.
    fn node(depth: u32, built: &'static AtomicUsize) -> AnySender<'static, u64> {
        built.fetch_add(1, Ordering::Relaxed);
        if depth == 0 {
            return just(1).boxed();
        }
        when_all_iter((0..8).map(move |_| node(depth - 1, built))).then(|v| 1 + v.iter().sum::<u64>()).boxed()
    }

    fn nodes(depth: u32) -> u64 {
        (0..=depth).map(|k| 8u64.pow(k)).sum()
    }

    #[test]
    fn building_a_large_tree_builds_only_its_root() {
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        let root = node(12, &BUILT);
        assert_eq!(BUILT.load(Ordering::SeqCst), 1, "a tree of 78 G nodes: only the root is built");
        drop(root);
        assert_eq!(BUILT.load(Ordering::SeqCst), 1);
    }

    /// A tree of 2.4 M nodes completes on the pool, every node built once, while the
    /// senders built and not yet started stay few. On one worker, which runs the tree
    /// depth first, they are at most the unstarted siblings along one path: seven per
    /// level. On two, each node is still built once, by the worker that starts its
    /// parent.
    #[test]
    fn a_tree_of_millions_of_nodes_is_built_as_it_runs() {
        static BUILT: AtomicUsize = AtomicUsize::new(0);
        static STARTED: AtomicUsize = AtomicUsize::new(0);
        static MOST_AHEAD: AtomicUsize = AtomicUsize::new(0);
        fn counted(depth: u32) -> AnySender<'static, u64> {
            BUILT.fetch_add(1, Ordering::Relaxed);
            let body = move |()| {
                let started = STARTED.fetch_add(1, Ordering::Relaxed) + 1;
                MOST_AHEAD.fetch_max(BUILT.load(Ordering::Relaxed) - started, Ordering::Relaxed);
                if depth == 0 {
                    return just(1).boxed();
                }
                when_all_iter((0..8).map(move |_| counted(depth - 1))).then(|v| 1 + v.iter().sum::<u64>()).boxed()
            };
            just(()).let_value(body).boxed()
        }
        for workers in [1, 2] {
            BUILT.store(0, Ordering::SeqCst);
            STARTED.store(0, Ordering::SeqCst);
            MOST_AHEAD.store(0, Ordering::SeqCst);
            let pool = common::pool(workers);
            let root = counted(7);
            assert_eq!(BUILT.load(Ordering::SeqCst), 1);
            assert_eq!(sync_wait(starts_on(pool.scheduler(), root)), Ok(Some(nodes(7))));
            assert_eq!(BUILT.load(Ordering::SeqCst) as u64, nodes(7), "every node built once ({workers} workers)");
            assert_eq!(STARTED.load(Ordering::SeqCst) as u64, nodes(7));
            if workers == 1 {
                let ahead = MOST_AHEAD.load(Ordering::SeqCst);
                assert!(ahead <= 7 * 7, "{ahead} senders built and not started at once");
            }
        }
    }

    #[test]
    fn values_come_in_order_and_children_run_on_several_workers() {
        let pool = named_pool(2, "lazy");
        let sch = pool.scheduler();
        let names = Mutex::new(HashSet::new());
        let names = &names;
        // Each child waits (up to 10 s) until a child has run on the other worker too, so
        // the other worker steals one however slowly it wakes (under memcheck, say). Were
        // the children not forked, the one worker would wait out the 10 s and the
        // assertion below would fail.
        let leaf = move |i: u64| {
            just(i)
                .then(move |i| {
                    names.lock().unwrap().insert(thread_name().unwrap_or_default());
                    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
                    while names.lock().unwrap().len() < 2 && std::time::Instant::now() < deadline {
                        std::thread::yield_now();
                    }
                    i
                })
                .boxed()
        };
        let fan = when_all_iter((0..64u64).map(leaf));
        let values = sync_wait(starts_on(sch.clone(), fan)).unwrap().unwrap();
        assert_eq!(values, (0..64).collect::<Vec<_>>());
        let names = names.lock().unwrap();
        assert!(names.iter().all(|n| n.starts_with("lazy-")), "{names:?}");
        assert_eq!(names.len(), 2, "the pool's domain forked the children onto both workers: {names:?}");
    }

    #[test]
    fn the_iterator_runs_on_the_thread_that_starts_it() {
        let pool = named_pool(1, "starter");
        let ran_on = Mutex::new(None);
        let ran_on = &ran_on;
        let fan = when_all_iter((0..3u64).inspect(move |_| *ran_on.lock().unwrap() = thread_name()).map(just));
        assert_eq!(sync_wait(starts_on(pool.scheduler(), fan)), Ok(Some(vec![0, 1, 2])));
        assert_eq!(ran_on.lock().unwrap().as_deref(), Some("starter-0"));
    }

    #[test]
    fn errors_and_stops_of_lazily_made_children_win_and_stop_the_rest() {
        let pool = common::pool(2);
        let made = AtomicUsize::new(0);
        let made = &made;
        let failing = || {
            when_all_iter((0..30u32).map(move |i| {
                made.fetch_add(1, Ordering::SeqCst);
                if i == 7 { just_error::<bool, u32>(i).boxed() } else { stop_probe::<u32>().boxed() }
            }))
        };
        assert_eq!(sync_wait(failing()), Err(7));
        assert_eq!(made.load(Ordering::SeqCst), 30);
        assert_eq!(sync_wait(starts_on(pool.scheduler(), failing())), Err(7));
        let stopped = when_all_iter((0..5).map(|i| {
            if i == 2 { just_stopped::<bool, Infallible>().boxed() } else { stop_probe::<Infallible>().boxed() }
        }));
        assert_eq!(sync_wait(stopped), Ok(None));
        // A parent stop request requested before the start reaches the children made
        // at the start.
        let source = InplaceStopSource::new();
        source.request_stop();
        let probes = when_all_iter((0..5).map(|_| stop_probe::<Infallible>()));
        assert_eq!(sync_wait(with_stop(&source, probes)), Ok(Some(vec![true; 5])));
    }

    #[test]
    fn an_empty_iterator_completes_at_once_inline_and_on_the_pool() {
        let pool = common::pool(2);
        let empty = || when_all_iter(std::iter::empty::<AnySender<u8>>());
        assert_eq!(sync_wait(empty()), Ok(Some(vec![])));
        assert_eq!(sync_wait(starts_on(pool.scheduler(), empty())), Ok(Some(vec![])));
        let tree = when_all_iter((0..4).map(|_| empty().boxed())).then(|v| v.len());
        assert_eq!(sync_wait(starts_on(pool.scheduler(), tree)), Ok(Some(4)));
    }

    #[test]
    fn a_tree_borrowing_its_nodes_sums_them_on_the_pool() {
        let tree = common::make_tree(10);
        fn visit(t: &common::Tree) -> AnySender<'_, usize> {
            t.visits.fetch_add(1, Ordering::SeqCst);
            let children = t.left.iter().chain(&t.right).map(|c| visit(c));
            when_all_iter(children).then(|v| 1 + v.iter().sum::<usize>()).boxed()
        }
        let pool = common::pool(2);
        let count = sync_wait(starts_on(pool.scheduler(), visit(&tree))).unwrap().unwrap();
        assert_eq!(count, common::all_visited_once(&tree));
    }
}

/// On the pool, children that are ready values are started where the `when_all` runs,
/// the others handed out: every mix of the two, in every position, up to ten children
/// (past the one-by-one handout), in tuples too, collects every value in order; an
/// error among ready children still wins, and a child that does work still runs on any
/// worker.
#[test]
fn ready_children_mixed_with_working_ones_collect_in_order_on_the_pool() {
    for workers in [1, 2, 3] {
        let pool = common::pool(workers);
        let sch = pool.scheduler();
        for n in 1..=10usize {
            for mask in 0..(1u32 << n) {
                let children: Vec<AnySender<'static, usize>> =
                    (0..n)
                        .map(|i| {
                            if mask & (1 << i) != 0 {
                                just(i).boxed()
                            } else {
                                schedule(&sch).then(move |()| i).boxed()
                            }
                        })
                        .collect();
                let got = sync_wait(starts_on(sch.clone(), when_all(children))).unwrap().unwrap();
                assert_eq!(got, (0..n).collect::<Vec<_>>(), "{workers} workers, {n} children, ready {mask:#b}");
            }
        }
        let pair = when_all((just(1u8).boxed(), schedule(&sch).then(|()| 2u8).boxed()));
        assert_eq!(sync_wait(starts_on(sch.clone(), pair)).unwrap(), Some((1, 2)));
        let pair = when_all((schedule(&sch).then(|()| 1u8).boxed(), just(2u8).boxed()));
        assert_eq!(sync_wait(starts_on(sch.clone(), pair)).unwrap(), Some((1, 2)));
        let failing: Vec<AnySender<'static, u8, &str>> =
            vec![just(1u8).with_error().boxed(), just_error::<u8, &str>("no").boxed(), just(3u8).with_error().boxed()];
        assert_eq!(sync_wait(starts_on(sch.clone(), when_all(failing))), Err("no"));
    }
}
