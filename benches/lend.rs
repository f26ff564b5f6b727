//! Divide and conquer with `let_value_ref` against `rayon::join`, in the same run, with
//! 2 workers on both sides: the programs of `examples/mergesort.rs`,
//! `examples/matmul.rs` and `examples/strassen.rs` (included here as they are), and the
//! same algorithms written with `rayon::join` below, step for step (same grain, same
//! scratch allocations, same sequential leaves and merges).
//!
//! | group | ours | rayon |
//! |---|---|---|
//! | `mergesort` | 2^20 `u32`s: halves lent to two children, then a merge | `join` of the halves, then the merge |
//! | `matmulz` | 512 × 512 `f32`, z-order: 8 quadrant products, 4 into a lent scratch matrix, then the sum | `join` of 8 (as a tree of `join`s), then the sum |
//! | `strassen` | 512 × 512 `f32`: 7 products, each with its operand sums lent to the recursion | `join` of 7 (as a tree of `join`s) |
//!
//! After criterion, each case is also timed in interleaved rounds (ours, rayon, rayon,
//! ours, ...), which resists the background load of a shared machine better than two
//! separate criterion runs; the binary prints the median ratio ours ÷ rayon and its
//! range over the rounds.
//!
//! ```text
//! cargo bench --bench lend -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! `SENDERS_LEND_PAIRED_ONLY=1` runs the interleaved rounds alone;
//! `SENDERS_LEND_CASES=matmulz,strassen` picks the cases they time and
//! `SENDERS_LEND_ROUNDS=<n>` their number (21 by default); the cases
//! `matmulz_rayon_rayon` and `strassen_rayon_rayon` (run only when named) time rayon
//! against itself, the noise of the ratio. For profilers,
//! `SENDERS_LEND_PROFILE=<mergesort|matmulz|strassen>[_rayon]:<repeats>` runs one
//! workload without criterion (`_rayon`: rayon's), and `SENDERS_PROFILE_THREADS=1` gives
//! both pools one worker, so that callgrind counts what each side adds per node.

use std::hint::black_box;
use std::time::Duration;

use criterion::{BatchSize, Criterion};
use senders::{StaticThreadPool, starts_on, sync_wait_value};

#[path = "common/cases.rs"]
mod cases;
#[path = "common/paired.rs"]
#[allow(dead_code)] // shared by the benches; this one uses part of it
mod paired;
use cases::Case;

#[path = "../examples/mergesort.rs"]
mod mergesort;

#[path = "../examples/matmul.rs"]
mod matmul;

#[path = "../examples/strassen.rs"]
mod strassen;

#[path = "common/lend_rayon.rs"]
mod lend_rayon;
use lend_rayon::{rayon_mul_add, rayon_sort, rayon_strassen};

/// Workers on both sides.
const THREADS: usize = 2;
/// Numbers sorted.
const SORT_N: usize = 1 << 20;
/// The side of the multiplied matrices.
const MATRIX_N: usize = 512;
/// Interleaved rounds per case.
const ROUNDS: usize = 21;

