//! Reductions, mutable chunks and grain against rayon's counterparts, in the same run,
//! with 2 workers on both sides.
//!
//! | case | ours | rayon |
//! |---|---|---|
//! | `sum` | `bulk_reduce` of 2^20 `u64`s: each chunk summed, then added | `par_iter().fold(..).reduce(..)` |
//! | `map_sum` | `bulk_map_reduce` of `3 x + 1` over the same, added | `par_iter().map(..).sum()` |
//! | `rows` | `bulk_chunks_mut` over the rows of a 1024 × 1024 `f64` matrix, each row scaled | `par_chunks_mut(1024).enumerate().for_each(..)` |
//! | `min_len` | `bulk_each_with(Grain::new().min_len(4096))`: a cheap map of 2^20 `u64`s in place | `par_iter_mut().with_min_len(4096).for_each(..)` |
//!
//! After criterion, each case is also timed in interleaved rounds (ours, rayon, rayon,
//! ours, ...), which resists the background load of a shared machine better than two
//! separate criterion runs; the binary prints the median ratio ours ÷ rayon and its
//! range over the rounds.
//!
//! ```text
//! cargo bench --bench reduce -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! `SENDERS_REDUCE_PAIRED_ONLY=1` runs the interleaved rounds alone. For profilers,
//! `SENDERS_REDUCE_PROFILE=<sum|map_sum|rows|min_len>[_rayon]:<repeats>` runs one case
//! without criterion (`_rayon`: rayon's), and `SENDERS_PROFILE_THREADS=1` gives both
//! pools one worker, so that callgrind counts what each side adds.

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use rayon::prelude::*;
use senders::{Grain, SenderExt, StaticThreadPool, schedule, sync_wait};

#[path = "common/cases.rs"]
mod cases;
#[path = "common/paired.rs"]
#[allow(dead_code)] // shared by the benches; this one uses part of it
mod paired;
use cases::Case;

/// Workers on both sides.
const THREADS: usize = 2;
/// Elements summed and mapped.
const N: usize = 1 << 20;
/// The side of the matrix whose rows are scaled.
const SIDE: usize = 1024;
/// The `min_len` of the `min_len` case.
const MIN_LEN: usize = 4096;
/// Interleaved rounds per case.
const ROUNDS: usize = 21;

/// The cheap map of the `min_len` case.
#[inline]
fn step(x: u64) -> u64 {
    x.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (x >> 7)
}

/// The factor row `r` is scaled by.
#[inline]
fn factor(r: usize) -> f64 {
    1.0 + (r % 7) as f64 * 1e-3
}

fn sum(sch: &senders::PoolScheduler, data: &[u64]) -> u64 {
    sync_wait(schedule(sch).then(move |()| data).bulk_reduce(
        data.len(),
        || 0,
        |acc, b, e, v: &&[u64]| acc + v[b..e].iter().sum::<u64>(),
        |a, b| a + b,
    ))
    .unwrap()
    .unwrap()
}

fn rayon_sum(data: &[u64]) -> u64 {
    data.par_iter().fold(|| 0, |a, &x| a + x).reduce(|| 0, |a, b| a + b)
}

fn map_sum(sch: &senders::PoolScheduler, data: &[u64]) -> u64 {
    sync_wait(schedule(sch).then(move |()| data).bulk_map_reduce(
        data.len(),
        |i, v: &&[u64]| 3 * v[i] + 1,
        |a, b| a + b,
    ))
    .unwrap()
    .unwrap()
    .unwrap_or_default()
}

fn rayon_map_sum(data: &[u64]) -> u64 {
    data.par_iter().map(|&x| 3 * x + 1).sum()
}

fn rows(sch: &senders::PoolScheduler, m: &mut [f64]) {
    sync_wait(schedule(sch).then(move |()| m).bulk_chunks_mut(SIDE, |r, row: &mut [f64]| {
        let k = factor(r);
        row.iter_mut().for_each(|x| *x *= k);
    }))
    .unwrap();
}

fn rayon_rows(m: &mut [f64]) {
    m.par_chunks_mut(SIDE).enumerate().for_each(|(r, row)| {
        let k = factor(r);
        row.iter_mut().for_each(|x| *x *= k);
    });
}

fn min_len(sch: &senders::PoolScheduler, v: &mut [u64]) {
    sync_wait(
        schedule(sch).then(move |()| v).bulk_each_with(Grain::new().min_len(MIN_LEN), |_, x: &mut u64| *x = step(*x)),
    )
    .unwrap();
}

fn rayon_min_len(v: &mut [u64]) {
    v.par_iter_mut().with_min_len(MIN_LEN).for_each(|x| *x = step(*x));
}

