//! The parallel sorts (`bulk_sort`, `bulk_sort_unstable` and their `_by` / `_by_key`
//! forms): the std sort's results, on a pool and off it, owned and borrowed slices,
//! adversarial inputs, panics of the comparator (a permutation left, nothing dropped
//! twice or leaked), stop requests, and the predecessor's errors and stops.

mod common;

use common::{QUIET, pool, quiet_panics, with_stop};
use senders::*;
use std::cmp::Ordering as Cmp;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread::ThreadId;

/// `n` pseudo-random numbers below `modulo`.
fn random(n: usize, modulo: u64, seed: u64) -> Vec<u64> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % modulo
        })
        .collect()
}

/// Inputs that find the usual faults: random, sorted, reversed, all equal, few values,
/// sawtooth, organ pipe, sorted with a tail of noise.
fn inputs(n: usize) -> Vec<(&'static str, Vec<u64>)> {
    let mut tail = (0..n as u64).collect::<Vec<_>>();
    let noise = random(n / 50 + 1, n as u64 + 1, 3);
    let k = tail.len().saturating_sub(noise.len());
    let m = tail.len() - k;
    tail[k..].copy_from_slice(&noise[..m]);
    vec![
        ("random", random(n, u64::MAX, 1)),
        ("sorted", (0..n as u64).collect()),
        ("reversed", (0..n as u64).rev().collect()),
        ("equal", vec![7; n]),
        ("few", random(n, 4, 2)),
        ("sawtooth", (0..n as u64).map(|i| i % 1000).collect()),
        ("organ", (0..n as u64).map(|i| i.min(n as u64 - i)).collect()),
        ("tail", tail),
    ]
}

const LENS: [usize; 8] = [0, 1, 2, 3, 100, 5_000, 70_000, 140_000];

#[test]
fn every_form_sorts_as_the_std_sort_on_a_pool() {
    let pool = pool(2);
    let sch = pool.scheduler();
    for n in LENS {
        for (name, v) in inputs(n.max(1)).into_iter().map(|(k, v)| (k, v[..n].to_vec())) {
            let mut want = v.clone();
            want.sort();
            let on = |s: &dyn Fn(Vec<u64>) -> Option<Vec<u64>>| s(v.clone()).expect("a value");
            let got = on(&|v| sync_wait(schedule(&sch).then(move |()| v).bulk_sort()).unwrap());
            assert!(got == want, "bulk_sort, {name}, {n}");
            let got = on(&|v| sync_wait(schedule(&sch).then(move |()| v).bulk_sort_unstable()).unwrap());
            assert!(got == want, "bulk_sort_unstable, {name}, {n}");
            let got = on(&|v| sync_wait(schedule(&sch).then(move |()| v).bulk_sort_by(|a, b| b.cmp(a))).unwrap());
            assert!(got.iter().rev().eq(want.iter()), "bulk_sort_by, {name}, {n}");
            let got =
                on(&|v| sync_wait(schedule(&sch).then(move |()| v).bulk_sort_unstable_by(|a, b| b.cmp(a))).unwrap());
            assert!(got.iter().rev().eq(want.iter()), "bulk_sort_unstable_by, {name}, {n}");
            let got =
                on(&|v| sync_wait(schedule(&sch).then(move |()| v).bulk_sort_by_key(|x: &u64| u64::MAX - x)).unwrap());
            assert!(got.iter().rev().eq(want.iter()), "bulk_sort_by_key, {name}, {n}");
            let got = on(&|v| {
                sync_wait(schedule(&sch).then(move |()| v).bulk_sort_unstable_by_key(|x: &u64| u64::MAX - x)).unwrap()
            });
            assert!(got.iter().rev().eq(want.iter()), "bulk_sort_unstable_by_key, {name}, {n}");
        }
    }
}

/// The stable sort keeps equal keys in their input order, as `slice::sort_by_key` does.
#[test]
fn the_stable_sort_keeps_equal_elements_in_order() {
    let pool = pool(2);
    for n in [10_000, 200_000] {
        for modulo in [3, 1000, u64::MAX] {
            let v: Vec<(u64, usize)> = random(n, modulo, 5).into_iter().zip(0..).collect();
            let mut want = v.clone();
            want.sort_by_key(|p| p.0);
            let got = sync_wait(schedule(&pool.scheduler()).then(move |()| v).bulk_sort_by_key(|p: &(u64, usize)| p.0));
            assert_eq!(got.unwrap().unwrap(), want, "{n} below {modulo}");
        }
    }
}