fn main() {
    let pool = StaticThreadPool::new(paired::threads(THREADS)).expect("a pool");
    let rayon_pool =
        rayon::ThreadPoolBuilder::new().num_threads(paired::threads(THREADS)).build().expect("a rayon pool");
    let sch = pool.scheduler();

    // Inputs, and a check that both sides compute the same thing.
    let unsorted = mergesort::input(SORT_N);
    let (a, b) = (matmul::input(MATRIX_N, 1), matmul::input(MATRIX_N, 2));
    if let Ok(spec) = std::env::var("SENDERS_LEND_PROFILE") {
        let mut parts = spec.split(':');
        let what = parts.next().unwrap_or("mergesort");
        let repeats: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(10);
        let (mut v, mut buf, mut dest) = (Vec::new(), vec![0u32; SORT_N], vec![0.0f32; MATRIX_N * MATRIX_N]);
        let start = std::time::Instant::now();
        for _ in 0..repeats {
            match what {
                "mergesort" => {
                    v.clone_from(&unsorted);
                    sync_wait_value(starts_on(sch.clone(), mergesort::sort(&mut v, &mut buf)));
                }
                "mergesort_rayon" => {
                    v.clone_from(&unsorted);
                    rayon_pool.install(|| rayon_sort(&mut v, &mut buf));
                }
                "matmulz" => {
                    dest.fill(0.0);
                    sync_wait_value(starts_on(sch.clone(), matmul::mul_add(&a, &b, &mut dest, MATRIX_N)));
                }
                "matmulz_rayon" => {
                    dest.fill(0.0);
                    rayon_pool.install(|| rayon_mul_add(&a, &b, &mut dest, MATRIX_N));
                }
                "strassen" => {
                    drop(black_box(sync_wait_value(starts_on(sch.clone(), strassen::multiply(&a, &b, MATRIX_N)))))
                }
                "strassen_rayon" => drop(black_box(rayon_pool.install(|| rayon_strassen(&a, &b, MATRIX_N)))),
                other => panic!("unknown profile workload {other:?}"),
            }
        }
        println!("{what} x {repeats}: {:?} per run", start.elapsed() / repeats.max(1));
        return;
    }
    {
        let (mut v, mut buf, mut w) = (unsorted.clone(), vec![0; SORT_N], unsorted.clone());
        sync_wait_value(starts_on(sch.clone(), mergesort::sort(&mut v, &mut buf)));
        rayon_pool.install(|| rayon_sort(&mut w, &mut buf));
        assert!(v.is_sorted() && v == w, "both sorts sort");
        let (mut c, mut d) = (vec![0.0f32; MATRIX_N * MATRIX_N], vec![0.0f32; MATRIX_N * MATRIX_N]);
        sync_wait_value(starts_on(sch.clone(), matmul::mul_add(&a, &b, &mut c, MATRIX_N)));
        rayon_pool.install(|| rayon_mul_add(&a, &b, &mut d, MATRIX_N));
        assert_eq!(c, d, "both z-order products agree");
        let s = sync_wait_value(starts_on(sch.clone(), strassen::multiply(&a, &b, MATRIX_N)));
        let r = rayon_pool.install(|| rayon_strassen(&a, &b, MATRIX_N));
        assert_eq!(s, r, "both Strassen products agree");
        let worst = s.iter().zip(&c).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
        assert!(worst < 1e-2 * MATRIX_N as f32, "Strassen's product is the product ({worst})");
    }

    let mut c = Criterion::default().without_plots().configure_from_args();
    // `SENDERS_LEND_PAIRED_ONLY=1`: only the interleaved rounds (a quick look).
    let criterion = std::env::var("SENDERS_LEND_PAIRED_ONLY").map_or(true, |v| v != "1");
    if criterion {
        let mut g = c.benchmark_group("mergesort");
        g.sample_size(20).measurement_time(Duration::from_secs(3));
        let mut buf = vec![0u32; SORT_N];
        g.bench_function("senders", |bch| {
            bch.iter_batched_ref(
                || unsorted.clone(),
                |v| sync_wait_value(starts_on(sch.clone(), mergesort::sort(v, &mut buf))),
                BatchSize::LargeInput,
            )
        });
        g.bench_function("rayon", |bch| {
            bch.iter_batched_ref(
                || unsorted.clone(),
                |v| rayon_pool.install(|| rayon_sort(v, &mut buf)),
                BatchSize::LargeInput,
            )
        });
        g.finish();
    }
    if criterion {
        let mut g = c.benchmark_group("matmulz");
        g.sample_size(20).measurement_time(Duration::from_secs(3));
        let mut dest = vec![0.0f32; MATRIX_N * MATRIX_N];
        g.bench_function("senders", |bch| {
            bch.iter(|| {
                dest.fill(0.0);
                sync_wait_value(starts_on(sch.clone(), matmul::mul_add(&a, &b, &mut dest, MATRIX_N)));
            })
        });
        g.bench_function("rayon", |bch| {
            bch.iter(|| {
                dest.fill(0.0);
                rayon_pool.install(|| rayon_mul_add(&a, &b, &mut dest, MATRIX_N));
            })
        });
        g.finish();
    }
    if criterion {
        let mut g = c.benchmark_group("strassen");
        g.sample_size(20).measurement_time(Duration::from_secs(3));
        g.bench_function("senders", |bch| {
            bch.iter(|| black_box(sync_wait_value(starts_on(sch.clone(), strassen::multiply(&a, &b, MATRIX_N)))))
        });
        g.bench_function("rayon", |bch| {
            bch.iter(|| black_box(rayon_pool.install(|| rayon_strassen(&a, &b, MATRIX_N))))
        });
        g.finish();
    }
    if criterion {
        c.final_summary();
    }

    // Interleaved rounds: the ratio that resists the machine's background load.
    let (a, b, unsorted, rayon_pool) = (&a, &b, &unsorted, &rayon_pool);
    let (mut v, mut buf, mut dest) = (Vec::new(), vec![0u32; SORT_N], vec![0.0f32; MATRIX_N * MATRIX_N]);
    let (mut w, mut wbuf, mut wdest) = (Vec::new(), vec![0u32; SORT_N], vec![0.0f32; MATRIX_N * MATRIX_N]);
    let (mut xdest, mut ydest) = (vec![0.0f32; MATRIX_N * MATRIX_N], vec![0.0f32; MATRIX_N * MATRIX_N]);
    let (sch1, sch2, sch3) = (sch.clone(), sch.clone(), sch.clone());
    let mut cases = [
        Case {
            name: "mergesort",
            ours: Box::new(|| {
                v.clone_from(unsorted);
                sync_wait_value(starts_on(sch1.clone(), mergesort::sort(&mut v, &mut buf)));
            }),
            rayon: Box::new(|| {
                w.clone_from(unsorted);
                rayon_pool.install(|| rayon_sort(&mut w, &mut wbuf));
            }),
        },
        Case {
            name: "matmulz",
            ours: Box::new(|| {
                dest.fill(0.0);
                sync_wait_value(starts_on(sch2.clone(), matmul::mul_add(a, b, &mut dest, MATRIX_N)));
            }),
            rayon: Box::new(|| {
                wdest.fill(0.0);
                rayon_pool.install(|| rayon_mul_add(a, b, &mut wdest, MATRIX_N));
            }),
        },
        Case {
            name: "strassen",
            ours: Box::new(|| {
                drop(black_box(sync_wait_value(starts_on(sch3.clone(), strassen::multiply(a, b, MATRIX_N)))))
            }),
            rayon: Box::new(|| drop(black_box(rayon_pool.install(|| rayon_strassen(a, b, MATRIX_N))))),
        },
        // Rayon against itself (run only when named): the noise of the ratio.
        Case {
            name: "matmulz_rayon_rayon",
            ours: Box::new(|| {
                xdest.fill(0.0);
                rayon_pool.install(|| rayon_mul_add(a, b, &mut xdest, MATRIX_N));
            }),
            rayon: Box::new(|| {
                ydest.fill(0.0);
                rayon_pool.install(|| rayon_mul_add(a, b, &mut ydest, MATRIX_N));
            }),
        },
        Case {
            name: "strassen_rayon_rayon",
            ours: Box::new(|| drop(black_box(rayon_pool.install(|| rayon_strassen(a, b, MATRIX_N))))),
            rayon: Box::new(|| drop(black_box(rayon_pool.install(|| rayon_strassen(a, b, MATRIX_N))))),
        },
    ];
    let rounds = std::env::var("SENDERS_LEND_ROUNDS").ok().and_then(|s| s.parse().ok()).unwrap_or(ROUNDS);
    let picked = std::env::var("SENDERS_LEND_CASES").ok();
    let picked = |name: &str| match picked.as_deref() {
        Some(list) => list.split(',').any(|c| c == name),
        None => !name.ends_with("_rayon_rayon"),
    };
    println!("\ninterleaved rounds ({rounds}), {THREADS} workers each: ours ÷ rayon, median [range]");
    for case in cases.iter_mut().filter(|case| picked(case.name)) {
        case.print_rounds(rounds, 1);
    }
}
