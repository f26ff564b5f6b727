//! `Task` (P3552) against tokio and rayon, in the same run, 2 workers everywhere.
//!
//! | group | ours | baseline | target |
//! |---|---|---|---|
//! | `task_fib` | fib([`FIB_N`]), one `Task` per node, children awaited with `when_all` on the pool | `tokio::spawn` per child, awaiting the `JoinHandle`s (multi-thread runtime) | ≥ 5× faster than tokio |
//! | `task_fib` | the same | `rayon::join` per node | reported |
//! | `any_fib` | fib([`ANY_FIB_N`]) as a recursion of `AnySender`s joined by `when_all` on the pool | `rayon::join` per node | reported (the speed issue's target) |
//! | `inline_await` | [`AWAITS`] × `just(i).await` in one task under `sync_wait` | — | ≤ 10 ns per await |
//!
//! ```text
//! cargo bench --bench task -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! After the criterion groups, each pair is timed again in interleaved rounds (ours,
//! baseline, baseline, ours, ...), and the medians and ranges of the ratio are printed.
//! `SENDERS_TASK_PROFILE=<fib|any|await>:<repeats>` runs one workload without criterion,
//! for profilers.

#[path = "common/paired.rs"]
#[allow(dead_code)] // shared by the benches; this one uses part of it
mod paired;

use std::convert::Infallible;
use std::hint::black_box;
use std::time::Instant;

use criterion::Criterion;
use senders::{AnySender, SenderExt, StaticThreadPool, Task, just, starts_on, sync_wait, when_all};

/// Workers everywhere.
const THREADS: usize = 2;
/// The fib argument of `task_fib`.
const FIB_N: u32 = 25;
/// The fib argument of `any_fib`.
const ANY_FIB_N: u32 = 30;
/// Awaits per iteration of `inline_await`.
const AWAITS: u64 = 1_000_000;
/// Interleaved rounds per pair.
const ROUNDS: usize = 15;

fn fib_task(n: u32) -> Task<'static, u64, Infallible> {
    Task::new(async move {
        if n < 2 {
            return Ok(u64::from(n));
        }
        let (a, b) = when_all((fib_task(n - 1), fib_task(n - 2))).await?;
        Ok(a + b)
    })
}

/// Lazy: a node builds its children only when it runs (one erased block per node).
fn fib_any(n: u32) -> AnySender<'static, u64> {
    if n < 2 {
        return just(u64::from(n)).boxed();
    }
    just(()).let_value(move |()| when_all((fib_any(n - 1), fib_any(n - 2))).then(|(a, b)| a + b)).boxed()
}

fn fib_tokio(n: u32) -> std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send>> {
    Box::pin(async move {
        if n < 2 {
            return u64::from(n);
        }
        let a = tokio::spawn(fib_tokio(n - 1));
        let b = tokio::spawn(fib_tokio(n - 2));
        a.await.unwrap() + b.await.unwrap()
    })
}