/// A slice the sender borrows: `let_value_ref` lends it, the sort completes with the
/// same `&mut [T]`, and the owner sees it sorted.
#[test]
fn a_borrowed_slice_is_sorted_in_place() {
    let pool = pool(2);
    let v = random(100_000, 1 << 20, 9);
    let mut want = v.clone();
    want.sort();
    for stable in [true, false] {
        let (got, n) = sync_wait_value(starts_on(
            pool.scheduler(),
            just(v.clone()).let_value_ref(move |v, _| {
                let s = just(v.as_mut_slice());
                if stable {
                    s.bulk_sort().then(|s| s.len()).boxed()
                } else {
                    s.bulk_sort_unstable().then(|s| s.len()).boxed()
                }
            }),
        ));
        assert_eq!((n, &got), (want.len(), &want), "stable: {stable}");
    }
    // Borrowed from the caller's frame, off the pool.
    let mut mine = v.clone();
    let s: &mut [u64] = sync_wait_value(just(&mut mine[..]).bulk_sort_unstable());
    assert_eq!(s.len(), want.len());
    assert_eq!(mine, want);
}

/// Records the threads its comparisons run on.
struct Threads(Mutex<std::collections::HashSet<ThreadId>>);

impl Threads {
    fn note(&self) {
        self.0.lock().unwrap().insert(std::thread::current().id());
    }
}

/// On a pool every comparison runs on its workers (more than one of them for a large
/// input is likely but not certain, so not asserted); off the pool, on the thread that
/// delivered the value.
#[test]
fn on_a_pool_the_workers_compare_elsewhere_the_calling_thread() {
    let pool = pool(2);
    let me = std::thread::current().id();
    for stable in [true, false] {
        let seen = Threads(Mutex::new(Default::default()));
        let cmp = |a: &u64, b: &u64| {
            if a.is_multiple_of(4096) {
                seen.note();
            }
            a.cmp(b)
        };
        let v = random(200_000, u64::MAX, 4);
        let s = schedule(&pool.scheduler()).then(move |()| v);
        let got = if stable { sync_wait(s.bulk_sort_by(cmp)) } else { sync_wait(s.bulk_sort_unstable_by(cmp)) };
        assert!(got.unwrap().unwrap().is_sorted());
        let threads = seen.0.into_inner().unwrap();
        assert!(!threads.is_empty() && !threads.contains(&me), "stable: {stable}: on the pool's workers");

        let seen = Threads(Mutex::new(Default::default()));
        let cmp = |a: &u64, b: &u64| {
            seen.note();
            a.cmp(b)
        };
        let v = random(50_000, u64::MAX, 4);
        let got =
            if stable { sync_wait(just(v).bulk_sort_by(cmp)) } else { sync_wait(just(v).bulk_sort_unstable_by(cmp)) };
        assert!(got.unwrap().unwrap().is_sorted());
        assert_eq!(seen.0.into_inner().unwrap(), [me].into(), "stable: {stable}: on the calling thread");
    }
}

/// An element with no `Default`, no `Clone`, no `Copy`, that counts its drops.
#[derive(Debug)]
struct Counted<'a> {
    key: u64,
    drops: &'a AtomicUsize,
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.drops.fetch_add(1, Ordering::SeqCst);
    }
}

fn counted<'a>(keys: &[u64], drops: &'a AtomicUsize) -> Vec<Counted<'a>> {
    keys.iter().map(|&key| Counted { key, drops }).collect()
}

/// Elements that are neither `Clone` nor `Default` are sorted, and each is dropped once.
#[test]
fn elements_without_clone_or_default_are_moved_not_copied() {
    let pool = pool(2);
    let keys = random(100_000, 1000, 8);
    let mut want = keys.clone();
    want.sort();
    for stable in [true, false] {
        let drops = AtomicUsize::new(0);
        let v = counted(&keys, &drops);
        let s = schedule(&pool.scheduler()).then(move |()| v);
        let got = if stable {
            sync_wait(s.bulk_sort_by_key(|c: &Counted| c.key))
        } else {
            sync_wait(s.bulk_sort_unstable_by_key(|c: &Counted| c.key))
        };
        let got = got.unwrap().unwrap();
        assert_eq!(drops.load(Ordering::SeqCst), 0, "stable: {stable}: nothing dropped while sorting");
        assert!(got.iter().map(|c| c.key).eq(want.iter().copied()), "stable: {stable}");
        drop(got);
        assert_eq!(drops.load(Ordering::SeqCst), keys.len(), "stable: {stable}: each dropped once");
    }
}

