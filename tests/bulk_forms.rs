//! The bulk algorithms as a user sees them: small bulks of expensive items use the pool
//! (issue 27's defect), large cheap bulks are not over-split, and C++26's forms
//! (`bulk_chunked`, `bulk_unchunked`) with their value, error, stopped and panic paths,
//! on the default domain and on the pool.

mod common;

use common::{QUIET, SAFETY_TIMEOUT, panic_message, quiet_panics, serial, spin, with_stop};
use senders::*;
use std::collections::HashSet;
use std::convert::Infallible;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

/// A pool whose workers are named `{prefix}-{i}`.
fn named_pool(n: usize, prefix: &'static str) -> StaticThreadPool {
    StaticThreadPool::builder().num_threads(n).thread_name(move |i| format!("{prefix}-{i}")).build().unwrap()
}

/// What a bulk's items observed: which threads ran them, and how many started.
#[derive(Default)]
struct Seen {
    started: AtomicUsize,
    threads: Mutex<HashSet<String>>,
}

impl Seen {
    /// Notes this item's start and thread, then waits (up to a deadline) until `all`
    /// items have started: items that run one after the other on one thread never see
    /// that, and the deadline ends the test instead of hanging it.
    fn start_and_wait_for(&self, all: usize) -> bool {
        self.threads.lock().unwrap().insert(std::thread::current().name().unwrap_or("?").to_owned());
        self.started.fetch_add(1, Ordering::SeqCst);
        let deadline = Instant::now() + SAFETY_TIMEOUT;
        while self.started.load(Ordering::SeqCst) < all {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::yield_now();
        }
        true
    }

    fn threads(&self) -> usize {
        self.threads.lock().unwrap().len()
    }
}

/// The defect: on a 5-thread pool, a `bulk` of 5 expensive items ran all 5 on one worker,
/// one after the other. Each item here waits until all 5 have started, so they pass only
/// if they run at the same time, on five workers.
#[test]
fn a_bulk_of_five_expensive_items_runs_on_five_workers() {
    let _serial = serial();
    let pool = named_pool(5, "five");
    let sch = pool.scheduler();
    let together = |seen: &Seen| -> bool { seen.start_and_wait_for(5) };
    let ok = AtomicUsize::new(0);
    let seen = sync_wait(sch.schedule().then(|()| Seen::default()).bulk(5, |_, seen: &Seen| {
        if together(seen) {
            ok.fetch_add(1, Ordering::SeqCst);
        }
    }))
    .unwrap()
    .unwrap();
    assert_eq!(ok.load(Ordering::SeqCst), 5, "every item saw all five running at once");
    assert_eq!(seen.threads(), 5, "five workers ran the five items");

    // The same through `bulk_unchunked` (every index its own job) and `bulk_each`.
    let ok = AtomicUsize::new(0);
    let seen = sync_wait(sch.schedule().then(|()| Seen::default()).bulk_unchunked(5, |_, seen: &Seen| {
        if together(seen) {
            ok.fetch_add(1, Ordering::SeqCst);
        }
    }))
    .unwrap()
    .unwrap();
    assert_eq!((ok.load(Ordering::SeqCst), seen.threads()), (5, 5), "bulk_unchunked");
    let shared = Seen::default();
    let out = sync_wait(sch.schedule().then(|()| vec![0u32; 5]).bulk_each(|_, x: &mut u32| {
        *x = u32::from(shared.start_and_wait_for(5));
    }))
    .unwrap()
    .unwrap();
    assert_eq!((out, shared.threads()), (vec![1; 5], 5), "bulk_each");
}

/// Two items of ~20 ms on two workers take about one item's time.
#[test]
fn two_expensive_items_run_on_both_workers() {
    let _serial = serial();
    let pool = named_pool(2, "two");
    let seen = sync_wait(pool.scheduler().schedule().then(|()| Seen::default()).bulk(2, |_, seen: &Seen| {
        assert!(seen.start_and_wait_for(2), "the two items did not run at the same time");
    }))
    .unwrap()
    .unwrap();
    assert_eq!(seen.threads(), 2);
}

