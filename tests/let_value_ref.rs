//! `let_value_ref` and `let_value_ref_with`: `let_value` by reference. The function
//! borrows the value kept in the operation, the sender it returns may borrow it until it
//! completes, and the value is handed on with that sender's result; every other
//! completion drops the value (and the function's operation) before it is delivered.

mod common;

use common::{Live, cancel_on_stop, panic_message, stop_probe, with_stop};
use senders::adaptors::{LendScope, WhenAll};
use senders::factories::ReadEnv;
use senders::*;
use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The function gets `&mut` the stored value; the value comes back with the result.
#[test]
fn the_value_is_lent_to_the_function_and_handed_on_with_its_result() {
    let out = sync_wait_value(just(vec![1, 2, 3]).let_value_ref(|v, _| {
        v.push(4);
        just(v.len()).boxed()
    }));
    assert_eq!(out, (vec![1, 2, 3, 4], 4));
}

/// Children borrow disjoint parts of the value, on the pool; the parent uses the whole
/// value after they completed.
#[test]
fn children_borrow_the_parts_and_the_parent_uses_the_whole_afterwards() {
    let pool = common::pool(2);
    let work = schedule(&pool.scheduler()).then(|()| vec![0u64; 1000]).let_value_ref(|v, _| {
        fn fill(part: &mut [u64], base: u64) -> AnySender<'_, ()> {
            just(part).then(move |part| part.iter_mut().enumerate().for_each(|(i, x)| *x = base + i as u64)).boxed()
        }
        let (left, right) = v.split_at_mut(500);
        when_all((fill(left, 0), fill(right, 500))).boxed()
    });
    let (v, ((), ())) = sync_wait_value(work.then(|(v, done)| (v, done)));
    assert_eq!(v, (0..1000).collect::<Vec<u64>>());
}

fn merge_sort(v: &mut [u32]) -> AnySender<'_, ()> {
    if v.len() <= 16 {
        v.sort_unstable();
        return just(()).boxed();
    }
    just(v)
        .let_value_ref(|v, _| {
            let (left, right) = v.split_at_mut(v.len() / 2);
            when_all((merge_sort(left), merge_sort(right))).boxed()
        })
        .then(|(v, _)| {
            let mid = v.len() / 2;
            let mut merged = Vec::with_capacity(v.len());
            let (mut i, mut j) = (0, mid);
            while i < mid && j < v.len() {
                if v[i] <= v[j] {
                    merged.push(v[i]);
                    i += 1;
                } else {
                    merged.push(v[j]);
                    j += 1;
                }
            }
            merged.extend_from_slice(&v[i..mid]);
            merged.extend_from_slice(&v[j..]);
            v.copy_from_slice(&merged);
        })
        .boxed()
}

/// The divide-and-conquer shape the adaptor exists for: sort two halves in children that
/// borrow `&mut` halves, then merge, as a recursion of erased senders on the pool.
#[test]
fn a_merge_sort_of_borrowed_halves_sorts_on_the_pool_and_inline() {
    let pool = common::pool(2);
    let mut data: Vec<u32> = (0..50_000u32).map(|i| i.wrapping_mul(2_654_435_761) % 100_003).collect();
    let mut expected = data.clone();
    expected.sort_unstable();
    sync_wait_value(starts_on(pool.scheduler(), merge_sort(&mut data)));
    assert_eq!(data, expected);
    let mut data: Vec<u32> = (0..1000).rev().collect();
    sync_wait_value(merge_sort(&mut data));
    assert_eq!(data, (0..1000).collect::<Vec<u32>>());
}

fn halves<'a>(v: &'a mut &mut [u32]) -> WhenAll<(AnySender<'a, ()>, AnySender<'a, ()>)> {
    let mid = v.len() / 2;
    let (left, right) = v.split_at_mut(mid);
    when_all((merge_sort(left), merge_sort(right)))
}

