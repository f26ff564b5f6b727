//! Timers against tokio's, in the same run, with two workers on both sides.
//!
//! | group | ours (`senders`) | tokio |
//! |---|---|---|
//! | `set_cancel` | [`SET_N`] `spawn(schedule_after(&sch, 1 h), scope.token())` from the main thread, then `scope.request_stop()` and `join` | `tokio::spawn(sleep(1 h))` as many times, then `abort()` each and await the handles; also bare `Sleep` futures, each polled once (which sets the timer) and then dropped |
//! | `fire` | [`FIRE_N`] timers spread over [`SPREAD`], each `spawn(schedule_at(&sch, t).then(record))` | `tokio::spawn(async { sleep_until(t).await; record })` |
//!
//! `set_cancel` is timed by criterion and then in interleaved rounds (ours, tokio, tokio,
//! ours, ...), whose per-round ratios resist the load of a shared machine. `fire`
//! records each timer's lateness (the time from its deadline to the moment its
//! continuation runs) in interleaved rounds and prints the median and the 99th
//! percentile of each side.
//!
//! ```text
//! cargo bench --bench timers
//! ```
//!
//! For profilers, `SENDERS_TIMERS_PROFILE=<side>:<repeats> target/release/deps/timers-*`
//! runs one side of `set_cancel` (`ours`, `tokio_abort` or `tokio_drop`) without
//! criterion.

#[path = "common/paired.rs"]
#[allow(dead_code)] // shared by the benches; this one uses part of it
mod paired;

use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Waker};
use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode, criterion_group};
use paired::{format_ns, median, paired_rounds};
use senders::{CountingScope, SenderExt, StaticThreadPool, schedule_after, schedule_at, spawn, sync_wait};

/// Timers set and cancelled per iteration of `set_cancel`.
const SET_N: usize = 1_000_000;
/// Timers that fire per round of `fire`.
const FIRE_N: usize = 100_000;
/// The span the deadlines of `fire` are spread over.
const SPREAD: Duration = Duration::from_millis(200);
/// Workers on both sides.
const THREADS: usize = 2;
/// The first deadline of `fire` is this far after the round starts, so that every timer
/// is set before any is due (setting them is timed by `set_cancel`, not here).
const LEAD: Duration = Duration::from_millis(300);
const HOUR: Duration = Duration::from_secs(3600);

struct Sides {
    pool: StaticThreadPool,
    rt: tokio::runtime::Runtime,
}

impl Sides {
    fn new() -> Self {
        let threads = paired::threads(THREADS);
        let pool = StaticThreadPool::new(threads).expect("the pool starts");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .enable_time()
            .build()
            .expect("the runtime starts");
        Sides { pool, rt }
    }

    /// Ours: a million pending timers in a scope, all cancelled by one stop request.
    fn ours_set_cancel(&self) {
        let sch = self.pool.scheduler();
        let scope = CountingScope::new();
        for _ in 0..SET_N {
            spawn(schedule_after(&sch, HOUR), scope.token());
        }
        scope.request_stop();
        sync_wait(scope.join()).expect("the join succeeds");
    }

    /// tokio: a million tasks sleeping an hour, each aborted.
    fn tokio_set_abort(&self) {
        self.rt.block_on(async {
            let handles: Vec<_> = (0..SET_N).map(|_| tokio::spawn(tokio::time::sleep(HOUR))).collect();
            for h in &handles {
                h.abort();
            }
            for h in handles {
                let _ = h.await;
            }
        });
    }

    /// tokio's timer alone: a million `Sleep`s, each polled once (which registers it
    /// with the driver), then dropped (which deregisters it). No task, no allocation
    /// per timer beyond the boxed future.
    fn tokio_set_drop(&self) {
        let _in_rt = self.rt.enter();
        let mut cx = Context::from_waker(Waker::noop());
        let mut sleeps: Vec<Pin<Box<tokio::time::Sleep>>> = Vec::with_capacity(SET_N);
        for _ in 0..SET_N {
            let mut s = Box::pin(tokio::time::sleep(HOUR));
            assert!(s.as_mut().poll(&mut cx).is_pending());
            sleeps.push(s);
        }
        drop(black_box(sleeps));
    }

    /// Ours: `FIRE_N` timers over `SPREAD`; returns each one's lateness in ns.
    fn ours_fire(&self) -> Vec<u64> {
        let sch = self.pool.scheduler();
        let late: Arc<Vec<AtomicU64>> = Arc::new((0..FIRE_N).map(|_| AtomicU64::new(u64::MAX)).collect());
        let scope = CountingScope::new();
        let start = Instant::now() + LEAD;
        for i in 0..FIRE_N {
            let at = start + spread(i);
            let late = late.clone();
            let work = schedule_at(&sch, at).then(move |()| late[i].store(nanos_since(at), Ordering::Relaxed));
            spawn(work, scope.token());
        }
        sync_wait(scope.join()).expect("the join succeeds");
        collect(&late)
    }

