//! `AnySender`: the four completions through erasure, collections, recursion on the
//! pool (forking, early and late), stop requests, the forwarded environment, borrowing,
//! and that the block is freed on every path.

mod common;

use common::{DropCounter, PanicsInConnect, Sink, WaitProbe, panic_message, thread_name, wait_for_stop, with_stop};
use senders::any::AnyReceiver;
use senders::*;
use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[test]
fn value_error_stopped_and_panic_pass_through() {
    assert_eq!(sync_wait(just(7).boxed()).unwrap(), Some(7));
    assert_eq!(sync_wait(just_error::<i32, &str>("bad").boxed()).unwrap_err(), "bad");
    assert_eq!(sync_wait(just_stopped::<i32, Infallible>().boxed()).unwrap(), None);
    let msg = panic_message(|| sync_wait(just(1).then(|_: i32| -> i32 { panic!("inner panicked") }).boxed()));
    assert_eq!(msg, "inner panicked");
}

#[test]
fn a_collection_of_different_senders() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let all: Vec<AnySender<'static, u32>> = vec![
        just(1).boxed(),
        just(1).then(|x| x + 1).boxed(),
        schedule(&sch).then(|()| 3).boxed(),
        when_all((just(2), just(2))).then(|(a, b)| a + b).boxed(),
    ];
    let got: Vec<u32> = all.into_iter().map(|s| sync_wait(s).unwrap().unwrap()).collect();
    assert_eq!(got, [1, 2, 3, 4]);
}

/// Leaves take a little time, so that the second worker steals work (as it does when
/// the recursion has real work) however fast the machine is.
fn fib(n: u32, seen: &'static Mutex<Vec<String>>) -> AnySender<'static, u64> {
    if n < 2 {
        return just(u64::from(n))
            .then(move |v| {
                std::thread::sleep(std::time::Duration::from_micros(100));
                if let Some(name) = thread_name() {
                    let mut s = seen.lock().unwrap();
                    if !s.contains(&name) {
                        s.push(name);
                    }
                }
                v
            })
            .boxed();
    }
    when_all((fib(n - 1, seen), fib(n - 2, seen))).then(|(a, b)| a + b).boxed()
}

#[test]
fn recursion_forks_on_the_pool_under_starts_on() {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("any-{i}")).build().unwrap();
    assert_eq!(sync_wait(starts_on(pool.scheduler(), fib(13, &SEEN))).unwrap(), Some(233));
    let seen = SEEN.lock().unwrap();
    assert!(seen.iter().any(|s| s == "any-0") && seen.iter().any(|s| s == "any-1"), "both workers: {seen:?}");
}

#[test]
fn recursion_forks_on_the_pool_inside_a_task() {
    static SEEN: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("any-t-{i}")).build().unwrap();
    let t = Task::<u64, Infallible>::new(async { fib(12, &SEEN).await });
    assert_eq!(sync_wait(starts_on(pool.scheduler(), t)).unwrap(), Some(144));
    let seen = SEEN.lock().unwrap();
    assert!(seen.iter().any(|s| s == "any-t-0") && seen.iter().any(|s| s == "any-t-1"), "both workers: {seen:?}");
}

/// With the pool's scheduler type, the erased sender keeps the pool's domain: `when_all`
/// of them forks even where the environment knows nothing of the pool.
fn pool_fib(
    n: u32,
    sch: PoolScheduler,
    hits: &'static AtomicUsize,
) -> AnySender<'static, u64, Infallible, PoolScheduler> {
    if n < 2 {
        return schedule(&sch)
            .then(move |()| {
                hits.fetch_add(1, Ordering::Relaxed);
                u64::from(n)
            })
            .boxed_on();
    }
    when_all((pool_fib(n - 1, sch.clone(), hits), pool_fib(n - 2, sch, hits))).then(|(a, b)| a + b).boxed_on()
}