/// The typed form: a function item whose sender's type depends on the borrow.
#[test]
fn the_typed_form_takes_a_function_item_whose_sender_borrows() {
    let pool = common::pool(2);
    let mut data: Vec<u32> = (0..10_000).rev().collect();
    let (v, ((), ())) = sync_wait_value(starts_on(pool.scheduler(), just(&mut data[..]).let_value_ref_with(halves)));
    assert!(v[..5000].is_sorted() && v[5000..].is_sorted(), "both halves sorted by the lent children");
    assert_eq!(v[0], 5000, "the upper half of the values came first");
}

fn scheduler_of(_: &mut ()) -> ReadEnv<GetScheduler, PoolScheduler> {
    read_env(GetScheduler)
}

/// The function's sender sees the predecessor's completion scheduler as current, as
/// `let_value`'s does.
#[test]
fn the_lent_sender_sees_the_predecessors_scheduler() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let ((), seen) = sync_wait_value(schedule(&sch).let_value_ref_with(scheduler_of));
    assert!(seen == sch, "the pool's scheduler, from the predecessor");
}

/// Error, stop and panic of the predecessor pass through; the function never runs.
#[test]
fn the_predecessors_error_stop_and_panic_pass_through_without_the_function() {
    static RAN: AtomicBool = AtomicBool::new(false);
    fn f<'a>(_: &'a mut i32, _: LendScope<'a, '_>) -> AnySender<'a, (), &'static str> {
        RAN.store(true, Ordering::SeqCst);
        just(()).with_error().boxed()
    }
    assert_eq!(sync_wait(just_error::<i32, _>("no").let_value_ref(f)), Err("no"));
    assert_eq!(sync_wait(just_stopped::<i32, &str>().let_value_ref(f)), Ok(None));
    let msg =
        panic_message(|| sync_wait(just(1).with_error::<&str>().then(|_| -> i32 { panic!("first") }).let_value_ref(f)));
    assert_eq!(msg, "first");
    assert!(!RAN.load(Ordering::SeqCst), "the function never ran");
}

/// A panic in the function is the completion; the value is dropped before it, on the
/// worker that ran the function.
#[test]
fn a_panicking_function_drops_the_value_before_completing() {
    let pool = common::pool(2);
    for _ in 0..3 {
        let live = Live::new();
        let msg = panic_message(|| {
            sync_wait(
                schedule(&pool.scheduler())
                    .then(|()| live.track(7))
                    .let_value_ref(|_, _| -> AnySender<'_, ()> { panic!("in the function") }),
            )
        });
        assert_eq!(msg, "in the function");
        live.assert_none_alive("after the panic resumed");
    }
}

/// The lent sender's error, stop and panic are delivered after the value (and the lent
/// sender's operation) are gone, though they complete on a worker.
#[test]
fn the_lent_senders_error_stop_and_panic_drop_the_value_before_completing() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    for _ in 0..3 {
        let live = Live::new();
        let value = || schedule(&sch).then(|()| live.track(1)).with_error::<i32>();
        let r =
            sync_wait(value().let_value_ref(|_, _| {
                schedule(&sch).with_error::<i32>().let_value(|()| just_error::<(), _>(5)).boxed()
            }));
        assert_eq!(r.map(|v| v.map(|_| ())), Err(5));
        live.assert_none_alive("after the error");
        let r = sync_wait(
            value().let_value_ref(|_, _| schedule(&sch).with_error().let_value(|()| just_stopped::<(), i32>()).boxed()),
        );
        assert!(matches!(r, Ok(None)), "stopped");
        live.assert_none_alive("after the stop");
        let msg = panic_message(|| {
            sync_wait(
                value().let_value_ref(|_, _| schedule(&sch).with_error::<i32>().then(|()| panic!("lent")).boxed()),
            )
        });
        assert_eq!(msg, "lent");
        live.assert_none_alive("after the panic");
    }
}

/// A stop request from the receiver's environment reaches the lent sender.
#[test]
fn a_stop_request_reaches_the_lent_sender() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let r =
        sync_wait(with_stop(&source, just(5).let_value_ref(|v, _| stop_probe().then(|stopped| (*v, stopped)).boxed())));
    assert_eq!(r, Ok(Some((5, (5, true)))));

    // Requested while the lent sender waits: it completes stopped, and so does the whole.
    let pool = common::pool(2);
    let source = InplaceStopSource::new();
    let registered = AtomicBool::new(false);
    let live = Live::new();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !registered.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            source.request_stop();
        });
        let work = schedule(&pool.scheduler())
            .then(|()| live.track(0))
            .let_value_ref(|_, _| cancel_on_stop(&registered).boxed());
        assert!(matches!(sync_wait(with_stop(&source, work)), Ok(None)));
        live.assert_none_alive("after the stop");
    });
}