    /// tokio: `FIRE_N` sleeping tasks over `SPREAD`; returns each one's lateness in ns.
    fn tokio_fire(&self) -> Vec<u64> {
        let late: Arc<Vec<AtomicU64>> = Arc::new((0..FIRE_N).map(|_| AtomicU64::new(u64::MAX)).collect());
        self.rt.block_on(async {
            let start = Instant::now() + LEAD;
            let handles: Vec<_> = (0..FIRE_N)
                .map(|i| {
                    let at = start + spread(i);
                    let late = late.clone();
                    tokio::spawn(async move {
                        tokio::time::sleep_until(at.into()).await;
                        late[i].store(nanos_since(at), Ordering::Relaxed);
                    })
                })
                .collect();
            for h in handles {
                h.await.expect("the task completes");
            }
        });
        collect(&late)
    }
}

/// The `i`-th deadline's offset: spread over `SPREAD` in a scrambled order.
fn spread(i: usize) -> Duration {
    let k = (i as u64).wrapping_mul(2_654_435_761) % FIRE_N as u64;
    SPREAD.mul_f64(k as f64 / FIRE_N as f64)
}

fn nanos_since(at: Instant) -> u64 {
    u64::try_from(Instant::now().saturating_duration_since(at).as_nanos()).unwrap_or(u64::MAX)
}

/// The recorded latenesses, each checked to be set (every timer fired once).
fn collect(late: &[AtomicU64]) -> Vec<u64> {
    let v: Vec<u64> = late.iter().map(|l| l.load(Ordering::Relaxed)).collect();
    assert!(v.iter().all(|&l| l != u64::MAX), "every timer fired");
    v
}

fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn set_cancel(c: &mut Criterion) {
    let sides = Sides::new();
    let mut g = c.benchmark_group("set_cancel");
    g.sample_size(10).sampling_mode(SamplingMode::Flat);
    g.bench_function("ours_spawn_stop", |b| b.iter(|| sides.ours_set_cancel()));
    g.bench_function("tokio_spawn_abort", |b| b.iter(|| sides.tokio_set_abort()));
    g.bench_function("tokio_sleep_drop", |b| b.iter(|| sides.tokio_set_drop()));
    g.finish();

    println!("\nset_cancel, {SET_N} timers, interleaved rounds (ours, tokio, tokio, ours, ...):");
    let spawned = &|| sides.ours_set_cancel();
    for (ours_name, ours_f, name, base) in [
        ("ours_spawn_stop", spawned as &dyn Fn(), "tokio_spawn_abort", &(|| sides.tokio_set_abort()) as &dyn Fn()),
        ("ours_spawn_stop", spawned, "tokio_sleep_drop", &(|| sides.tokio_set_drop()) as &dyn Fn()),
    ] {
        let rounds = paired_rounds(8, (&mut || ours_f(), 1), (&mut || base(), 1));
        let ratios: Vec<f64> = rounds.iter().map(|(o, b)| o / b).collect();
        let ours: Vec<f64> = rounds.iter().map(|r| r.0).collect();
        let theirs: Vec<f64> = rounds.iter().map(|r| r.1).collect();
        let (lo, hi) = ratios.iter().fold((f64::MAX, f64::MIN), |(l, h), &r| (l.min(r), h.max(r)));
        println!(
            "  {ours_name} {} vs {name} {}: ours ÷ tokio median {:.2}× (range {lo:.2}–{hi:.2})",
            format_ns(median(&ours)),
            format_ns(median(&theirs)),
            median(&ratios),
        );
    }
}

fn fire(_: &mut Criterion) {
    let sides = Sides::new();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..6 {
        if round % 2 == 0 {
            ours.extend(sides.ours_fire());
            theirs.extend(sides.tokio_fire());
        } else {
            theirs.extend(sides.tokio_fire());
            ours.extend(sides.ours_fire());
        }
    }
    ours.sort_unstable();
    theirs.sort_unstable();
    println!("\nfire, {FIRE_N} timers over {SPREAD:?}, 6 interleaved rounds: lateness after the deadline");
    for (name, v) in [("ours", &ours), ("tokio", &theirs)] {
        println!(
            "  {name:<6} median {:>10}  p99 {:>10}  max {:>10}",
            format_ns(percentile(v, 0.5) as f64),
            format_ns(percentile(v, 0.99) as f64),
            format_ns(*v.last().expect("timers fired") as f64),
        );
    }
}

/// Runs `SENDERS_TIMERS_PROFILE=<side>:<repeats>` if set; returns whether it did.
fn profile() -> bool {
    let Ok(spec) = std::env::var("SENDERS_TIMERS_PROFILE") else { return false };
    let (side, repeats) = spec.split_once(':').expect("SENDERS_TIMERS_PROFILE=<side>:<repeats>");
    let repeats: usize = repeats.parse().expect("a number of repeats");
    let sides = Sides::new();
    let run: &dyn Fn() = match side {
        "ours" => &|| sides.ours_set_cancel(),
        "tokio_abort" => &|| sides.tokio_set_abort(),
        "tokio_drop" => &|| sides.tokio_set_drop(),
        other => panic!("unknown side {other}"),
    };
    let start = Instant::now();
    for _ in 0..repeats {
        run();
    }
    println!("{side}: {} per run", format_ns(start.elapsed().as_nanos() as f64 / repeats as f64));
    true
}

// No plots: criterion's plotting backend fails where it finds no font.
criterion_group! {
    name = benches;
    config = Criterion::default().without_plots().warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(5));
    targets = set_cancel, fire
}

fn main() {
    if !profile() {
        benches();
        Criterion::default().configure_from_args().final_summary();
    }
}