/// The chunks `bulk_chunked` makes for a large bulk of cheap items: they cover the shape
/// exactly once, and they are few and long (a chunk is split only when a worker was idle
/// to steal it), not cut down to sizes where a split would cost more than its work.
#[test]
fn a_large_cheap_bulk_is_not_split_below_useful_chunks() {
    let _serial = serial();
    // Two workers exactly: how far the bulk splits depends on how many steal.
    let pool = StaticThreadPool::new(2).unwrap();
    const N: usize = 1 << 22;
    let chunks = Mutex::new(Vec::new());
    let data =
        sync_wait(pool.scheduler().schedule().then(|()| vec![1u64; N]).bulk_chunked(N, |lo, hi, v: &Vec<u64>| {
            // Cheap: about a nanosecond an index.
            let s: u64 = v[lo..hi].iter().sum();
            assert_eq!(s, (hi - lo) as u64);
            chunks.lock().unwrap().push((lo, hi));
        }))
        .unwrap()
        .unwrap();
    assert_eq!(data.len(), N);
    let mut chunks = chunks.into_inner().unwrap();
    chunks.sort_unstable();
    let mut next = 0;
    for &(lo, hi) in &chunks {
        assert_eq!(lo, next, "the chunks cover 0..N exactly once");
        assert!(hi > lo && hi - lo <= 1 << 16, "a chunk is at most 65,536 long: {lo}..{hi}");
        next = hi;
    }
    assert_eq!(next, N);
    // 64 chunks is the least (65,536 each); the splits add a few per steal.
    let short = chunks.iter().filter(|(lo, hi)| hi - lo < 1024).count();
    assert!(chunks.len() <= 256, "{} chunks for {N} cheap indices", chunks.len());
    assert!(short <= 8, "{short} chunks shorter than 1,024 indices");
}

/// `bulk_chunked` by default: one call with the whole range; none for a shape of zero.
#[test]
fn the_default_bulk_chunked_makes_one_call() {
    let calls = Mutex::new(Vec::new());
    let v = sync_wait(just(5).bulk_chunked(1000, |lo, hi, v: &i32| calls.lock().unwrap().push((lo, hi, *v))));
    assert_eq!(v, Ok(Some(5)));
    assert_eq!(*calls.lock().unwrap(), [(0, 1000, 5)]);
    let v = sync_wait(just(6).bulk_chunked(0, |_, _, _: &i32| -> () { panic!("no call for a zero shape") }));
    assert_eq!(v, Ok(Some(6)));
}

/// Where a bulk's value arrives, and so which domain runs it.
#[derive(Clone, Copy, Debug)]
enum On<'p> {
    /// The pool's early customization (the predecessor completes on the pool).
    Early(&'p StaticThreadPool),
    /// The pool's late customization (`starts_on`).
    Late(&'p StaticThreadPool),
    /// The default domain, under `sync_wait`.
    Default,
}

fn placements(pool: &StaticThreadPool) -> [On<'_>; 3] {
    [On::Early(pool), On::Late(pool), On::Default]
}

/// The three forms, as one function of the form's name.
#[derive(Clone, Copy, Debug)]
enum Form {
    Bulk,
    Chunked,
    Unchunked,
}

const FORMS: [Form; 3] = [Form::Bulk, Form::Chunked, Form::Unchunked];

/// Runs `form` with `shape` and the per-index `f` on the value `v`, placed as `on` says,
/// under `stop` if given. (`bulk_chunked` runs `f` for each index of each chunk.)
fn run<V, E, F>(
    form: Form,
    on: On<'_>,
    stop: Option<&InplaceStopSource>,
    v: V,
    shape: usize,
    f: F,
) -> Result<Option<V>, E>
where
    V: Send + Sync,
    E: Send,
    F: Fn(usize, &V) -> Result<(), E> + Send + Sync,
{
    macro_rules! with_form {
        ($sndr:expr) => {
            match form {
                Form::Bulk => with_place!($sndr.bulk(shape, f)),
                Form::Chunked => {
                    with_place!($sndr.bulk_chunked(shape, |lo, hi, v: &V| (lo..hi).try_for_each(|i| f(i, v))))
                }
                Form::Unchunked => with_place!($sndr.bulk_unchunked(shape, f)),
            }
        };
    }
    macro_rules! with_place {
        ($work:expr) => {
            match stop {
                None => sync_wait($work),
                Some(src) => sync_wait(with_stop(src, $work)),
            }
        };
    }
    match on {
        On::Early(pool) => with_form!(pool.scheduler().schedule().then(move |()| v).with_error::<E>()),
        On::Late(pool) => {
            let sch = pool.scheduler();
            match form {
                Form::Bulk => with_place!(starts_on(sch, just(v).with_error::<E>().bulk(shape, f))),
                Form::Chunked => with_place!(starts_on(
                    sch,
                    just(v).with_error::<E>().bulk_chunked(shape, |lo, hi, v: &V| (lo..hi).try_for_each(|i| f(i, v)))
                )),
                Form::Unchunked => with_place!(starts_on(sch, just(v).with_error::<E>().bulk_unchunked(shape, f))),
            }
        }
        On::Default => with_form!(just(v).with_error::<E>()),
    }
}

fn counters(n: usize) -> Vec<AtomicUsize> {
    (0..n).map(|_| AtomicUsize::new(0)).collect()
}

fn all_once(hits: &[AtomicUsize]) -> bool {
    hits.iter().all(|h| h.load(Ordering::Relaxed) == 1)
}

#[test]
fn every_form_visits_every_index_once_with_the_value() {
    let pool = common::pool(2);
    for n in [0, 1, 2, 3, 17, 1024, 1025, 100_000] {
        for form in FORMS {
            // `bulk_unchunked` makes a job of every index: keep it to smaller shapes.
            if matches!(form, Form::Unchunked) && n > 2000 {
                continue;
            }
            for on in placements(&pool) {
                let out = run::<_, Infallible, _>(form, on, None, (7, counters(n)), n, |i, (_, hits)| {
                    hits[i].fetch_add(1, Ordering::Relaxed);
                    Ok(())
                })
                .unwrap()
                .unwrap();
                assert_eq!(out.0, 7, "{form:?} {on:?} {n}: the value is forwarded");
                assert!(all_once(&out.1), "{form:?} {on:?} {n}: every index exactly once");
            }
        }
    }
}

#[test]
fn every_form_completes_with_an_error_and_stops_the_rest() {
    let _serial = serial();
    let pool = common::pool(2);
    const N: usize = 20_000;
    for form in FORMS {
        for on in placements(&pool) {
            let hits = counters(N);
            let r = run(form, on, None, (), N, |i, ()| {
                hits[i].fetch_add(1, Ordering::Relaxed);
                if i == 100 { Err(i) } else { Ok(()) }
            });
            assert_eq!(r, Err(100), "{form:?} {on:?}");
            assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) <= 1), "{form:?} {on:?}: an index ran twice");
        }
    }
}

