//! `bulk_map_collect`, `bulk_try_map_collect`, `bulk_filter_map_collect`: the values in
//! order on pools of 1, 2 and 4 workers and without a scheduler, element types with no
//! `Default` or `Clone`, and nothing leaked or read half-made when `map` panics or fails,
//! a stop arrives, the predecessor fails, or a domain runs the chunks wrongly.

mod common;

use common::{QUIET, panic_message, quiet_panics, with_stop};
use senders::adaptors::{BulkChunked, BulkChunkedFn, BulkChunkedImpl};
use senders::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Elements made and dropped.
#[derive(Default)]
struct Counts {
    made: AtomicUsize,
    dropped: AtomicUsize,
}

impl Counts {
    fn elem(&self, i: usize) -> Elem<'_> {
        self.made.fetch_add(1, Ordering::SeqCst);
        Elem { i, counts: self }
    }
    fn made(&self) -> usize {
        self.made.load(Ordering::SeqCst)
    }
    #[track_caller]
    fn assert_balanced(&self, when: &str) {
        let (made, dropped) = (self.made(), self.dropped.load(Ordering::SeqCst));
        assert_eq!(made, dropped, "{when}: {made} elements made, {dropped} dropped");
    }
}

/// An element with no `Default` and no `Clone` that counts its drop.
struct Elem<'a> {
    i: usize,
    counts: &'a Counts,
}

impl Drop for Elem<'_> {
    fn drop(&mut self) {
        self.counts.dropped.fetch_add(1, Ordering::SeqCst);
    }
}

const SHAPES: [usize; 6] = [0, 1, 2, 7, 1000, 300_000];

fn pools() -> Vec<StaticThreadPool> {
    [1, 2, 4].into_iter().map(|n| StaticThreadPool::new(n).expect("a pool")).collect()
}

#[test]
fn map_collect_is_in_order_on_pools_of_1_2_4_and_without_a_scheduler() {
    for pool in pools() {
        for shape in SHAPES {
            let counts = Counts::default();
            let out = sync_wait(
                schedule(&pool.scheduler())
                    .then(|()| 3usize)
                    .bulk_map_collect(shape, |i, k: &usize| counts.elem(i * k)),
            )
            .unwrap()
            .unwrap();
            assert_eq!(out.len(), shape);
            assert!(out.iter().enumerate().all(|(i, e)| e.i == 3 * i), "in order, {shape}");
            assert_eq!(counts.made(), shape, "one element per index");
            drop(out);
            counts.assert_balanced("after the Vec is dropped");
        }
    }
    // Late customization, and the default domain on the calling thread.
    let pool = StaticThreadPool::new(2).unwrap();
    let late = sync_wait(starts_on(pool.scheduler(), just(()).bulk_map_collect(5000, |i, _| i as u64))).unwrap();
    assert_eq!(late.unwrap(), (0..5000).collect::<Vec<u64>>());
    let here = std::thread::current().id();
    let seq = sync_wait(just(()).bulk_map_collect(100, |i, _| {
        assert_eq!(std::thread::current().id(), here, "no scheduler: on the calling thread");
        i.to_string()
    }));
    assert_eq!(seq.unwrap().unwrap(), (0..100).map(|i| i.to_string()).collect::<Vec<_>>());
}

#[test]
fn map_collect_with_a_grain_of_one_index_and_of_the_whole_shape() {
    let pool = StaticThreadPool::new(4).unwrap();
    for grain in [Grain::new().max_len(1), Grain::new().min_len(1 << 20), Grain::new().min_len(100).max_len(300)] {
        let out = sync_wait(schedule(&pool.scheduler()).bulk_map_collect_with(grain, 10_000, |i, _| i));
        assert_eq!(out.unwrap().unwrap(), (0..10_000).collect::<Vec<_>>(), "{grain:?}");
        let out = sync_wait(
            schedule(&pool.scheduler()).bulk_filter_map_collect_with(grain, 10_000, |i, _| (i % 3 == 0).then_some(i)),
        );
        assert_eq!(out.unwrap().unwrap(), (0..10_000).step_by(3).collect::<Vec<_>>(), "{grain:?}");
    }
}