/// `AnySender::new` with the pool's scheduler type (the `boxed` convenience erases the
/// scheduler).
trait BoxedOn: Sized {
    fn boxed_on(self) -> AnySender<'static, u64, Infallible, PoolScheduler>;
}
impl<S> BoxedOn for S
where
    S: SenderTo<AnyReceiver<u64, Infallible, PoolScheduler>, Value = u64, Error = Infallible> + Send + 'static,
    <S as SenderTo<AnyReceiver<u64, Infallible, PoolScheduler>>>::Operation: Send,
{
    fn boxed_on(self) -> AnySender<'static, u64, Infallible, PoolScheduler> {
        AnySender::new(self)
    }
}

#[test]
fn with_a_scheduler_type_early_customization_survives_erasure() {
    static HITS: AtomicUsize = AtomicUsize::new(0);
    let pool = common::pool(2);
    // The pool's `when_all` is chosen when the sender is built (the `AnySender`'s domain
    // is the pool's); it is connected under `starts_on` so the environment has the pool's
    // scheduler type, as the erased receiver requires.
    let v = sync_wait(starts_on(pool.scheduler(), pool_fib(15, pool.scheduler(), &HITS)));
    assert_eq!(v.unwrap(), Some(610));
    assert_eq!(HITS.load(Ordering::Relaxed), 987, "every leaf ran");
}

#[test]
fn the_environment_is_forwarded_through_erasure() {
    struct Tenant;
    impl Query for Tenant {
        type Value = u32;
    }
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let inner = read_env(GetScheduler).then(|s: PoolScheduler| s);
    let erased: AnySender<'static, PoolScheduler, Infallible, PoolScheduler> = AnySender::new(inner);
    let got = sync_wait(starts_on(sch.clone(), erased)).unwrap().unwrap();
    assert!(got == sch, "read_env(GetScheduler) through erasure returns the pool's scheduler");
    let tenant = sync_wait(read_env(Tenant).boxed().write_env(prop::<Tenant>(9))).unwrap().unwrap();
    assert_eq!(tenant, Some(9));
}

#[test]
fn a_stop_request_reaches_the_erased_sender() {
    let ctx = SingleThreadContext::new();
    let source = InplaceStopSource::new();
    let probe = WaitProbe::default();
    let sch = ctx.scheduler();
    let (probe_ref, source_ref) = (&probe, &source);
    let r = std::thread::scope(|s| {
        let waiter = s.spawn(move || {
            sync_wait(with_stop(source_ref, starts_on(sch, wait_for_stop::<Infallible>(probe_ref)).boxed()))
        });
        assert!(probe.wait_started());
        source.request_stop();
        waiter.join().unwrap()
    });
    assert_eq!(r.unwrap(), None);
    assert!(probe.saw_stop());
}

#[test]
fn an_erased_sender_borrows_locals_under_sync_wait() {
    let data = vec![1, 2, 3];
    let data_ref = &data;
    let erased: AnySender<'_, i32> = just(()).then(move |()| data_ref.iter().sum::<i32>()).boxed();
    assert_eq!(sync_wait(erased).unwrap(), Some(6));
}

#[test]
fn the_block_is_freed_on_every_path() {
    let drops = Arc::new(AtomicUsize::new(0));
    // Never connected.
    let c = DropCounter(drops.clone());
    drop(just(()).then(move |()| drop(c)).boxed());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    // Connected, never started.
    let c = DropCounter(drops.clone());
    drop(just(()).then(move |()| drop(c)).boxed().connect(Sink));
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    // Run to completion.
    let c = DropCounter(drops.clone());
    sync_wait(just(()).then(move |()| drop(c)).boxed()).unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 3);
}

