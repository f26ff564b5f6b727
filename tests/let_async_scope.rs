//! `let_async_scope` (P3296): the value, error, stopped and panic paths, borrowing, the
//! join (nothing completes early), stop requests, the environment spawned work sees,
//! and the three P3149 recursive-tree variants on a borrowed tree.

mod common;

use common::{
    Tree, WaitProbe, all_visited_once, cancel_on_stop, make_tree, panic_message, stop_probe, thread_name,
    wait_for_stop, with_stop,
};
use senders::scope::{ScopeAssociation, ScopeLifetime, SpawnFuture, Spawnable};
use senders::*;
use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// The body of spawned work that sleeps a little first, so that a completion before
/// the join would show (the counter would not yet have been bumped).
fn slow_add(n: &AtomicUsize) -> impl FnOnce(()) + Send + '_ {
    move |()| {
        std::thread::sleep(Duration::from_millis(5));
        n.fetch_add(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------------------
// Value path, borrowing, the join.

#[test]
fn completes_with_the_returned_value_after_all_spawned_work() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let n = AtomicUsize::new(0);
    let (sch_ref, n_ref) = (&sch, &n);
    let v = sync_wait(just(5).let_async_scope(|tk, five| {
        for _ in 0..8 {
            spawn(schedule(sch_ref).then(slow_add(n_ref)), tk);
        }
        just(*five * 2)
    }));
    assert_eq!(v.unwrap(), Some(10));
    assert_eq!(n.load(Ordering::SeqCst), 8, "every spawned sender completed before the scope");
}

#[test]
fn a_unit_function_means_just_unit() {
    let ran = AtomicBool::new(false);
    let ran_ref = &ran;
    let v = sync_wait(just(()).let_async_scope(|tk, ()| {
        spawn(just(()).then(move |()| ran_ref.store(true, Ordering::SeqCst)), tk);
    }));
    assert_eq!(v.unwrap(), Some(()));
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn spawned_work_borrows_the_scoped_value_and_the_callers_stack() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let total = Mutex::new(0u64); // the caller's stack
    let total_ref = &total;
    sync_wait(just((1..=100u64).collect::<Vec<_>>()).let_async_scope(|tk, data| {
        let data: &Vec<u64> = data; // lives in the operation state
        for chunk in data.chunks(10) {
            spawn(schedule(&sch).then(move |()| *total_ref.lock().unwrap() += chunk.iter().sum::<u64>()), tk);
        }
    }))
    .unwrap();
    assert_eq!(total.into_inner().unwrap(), 5050);
}

#[test]
fn the_value_may_be_mutated_by_the_function_before_work_borrows_it() {
    let v = sync_wait(just(vec![1, 2]).let_async_scope(|tk, v| {
        v.push(3);
        let v: &Vec<i32> = v;
        spawn_future(just(()).then(move |()| v.iter().sum::<i32>()), tk)
    }));
    assert_eq!(v.unwrap(), Some(6));
}

#[test]
fn nested_spawns_at_any_depth_and_from_token_copies_are_joined() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let n = AtomicUsize::new(0);
    let (sch, n_ref) = (&sch, &n);
    sync_wait(just(()).let_async_scope(|tk, ()| {
        let copy = tk;
        spawn(
            schedule(sch).then(move |()| {
                spawn(
                    schedule(sch).then(move |()| {
                        spawn(schedule(sch).then(slow_add(n_ref)), copy);
                        n_ref.fetch_add(1, Ordering::SeqCst);
                    }),
                    copy,
                );
                n_ref.fetch_add(1, Ordering::SeqCst);
            }),
            tk,
        );
    }))
    .unwrap();
    assert_eq!(n.load(Ordering::SeqCst), 3);
}

#[test]
fn the_returned_sender_is_part_of_the_join_and_may_be_a_spawn_future() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let v = sync_wait(just(21).let_async_scope(|tk, x| {
        let x: &i32 = x;
        spawn_future(schedule(&sch).then(move |()| *x * 2), tk)
    }));
    assert_eq!(v.unwrap(), Some(42));
}