#[test]
fn a_panicking_map_drops_every_element_written() {
    quiet_panics();
    for pool in pools() {
        for at in [0, 1, 4_999, 65_536, 150_000, 299_999] {
            let counts = Counts::default();
            let msg = panic_message(|| {
                sync_wait(schedule(&pool.scheduler()).bulk_map_collect(300_000, |i, _| {
                    assert!(i != at, "{QUIET}: map at {at}");
                    counts.elem(i)
                }))
            });
            assert_eq!(msg, format!("{QUIET}: map at {at}"));
            counts.assert_balanced(&format!("map panicked at {at}"));
        }
    }
    // Without a scheduler too, and in the filter form.
    let counts = Counts::default();
    let msg = panic_message(|| {
        sync_wait(just(()).bulk_map_collect(1000, |i, _| {
            assert!(i != 500, "{QUIET}: at 500");
            counts.elem(i)
        }))
    });
    assert_eq!(msg, format!("{QUIET}: at 500"));
    assert_eq!(counts.made(), 500);
    counts.assert_balanced("default domain");
    for pool in pools() {
        let counts = Counts::default();
        let msg = panic_message(|| {
            sync_wait(schedule(&pool.scheduler()).bulk_filter_map_collect(300_000, |i, _| {
                assert!(i != 200_001, "{QUIET}: filter at 200001");
                (i % 2 == 1).then(|| counts.elem(i))
            }))
        });
        assert_eq!(msg, format!("{QUIET}: filter at 200001"));
        counts.assert_balanced("filter panicked");
    }
}

#[test]
fn an_error_of_map_or_of_the_predecessor_drops_every_element_written() {
    for pool in pools() {
        for at in [0, 70_000, 299_999] {
            let counts = Counts::default();
            let r = sync_wait(
                schedule(&pool.scheduler())
                    .with_error::<usize>()
                    .bulk_try_map_collect(300_000, |i, _| if i == at { Err(i) } else { Ok(counts.elem(i)) }),
            );
            assert!(matches!(r, Err(i) if i == at));
            counts.assert_balanced(&format!("map failed at {at}"));
        }
        let ok = sync_wait(schedule(&pool.scheduler()).with_error::<()>().bulk_try_map_collect(1000, |i, _| Ok(i * 2)));
        assert_eq!(ok.unwrap().unwrap(), (0..1000).map(|i| i * 2).collect::<Vec<_>>());
    }
    let r = sync_wait(just_error::<(), _>("before").bulk_map_collect(10, |_, _| -> u8 { panic!("never runs") }));
    assert_eq!(r, Err("before"));
    let r = sync_wait(just_error::<(), _>("before").bulk_filter_map_collect(10, |_, _| -> Option<u8> { None }));
    assert_eq!(r, Err("before"));
    let r = sync_wait(just_stopped::<(), ()>().bulk_map_collect(10, |i, _| i));
    assert_eq!(r, Ok(None));
}

#[test]
fn a_stop_partway_through_completes_stopped_and_drops_every_element_written() {
    const N: usize = 1 << 20;
    for pool in pools() {
        let counts = Counts::default();
        let source = InplaceStopSource::new();
        let r = sync_wait(with_stop(
            &source,
            schedule(&pool.scheduler()).bulk_map_collect(N, |i, _| {
                if i == 1000 {
                    source.request_stop();
                }
                counts.elem(i)
            }),
        ));
        assert!(r.is_ok_and(|v| v.is_none()), "stopped");
        assert!(counts.made() < N, "the stop ended the collect early");
        counts.assert_balanced("stopped map");

        let counts = Counts::default();
        let source = InplaceStopSource::new();
        let r = sync_wait(with_stop(
            &source,
            schedule(&pool.scheduler()).bulk_filter_map_collect(N, |i, _| {
                if i == 1000 {
                    source.request_stop();
                }
                Some(counts.elem(i))
            }),
        ));
        assert!(r.is_ok_and(|v| v.is_none()), "stopped");
        counts.assert_balanced("stopped filter");
    }
    // A stop requested before: nothing runs.
    let source = InplaceStopSource::new();
    source.request_stop();
    let r = sync_wait(with_stop(&source, just(()).bulk_map_collect(10, |_, _| -> u8 { panic!("never runs") })));
    assert_eq!(r, Ok(None));
}