fn main() {
    let pool = StaticThreadPool::new(paired::threads(THREADS)).expect("a pool");
    let rayon_pool =
        rayon::ThreadPoolBuilder::new().num_threads(paired::threads(THREADS)).build().expect("a rayon pool");
    let sch = pool.scheduler();
    let data: Vec<u64> = (0..N as u64).map(|i| i.wrapping_mul(2_654_435_761) % 1000).collect();
    let matrix: Vec<f64> = (0..SIDE * SIDE).map(|i| (i % 97) as f64).collect();

    if let Ok(spec) = std::env::var("SENDERS_REDUCE_PROFILE") {
        let mut parts = spec.split(':');
        let what = parts.next().unwrap_or("sum");
        let repeats: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(10);
        let (mut m, mut v) = (matrix.clone(), data.clone());
        let start = std::time::Instant::now();
        for _ in 0..repeats {
            match what {
                "sum" => {
                    black_box(sum(&sch, &data));
                }
                "sum_rayon" => {
                    black_box(rayon_pool.install(|| rayon_sum(&data)));
                }
                "map_sum" => {
                    black_box(map_sum(&sch, &data));
                }
                "map_sum_rayon" => {
                    black_box(rayon_pool.install(|| rayon_map_sum(&data)));
                }
                "rows" => rows(&sch, &mut m),
                "rows_rayon" => rayon_pool.install(|| rayon_rows(&mut m)),
                "min_len" => min_len(&sch, &mut v),
                "min_len_rayon" => rayon_pool.install(|| rayon_min_len(&mut v)),
                other => panic!("unknown profile workload {other:?}"),
            }
        }
        println!("{what} x {repeats}: {:?} per run", start.elapsed() / repeats.max(1));
        return;
    }

    // Both sides compute the same thing.
    assert_eq!(sum(&sch, &data), rayon_pool.install(|| rayon_sum(&data)), "both sums agree");
    assert_eq!(map_sum(&sch, &data), rayon_pool.install(|| rayon_map_sum(&data)), "both map-sums agree");
    {
        let (mut m1, mut m2) = (matrix.clone(), matrix.clone());
        rows(&sch, &mut m1);
        rayon_pool.install(|| rayon_rows(&mut m2));
        assert_eq!(m1, m2, "both row scalings agree");
        let (mut v1, mut v2) = (data.clone(), data.clone());
        min_len(&sch, &mut v1);
        rayon_pool.install(|| rayon_min_len(&mut v2));
        assert_eq!(v1, v2, "both maps agree");
    }

    let mut c = Criterion::default().without_plots().configure_from_args();
    // `SENDERS_REDUCE_PAIRED_ONLY=1`: only the interleaved rounds (a quick look).
    let criterion = std::env::var("SENDERS_REDUCE_PAIRED_ONLY").map_or(true, |v| v != "1");
    if criterion {
        let mut g = c.benchmark_group("sum");
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        g.bench_function("senders", |bch| bch.iter(|| black_box(sum(&sch, &data))));
        g.bench_function("rayon", |bch| bch.iter(|| black_box(rayon_pool.install(|| rayon_sum(&data)))));
        g.finish();

        let mut g = c.benchmark_group("map_sum");
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        g.bench_function("senders", |bch| bch.iter(|| black_box(map_sum(&sch, &data))));
        g.bench_function("rayon", |bch| bch.iter(|| black_box(rayon_pool.install(|| rayon_map_sum(&data)))));
        g.finish();

        let mut g = c.benchmark_group("rows");
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        let mut m = matrix.clone();
        g.bench_function("senders", |bch| bch.iter(|| rows(&sch, &mut m)));
        g.bench_function("rayon", |bch| bch.iter(|| rayon_pool.install(|| rayon_rows(&mut m))));
        g.finish();

        let mut g = c.benchmark_group("min_len");
        g.sample_size(30).measurement_time(Duration::from_secs(3));
        let mut v = data.clone();
        g.bench_function("senders", |bch| bch.iter(|| min_len(&sch, &mut v)));
        g.bench_function("rayon", |bch| bch.iter(|| rayon_pool.install(|| rayon_min_len(&mut v))));
        g.finish();
        c.final_summary();
    }

    // Interleaved rounds: the ratio that resists the machine's background load.
    let (data, rayon_pool) = (&data, &rayon_pool);
    let (mut m1, mut m2, mut v1, mut v2) = (matrix.clone(), matrix.clone(), data.clone(), data.clone());
    let (s1, s2, s3, s4) = (sch.clone(), sch.clone(), sch.clone(), sch.clone());
    let mut cases = [
        Case {
            name: "sum",
            ours: Box::new(move || {
                black_box(sum(&s1, data));
            }),
            rayon: Box::new(|| {
                black_box(rayon_pool.install(|| rayon_sum(data)));
            }),
        },
        Case {
            name: "map_sum",
            ours: Box::new(move || {
                black_box(map_sum(&s2, data));
            }),
            rayon: Box::new(|| {
                black_box(rayon_pool.install(|| rayon_map_sum(data)));
            }),
        },
        Case {
            name: "rows",
            ours: Box::new(move || rows(&s3, &mut m1)),
            rayon: Box::new(|| rayon_pool.install(|| rayon_rows(&mut m2))),
        },
        Case {
            name: "min_len",
            ours: Box::new(move || min_len(&s4, &mut v1)),
            rayon: Box::new(|| rayon_pool.install(|| rayon_min_len(&mut v2))),
        },
    ];
    println!("\ninterleaved rounds ({ROUNDS}), {THREADS} workers each: ours ÷ rayon, median [range]");
    for case in &mut cases {
        // Batches of about 5 ms each side, from one timed call.
        let t = std::time::Instant::now();
        (case.ours)();
        let n = paired::batch(t.elapsed().as_nanos() as f64);
        case.print_rounds(ROUNDS, n);
    }
}