/// A comparator that panics partway: the panic is the completion, the borrowed slice is
/// a permutation of its input, every element is dropped exactly once, and the pool
/// still works.
#[test]
fn a_panicking_comparator_leaves_a_permutation() {
    quiet_panics();
    let pool = pool(2);
    let keys = random(70_000, 5000, 6);
    let mut want = keys.clone();
    want.sort();
    for stable in [true, false] {
        for after in [10, 50_000, 500_000] {
            let drops = AtomicUsize::new(0);
            let calls = AtomicUsize::new(0);
            let cmp = |a: &Counted, b: &Counted| {
                if calls.fetch_add(1, Ordering::Relaxed) == after {
                    panic!("{QUIET}: comparator");
                }
                a.key.cmp(&b.key)
            };
            let mut v = counted(&keys, &drops);
            let s = starts_on(pool.scheduler(), just(&mut v[..]));
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if stable {
                    sync_wait(s.bulk_sort_by(cmp)).map(drop)
                } else {
                    sync_wait(s.bulk_sort_unstable_by(cmp)).map(drop)
                }
            }));
            assert!(r.is_err(), "stable: {stable}, after {after}: the panic reaches the waiter");
            assert_eq!(drops.load(Ordering::SeqCst), 0, "stable: {stable}, after {after}: nothing dropped");
            let mut left: Vec<u64> = v.iter().map(|c| c.key).collect();
            left.sort();
            assert_eq!(left, want, "stable: {stable}, after {after}: a permutation");
            drop(v);
            assert_eq!(drops.load(Ordering::SeqCst), keys.len(), "stable: {stable}, after {after}: each dropped once");

            // An owned value goes down with the panic, each element once.
            let drops = AtomicUsize::new(0);
            calls.store(0, Ordering::Relaxed);
            let v = counted(&keys, &drops);
            let s = schedule(&pool.scheduler()).then(move |()| v);
            let cmp = |a: &Counted, b: &Counted| {
                if calls.fetch_add(1, Ordering::Relaxed) == after {
                    panic!("{QUIET}: comparator");
                }
                a.key.cmp(&b.key)
            };
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                if stable {
                    sync_wait(s.bulk_sort_by(cmp)).map(drop)
                } else {
                    sync_wait(s.bulk_sort_unstable_by(cmp)).map(drop)
                }
            }));
            assert!(r.is_err());
            assert_eq!(
                drops.load(Ordering::SeqCst),
                keys.len(),
                "stable: {stable}, after {after}: owned, dropped once"
            );
        }
    }
    let v = random(100_000, u64::MAX, 7);
    let got = sync_wait(schedule(&pool.scheduler()).then(move |()| v).bulk_sort()).unwrap().unwrap();
    assert!(got.is_sorted(), "the workers survive");
}

/// A stop requested before the value arrives, or by the comparator partway, completes
/// stopped; the borrowed slice is a permutation of its input.
#[test]
fn a_stop_request_completes_stopped_with_a_permutation() {
    let pool = pool(2);
    let keys = random(100_000, u64::MAX, 10);
    let mut want = keys.clone();
    want.sort();
    for stable in [true, false] {
        let before = InplaceStopSource::new();
        before.request_stop();
        let calls = AtomicUsize::new(0);
        let cmp = |a: &u64, b: &u64| {
            calls.fetch_add(1, Ordering::Relaxed);
            a.cmp(b)
        };
        let mut v = keys.clone();
        let s = starts_on(pool.scheduler(), just(&mut v[..]));
        let r = if stable {
            sync_wait(with_stop(&before, s.bulk_sort_by(cmp))).map(|s| s.map(drop))
        } else {
            sync_wait(with_stop(&before, s.bulk_sort_unstable_by(cmp))).map(|s| s.map(drop))
        };
        assert_eq!(r, Ok(None), "stable: {stable}: stopped before");
        assert_eq!(v, keys, "stable: {stable}: untouched");

        let during = InplaceStopSource::new();
        let cmp = |a: &u64, b: &u64| {
            if calls.fetch_add(1, Ordering::Relaxed) == 50_000 {
                during.request_stop();
            }
            a.cmp(b)
        };
        let s = starts_on(pool.scheduler(), just(&mut v[..]));
        let r = if stable {
            sync_wait(with_stop(&during, s.bulk_sort_by(cmp))).map(|s| s.map(drop))
        } else {
            sync_wait(with_stop(&during, s.bulk_sort_unstable_by(cmp))).map(|s| s.map(drop))
        };
        assert_eq!(r, Ok(None), "stable: {stable}: stopped during");
        let mut left = v.clone();
        left.sort();
        assert_eq!(left, want, "stable: {stable}: a permutation");
    }
}