#[test]
fn every_form_delivers_a_panic_and_the_pool_survives() {
    quiet_panics();
    let pool = common::pool(2);
    for form in FORMS {
        for on in placements(&pool) {
            let msg = panic_message(|| {
                run::<_, Infallible, _>(form, on, None, (), 1000, |i, ()| {
                    assert!(i != 700, "{QUIET}: 700");
                    Ok(())
                })
            });
            assert_eq!(msg, format!("{QUIET}: 700"), "{form:?} {on:?}");
        }
    }
    assert_eq!(sync_wait(pool.scheduler().schedule().then(|()| 1)), Ok(Some(1)));
}

#[test]
fn every_form_completes_stopped_under_a_stop_request_made_before_or_while_it_runs() {
    let pool = common::pool(2);
    for form in FORMS {
        for on in placements(&pool) {
            let before = InplaceStopSource::new();
            before.request_stop();
            let r = run::<_, Infallible, _>(form, on, Some(&before), (), 1000, |_, ()| panic!("no index runs"));
            assert_eq!(r, Ok(None), "{form:?} {on:?}: stopped before");
            // A request made by the first index: the rest (beyond a piece under way)
            // does not run. `bulk_chunked`'s default makes one call, which sees no stop.
            let during = InplaceStopSource::new();
            let ran = AtomicUsize::new(0);
            const N: usize = 200_000;
            let r = run::<_, Infallible, _>(form, on, Some(&during), (), N, |i, ()| {
                ran.fetch_add(1, Ordering::Relaxed);
                if i == 0 {
                    during.request_stop();
                }
                Ok(())
            });
            if matches!((form, on), (Form::Chunked, On::Default)) {
                assert_eq!(r, Ok(Some(())), "one call: nothing to stop between");
                continue;
            }
            assert_eq!(r, Ok(None), "{form:?} {on:?}: stopped while running");
            assert!(ran.load(Ordering::Relaxed) < N, "{form:?} {on:?}: every index ran despite the stop");
        }
    }
}

/// `bulk_unchunked` on the pool: every index is a job, so two indices that wait for each
/// other both make progress on two workers (a chunked bulk promises no such thing).
#[test]
fn bulk_unchunked_indices_make_progress_together() {
    let _serial = serial();
    let pool = named_pool(2, "unchunked");
    for _ in 0..20 {
        let met = AtomicUsize::new(0);
        sync_wait(pool.scheduler().schedule().then(|()| Seen::default()).bulk_unchunked(2, |_, seen: &Seen| {
            if seen.start_and_wait_for(2) {
                met.fetch_add(1, Ordering::SeqCst);
            }
        }))
        .unwrap()
        .unwrap();
        assert_eq!(met.load(Ordering::SeqCst), 2);
    }
}

/// An expensive bulk of 8 items on 2 workers: both workers take part, each item once.
#[test]
fn an_expensive_bulk_spreads_over_both_workers() {
    let _serial = serial();
    let pool = named_pool(2, "spread");
    let seen = sync_wait(pool.scheduler().schedule().then(|()| (Seen::default(), counters(8))).bulk(
        8,
        |i, (seen, hits): &(Seen, Vec<AtomicUsize>)| {
            seen.threads.lock().unwrap().insert(std::thread::current().name().unwrap_or("?").to_owned());
            hits[i].fetch_add(1, Ordering::Relaxed);
            spin(2000);
        },
    ))
    .unwrap()
    .unwrap();
    assert!(all_once(&seen.1));
    assert_eq!(seen.0.threads(), 2, "both workers ran items");
}