#[test]
fn filter_map_collect_is_in_order_on_pools_of_1_2_4() {
    for pool in pools() {
        for shape in SHAPES {
            let counts = Counts::default();
            let data: Vec<u64> = (0..shape as u64).map(|i| i.wrapping_mul(2_654_435_761) % 1000).collect();
            let expected: Vec<usize> = (0..shape).filter(|&i| data[i] < 300).collect();
            let out = sync_wait(
                schedule(&pool.scheduler())
                    .then(|()| &data)
                    .bulk_filter_map_collect(shape, |i, v: &&Vec<u64>| (v[i] < 300).then(|| counts.elem(i))),
            )
            .unwrap()
            .unwrap();
            assert_eq!(out.iter().map(|e| e.i).collect::<Vec<_>>(), expected, "{shape}");
            drop(out);
            counts.assert_balanced("filter collected");
        }
    }
}

/// How [`Wrong`] runs a chunk `begin..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mistake {
    /// Twice.
    Twice,
    /// Only its first half.
    Half,
    /// One index past its end.
    Past,
}

/// The chunk function of [`WrongDomain`], which runs each chunk wrongly.
struct Wrong<F, const M: u8>(F);

impl<V, E, F: BulkChunkedFn<V, E>, const M: u8> BulkChunkedFn<V, E> for Wrong<F, M> {
    fn call(&self, begin: usize, end: usize, value: &V) -> Result<(), E> {
        match M {
            0 => {
                self.0.call(begin, end, value)?;
                self.0.call(begin, end, value)
            }
            1 => self.0.call(begin, begin + (end - begin) / 2, value),
            _ => self.0.call(begin, end + 1, value),
        }
    }
}

/// A domain whose `bulk_chunked` runs the chunks wrongly (the hook is safe to write).
#[derive(Clone, Copy, Default)]
struct WrongDomain<const M: u8>;

impl<const M: u8> Domain for WrongDomain<M> {
    default_transforms!(except bulk_chunked);
    type BulkChunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>> = BulkChunkedImpl<S, Wrong<F, M>>;
    fn transform_bulk_chunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>, E: Env>(
        self,
        sndr: BulkChunked<S, F>,
        _env: Option<&E>,
    ) -> BulkChunkedImpl<S, Wrong<F, M>> {
        let grain = sndr.grain();
        let (pred, shape, f) = sndr.into_parts();
        BulkChunked::new(pred, shape, Wrong(f)).with_grain(grain).lower()
    }
}

fn wrongly<const M: u8>(mistake: Mistake) {
    let ctx = SingleThreadContext::<WrongDomain<M>>::with_domain("wrong");
    let counts = Counts::default();
    let msg = panic_message(|| {
        sync_wait(
            ctx.scheduler().schedule().bulk_map_collect_with(Grain::new().max_len(10), 100, |i, _| counts.elem(i)),
        )
    });
    assert!(msg.starts_with("collect: bulk_chunked"), "{mistake:?}: {msg}");
    counts.assert_balanced(&format!("{mistake:?}"));
    let msg = panic_message(|| {
        sync_wait(
            ctx.scheduler()
                .schedule()
                .bulk_filter_map_collect_with(Grain::new().max_len(10), 100, |i, _| Some(counts.elem(i))),
        )
    });
    assert!(msg.starts_with("collect: bulk_chunked"), "{mistake:?}: {msg}");
    counts.assert_balanced(&format!("{mistake:?}, filter"));
}

#[test]
fn a_domain_that_runs_chunks_twice_partly_or_past_the_shape_gets_a_panic_not_ub() {
    wrongly::<0>(Mistake::Twice);
    wrongly::<1>(Mistake::Half);
    wrongly::<2>(Mistake::Past);
}

#[test]
fn the_value_is_dropped_before_the_vec_is_delivered() {
    let pool = StaticThreadPool::new(2).unwrap();
    let dropped = std::sync::Arc::new(AtomicUsize::new(0));
    let value = common::DropCounter(dropped.clone());
    let out =
        sync_wait(schedule(&pool.scheduler()).then(move |()| value).bulk_map_collect(10_000, |i, _| i).then(|v| {
            assert_eq!(dropped.load(Ordering::SeqCst), 1, "the value is dropped first");
            v.len()
        }));
    assert_eq!(out, Ok(Some(10_000)));
}