/// `just(v).boxed()` keeps a value of one word or less without a block: it is
/// delivered, and dropped exactly once on every path; a larger one takes a block.
#[test]
fn a_ready_value_is_delivered_and_dropped_once_on_every_path() {
    let drops = Arc::new(AtomicUsize::new(0));
    drop(just(DropCounter(drops.clone())).boxed());
    assert_eq!(drops.load(Ordering::SeqCst), 1);
    drop(just(DropCounter(drops.clone())).boxed().connect(Sink));
    assert_eq!(drops.load(Ordering::SeqCst), 2);
    let got = sync_wait(just(DropCounter(drops.clone())).boxed()).unwrap().unwrap();
    assert_eq!(drops.load(Ordering::SeqCst), 2, "the value is handed over, not dropped");
    drop(got);
    assert_eq!(drops.load(Ordering::SeqCst), 3);
    // In a `when_all` on the pool, as the leaves of a recursion are.
    let pool = common::pool(2);
    let both = when_all((just(DropCounter(drops.clone())).boxed(), just(2u8).boxed())).then(|(c, n)| {
        drop(c);
        n
    });
    assert_eq!(sync_wait(starts_on(pool.scheduler(), both)).unwrap(), Some(2));
    assert_eq!(drops.load(Ordering::SeqCst), 4);
    // Larger than a word, or more aligned: through a block, with the same results.
    let big = [1u64, 2, 3, 4];
    assert_eq!(sync_wait(just(big).boxed()).unwrap(), Some(big));
    #[derive(Clone, Copy, Debug, PartialEq)]
    #[repr(align(32))]
    struct Aligned(u8);
    assert_eq!(sync_wait(just(Aligned(9)).boxed()).unwrap(), Some(Aligned(9)));
    // A zero-sized value, and `just_error` (never ready) alongside.
    assert_eq!(sync_wait(just(()).boxed()).unwrap(), Some(()));
    assert_eq!(sync_wait(just_error::<u8, &str>("no").boxed()).unwrap_err(), "no");
}

/// `just(x).then(f).boxed()` whose value and captures fit a word and need no drop is
/// kept as a plain call instead of a block: `f` still runs only when the operation
/// starts, once, on the thread that starts it; never when it is dropped unstarted; its
/// value, and a panic in it, are delivered, on the pool as inline.
#[test]
fn then_of_a_ready_value_runs_once_when_started_on_the_starting_thread() {
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let calls = &CALLS;
    let leaf = move || {
        just(()).then(move |()| {
            calls.fetch_add(1, Ordering::SeqCst);
            thread_name()
        })
    };
    drop(leaf().boxed());
    drop(leaf().boxed().connect(Sink));
    assert_eq!(CALLS.load(Ordering::SeqCst), 0, "never run unless started");
    let pool = common::pool(2);
    let name = sync_wait(starts_on(pool.scheduler(), leaf().boxed())).unwrap().unwrap();
    assert_eq!(CALLS.load(Ordering::SeqCst), 1);
    assert!(name.is_some_and(|n| n.contains("worker")), "ran on the pool's worker that started it");
    assert_eq!(sync_wait(just(20u32).then(|x| x + 1).boxed()).unwrap(), Some(21));
    // As the leaves of a recursion: in a run-time `when_all` on the pool.
    let leaves = when_all_iter((0..64u64).map(|i| just(i).then(|i| i * 2).boxed()));
    let got = sync_wait(starts_on(pool.scheduler(), leaves)).unwrap().unwrap();
    assert_eq!(got, (0..64).map(|i| i * 2).collect::<Vec<u64>>());
    // A panic is delivered, and the worker survives it.
    let panics = just(1u8).then(|_| -> u8 { panic!("leaf panicked") }).boxed();
    assert_eq!(panic_message(|| sync_wait(starts_on(pool.scheduler(), panics))), "leaf panicked");
    assert_eq!(sync_wait(starts_on(pool.scheduler(), just(3u8).then(|x| x + 1).boxed())).unwrap(), Some(4));
    // A stop request before the start does not stop it, as it does not stop `then` of a
    // `just` unerased.
    let source = InplaceStopSource::new();
    source.request_stop();
    assert_eq!(sync_wait(with_stop(&source, just(2u8).then(|x| x * 5).boxed())).unwrap(), Some(10));
}

#[test]
fn a_panic_in_the_erased_senders_connect_is_delivered() {
    let msg = panic_message(|| sync_wait(PanicsInConnect.boxed()));
    assert_eq!(msg, "connect panicked");
    // The pool still works after the same happens on a worker.
    let pool = common::pool(2);
    let msg = panic_message(|| sync_wait(starts_on(pool.scheduler(), PanicsInConnect.boxed())));
    assert_eq!(msg, "connect panicked");
    assert_eq!(sync_wait(starts_on(pool.scheduler(), just(5).boxed())).unwrap(), Some(5));
}