#[test]
fn nest_through_the_token_holds_the_scope_until_its_operation_is_gone() {
    let n = AtomicUsize::new(0);
    let n_ref = &n;
    let v = sync_wait(just(()).let_async_scope(|tk, ()| {
        let nested = nest(just(()).then(move |()| n_ref.fetch_add(1, Ordering::SeqCst)), tk);
        assert!(nested.is_associated());
        // A nested sender that is dropped unstarted dissociates; one that is started
        // (here by `spawn`) runs inside the scope.
        drop(nest(just(()).then(move |()| n_ref.fetch_add(10, Ordering::SeqCst)), tk));
        spawn(nested.then(|_| ()), tk);
        just(100)
    }));
    assert_eq!(v.unwrap(), Some(100));
    assert_eq!(n.load(Ordering::SeqCst), 1);
}

// ---------------------------------------------------------------------------------------
// Predecessor completions other than a value.

#[test]
fn predecessor_error_stopped_and_panic_pass_through_without_calling_the_function() {
    let called = AtomicBool::new(false);
    let e = sync_wait(just_error::<i32, &str>("early").let_async_scope(|_, _| {
        called.store(true, Ordering::SeqCst);
    }));
    assert_eq!(e.unwrap_err(), "early");
    let s = sync_wait(just_stopped::<i32, Infallible>().let_async_scope(|_, _| {
        called.store(true, Ordering::SeqCst);
    }));
    assert_eq!(s.unwrap(), None);
    let msg = panic_message(|| {
        sync_wait(just(1).then(|_: i32| -> i32 { panic!("before") }).let_async_scope(|_, _| {
            called.store(true, Ordering::SeqCst);
        }))
    });
    assert_eq!(msg, "before");
    assert!(!called.load(Ordering::SeqCst));
}

// ---------------------------------------------------------------------------------------
// Errors (P3296: the first error wins, requests stop, discards the value).

#[test]
fn p3296_two_spawned_errors_exactly_one_reaches_sync_wait() {
    for _ in 0..50 {
        let pool = common::pool(2);
        let sch = pool.scheduler();
        let r = sync_wait(just(()).with_error::<&'static str>().let_async_scope(|tk, ()| {
            spawn(schedule(&sch).with_error::<&'static str>().let_value(|()| just_error::<(), _>("foo")), tk);
            spawn(schedule(&sch).with_error::<&'static str>().let_value(|()| just_error::<(), _>("bar")), tk);
        }));
        let e = r.unwrap_err();
        assert!(e == "foo" || e == "bar", "got {e}");
    }
}

#[test]
fn the_returned_value_is_discarded_when_spawned_work_fails() {
    let r = sync_wait(just(()).with_error::<String>().let_async_scope(|tk, ()| {
        spawn(just_error::<(), String>("spawned failed".into()), tk);
        just(7).with_error::<String>()
    }));
    assert_eq!(r.unwrap_err(), "spawned failed");
}

#[test]
fn an_error_of_the_returned_sender_completes_the_scope_after_the_join() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let n = AtomicUsize::new(0);
    let (sch_ref, n_ref) = (&sch, &n);
    let r = sync_wait(just(()).with_error::<u32>().let_async_scope(|tk, ()| {
        // An infallible sender in a scope whose error type has no `From<Infallible>`. The
        // error requests stop, so it may complete stopped instead of running.
        let stopped = move || {
            n_ref.fetch_add(1, Ordering::SeqCst);
        };
        spawn(schedule(sch_ref).then(slow_add(n_ref)).upon_stopped(stopped).with_error::<u32>(), tk);
        just_error::<i32, u32>(9)
    }));
    assert_eq!(r.unwrap_err(), 9);
    assert_eq!(n.load(Ordering::SeqCst), 1, "the join waited for the spawned work");
}

#[test]
fn spawned_errors_convert_into_the_scope_error() {
    #[derive(Debug, PartialEq)]
    struct ScopeError(String);
    impl From<&'static str> for ScopeError {
        fn from(s: &'static str) -> Self {
            ScopeError(s.to_owned())
        }
    }
    let r = sync_wait(just(()).with_error::<ScopeError>().let_async_scope(|tk, ()| {
        spawn(just_error::<(), &'static str>("converted"), tk);
    }));
    assert_eq!(r.unwrap_err(), ScopeError("converted".into()));
}