/// The predecessor's error and stop pass through, for both sorts.
#[test]
fn the_predecessors_error_and_stop_pass_through() {
    assert_eq!(sync_wait(just_error::<Vec<u8>, _>("no").bulk_sort()), Err("no"));
    assert_eq!(sync_wait(just_error::<Vec<u8>, _>("no").bulk_sort_unstable()), Err("no"));
    assert_eq!(sync_wait(just_stopped::<Vec<u8>, ()>().bulk_sort()), Ok(None));
    assert_eq!(sync_wait(just_stopped::<Vec<u8>, ()>().bulk_sort_unstable_by_key(|x: &u8| *x)), Ok(None));
    let pool = pool(2);
    let s = schedule(&pool.scheduler()).with_error::<&str>().let_value(|()| just_error::<Vec<u8>, _>("late"));
    assert_eq!(sync_wait(s.bulk_sort()), Err("late"));
}

/// A comparator that is not a total order (always `Less`) still ends, with a
/// permutation, as the std sorts do.
#[test]
fn an_inconsistent_comparator_ends_with_a_permutation() {
    let pool = pool(2);
    let keys = random(100_000, 100, 11);
    let mut want = keys.clone();
    want.sort();
    for stable in [true, false] {
        for order in [Cmp::Less, Cmp::Greater] {
            let v = keys.clone();
            let s = schedule(&pool.scheduler()).then(move |()| v);
            let got = if stable {
                sync_wait(s.bulk_sort_by(move |_, _| order))
            } else {
                sync_wait(s.bulk_sort_unstable_by(move |_, _| order))
            };
            let mut got = got.unwrap().unwrap();
            got.sort();
            assert_eq!(got, want, "stable: {stable}, always {order:?}");
        }
    }
}

/// McIlroy's adversary for quicksorts ("A Killer Adversary for Quicksort", 1999): the
/// elements are ids whose values it fixes only as comparisons force it to, so that each
/// pivot the sort picks turns out to be among the least of its slice (of two unfixed ids
/// it fixes the first, unless the second is the likely pivot, so that the sort's check
/// for sorted input ends at once). A quicksort without a fallback then partitions badly
/// at every level and makes a quadratic number of comparisons.
struct Adversary {
    /// Each id's value; `gas` while not fixed, above every fixed value.
    val: Vec<usize>,
    gas: usize,
    fixed: usize,
    candidate: usize,
    comparisons: usize,
    /// The most comparisons allowed: past it the comparator panics, so that a sort gone
    /// quadratic fails at once rather than running for hours.
    limit: usize,
}

impl Adversary {
    fn new(n: usize, limit: usize) -> Self {
        Adversary { val: vec![n; n], gas: n, fixed: 0, candidate: 0, comparisons: 0, limit }
    }

    fn fix(&mut self, id: usize) {
        self.val[id] = self.fixed;
        self.fixed += 1;
    }

    fn cmp(&mut self, x: usize, y: usize) -> Cmp {
        self.comparisons += 1;
        assert!(self.comparisons <= self.limit, "over {} comparisons", self.limit);
        if self.val[x] == self.gas && self.val[y] == self.gas {
            self.fix(if y == self.candidate { y } else { x });
        }
        if self.val[x] == self.gas {
            self.candidate = x;
        } else if self.val[y] == self.gas {
            self.candidate = y;
        }
        self.val[x].cmp(&self.val[y])
    }
}

/// Against an input built to defeat its pivots, the unstable sort spends its bad-pivot
/// budget and sorts the rest with the std sort: it makes `O(n log n)` comparisons, not
/// the quadratic number the adversary forces out of a plain quicksort, and its result is
/// sorted by the values the adversary fixed.
#[test]
fn the_unstable_sort_stays_n_log_n_against_an_adversary() {
    const N: usize = 1 << 17;
    for workers in [1, 2] {
        let pool = pool(workers);
        let bound = 4 * N * N.ilog2() as usize;
        let adversary = Mutex::new(Adversary::new(N, bound));
        let ids: Vec<usize> = (0..N).collect();
        let s = schedule(&pool.scheduler()).then(move |()| ids);
        let sorted = sync_wait(s.bulk_sort_unstable_by(|a: &usize, b: &usize| adversary.lock().unwrap().cmp(*a, *b)))
            .unwrap()
            .unwrap();
        let adversary = adversary.into_inner().unwrap();
        assert!(sorted.windows(2).all(|w| adversary.val[w[0]] <= adversary.val[w[1]]), "{workers} workers");
        let mut seen = sorted.clone();
        seen.sort_unstable();
        assert!(seen.iter().copied().eq(0..N), "{workers} workers: not a permutation");
        // Every pivot was bad: the budget was spent (about 17 partitions of the whole
        // slice), and then the std sort.
        assert!(adversary.comparisons > 17 * N, "{workers} workers: the adversary lost");
    }
}