/// A sender whose operation keeps a borrow of the value and uses it when dropped: the
/// operation is dropped before the value moves on, so its write is in the value handed
/// on (with the value moved first, the write would land in the operation's emptied slot).
struct Touch<'a> {
    value: &'a mut Vec<i32>,
}

struct TouchOp<'a, R> {
    value: &'a mut Vec<i32>,
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl Sender for Touch<'_> {
    type Value = usize;
    type Error = Infallible;
    const SENDS_STOPPED: bool = false;
    type Domain = senders::domain::NoDomain;
    type CompletionScheduler = senders::schedulers::NoScheduler;
    fn completion_scheduler(&self) -> Self::CompletionScheduler {
        senders::schedulers::NoScheduler
    }
}

impl<'a, R: Receiver<usize, Infallible>> SenderTo<R> for Touch<'a> {
    type Operation = TouchOp<'a, R>;
    fn connect(self, rcvr: R) -> TouchOp<'a, R> {
        TouchOp { value: self.value, rcvr: Some(rcvr), _pin: PhantomPinned }
    }
}

impl<R: Receiver<usize, Infallible>> OperationState for TouchOp<'_, R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        this.value.push(1);
        let len = this.value.len();
        this.rcvr.take().expect("started once").set_value(len);
    }
}

impl<R> Drop for TouchOp<'_, R> {
    fn drop(&mut self) {
        self.value.push(99);
    }
}

fn touch(value: &mut Vec<i32>) -> Touch<'_> {
    Touch { value }
}

#[test]
fn the_lent_senders_operation_is_dropped_before_the_value_moves_on() {
    let pool = common::pool(2);
    let (v, len) = sync_wait_value(schedule(&pool.scheduler()).then(|()| vec![0]).let_value_ref_with(touch));
    assert_eq!(len, 2);
    assert_eq!(v, [0, 1, 99], "the operation's drop wrote into the value before it was handed on");
}

/// Each lent sender runs once, and its value is dropped once, however many nodes.
#[test]
fn every_node_of_a_recursion_lends_once() {
    fn count(depth: u32, hits: &AtomicUsize) -> AnySender<'_, u32> {
        if depth == 0 {
            hits.fetch_add(1, Ordering::Relaxed);
            return just(1).boxed();
        }
        just([0u32; 2])
            .let_value_ref(move |pair, _| {
                let [a, b] = pair;
                when_all((count(depth - 1, hits).then(|n| *a = n), count(depth - 1, hits).then(|n| *b = n))).boxed()
            })
            .then(|(pair, _)| pair[0] + pair[1])
            .boxed()
    }
    let pool = common::pool(2);
    let hits = AtomicUsize::new(0);
    assert_eq!(sync_wait_value(starts_on(pool.scheduler(), count(12, &hits))), 4096);
    assert_eq!(hits.load(Ordering::Relaxed), 4096);
}

/// `let_async_scope`'s value after the join: the value lives in a `let_value_ref`
/// around the scope, the scope's spawned work borrows it (mutably, element by element),
/// and the value is handed on once the scope has joined.
#[test]
fn a_let_async_scope_inside_let_value_ref_hands_the_value_on_after_the_join() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let sch_ref = &sch;
    let work = just(vec![0u64; 64]).let_value_ref(|v, _| {
        let v: &mut Vec<u64> = v;
        just(())
            .let_async_scope(move |tk, ()| {
                for (i, x) in v.iter_mut().enumerate() {
                    spawn(schedule(sch_ref).then(move |()| *x = 2 * i as u64), tk);
                }
            })
            .boxed()
    });
    let (v, ()) = sync_wait_value(starts_on(sch.clone(), work));
    assert_eq!(v, (0..64).map(|i| 2 * i).collect::<Vec<u64>>());
}