#[test]
fn an_error_requests_stop_on_the_other_outstanding_work() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let probe = WaitProbe::default();
    let probe_ref = &probe;
    let r = sync_wait(just(()).with_error::<&'static str>().let_async_scope(|tk, ()| {
        // Blocks a worker until the scope's stop token fires.
        spawn(starts_on(sch.clone(), wait_for_stop::<&'static str>(probe_ref)), tk);
        assert!(probe_ref.wait_started());
        spawn(just_error::<(), _>("fail"), tk);
    }));
    assert_eq!(r.unwrap_err(), "fail");
    assert!(probe.saw_stop(), "the error requested stop on the waiting work");
}

// ---------------------------------------------------------------------------------------
// Panics.

#[test]
fn a_panicking_function_still_joins_the_work_it_spawned_then_resumes_the_panic() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let n = AtomicUsize::new(0);
    let (sch_ref, n_ref) = (&sch, &n);
    let msg = panic_message(|| {
        sync_wait(just(()).let_async_scope(|tk, ()| {
            // The panic requests stop: work not yet run completes stopped. Either way
            // each one is accounted for before the panic resumes.
            for _ in 0..4 {
                let stopped = move || {
                    n_ref.fetch_add(1, Ordering::SeqCst);
                };
                spawn(schedule(sch_ref).then(slow_add(n_ref)).upon_stopped(stopped), tk);
            }
            if n_ref.load(Ordering::SeqCst) < 100 {
                panic!("function panicked");
            }
        }))
    });
    assert_eq!(msg, "function panicked");
    assert_eq!(n.load(Ordering::SeqCst), 4, "the scope was joined (each work ran or stopped) before the panic resumed");
}

#[test]
fn a_panic_in_spawned_work_is_delivered_and_the_workers_survive() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let probe = WaitProbe::default();
    let probe_ref = &probe;
    let msg = panic_message(|| {
        sync_wait(just(3).let_async_scope(|tk, three| {
            spawn(starts_on(sch.clone(), wait_for_stop::<Infallible>(probe_ref)), tk);
            assert!(probe_ref.wait_started());
            spawn(schedule(&sch).then(|()| panic!("spawned panicked")), tk);
            just(*three)
        }))
    });
    assert_eq!(msg, "spawned panicked");
    assert!(probe.saw_stop(), "the panic requested stop on the other work");
    // Both workers still run work.
    let on_pool =
        sync_wait(when_all((schedule(&sch).then(|()| thread_name()), schedule(&sch).then(|()| thread_name()))));
    let (a, b) = on_pool.unwrap().unwrap();
    assert!(a.is_some() && b.is_some());
}

#[test]
fn a_panic_wins_over_an_error() {
    let msg = panic_message(|| {
        sync_wait(just(()).with_error::<&'static str>().let_async_scope(|tk, ()| {
            spawn(just_error::<(), _>("error"), tk);
            spawn(just(()).then(|()| panic!("panic")).with_error::<&str>(), tk);
        }))
    });
    assert_eq!(msg, "panic");
}

// ---------------------------------------------------------------------------------------
// Stop requests.

#[test]
fn an_outer_stop_request_reaches_nested_work_which_may_still_spawn_cleanup() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let source = InplaceStopSource::new();
    let probe = WaitProbe::default();
    let cleaned = AtomicBool::new(false);
    let (probe_ref, cleaned_ref, source_ref, sch_ref) = (&probe, &cleaned, &source, &sch);
    let r = sync_wait(with_stop(
        &source,
        just(()).let_async_scope(|tk, ()| {
            let waiting = starts_on(sch_ref.clone(), wait_for_stop::<Infallible>(probe_ref));
            // When stopped, spawn cleanup work into the same scope.
            spawn(
                waiting.upon_stopped(move || {
                    spawn(just(()).then(move |()| cleaned_ref.store(true, Ordering::SeqCst)), tk);
                }),
                tk,
            );
            spawn(
                schedule(sch_ref).then(move |()| {
                    assert!(probe_ref.wait_started());
                    source_ref.request_stop();
                }),
                tk,
            );
        }),
    ));
    assert_eq!(r.unwrap(), Some(()));
    assert!(probe.saw_stop(), "the outer stop reached the nested work");
    assert!(cleaned.load(Ordering::SeqCst), "cleanup spawned after the stop ran before completion");
}

