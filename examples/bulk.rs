//! Data-parallel loops on the static thread pool: `bulk_each` (exclusive access to each
//! element) early and late customized, `bulk` (shared access to the whole value), and
//! C++26's `bulk_chunked` (the callee gets a range) and `bulk_unchunked` (every index a
//! job of its own), next to rayon's `par_iter_mut` and a plain loop on the same number
//! of threads.
//!
//! Run it with `cargo run --release --example bulk`. The workload is 16 Mi `f64`
//! updated by the compute-bound kernel `x = sin(√x) + 1`; each row is the best of 5
//! runs; every result is checked against the sequential loop's.
//!
//! | row | what runs |
//! |---|---|
//! | sequential | `v.iter_mut().for_each(kernel)` on the main thread |
//! | rayon | `pool.install(\|\| v.par_iter_mut().for_each(kernel))` |
//! | bulk_each, early | `sch.schedule().then(move \|()\| v).bulk_each(..)`: domain known when built |
//! | bulk_each, late | `starts_on(sch, just(v).bulk_each(..))`: domain found at `connect` |
//! | check: … | count mismatches against the reference, 4096 elements per iteration |
//! | check: senders bulk_chunked | the same count, over the chunks the pool chooses |
//! | a few expensive items | `bulk_unchunked` of one 20 ms item per thread, against rayon's `par_iter` |
//!
//! The check rows compare the last result with the sequential one: a loop, rayon's
//! `into_par_iter().map(..).sum()`, and our `bulk(chunks, |c, (v, count): &(..)| ..)`,
//! whose iterations read the whole value through `&V` and add to an atomic in it;
//! `bulk_chunked(LEN, |lo, hi, (v, count)| ..)` does the same over ranges it is given.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rayon::prelude::*;
use senders::{Scheduler, SenderExt, StaticThreadPool, just, starts_on, sync_wait};

/// Elements per vector (16 Mi `f64`, 128 MiB).
const LEN: usize = 16 << 20;
/// Timed runs per row; the best is shown.
const RUNS: usize = 5;
/// Elements per iteration of the checking `bulk`.
const CHUNK: usize = 4096;

/// The per-element work: a square root and a sine.
#[inline]
fn kernel(x: &mut f64) {
    *x = x.sqrt().sin() + 1.0;
}

/// The input, rebuilt before every run (outside the timed part).
fn input() -> Vec<f64> {
    (0..LEN).map(|i| (i % 1000) as f64 * 1e-3).collect()
}

/// Mismatches between chunk `c` of `got` and of `want`.
fn chunk_mismatches(c: usize, got: &[f64], want: &[f64]) -> usize {
    let range = c * CHUNK..((c + 1) * CHUNK).min(got.len());
    got[range.clone()].iter().zip(&want[range]).filter(|(a, b)| a.to_bits() != b.to_bits()).count()
}

/// Runs `run` on a fresh input `RUNS` times; returns the best time and the last output.
fn best_of(mut run: impl FnMut(Vec<f64>) -> Vec<f64>) -> (Duration, Vec<f64>) {
    let mut best = Duration::MAX;
    let mut out = Vec::new();
    for _ in 0..RUNS {
        let v = input();
        let start = Instant::now();
        out = run(v);
        best = best.min(start.elapsed());
    }
    (best, out)
}

/// Times `run` (which must return the mismatch count) `RUNS` times on `data`.
fn best_check(mut run: impl FnMut() -> usize) -> Duration {
    let mut best = Duration::MAX;
    for _ in 0..RUNS {
        let start = Instant::now();
        let mismatches = run();
        best = best.min(start.elapsed());
        assert_eq!(mismatches, 0, "a parallel result differs from the sequential one");
    }
    best
}