/// An erased sender connected to the receiver of `continues_on`, of `starts_on`'s hop, or
/// of the pool's `bulk`: those receivers are `Sync` (a shared reference reaches only the
/// environment), as erasure requires. This did not compile before.
#[test]
fn an_erased_sender_before_continues_on_and_pool_bulk() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let hop = just(1).boxed().continues_on(sch.clone()).boxed();
    assert_eq!(sync_wait(hop).unwrap(), Some(1));
    let hits = AtomicUsize::new(0);
    let hits = &hits;
    // The erased environment's domain is the pool's: on a worker, `bulk` is the pool's.
    let bulk = just(2).boxed().bulk(8, move |_, _: &i32| _ = hits.fetch_add(1, Ordering::Relaxed)).boxed();
    assert_eq!(sync_wait(starts_on(sch.clone(), bulk)).unwrap(), Some(2));
    assert_eq!(hits.load(Ordering::Relaxed), 8);
    let each = just(vec![1, 2, 3]).boxed().bulk_each(|_, x: &mut i32| *x *= 10).boxed();
    assert_eq!(sync_wait(starts_on(sch, each)).unwrap(), Some(vec![10, 20, 30]));
}

/// `Send` but not `Sync`, as rayon-demo's mergesort allows its items to be.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Item(u32, std::marker::PhantomData<std::cell::Cell<()>>);

/// Adds one to every item: the left half by recursion, the right half in a `then`
/// (on the pool, run at the same time as the left) whose closure holds `&mut [Item]`.
fn bump_all<'a>(sch: &'a PoolScheduler, items: &'a mut [Item]) -> AnySender<'a, usize> {
    if items.len() <= 2 {
        return schedule(sch)
            .then(move |()| {
                items.iter_mut().for_each(|i| i.0 += 1);
                items.len()
            })
            .boxed();
    }
    let (left, right) = items.split_at_mut(items.len() / 2);
    let right = schedule(sch).then(move |()| {
        right.iter_mut().for_each(|i| i.0 += 1);
        right
    });
    // The continuation holds the right half while the boxed left half runs under it.
    when_all((bump_all(sch, left), right)).then(move |(n, right)| n + right.len()).boxed()
}

#[test]
fn closures_over_a_mutable_slice_of_send_but_not_sync_items_box() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let mut items: Vec<Item> = (0..1000).map(|i| Item(i, std::marker::PhantomData)).collect();
    assert_eq!(sync_wait(bump_all(&sch, &mut items)), Ok(Some(1000)));
    assert!(items.iter().enumerate().all(|(i, item)| item.0 == i as u32 + 1));

    // Every completion's closure may hold one: `then` after a boxed sender, `upon_error`,
    // `upon_stopped`, and `bulk` in order (off the pool and outside a box: inside one,
    // `bulk` may split over the pool's workers, so its function is shared and `Sync`).
    let (head, tail) = items.split_at_mut(500);
    let sndr = just(1u32).boxed().then(move |x| {
        head[0].0 += x;
        head.len()
    });
    assert_eq!(sync_wait(sndr.boxed()), Ok(Some(500)));
    let error = just_error::<usize, u32>(7).boxed().upon_error(|e| {
        tail[0].0 += e;
        tail.len()
    });
    assert_eq!(sync_wait(error.boxed()), Ok(Some(500)));
    let (a, b) = items.split_at_mut(2);
    let stopped = just_stopped::<usize, Infallible>().boxed().upon_stopped(move || a.len());
    assert_eq!(sync_wait(stopped.boxed()), Ok(Some(2)));
    let seen = AtomicUsize::new(0);
    let bulk = just(()).bulk(3, |i, ()| {
        if b[i].0 > 0 {
            seen.fetch_add(1, Ordering::Relaxed);
        }
    });
    assert_eq!(sync_wait(bulk), Ok(Some(())));
    assert_eq!(seen.load(Ordering::Relaxed), 3);
    assert_eq!(items[0].0, 1 + 1);
    assert_eq!(items[500].0, 501 + 7);
}