#[test]
fn a_stop_requested_before_the_value_is_seen_by_all_nested_work() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let seen = AtomicUsize::new(0);
    let seen_ref = &seen;
    sync_wait(with_stop(
        &source,
        just(()).let_async_scope(|tk, ()| {
            for _ in 0..3 {
                spawn(
                    read_env(GetScheduler).then(|_| ()).let_value(move |()| {
                        just(()).bulk(1, move |_, _| {
                            seen_ref.fetch_add(1, Ordering::SeqCst);
                        })
                    }),
                    tk,
                );
            }
        }),
    ))
    .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 0, "bulk saw the stop request and ran nothing");
}

// ---------------------------------------------------------------------------------------
// The environment of spawned work.

#[test]
fn spawned_work_sees_the_outer_scheduler_and_user_queries() {
    struct Tenant;
    impl Query for Tenant {
        type Value = &'static str;
    }
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let seen = Mutex::new(Vec::new());
    let (seen_ref, sch_ref) = (&seen, &sch);
    let work = just(()).let_async_scope(|tk, ()| {
        spawn(read_env(GetScheduler).then(move |s: PoolScheduler| seen_ref.lock().unwrap().push(s == *sch_ref)), tk);
        spawn(read_env(Tenant).then(move |t| seen_ref.lock().unwrap().push(t == Some("acme"))), tk);
    });
    sync_wait(starts_on(sch.clone(), work).write_env(prop::<Tenant>("acme"))).unwrap();
    assert_eq!(*seen.lock().unwrap(), [true, true]);
}

#[test]
fn the_scope_completes_on_the_outer_scheduler() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("let-pool-{i}")).build().unwrap();
    let sch = pool.scheduler();
    let ctx = SingleThreadContext::with_name("let-outer");
    let sch_ref = &sch;
    // Under `starts_on(ctx)` the outer scheduler is the context's: the last spawned work
    // ends on the pool, and the completion hops back to the context's thread.
    let where_ = sync_wait(
        starts_on(
            ctx.scheduler(),
            just(()).let_async_scope(|tk, ()| {
                spawn(schedule(sch_ref).then(|()| std::thread::sleep(Duration::from_millis(10))), tk);
            }),
        )
        .then(|()| thread_name()),
    );
    assert_eq!(where_.unwrap().unwrap().as_deref(), Some("let-outer"));
}

// ---------------------------------------------------------------------------------------
// P3149R6 "Recursively spawning work until completion", on a tree that lives on the
// test's stack.

/// The token of a scope started under `sync_wait`, whose scheduler is the run loop's.
type Token<'s, 'e> = LetScopeToken<'s, 'e, RunLoopScheduler>;

/// P3149's `process` with `spawn`: returns spawnable work; nothing names a receiver.
fn process<'s, 'e>(tk: Token<'s, 'e>, sch: &'s PoolScheduler, t: &'s Tree) -> impl Spawnable<Token<'s, 'e>> {
    schedule(sch).then(move |()| {
        if let Some(l) = &t.left {
            spawn(process(tk, sch, l), tk);
        }
        if let Some(r) = &t.right {
            spawn(process(tk, sch, r), tk);
        }
        t.visits.fetch_add(1, Ordering::Relaxed);
    })
}

#[test]
fn p3149_let_async_scope_with_spawn_visits_a_borrowed_tree_once() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let tree = make_tree(14);
    let (tree_ref, sch_ref) = (&tree, &sch);
    sync_wait(just(()).let_async_scope(|tk, ()| {
        spawn(process(tk, sch_ref, tree_ref), tk);
    }))
    .unwrap();
    assert_eq!(all_visited_once(&tree), (1 << 15) - 1);
}

/// P3149's `process` with `spawn_future`: each node completes once its subtrees have.
fn process_future<'s, 'e>(tk: Token<'s, 'e>, sch: &'s PoolScheduler, t: &'s Tree) -> SpawnFuture<(), Infallible> {
    spawn_future(
        schedule(sch).let_value(move |()| {
            let child = |c: &'s Option<Box<Tree>>| match c.as_deref() {
                Some(c) => process_future(tk, sch, c),
                None => spawn_future(just(()), tk),
            };
            let (left, right) = (child(&t.left), child(&t.right));
            t.visits.fetch_add(1, Ordering::Relaxed);
            when_all((left, right)).then(|_| ())
        }),
        tk,
    )
}

