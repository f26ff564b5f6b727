//! Data-parallel programs as rayon users write them (`benches/common/data.rs`: the
//! sieve, the word count, the dot product and sum of squares, mandelbrot by rows and by
//! pixels), ours against rayon's idiomatic form, in the same run, with 2 workers on both
//! sides. Every call's output is checked against the sequential program's.
//!
//! ```text
//! cargo bench --bench data -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! After criterion, each case is timed in interleaved rounds (ours, rayon, rayon, ours,
//! ...) and the binary prints the median ratio ours ÷ rayon and its range.
//! `SENDERS_DATA_PAIRED_ONLY=1` runs the interleaved rounds alone;
//! `SENDERS_DATA_CASES=wordcount,dot` runs only the cases named. For profilers,
//! `SENDERS_DATA_PROFILE=<case>[_rayon]:<repeats>` runs one side of one case without
//! criterion, and `SENDERS_PROFILE_THREADS=1` gives both pools one worker.
//!
//! Further cases: a file in `benches/common/` whose `cases(ctx, &want)` returns the
//! `Vec<data::DataCase>` of the cases `want` names, appended to `all` in `main`.

use std::hint::black_box;
use std::time::Duration;

use criterion::Criterion;
use senders::StaticThreadPool;

#[path = "common/cases.rs"]
mod cases;
#[path = "common/data.rs"]
#[allow(dead_code)] // the report reads the titles
mod data;
#[path = "common/paired.rs"]
#[allow(dead_code)] // shared by the benches; this one uses part of it
mod paired;
use cases::Case;
use data::{Ctx, DataCase, Sizes};

/// Workers on both sides.
const THREADS: usize = 2;
/// Interleaved rounds per case.
const ROUNDS: usize = 15;

fn main() {
    let pool = StaticThreadPool::new(paired::threads(THREADS)).expect("a pool");
    let rayon_pool =
        rayon::ThreadPoolBuilder::new().num_threads(paired::threads(THREADS)).build().expect("a rayon pool");
    let sch = pool.scheduler();
    let ctx = Ctx { sch: &sch, rayon: &rayon_pool };
    let wanted: Option<Vec<String>> =
        std::env::var("SENDERS_DATA_CASES").ok().map(|s| s.split(',').map(str::to_owned).collect());
    let profile = std::env::var("SENDERS_DATA_PROFILE").ok();
    let profiled = profile.as_deref().map(|p| p.split(':').next().unwrap_or("").trim_end_matches("_rayon").to_owned());

    let want = |name: &str| {
        wanted.as_ref().is_none_or(|w| w.iter().any(|n| n == name)) && profiled.as_ref().is_none_or(|p| p == name)
    };
    let mut all: Vec<DataCase> = data::cases(ctx, Sizes::BENCH, &want);

    if let Some(spec) = profile {
        let mut parts = spec.split(':');
        let what = parts.next().unwrap_or("");
        let repeats: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(10);
        let case = all.first_mut().unwrap_or_else(|| panic!("unknown profile workload {what:?}"));
        let side = if what.ends_with("_rayon") { &mut case.rayon } else { &mut case.ours };
        let start = std::time::Instant::now();
        for _ in 0..repeats {
            assert_eq!(side(), case.expected, "{what}: output");
        }
        println!("{what} x {repeats}: {:?} per run", start.elapsed() / repeats.max(1));
        return;
    }

    let mut c = Criterion::default().without_plots().configure_from_args();
    let criterion = std::env::var("SENDERS_DATA_PAIRED_ONLY").map_or(true, |v| v != "1");
    if criterion {
        for case in &mut all {
            let expected = case.expected;
            let mut g = c.benchmark_group(case.name);
            g.sample_size(10).measurement_time(Duration::from_secs(3));
            g.bench_function("senders", |b| b.iter(|| assert_eq!(black_box((case.ours)()), expected)));
            g.bench_function("rayon", |b| b.iter(|| assert_eq!(black_box((case.rayon)()), expected)));
            g.finish();
        }
        c.final_summary();
    }

    println!("\ninterleaved rounds ({ROUNDS}), {THREADS} workers each: ours ÷ rayon, median [range]");
    for case in all {
        let DataCase { name, mut ours, mut rayon, expected, .. } = case;
        let mut case = Case {
            name,
            ours: Box::new(move || assert_eq!(ours(), expected, "{name}: our output")),
            rayon: Box::new(move || assert_eq!(rayon(), expected, "{name}: rayon's output")),
        };
        let t = std::time::Instant::now();
        (case.ours)();
        let n = paired::batch(t.elapsed().as_nanos() as f64);
        case.print_rounds(ROUNDS, n);
    }
}