fn main() {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let pool = StaticThreadPool::new(threads).expect("start the pool");
    let sch = pool.scheduler();
    let rayon_pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("start the rayon pool");
    println!("{LEN} f64, x = sin(sqrt(x)) + 1, {threads} threads, best of {RUNS}\n");

    let (seq, reference) = best_of(|mut v| {
        v.iter_mut().for_each(kernel);
        v
    });
    let (rayon, out) = best_of(|mut v| {
        rayon_pool.install(|| v.par_iter_mut().for_each(kernel));
        v
    });
    assert!(out == reference, "rayon's result differs");
    let (early, out) = best_of(|v| {
        let work = sch.schedule().then(move |()| v).bulk_each(|_, x: &mut f64| kernel(x));
        sync_wait(work).unwrap().expect("not stopped")
    });
    assert!(out == reference, "bulk_each (early) result differs");
    let (late, out) = best_of(|v| {
        let work = starts_on(sch.clone(), just(v).bulk_each(|_, x: &mut f64| kernel(x)));
        sync_wait(work).unwrap().expect("not stopped")
    });
    assert!(out == reference, "bulk_each (late) result differs");

    // Checking `out` against `reference`: each iteration reads its chunk of the value
    // through `&V` and adds its mismatches to the counter inside the value. The closure
    // borrows `reference` from this frame: `sync_wait` returns only once every
    // iteration has run.
    let chunks = LEN.div_ceil(CHUNK);
    let check_seq = best_check(|| (0..chunks).map(|c| chunk_mismatches(c, &out, &reference)).sum());
    let check_rayon = best_check(|| {
        rayon_pool.install(|| (0..chunks).into_par_iter().map(|c| chunk_mismatches(c, &out, &reference)).sum())
    });
    let mut slot = Some(out);
    let reference = &reference;
    let check_senders = best_check(|| {
        let v = slot.take().expect("the vector comes back");
        let work = sch.schedule().then(move |()| (v, AtomicUsize::new(0))).bulk(
            chunks,
            move |c, (v, mismatches): &(Vec<f64>, AtomicUsize)| {
                mismatches.fetch_add(chunk_mismatches(c, v, reference), Ordering::Relaxed);
            },
        );
        let (v, mismatches) = sync_wait(work).unwrap().expect("not stopped");
        slot = Some(v);
        mismatches.into_inner()
    });
    let check_chunked = best_check(|| {
        let v = slot.take().expect("the vector comes back");
        let work = sch.schedule().then(move |()| (v, AtomicUsize::new(0))).bulk_chunked(
            LEN,
            move |lo, hi, (v, mismatches): &(Vec<f64>, AtomicUsize)| {
                let bad = v[lo..hi].iter().zip(&reference[lo..hi]).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
                mismatches.fetch_add(bad, Ordering::Relaxed);
            },
        );
        let (v, mismatches) = sync_wait(work).unwrap().expect("not stopped");
        slot = Some(v);
        mismatches.into_inner()
    });

    // A few expensive items, one per thread: each is a job of its own, so they run side
    // by side (a small `bulk` used to run them one after the other on one worker).
    let item = Duration::from_millis(20);
    let spin = move || {
        let start = Instant::now();
        while start.elapsed() < item {
            std::hint::spin_loop();
        }
    };
    let few_rayon = best_check(|| {
        rayon_pool.install(|| (0..threads).into_par_iter().for_each(|_| spin()));
        0
    });
    let few_senders = best_check(|| {
        sync_wait(sch.schedule().bulk_unchunked(threads, move |_, ()| spin())).unwrap().expect("not stopped");
        0
    });

    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let row = |name: &str, d: Duration, base: Duration| {
        println!("{name:<34} {:>9.1} ms {:>8.2}×", ms(d), ms(d) / ms(base));
    };
    println!("{:<34} {:>12} {:>9}", "", "best", "÷ rayon");
    row("sequential loop", seq, rayon);
    row("rayon par_iter_mut", rayon, rayon);
    row("senders bulk_each, early", early, rayon);
    row("senders bulk_each, late", late, rayon);
    row("check: sequential loop", check_seq, check_rayon);
    row("check: rayon par_iter", check_rayon, check_rayon);
    row("check: senders bulk (&V)", check_senders, check_rayon);
    row("check: senders bulk_chunked", check_chunked, check_rayon);
    row(&format!("{threads} × 20 ms: rayon par_iter"), few_rayon, few_rayon);
    row(&format!("{threads} × 20 ms: senders bulk_unchunked"), few_senders, few_rayon);
    println!("\nall results equal the sequential loop's");
}
