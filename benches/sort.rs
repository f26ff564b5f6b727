//! The parallel sorts against rayon's, in the same run, with 2 workers on both sides
//! (workloads in `common/sort.rs`).
//!
//! | case | ours | rayon |
//! |---|---|---|
//! | `stable/<input>` | `bulk_sort` of 4 Mi `u32`s | `par_sort` |
//! | `unstable/<input>` | `bulk_sort_unstable` | `par_sort_unstable` |
//!
//! The inputs are random, sorted and reversed. After criterion, each case is timed in
//! interleaved rounds (ours, rayon, rayon, ours, ...; a fresh copy of the input before
//! each sort, outside the timed span) and the binary prints the medians per sort and the
//! median ratio ours ÷ rayon with its range over the rounds.
//!
//! ```text
//! cargo bench --bench sort -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! `SENDERS_SORT_PAIRED_ONLY=1` runs the interleaved rounds alone; `SENDERS_SORT_ROUNDS`
//! sets their number (11). For profilers, `SENDERS_SORT_PROFILE=<stable|unstable>_<input>[_rayon]:<repeats>`
//! runs one case without criterion, and `SENDERS_PROFILE_THREADS=1` gives both pools one
//! worker.

use std::time::Duration;

use criterion::{BatchSize, Criterion};
use senders::StaticThreadPool;

#[path = "common/paired.rs"]
#[allow(dead_code)] // shared by the benches; this one uses part of it
mod paired;
#[path = "common/sort.rs"]
mod sort;

/// Workers on both sides.
const THREADS: usize = 2;

fn main() {
    let pool = StaticThreadPool::new(paired::threads(THREADS)).expect("a pool");
    let rayon_pool =
        rayon::ThreadPoolBuilder::new().num_threads(paired::threads(THREADS)).build().expect("a rayon pool");
    let sch = pool.scheduler();
    let inputs = sort::inputs();

    if let Ok(spec) = std::env::var("SENDERS_SORT_PROFILE") {
        let mut parts = spec.split(':');
        let what = parts.next().unwrap_or("unstable_random");
        let repeats: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(10);
        let rayon_side = what.ends_with("_rayon");
        let what = what.trim_end_matches("_rayon");
        let (kind, input) = what.split_once('_').expect("<stable|unstable>_<input>");
        let stable = kind == "stable";
        let (_, data) = inputs.iter().find(|(name, _)| *name == input).expect("random, sorted or reversed");
        let mut v = data.clone();
        let start = std::time::Instant::now();
        for _ in 0..repeats {
            v.copy_from_slice(data);
            if rayon_side { sort::rayon(&rayon_pool, &mut v, stable) } else { sort::ours(&sch, &mut v, stable) }
        }
        println!("{spec}: {:?} per run (copy included)", start.elapsed() / repeats.max(1));
        return;
    }

    for (_, data) in &inputs {
        for stable in [true, false] {
            sort::check(&sch, &rayon_pool, data, stable);
        }
    }

    let mut c = Criterion::default().without_plots().configure_from_args();
    let criterion = std::env::var("SENDERS_SORT_PAIRED_ONLY").map_or(true, |v| v != "1");
    if criterion {
        for stable in [true, false] {
            for (name, data) in &inputs {
                let kind = if stable { "stable" } else { "unstable" };
                let mut g = c.benchmark_group(format!("{kind}/{name}"));
                g.sample_size(10).measurement_time(Duration::from_secs(3));
                g.bench_function("senders", |b| {
                    b.iter_batched_ref(|| data.clone(), |v| sort::ours(&sch, v, stable), BatchSize::LargeInput)
                });
                g.bench_function("rayon", |b| {
                    b.iter_batched_ref(|| data.clone(), |v| sort::rayon(&rayon_pool, v, stable), BatchSize::LargeInput)
                });
                g.finish();
            }
        }
        c.final_summary();
    }

    let rounds = std::env::var("SENDERS_SORT_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(11);
    println!("\ninterleaved rounds, {} workers, ours ÷ rayon (median [range]):", paired::threads(THREADS));
    for stable in [true, false] {
        for (name, data) in &inputs {
            let calls = if *name == "random" { 3 } else { 10 };
            let r = sort::paired(&sch, &rayon_pool, data, stable, rounds, calls);
            let ratios: Vec<f64> = r.iter().map(|(o, b)| o / b).collect();
            let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = ratios.iter().copied().fold(0.0, f64::max);
            let ours: Vec<f64> = r.iter().map(|p| p.0).collect();
            let theirs: Vec<f64> = r.iter().map(|p| p.1).collect();
            println!(
                "{:<18} ours {:>10}  rayon {:>10}  {:.3}× [{lo:.2}–{hi:.2}]",
                format!("{}/{name}", if stable { "stable" } else { "unstable" }),
                paired::format_ns(paired::median(&ours)),
                paired::format_ns(paired::median(&theirs)),
                paired::median(&ratios)
            );
        }
    }
}