#[test]
fn p3149_let_async_scope_with_spawn_future_visits_a_borrowed_tree_once() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let tree = make_tree(12);
    let (tree_ref, sch_ref) = (&tree, &sch);
    let v = sync_wait(just(()).let_async_scope(|tk, ()| process_future(tk, sch_ref, tree_ref)));
    assert_eq!(v.unwrap(), Some(()));
    assert_eq!(all_visited_once(&tree), (1 << 13) - 1);
}

/// P3149's `counting_scope` variant. A `CountingScope`'s token is `'static` (its work is
/// detached, and the scope could be leaked), so the borrowed tree is reached through a
/// `let_async_scope` around it: the counting scope is joined inside the let-scope's
/// returned sender, and the tree is borrowed through the outer token's lifetime.
#[test]
fn p3149_counting_scope_variant_visits_every_node_once() {
    fn process_counting(sch: PoolScheduler, token: CountingToken, t: &'static Tree) -> impl Spawnable<CountingToken> {
        schedule(&sch.clone()).then(move |()| {
            if let Some(l) = &t.left {
                spawn(process_counting(sch.clone(), token, l), token);
            }
            if let Some(r) = &t.right {
                spawn(process_counting(sch.clone(), token, r), token);
            }
            t.visits.fetch_add(1, Ordering::Relaxed);
        })
    }
    let pool = common::pool(2);
    let scope = CountingScope::new();
    let tree: &'static Tree = Box::leak(Box::new(make_tree(14)));
    spawn(process_counting(pool.scheduler(), scope.token(), tree), scope.token());
    sync_wait(scope.join()).unwrap();
    assert_eq!(all_visited_once(tree), (1 << 15) - 1);
}

/// A helper generic over the token works with both counting scopes.
fn count_down<Tk>(tk: Tk, n: u32, hits: &'static AtomicUsize) -> impl Spawnable<Tk>
where
    Tk: ScopeLifetime<'static, Association = ScopeAssociation>,
{
    just(()).then(move |()| {
        hits.fetch_add(1, Ordering::Relaxed);
        if n > 0 {
            spawn(count_down(tk, n - 1, hits), tk);
        }
    })
}

#[test]
fn spawnable_return_types_work_for_counting_tokens_too() {
    static HITS: AtomicUsize = AtomicUsize::new(0);
    let scope = SimpleCountingScope::new();
    spawn(count_down(scope.token(), 9, &HITS), scope.token());
    let scope2 = CountingScope::new();
    spawn(count_down(scope2.token(), 9, &HITS), scope2.token());
    sync_wait(scope.join()).unwrap();
    sync_wait(scope2.join()).unwrap();
    assert_eq!(HITS.load(Ordering::Relaxed), 20);
}

#[test]
fn many_scopes_in_a_row_recycle_their_cores() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let n = AtomicUsize::new(0);
    let (sch_ref, n_ref) = (&sch, &n);
    for i in 0..2_000 {
        let v = sync_wait(just(i).let_async_scope(|tk, i| {
            spawn(schedule(sch_ref).then(move |()| n_ref.fetch_add(1, Ordering::Relaxed)).then(|_| ()), tk);
            just(*i)
        }));
        assert_eq!(v.unwrap(), Some(i));
    }
    assert_eq!(n.load(Ordering::Relaxed), 2_000);
}

// ---------------------------------------------------------------------------------------
// Other owners: a let-scope spawned into a counting scope, and let-scopes nested in
// let-scopes (the inner one borrowing the outer one's value).

#[test]
fn a_let_scope_spawned_into_a_counting_scope_completes_inline_without_a_scheduler() {
    static HITS: AtomicUsize = AtomicUsize::new(0);
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let scope = CountingScope::new();
    // The spawned work's environment has no scheduler: the let-scope completes on the
    // thread that ends its last piece of work.
    let work = just(vec![1usize, 2, 3]).let_async_scope(move |tk, v| {
        let v: &Vec<usize> = v;
        for x in v {
            spawn(schedule(&sch).then(move |()| HITS.fetch_add(*x, Ordering::SeqCst)).then(|_| ()), tk);
        }
    });
    assert!(spawn(work, scope.token()));
    sync_wait(scope.join()).unwrap();
    assert_eq!(HITS.load(Ordering::SeqCst), 6);
}