fn fib_rayon(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn fib_seq(n: u32) -> u64 {
    if n < 2 { u64::from(n) } else { fib_seq(n - 1) + fib_seq(n - 2) }
}

struct Env {
    pool: StaticThreadPool,
    rt: tokio::runtime::Runtime,
    rpool: rayon::ThreadPool,
}

fn env() -> Env {
    Env {
        pool: StaticThreadPool::new(THREADS).unwrap(),
        rt: tokio::runtime::Builder::new_multi_thread().worker_threads(THREADS).build().unwrap(),
        rpool: rayon::ThreadPoolBuilder::new().num_threads(THREADS).build().unwrap(),
    }
}

fn ours_fib(e: &Env) -> u64 {
    sync_wait(starts_on(e.pool.scheduler(), fib_task(black_box(FIB_N)))).unwrap().unwrap()
}

fn tokio_fib(e: &Env) -> u64 {
    e.rt.block_on(fib_tokio(black_box(FIB_N)))
}

fn rayon_fib(e: &Env) -> u64 {
    e.rpool.install(|| fib_rayon(black_box(FIB_N)))
}

fn any_fib(e: &Env) -> u64 {
    sync_wait(starts_on(e.pool.scheduler(), fib_any(black_box(ANY_FIB_N)))).unwrap().unwrap()
}

fn rayon_fib30(e: &Env) -> u64 {
    e.rpool.install(|| fib_rayon(black_box(ANY_FIB_N)))
}

fn inline_awaits() -> u64 {
    sync_wait(Task::<_, Infallible>::new(async {
        let mut s = 0u64;
        for i in 0..black_box(AWAITS) {
            s += just(i).await?;
        }
        Ok(s)
    }))
    .unwrap()
    .unwrap()
}

fn benches(c: &mut Criterion, e: &Env) {
    let expect = fib_seq(FIB_N);
    assert_eq!((ours_fib(e), tokio_fib(e), rayon_fib(e)), (expect, expect, expect));
    assert_eq!(inline_awaits(), AWAITS * (AWAITS - 1) / 2);
    assert_eq!(any_fib(e), fib_seq(ANY_FIB_N));

    let mut g = c.benchmark_group("task_fib");
    g.sample_size(10);
    g.bench_function("ours", |b| b.iter(|| ours_fib(e)));
    g.bench_function("tokio_spawn", |b| b.iter(|| tokio_fib(e)));
    g.bench_function("rayon_join", |b| b.iter(|| rayon_fib(e)));
    g.finish();

    let mut g = c.benchmark_group("any_fib");
    g.sample_size(10);
    g.bench_function("ours", |b| b.iter(|| any_fib(e)));
    g.bench_function("rayon_join", |b| b.iter(|| rayon_fib30(e)));
    g.finish();

    let mut g = c.benchmark_group("inline_await");
    g.sample_size(10);
    g.throughput(criterion::Throughput::Elements(AWAITS));
    g.bench_function("1M_just", |b| b.iter(inline_awaits));
    g.finish();
}

/// Times `ours` against `base` in interleaved rounds; prints the ratio `base ÷ ours`.
fn pair(label: &str, ours: &mut dyn FnMut(), base: &mut dyn FnMut(), target: &str) {
    let rounds = paired::paired_rounds(ROUNDS, (ours, 1), (base, 1));
    let ratios: Vec<f64> = rounds.iter().map(|(o, b)| b / o).collect();
    let lo = ratios.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = ratios.iter().copied().fold(0.0, f64::max);
    let o: Vec<f64> = rounds.iter().map(|r| r.0).collect();
    let b: Vec<f64> = rounds.iter().map(|r| r.1).collect();
    println!(
        "{label}: ours {} vs {} -> {:.2}x faster [{lo:.2}-{hi:.2}] (target {target})",
        paired::format_ns(paired::median(&o)),
        paired::format_ns(paired::median(&b)),
        paired::median(&ratios),
    );
}

fn profile(spec: &str, e: &Env) {
    let mut parts = spec.split(':');
    let what = parts.next().unwrap_or("fib");
    let repeats: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let start = Instant::now();
    for _ in 0..repeats {
        match what {
            "fib" => {
                black_box(ours_fib(e));
            }
            "any" => {
                black_box(any_fib(e));
            }
            "await" => {
                black_box(inline_awaits());
            }
            other => panic!("unknown profile workload {other:?}"),
        }
    }
    println!("{what} x {repeats}: {:?} per run", start.elapsed() / repeats.max(1));
}

fn main() {
    let e = env();
    if let Ok(spec) = std::env::var("SENDERS_TASK_PROFILE") {
        return profile(&spec, &e);
    }
    let mut c = Criterion::default().without_plots().configure_from_args();
    benches(&mut c, &e);
    c.final_summary();
    println!("\n==> interleaved rounds (speedup = baseline time / ours)");
    pair(
        "task_fib vs tokio::spawn",
        &mut || {
            black_box(ours_fib(&e));
        },
        &mut || {
            black_box(tokio_fib(&e));
        },
        ">= 5x",
    );
    pair(
        "task_fib vs rayon::join",
        &mut || {
            black_box(ours_fib(&e));
        },
        &mut || {
            black_box(rayon_fib(&e));
        },
        "reported (speed issue)",
    );
    pair(
        "any_fib(30) vs rayon::join",
        &mut || {
            black_box(any_fib(&e));
        },
        &mut || {
            black_box(rayon_fib30(&e));
        },
        "reported (speed issue)",
    );
    let t: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let s = Instant::now();
            black_box(inline_awaits());
            s.elapsed().as_nanos() as f64 / AWAITS as f64
        })
        .collect();
    println!("inline_await: {:.1} ns per await (median of {ROUNDS} runs; target <= 10 ns)", paired::median(&t));
}
