//! Parallel collect into a `Vec` against rayon's, in the same run, with 2 workers on both
//! sides: the workloads of `common/collect.rs` (a map-collect and a filter-collect of
//! 4 Mi `u64`s), checked against the sequential results before timing.
//!
//! After criterion, each case is also timed in interleaved rounds (ours, rayon, rayon,
//! ours, ...); the binary prints the median ratio ours ÷ rayon and its range.
//!
//! ```text
//! cargo bench --bench collect -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! `SENDERS_COLLECT_PAIRED_ONLY=1` runs the interleaved rounds alone. For profilers,
//! `SENDERS_COLLECT_PROFILE=<map|filter>[_rayon]:<repeats>` runs one case without
//! criterion, and `SENDERS_PROFILE_THREADS=1` gives both pools one worker.

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use senders::StaticThreadPool;

#[path = "common/cases.rs"]
mod cases;
#[path = "common/collect.rs"]
mod collect;
#[path = "common/paired.rs"]
#[allow(dead_code)] // shared by the benches; this one uses part of it
mod paired;
use cases::Case;
use collect::{filter_collect, map_collect, rayon_filter_collect, rayon_map_collect};

/// Workers on both sides.
const THREADS: usize = 2;
/// Interleaved rounds per case.
const ROUNDS: usize = 21;

fn main() {
    let pool = StaticThreadPool::new(paired::threads(THREADS)).expect("a pool");
    let rayon_pool =
        rayon::ThreadPoolBuilder::new().num_threads(paired::threads(THREADS)).build().expect("a rayon pool");
    let sch = pool.scheduler();
    let data = collect::data();

    if let Ok(spec) = std::env::var("SENDERS_COLLECT_PROFILE") {
        let mut parts = spec.split(':');
        let what = parts.next().unwrap_or("map");
        let repeats: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(10);
        let start = std::time::Instant::now();
        for _ in 0..repeats {
            match what {
                "map" => drop(black_box(map_collect(&sch, &data))),
                "map_rayon" => drop(black_box(rayon_pool.install(|| rayon_map_collect(&data)))),
                "filter" => drop(black_box(filter_collect(&sch, &data))),
                "filter_rayon" => drop(black_box(rayon_pool.install(|| rayon_filter_collect(&data)))),
                other => panic!("unknown profile workload {other:?}"),
            }
        }
        println!("{what} x {repeats}: {:?} per run", start.elapsed() / repeats.max(1));
        return;
    }

    collect::check(&sch, &rayon_pool, &data);

    let mut c = Criterion::default().without_plots().configure_from_args();
    let criterion = std::env::var("SENDERS_COLLECT_PAIRED_ONLY").map_or(true, |v| v != "1");
    if criterion {
        let mut g = c.benchmark_group("map_collect");
        g.sample_size(20).measurement_time(Duration::from_secs(3));
        g.bench_function("senders", |b| b.iter(|| black_box(map_collect(&sch, &data))));
        g.bench_function("rayon", |b| b.iter(|| black_box(rayon_pool.install(|| rayon_map_collect(&data)))));
        g.finish();

        let mut g = c.benchmark_group("filter_collect");
        g.sample_size(20).measurement_time(Duration::from_secs(3));
        g.bench_function("senders", |b| b.iter(|| black_box(filter_collect(&sch, &data))));
        g.bench_function("rayon", |b| b.iter(|| black_box(rayon_pool.install(|| rayon_filter_collect(&data)))));
        g.finish();
        c.final_summary();
    }

    let (data, rayon_pool) = (&data, &rayon_pool);
    let (s1, s2) = (sch.clone(), sch.clone());
    let mut cases = [
        Case {
            name: "map_collect",
            ours: Box::new(move || drop(black_box(map_collect(&s1, data)))),
            rayon: Box::new(|| drop(black_box(rayon_pool.install(|| rayon_map_collect(data))))),
        },
        Case {
            name: "filter_collect",
            ours: Box::new(move || drop(black_box(filter_collect(&s2, data)))),
            rayon: Box::new(|| drop(black_box(rayon_pool.install(|| rayon_filter_collect(data))))),
        },
    ];
    println!("\ninterleaved rounds ({ROUNDS}), {THREADS} workers each: ours ÷ rayon, median [range]");
    for case in &mut cases {
        let t = std::time::Instant::now();
        (case.ours)();
        let n = paired::batch(t.elapsed().as_nanos() as f64);
        case.print_rounds(ROUNDS, n);
    }
}