#[test]
fn nested_let_scopes_borrow_the_outer_value() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let sum = AtomicUsize::new(0);
    let (sch, sum_ref) = (&sch, &sum);
    let v = sync_wait(just(vec![10usize, 20]).let_async_scope(|outer, v| {
        let v: &Vec<usize> = v;
        for x in v {
            let inner = just(*x).let_async_scope(move |inner_tk, y| {
                let y: &usize = y;
                spawn(
                    schedule(sch).then(move |()| sum_ref.fetch_add(*x + *y, Ordering::SeqCst)).then(|_| ()),
                    inner_tk,
                );
            });
            spawn(inner, outer);
        }
        just(v.len())
    }));
    assert_eq!(v.unwrap(), Some(2));
    assert_eq!(sum.load(Ordering::SeqCst), 60);
}

/// Regression (found by the loom model of the outer stop racing the join): a scope whose
/// last work completes inside the forwarded outer stop request, without a scheduler to hop
/// to, used to complete and release its core inside that core's own `request_stop`, which
/// then left the recycled core "stop requested" for the next scope.
#[test]
fn a_scope_joined_inside_its_forwarded_stop_request_leaves_no_stop_behind() {
    static REGISTERED: AtomicBool = AtomicBool::new(false);
    for _ in 0..20 {
        REGISTERED.store(false, Ordering::SeqCst);
        let counting = CountingScope::new();
        // Spawned: the environment has no scheduler, so the scope completes inline.
        spawn(
            just(()).let_async_scope(|tk, ()| {
                spawn(cancel_on_stop::<Infallible>(&REGISTERED), tk);
            }),
            counting.token(),
        );
        assert!(REGISTERED.load(Ordering::SeqCst));
        counting.request_stop();
        sync_wait(counting.join()).unwrap();
        for _ in 0..4 {
            let born_stopped =
                sync_wait(just(()).let_async_scope(|tk, ()| spawn_future(stop_probe::<Infallible>(), tk)));
            assert_eq!(born_stopped.unwrap(), Some(false), "a new scope was born stopped");
        }
    }
}

// ---------------------------------------------------------------------------------------
// Spawned work that is discarded (stopped before its function runs) drops that function
// before the scope can end: the function may borrow what the scope borrows.

/// Borrows a flag; reads it when dropped, after a pause that lets a premature join win
/// the race, and records what it saw.
struct ReadsOnDrop<'a> {
    joined: &'a AtomicBool,
    saw_joined: &'a AtomicUsize,
}

impl Drop for ReadsOnDrop<'_> {
    fn drop(&mut self) {
        std::thread::sleep(Duration::from_millis(20));
        if self.joined.load(Ordering::SeqCst) {
            self.saw_joined.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[test]
fn discarded_spawned_work_drops_its_borrows_before_the_scope_ends() {
    // One worker, held by a first job while the guarded work queues behind it; stop is
    // requested before the worker is released, so the worker completes the queued work
    // stopped and `then` discards its function (and the guard) there.
    let pool = common::pool(1);
    let sch = pool.scheduler();
    let source = InplaceStopSource::new();
    let release = AtomicBool::new(false);
    let queued = AtomicBool::new(false);
    // Set once the let-scope has completed: a borrow read after that would be a read of
    // data the caller may already have freed.
    let joined = AtomicBool::new(false);
    let saw_joined = AtomicUsize::new(0);
    let (sch_ref, joined_ref, saw_ref, release_ref, queued_ref) = (&sch, &joined, &saw_joined, &release, &queued);
    let work = just(()).let_async_scope(move |tk, ()| {
        spawn(
            schedule(sch_ref).then(move |()| {
                while !release_ref.load(Ordering::SeqCst) {
                    std::thread::yield_now();
                }
            }),
            tk,
        );
        for _ in 0..4 {
            let guard = ReadsOnDrop { joined: joined_ref, saw_joined: saw_ref };
            spawn(schedule(sch_ref).then(move |()| drop(guard)), tk);
        }
        queued_ref.store(true, Ordering::SeqCst);
    });
    std::thread::scope(|s| {
        s.spawn(|| {
            while !queued.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            source.request_stop();
            release.store(true, Ordering::SeqCst);
        });
        let r = sync_wait(stop_when(work, source.token()));
        joined.store(true, Ordering::SeqCst);
        assert!(matches!(r, Ok(None) | Ok(Some(()))), "{r:?}");
    });
    // Long enough for a guard still pending on the worker to read the flag.
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(saw_joined.load(Ordering::SeqCst), 0, "a borrow was used after the scope completed");
}
