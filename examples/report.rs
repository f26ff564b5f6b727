//! The comparison report: every workload of `benches/` run against rayon (and tokio
//! where it has a counterpart) in one process, with the same number of workers
//! ([`THREADS`] by default, `--threads N` to choose) on every side.
//!
//! ```text
//! cargo run --release --example report            # --quick, the default: well under a minute
//! cargo run --release --example report -- --full  # the benches' sizes: about 100 s
//! cargo run --release --example report -- --threads 8  # 8 workers on every side
//! cargo run --release --example report -- --redraw docs/report.md  # the chart of a saved run
//! ```
//!
//! Each workload is timed in interleaved rounds: every round times one batch of each
//! side (a batch lasts about [`Mode::batch_ns`]), and the side that goes first rotates
//! from round to round, so that the background load of a shared machine falls on all
//! sides alike. The report gives the median time per call over the rounds. A progress
//! bar (`indicatif`, on standard error) follows the workloads.
//!
//! It prints a markdown table (workload, our median, rayon's, ours ÷ rayon, tokio's and
//! ours ÷ tokio) and writes, under `target/report/`:
//! - `report.md`: the same table, with the date, the mode and the machine;
//! - `report.svg` and `report.png`: a chart (`plotters`) of every workload that has a
//!   rayon counterpart, as horizontal bars of time ÷ rayon's time on a log scale (rayon
//!   = 1.0, lower is better), ours and, where it has a counterpart, tokio's.
//!
//! The chart's text is drawn with the first font of [`FONTS`] found on the machine
//! (plotters' `ab_glyph` feature, which reads no system font by itself); without one,
//! the chart is drawn without text and the program says so.
//!
//! The workloads, written with the public API as a user would (see [`workloads`]):
//!
//! | workload | ours | rayon | tokio |
//! |---|---|---|---|
//! | fib via `when_all` | `AnySender` recursion, `when_all` of both calls per node | `rayon::join` | — |
//! | fib via `fork_join` | the same node as `fork_join(\|\| fib(n - 1), \|\| fib(n - 2))` | `rayon::join` | — |
//! | fib via `spawn_future` | each node spawns its two children into a `CountingScope` (`starts_on` the pool) and joins their futures with `when_all` | `rayon::join` | — |
//! | tree via `when_all` | the same for a full binary tree | `rayon::join` | — |
//! | fib, tree and `n!` by nested `sync_wait` | plain recursive functions that `sync_wait(when_all(..))` their two children, scheduled on the pool, from a worker (`benches/common/nested.rs`); `n!` is rayon-demo's factorial, a product of big integers | `rayon::join` | — |
//! | 100 trees of 1023 nodes from a worker | chili's benchmark: one `Task` on a worker awaits 100 trees via `when_all` in turn, so each tree forks from a worker that is already running | one `install` running 100 `rayon::join` trees | — |
//! | 8-ary tree via `when_all_iter` | `AnySender` recursion, a run-time `when_all` of the eight children per node | `par_iter().map(..).sum()` | — |
//! | `bulk` of 8 items of 2 ms | a small, expensive bulk on the pool | `par_iter().for_each` | — |
//! | `Task` fib | one `Task` per node, children awaited with `when_all` | `rayon::join` | `tokio::spawn` per child |
//! | tree, `spawn` per node | `CountingScope`, one `spawn` per node from the workers | `rayon::scope` + `s.spawn` | — |
//! | tree, `let_async_scope` | the same in a `let_async_scope` | `rayon::join` | — |
//! | tree, ~300 ns per node | `CountingScope` as above, with spinning per node | `rayon::join` | — |
//! | empty spawns from `main` | `spawn(schedule(..))` into a `CountingScope` from the main thread | `in_place_scope` + `s.spawn` | `tokio::spawn` + awaiting the handles |
//! | schedule chain | one `Task` awaiting `schedule` [`SCHED_N`] times on a worker | chained `rayon::spawn`s | `yield_now` in a spawned task |
//! | schedule fan-out | [`SCHED_N`] `spawn`s of `schedule` in a `let_async_scope` on a worker | `rayon::scope` + `s.spawn` | `tokio::spawn`s from a task, awaited |
//! | round trip main → worker → main | `sync_wait(schedule(&sch))` | `pool.install(\|\| ())` | `block_on` of a `spawn`ed empty task |
//! | `bulk_each`, memory bound / compute bound | `starts_on(sch, just(v).bulk_each(..))` | `par_iter_mut().for_each` | — |
//! | sum of `u64`s | `bulk_reduce` (a fold per chunk, then the combines) | `par_iter().fold(..).reduce(..)` | — |
//! | scale the rows of a matrix | `bulk_chunks_mut` | `par_chunks_mut(..).enumerate().for_each(..)` | — |
//! | mergesort, matmul z-order, Strassen | `examples/mergesort.rs`, `matmul.rs`, `strassen.rs`: divide and conquer with `let_value_ref` lending parts of a buffer to the children | the same programs with `rayon::join` (`benches/common/lend_rayon.rs`) | — |
//! | UTS T1, T3 and nqueens(12) | the forms of `benches/trees.rs` (`--quick`: T1's `CountingScope` spawn form; `--full`: every form on T1, that one on T3 and nqueens(12)) | `par_iter` over the children | — |
//! | sieve, word count, dot product, sum of squares, mandelbrot by rows and by pixels | `benches/common/data.rs`: `bulk_chunks_mut_with`, `bulk_reduce` with a `HashMap` per accumulator, `bulk_map_reduce`, `bulk_chunks_mut`, `bulk_each` | rayon's idiomatic form of each (the row names it) | — |
//! | map-collect, filter-collect, sorts (`--full`) | `benches/common/collect.rs` and `sort.rs`: `bulk_map_collect`, `bulk_filter_map_collect`, `bulk_sort`, `bulk_sort_unstable` on random and sorted input | `par_iter().map(..).collect()`, `.filter(..).copied().collect()`, `par_sort`, `par_sort_unstable` | — |
//! | `sync_wait(just(1).then(..))` | an inline pipeline, no pool | — | — |
//! | inline await | `just(i).await` in one `Task` under `sync_wait` | — | — |
//!
//! Where rayon's side is a different construct from ours (the scope rows: `rayon::scope`
//! for `CountingScope`, `rayon::join` for `let_async_scope` and the tree with work), the
//! row's name in the table and on the chart says which.
//!
//! Every workload's result is checked once, before it is timed: all sides must agree.
//! The criterion benches in `benches/` remain the reference for careful measurements.

#[path = "../benches/common/work.rs"]
mod work;

#[path = "../benches/common/spawn_fib.rs"]
mod spawn_fib;
use spawn_fib::fib_spawned;

#[path = "../benches/common/nested.rs"]
mod nested;

#[path = "mergesort.rs"]
mod mergesort;

#[path = "matmul.rs"]
mod matmul;

#[path = "strassen.rs"]
mod strassen;

#[path = "../benches/common/uts.rs"]
mod uts;

#[path = "../benches/common/nqueens.rs"]
mod nqueens;

#[path = "../benches/common/tree_forms.rs"]
mod tree_forms;

#[path = "../benches/common/lend_rayon.rs"]
mod lend_rayon;

#[path = "../benches/common/data.rs"]
mod data;

#[path = "../benches/common/collect.rs"]
mod collect;

#[path = "../benches/common/sort.rs"]
#[allow(dead_code)] // the bench's interleaved rounds; the report has its own
mod par_sort;
use lend_rayon::{rayon_mul_add, rayon_sort, rayon_strassen};

use std::convert::Infallible;
use std::fmt::Write as _;
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressStyle};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use rayon::prelude::*;
use senders::{
    AnySender, CountingScope, CountingToken, LetScopeToken, PoolScheduler, SenderExt, Spawnable, StaticThreadPool,
    Task, fork_join, just, schedule, spawn, starts_on, sync_wait, sync_wait_value, when_all, when_all_iter,
};
use work::{calibrate, spin};

/// Workers of our pool, of rayon's and of tokio's runtime, unless `--threads` says
/// otherwise.
const THREADS: usize = 2;
/// Hops of the schedule chain and jobs of the schedule fan-out.
const SCHED_N: usize = 10_000;
/// Nanoseconds of spinning per node in the "~300 ns per node" tree.
const WORK_NS: f64 = 300.0;
/// Font files tried, in order, for the chart's text.
const FONTS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/Library/Fonts/Arial.ttf",
    "C:\\Windows\\Fonts\\arial.ttf",
];

// ---------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------

/// How long and how big: `--quick` (the default) or `--full`.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Quick,
    Full,
}

/// What the command line asks for.
struct Options {
    mode: Mode,
    /// Workers on every side (at least 1).
    threads: usize,
    /// `--redraw FILE`: no run; the table and chart are rewritten from a `report.md`
    /// written earlier (on another machine, say).
    redraw: Option<PathBuf>,
}

impl Options {
    /// Reads `--quick` / `--full`, `--threads N` and `--redraw FILE` from the command
    /// line; anything else is an error.
    fn from_args() -> Options {
        let usage = |why: String| -> ! {
            eprintln!("{why}; usage: report [--quick | --full] [--threads N] | report --redraw REPORT.md");
            std::process::exit(2);
        };
        let mut options = Options { mode: Mode::Quick, threads: THREADS, redraw: None };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => options.mode = Mode::Quick,
                "--full" => options.mode = Mode::Full,
                "--threads" => {
                    options.threads = match args.next().map(|n| n.parse::<usize>()) {
                        Some(Ok(n)) if n > 0 => n,
                        _ => usage("--threads takes a number of workers, at least 1".to_string()),
                    }
                }
                "--redraw" => match args.next() {
                    Some(file) => options.redraw = Some(PathBuf::from(file)),
                    None => usage("--redraw takes the report.md to draw".to_string()),
                },
                other => usage(format!("unknown option {other:?}")),
            }
        }
        options
    }
}

impl Mode {
    /// The option's name, without the dashes.
    fn name(self) -> &'static str {
        match self {
            Mode::Quick => "quick",
            Mode::Full => "full",
        }
    }

    /// Interleaved rounds per workload.
    fn rounds(self) -> usize {
        match self {
            Mode::Quick => 11,
            Mode::Full => 21,
        }
    }

    /// Nanoseconds one timed batch should last.
    fn batch_ns(self) -> f64 {
        match self {
            Mode::Quick => 30e6,
            Mode::Full => 100e6,
        }
    }

    /// `quick` or `full`, whichever this mode is.
    fn pick<T>(self, quick: T, full: T) -> T {
        match self {
            Mode::Quick => quick,
            Mode::Full => full,
        }
    }
}

// ---------------------------------------------------------------------------------------
// The workloads
// ---------------------------------------------------------------------------------------

/// `fib(n)` with both calls in a `when_all`; a node builds its children when it runs.
fn fib_when_all(n: u64) -> AnySender<'static, u64> {
    if n < 2 {
        return just(n).boxed();
    }
    just(()).let_value(move |()| when_all((fib_when_all(n - 1), fib_when_all(n - 2))).then(|(a, b)| a + b)).boxed()
}

/// [`fib_when_all`] with `fork_join`: the node's `when_all` builds its children.
fn fib_fork_join(n: u64) -> AnySender<'static, u64> {
    if n < 2 {
        return just(n).boxed();
    }
    fork_join(move || fib_fork_join(n - 1), move || fib_fork_join(n - 2)).then(|(a, b)| a + b).boxed()
}

/// A full binary tree of depth `d` through `when_all`; its value is its node count.
fn tree_when_all(d: u32) -> AnySender<'static, u64> {
    if d <= 1 {
        return just(1).boxed();
    }
    just(())
        .let_value(move |()| when_all((tree_when_all(d - 1), tree_when_all(d - 1))).then(|(a, b)| a + b + 1))
        .boxed()
}

/// An 8-ary tree of depth `d`: each node sums its children's values through `when_all`
/// of a run-time number of children; its value is its node count.
fn tree8_when_all(d: u32) -> AnySender<'static, u64> {
    if d == 0 {
        return just(1).boxed();
    }
    just(())
        .let_value(move |()| {
            when_all_iter((0..8).map(move |_| tree8_when_all(d - 1))).then(|v| v.iter().sum::<u64>() + 1)
        })
        .boxed()
}

/// The same with rayon: `par_iter().map(..).sum()` over the children.
fn tree8_rayon(d: u32) -> u64 {
    if d == 0 { 1 } else { (0..8).into_par_iter().map(|_| tree8_rayon(d - 1)).sum::<u64>() + 1 }
}

/// Busy-waits `ms` milliseconds: an item whose cost is its time.
fn spin_ms(ms: u64) {
    let start = std::time::Instant::now();
    while start.elapsed() < std::time::Duration::from_millis(ms) {
        std::hint::spin_loop();
    }
}

/// `fib(n)` with one `Task` per node.
fn fib_task(n: u64) -> Task<'static, u64, Infallible> {
    Task::new(async move {
        if n < 2 {
            return Ok(n);
        }
        let (a, b) = when_all((fib_task(n - 1), fib_task(n - 2))).await?;
        Ok(a + b)
    })
}

/// `fib(n)` with `rayon::join` per node.
fn fib_rayon(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

/// `fib(n)` with a `tokio::spawn` per child, the handles awaited.
fn fib_tokio(n: u64) -> std::pin::Pin<Box<dyn Future<Output = u64> + Send>> {
    Box::pin(async move {
        if n < 2 {
            return n;
        }
        let a = tokio::spawn(fib_tokio(n - 1));
        let b = tokio::spawn(fib_tokio(n - 2));
        a.await.expect("fib task") + b.await.expect("fib task")
    })
}

/// A tree of depth `d` with `rayon::join` per node and `iters` of spinning per node;
/// returns its node count.
fn tree_join(d: u32, iters: u64) -> u64 {
    if iters > 0 {
        spin(iters);
    }
    if d <= 1 {
        return 1;
    }
    let (a, b) = rayon::join(|| tree_join(d - 1, iters), || tree_join(d - 1, iters));
    a + b + 1
}

/// One node of the spawned tree: its work, then one `spawn` per child, each counting
/// itself in `nodes`.
fn spawn_node(sch: &'static PoolScheduler, tk: CountingToken, d: u32, iters: u64, nodes: &'static Counter) {
    nodes.add();
    if iters > 0 {
        spin(iters);
    }
    if d > 1 {
        for _ in 0..2 {
            spawn(schedule(sch).then(move |()| spawn_node(sch, tk, d - 1, iters, nodes)), tk);
        }
    }
}

/// The spawned tree in a fresh `CountingScope`, joined; returns its node count.
fn spawn_tree(sch: &'static PoolScheduler, d: u32, iters: u64, nodes: &'static Counter) -> u64 {
    let scope = CountingScope::new();
    let tk = scope.token();
    spawn(schedule(sch).then(move |()| spawn_node(sch, tk, d, iters, nodes)), tk);
    sync_wait(scope.join()).expect("join");
    nodes.take()
}

/// The token of a `let_async_scope` started on the pool.
type LetToken<'s, 'e> = LetScopeToken<'s, 'e, PoolScheduler>;

/// One node of the `let_async_scope` tree: the scheduler and the counter are borrowed.
fn let_node<'s, 'e>(
    tk: LetToken<'s, 'e>,
    sch: &'s PoolScheduler,
    d: u32,
    nodes: &'s Counter,
) -> impl Spawnable<LetToken<'s, 'e>> {
    schedule(sch).then(move |()| {
        nodes.add();
        if d > 1 {
            for _ in 0..2 {
                spawn(let_node(tk, sch, d - 1, nodes), tk);
            }
        }
    })
}

/// The tree in a `let_async_scope` started on the pool; returns its node count.
fn let_tree(sch: &PoolScheduler, d: u32, nodes: &Counter) -> u64 {
    let work = just(()).let_async_scope(|tk, ()| {
        spawn(let_node(tk, sch, d, nodes), tk);
    });
    sync_wait(starts_on(sch.clone(), work)).expect("let_async_scope tree");
    nodes.take()
}

/// The tree with `rayon::scope` and one `s.spawn` per node.
fn rayon_scope_node<'s>(s: &rayon::Scope<'s>, d: u32, nodes: &'s Counter) {
    nodes.add();
    if d > 1 {
        for _ in 0..2 {
            s.spawn(move |s| rayon_scope_node(s, d - 1, nodes));
        }
    }
}

/// A node counter shared by the workers: one relaxed add per node on a cache-padded
/// shard of the calling thread, the same on every side of a comparison. (One shared word
/// would make the workers of a spawned tree, which run nodes side by side, fight over
/// its cache line, and charge our side for it far more than a `rayon::join` tree, which
/// runs on one worker until a steal.)
struct Counter([crossbeam_utils::CachePadded<std::sync::atomic::AtomicU64>; COUNTER_SHARDS]);

/// Shards of a [`Counter`]; threads share one only beyond this many.
const COUNTER_SHARDS: usize = 16;

impl Counter {
    /// A counter at zero.
    const fn new() -> Counter {
        Counter([const { crossbeam_utils::CachePadded::new(std::sync::atomic::AtomicU64::new(0)) }; COUNTER_SHARDS])
    }

    /// Counts one node.
    fn add(&self) {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        thread_local! {
            static SHARD: usize = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % COUNTER_SHARDS;
        }
        self.0[SHARD.with(|s| *s)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// The count so far, reset to zero.
    fn take(&self) -> u64 {
        self.0.iter().map(|s| s.swap(0, std::sync::atomic::Ordering::Relaxed)).sum()
    }
}

/// The counter of our spawned trees (`'static`, as `CountingScope` spawns need).
static SPAWN_NODES: Counter = Counter::new();

/// A loop body bound by memory bandwidth.
fn add_one(x: &mut f64) {
    *x += 1.0;
}

/// A loop body bound by computation.
fn sin_sqrt(x: &mut f64) {
    *x = x.sqrt().sin() + 1.0;
}

/// The pools of every side.
struct Pools {
    sch: &'static PoolScheduler,
    rayon: rayon::ThreadPool,
    tokio: tokio::runtime::Runtime,
}

impl Pools {
    /// `threads` workers each; our pool lives as long as the process.
    fn new(threads: usize) -> Pools {
        let pool: &'static StaticThreadPool = Box::leak(Box::new(StaticThreadPool::new(threads).expect("our pool")));
        Pools {
            sch: Box::leak(Box::new(pool.scheduler())),
            rayon: rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool"),
            tokio: tokio::runtime::Builder::new_multi_thread().worker_threads(threads).build().expect("tokio runtime"),
        }
    }
}

/// One timed routine; it returns a value that every side of its workload must agree on.
type Routine<'a> = Box<dyn FnMut() -> u64 + 'a>;

/// One row of the report.
struct Workload<'a> {
    name: String,
    /// What rayon's side runs, where the name alone does not say (the chart's bar and
    /// the table's row name it).
    baseline: Option<&'static str>,
    ours: Routine<'a>,
    rayon: Option<Routine<'a>>,
    tokio: Option<Routine<'a>>,
}

impl<'a> Workload<'a> {
    /// A workload with only our side.
    fn new(name: impl Into<String>, ours: impl FnMut() -> u64 + 'a) -> Self {
        Workload { name: name.into(), baseline: None, ours: Box::new(ours), rayon: None, tokio: None }
    }

    /// Names rayon's side: the row reads "name, rayon: baseline".
    fn against(mut self, baseline: &'static str) -> Self {
        self.baseline = Some(baseline);
        self
    }

    /// Adds rayon's side.
    fn rayon(mut self, f: impl FnMut() -> u64 + 'a) -> Self {
        self.rayon = Some(Box::new(f));
        self
    }

    /// Adds tokio's side.
    fn tokio(mut self, f: impl FnMut() -> u64 + 'a) -> Self {
        self.tokio = Some(Box::new(f));
        self
    }
}

/// A `bulk_each` workload over `len` elements with `kernel`, ours against
/// `par_iter_mut`; each side keeps its own vector and moves it through every call.
fn bulk<'a>(name: &str, p: &'a Pools, len: usize, kernel: fn(&mut f64)) -> Workload<'a> {
    let data = || Some((0..len).map(|i| (i % 1000) as f64 * 1e-3).collect::<Vec<f64>>());
    let checksum = |v: &[f64]| v.iter().step_by(4096).map(|x| x.to_bits() >> 40).fold(0, u64::wrapping_add);
    let (mut ours, mut theirs) = (data(), data());
    Workload::new(format!("{name} ({} Mi f64)", len >> 20), move || {
        let v = ours.take().expect("vector");
        let v = sync_wait(starts_on(p.sch.clone(), just(v).bulk_each(move |_, x: &mut f64| kernel(x))))
            .expect("bulk_each")
            .expect("not stopped");
        let sum = checksum(&v);
        ours = Some(v);
        sum
    })
    .rayon(move || {
        let v = theirs.as_mut().expect("vector");
        p.rayon.install(|| v.par_iter_mut().for_each(kernel));
        checksum(v)
    })
}

/// `bulk_reduce` summing `n` numbers, against rayon's `fold` + `reduce`.
fn reduce_sum(p: &Pools, n: usize) -> Workload<'_> {
    let (ours, theirs) = ((0..n as u64).collect::<Vec<u64>>(), (0..n as u64).collect::<Vec<u64>>());
    Workload::new(format!("sum of {} Mi `u64` (`bulk_reduce`), rayon: `fold` + `reduce`", n >> 20), move || {
        let data = &ours[..];
        let sum = schedule(p.sch).then(move |()| data).bulk_reduce(
            data.len(),
            || 0,
            |acc, b, e, v: &&[u64]| acc + v[b..e].iter().sum::<u64>(),
            |a, b| a + b,
        );
        sync_wait_value(sum)
    })
    .rayon(move || p.rayon.install(|| theirs.par_iter().fold(|| 0, |a, &x| a + x).reduce(|| 0, |a, b| a + b)))
}

/// `bulk_chunks_mut` scaling each row of an `n` × 1024 matrix, against
/// `par_chunks_mut`; each side keeps its own matrix.
fn scale_rows(p: &Pools, n: usize) -> Workload<'_> {
    const SIDE: usize = 1024;
    let factor = |r: usize| 1.0 + (r % 7) as f64 * 1e-3;
    let checksum = |m: &[f64]| m.iter().step_by(4093).map(|x| x.to_bits() >> 32).fold(0, u64::wrapping_add);
    let (mut ours, mut theirs) = (vec![1.0f64; n], vec![1.0f64; n]);
    Workload::new(
        format!("scale the rows of {} Mi f64 (`bulk_chunks_mut`), rayon: `par_chunks_mut`", n >> 20),
        move || {
            let m = &mut ours[..];
            let scaled = schedule(p.sch).then(move |()| m).bulk_chunks_mut(SIDE, move |r, row: &mut [f64]| {
                let k = factor(r);
                row.iter_mut().for_each(|x| *x *= k);
            });
            checksum(sync_wait_value(scaled))
        },
    )
    .rayon(move || {
        p.rayon.install(|| {
            theirs.par_chunks_mut(SIDE).enumerate().for_each(|(r, row)| {
                let k = factor(r);
                row.iter_mut().for_each(|x| *x *= k);
            })
        });
        checksum(&theirs)
    })
}

/// Mergesort of `n` numbers, `let_value_ref` lending the halves to the children
/// (`examples/mergesort.rs`), against the same program with `rayon::join`. Each side
/// sorts a fresh copy of one input with a scratch buffer of its own.
fn sort(p: &Pools, n: usize) -> Workload<'_> {
    let unsorted = mergesort::input(n);
    let checksum =
        |v: &[u32]| v.iter().step_by(997).enumerate().map(|(i, &x)| i as u64 * u64::from(x)).fold(0, u64::wrapping_add);
    let (ours_in, theirs_in) = (unsorted.clone(), unsorted);
    let (mut ours, mut ours_buf, mut theirs, mut theirs_buf) = (Vec::new(), vec![0; n], Vec::new(), vec![0; n]);
    Workload::new(format!("mergesort of {} Ki `u32`", n >> 10), move || {
        ours.clone_from(&ours_in);
        sync_wait_value(starts_on(p.sch.clone(), mergesort::sort(&mut ours, &mut ours_buf)));
        checksum(&ours)
    })
    .rayon(move || {
        theirs.clone_from(&theirs_in);
        p.rayon.install(|| rayon_sort(&mut theirs, &mut theirs_buf));
        checksum(&theirs)
    })
}

/// A product of two `n` × `n` matrices (z-order), `ours` on our pool against `theirs`
/// inside rayon's.
fn matrix_product<'a>(
    name: String,
    p: &'a Pools,
    n: usize,
    ours: impl Fn(&PoolScheduler, &[f32], &[f32], usize) -> Vec<f32> + 'a,
    theirs: impl Fn(&[f32], &[f32], usize) -> Vec<f32> + Send + Sync + 'a,
) -> Workload<'a> {
    let (a, b) = (matmul::input(n, 1), matmul::input(n, 2));
    let (ra, rb) = (a.clone(), b.clone());
    let checksum = |m: &[f32]| m.iter().step_by(61).map(|x| u64::from(x.to_bits())).fold(0, u64::wrapping_add);
    Workload::new(name, move || checksum(&ours(p.sch, &a, &b, n)))
        .rayon(move || checksum(&p.rayon.install(|| theirs(&ra, &rb, n))))
}

/// The data-parallel programs of `benches/common/data.rs`, each side's result checked
/// against the sequential program's on every call.
fn data_workloads(p: &Pools, mode: Mode) -> Vec<Workload<'_>> {
    let ctx = data::Ctx { sch: p.sch, rayon: &p.rayon };
    data::cases(ctx, mode.pick(data::Sizes::QUICK, data::Sizes::BENCH), &|_| true)
        .into_iter()
        .map(|c| {
            let data::DataCase { name, title, baseline, mut ours, mut rayon, expected } = c;
            Workload::new(title, move || {
                let got = ours();
                assert_eq!(got, expected, "{name}: our output");
                got
            })
            .rayon(move || {
                let got = rayon();
                assert_eq!(got, expected, "{name}: rayon's output");
                got
            })
            .against(baseline)
        })
        .collect()
}

/// The parallel collects of `benches/common/collect.rs` (4 Mi `u64`) against rayon's
/// `map(..).collect()` and `filter(..).copied().collect()`, checked once against the
/// sequential results before they are timed.
fn collect_workloads(p: &Pools) -> Vec<Workload<'_>> {
    let input: &'static [u64] = collect::data().leak();
    collect::check(p.sch, &p.rayon, input);
    let len = |v: Vec<u64>| v.len() as u64;
    vec![
        Workload::new("map-collect of 4 Mi `u64` (`bulk_map_collect`)".to_string(), move || {
            len(collect::map_collect(p.sch, input))
        })
        .rayon(move || len(p.rayon.install(|| collect::rayon_map_collect(input))))
        .against("`par_iter().map(..).collect()`"),
        Workload::new("filter-collect of 4 Mi `u64` (`bulk_filter_map_collect`)".to_string(), move || {
            len(collect::filter_collect(p.sch, input))
        })
        .rayon(move || len(p.rayon.install(|| collect::rayon_filter_collect(input))))
        .against("`par_iter().filter(..).copied().collect()`"),
    ]
}

/// The parallel sorts of `benches/common/sort.rs` (4 Mi `u32`, random and already
/// sorted), stable and unstable, against `par_sort` and `par_sort_unstable`: each call
/// sorts a fresh copy of the input (the copy is timed on both sides alike), checked once
/// against the sequential sort.
fn sort_workloads(p: &Pools) -> Vec<Workload<'_>> {
    let mut work = Vec::new();
    for (input_name, input) in par_sort::inputs().into_iter().filter(|(name, _)| *name != "reversed") {
        let input: &'static [u32] = input.leak();
        for stable in [true, false] {
            par_sort::check(p.sch, &p.rayon, input, stable);
            let (ours_name, rayon_name) =
                if stable { ("bulk_sort", "par_sort") } else { ("bulk_sort_unstable", "par_sort_unstable") };
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            work.push(
                Workload::new(format!("`{ours_name}` of 4 Mi {input_name} `u32`"), move || {
                    ours.clear();
                    ours.extend_from_slice(input);
                    par_sort::ours(p.sch, &mut ours, stable);
                    u64::from(ours[ours.len() / 2])
                })
                .rayon(move || {
                    theirs.clear();
                    theirs.extend_from_slice(input);
                    par_sort::rayon(&p.rayon, &mut theirs, stable);
                    u64::from(theirs[theirs.len() / 2])
                })
                .against(rayon_name),
            );
        }
    }
    work
}

/// Every workload of the report, sized for `mode`.
fn workloads(p: &Pools, mode: Mode) -> Vec<Workload<'_>> {
    let sch = p.sch;
    let fib_n = mode.pick(25, 30);
    let task_fib_n = mode.pick(20, 25);
    let spawned_fib_n = mode.pick(20, 25);
    let depth = mode.pick(18, 20);
    let tree8_depth = mode.pick(6, 7);
    let work_depth = mode.pick(16, 20);
    let flat_n: usize = mode.pick(1 << 18, 1 << 20);
    let bulk_len: usize = mode.pick(1 << 22, 1 << 24);
    let awaits: u64 = mode.pick(100_000, 1_000_000);
    let sort_n: usize = mode.pick(1 << 18, 1 << 20);
    let factorial_n: u32 = mode.pick(4999, 9999);
    let reduce_n: usize = mode.pick(1 << 20, 1 << 22);
    let matrix_n: usize = mode.pick(256, 512);
    let iters = calibrate(WORK_NS);
    let let_nodes = Box::leak(Box::new(Counter::new()));
    let rayon_nodes = Box::leak(Box::new(Counter::new()));

    vec![
        Workload::new(format!("fib({fib_n}) via `when_all`"), move || {
            sync_wait(starts_on(sch.clone(), fib_when_all(black_box(fib_n)))).unwrap().unwrap()
        })
        .rayon(move || p.rayon.install(|| fib_rayon(black_box(fib_n)))),
        Workload::new(format!("fib({fib_n}) via `fork_join`"), move || {
            sync_wait(starts_on(sch.clone(), fib_fork_join(black_box(fib_n)))).unwrap().unwrap()
        })
        .rayon(move || p.rayon.install(|| fib_rayon(black_box(fib_n)))),
        Workload::new(format!("fib({spawned_fib_n}) via `spawn_future`"), move || {
            fib_spawned(sch, black_box(spawned_fib_n))
        })
        .rayon(move || p.rayon.install(|| fib_rayon(black_box(spawned_fib_n)))),
        Workload::new(format!("tree 2^{depth} via `when_all`"), move || {
            sync_wait(starts_on(sch.clone(), tree_when_all(black_box(depth)))).unwrap().unwrap()
        })
        .rayon(move || p.rayon.install(|| tree_join(black_box(depth), 0))),
        Workload::new(format!("fib({fib_n}) by nested `sync_wait(when_all(..))`"), move || {
            sync_wait_value(schedule(sch).then(move |()| nested::nested_fib(black_box(fib_n), sch)))
        })
        .rayon(move || p.rayon.install(|| fib_rayon(black_box(fib_n)))),
        Workload::new(format!("tree 2^{depth} by nested `sync_wait(when_all(..))`"), move || {
            sync_wait_value(schedule(sch).then(move |()| nested::nested_tree(black_box(depth), sch)))
        })
        .rayon(move || p.rayon.install(|| tree_join(black_box(depth), 0))),
        Workload::new(format!("{factorial_n}! by nested `sync_wait(when_all(..))`"), move || {
            let f =
                sync_wait_value(schedule(sch).then(move |()| nested::nested_product(1, black_box(factorial_n), sch)));
            f.bits() + f.trailing_zeros()
        })
        .rayon(move || {
            let f = p.rayon.install(|| nested::rayon_product(1, black_box(factorial_n)));
            f.bits() + f.trailing_zeros()
        }),
        Workload::new(format!("8-ary tree of depth {tree8_depth} via `when_all_iter`"), move || {
            sync_wait(starts_on(sch.clone(), tree8_when_all(black_box(tree8_depth)))).unwrap().unwrap()
        })
        .rayon(move || p.rayon.install(|| tree8_rayon(black_box(tree8_depth)))),
        Workload::new("100 trees of 1023 nodes from a worker (chili's bench)", move || {
            let trees = Task::<u64, Infallible>::new(async {
                let mut nodes = 0;
                for _ in 0..100 {
                    nodes += tree_when_all(black_box(10)).await?;
                }
                Ok(nodes)
            });
            sync_wait(starts_on(sch.clone(), trees)).unwrap().unwrap()
        })
        .rayon(move || p.rayon.install(|| (0..100).map(|_| tree_join(black_box(10), 0)).sum())),
        Workload::new("`bulk` of 8 items of 2 ms", move || {
            sync_wait(schedule(sch).bulk(8, |_, ()| spin_ms(2))).unwrap().unwrap();
            8
        })
        .rayon(move || {
            p.rayon.install(|| (0..8).into_par_iter().for_each(|_| spin_ms(2)));
            8
        }),
        Workload::new(format!("`Task` fib({task_fib_n})"), move || {
            sync_wait(starts_on(sch.clone(), fib_task(black_box(task_fib_n)))).unwrap().unwrap()
        })
        .rayon(move || p.rayon.install(|| fib_rayon(black_box(task_fib_n))))
        .tokio(move || p.tokio.block_on(fib_tokio(black_box(task_fib_n)))),
        Workload::new(format!("tree 2^{depth}, `spawn` per node (`CountingScope`)"), move || {
            spawn_tree(sch, depth, 0, &SPAWN_NODES)
        })
        .rayon(move || {
            p.rayon.install(|| rayon::scope(|s| rayon_scope_node(s, depth, rayon_nodes)));
            rayon_nodes.take()
        })
        .against("`rayon::scope`"),
        Workload::new(format!("tree 2^{depth}, `spawn` per node (`let_async_scope`)"), move || {
            let_tree(sch, depth, let_nodes)
        })
        .rayon(move || p.rayon.install(|| tree_join(black_box(depth), 0)))
        .against("`rayon::join`"),
        Workload::new(format!("tree 2^{work_depth}, ~300 ns per node, `spawn` per node"), move || {
            spawn_tree(sch, work_depth, iters, &SPAWN_NODES)
        })
        .rayon(move || p.rayon.install(|| tree_join(black_box(work_depth), iters)))
        .against("`rayon::join`"),
        Workload::new(format!("{} Ki empty spawns from `main`", flat_n >> 10), move || {
            let scope = CountingScope::new();
            let tk = scope.token();
            for _ in 0..flat_n {
                spawn(schedule(sch), tk);
            }
            sync_wait(scope.join()).expect("join");
            flat_n as u64
        })
        .rayon(move || {
            p.rayon.in_place_scope(|s| {
                for _ in 0..flat_n {
                    s.spawn(|_| {});
                }
            });
            flat_n as u64
        })
        .tokio(move || {
            p.tokio.block_on(async {
                let handles: Vec<_> = (0..flat_n).map(|_| tokio::spawn(async {})).collect();
                for h in handles {
                    h.await.expect("empty task");
                }
            });
            flat_n as u64
        }),
        Workload::new(format!("schedule chain ({}k hops on a worker)", SCHED_N / 1000), move || {
            let chain = Task::<u64, Infallible>::new(async move {
                for _ in 0..SCHED_N {
                    schedule(sch).await?;
                }
                Ok(SCHED_N as u64)
            });
            sync_wait(starts_on(sch.clone(), chain)).unwrap().unwrap()
        })
        .rayon(move || {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            p.rayon.spawn(move || rayon_chain(SCHED_N, tx));
            rx.recv().expect("chain finished")
        })
        .tokio(move || {
            p.tokio
                .block_on(p.tokio.spawn(async {
                    for _ in 0..SCHED_N {
                        tokio::task::yield_now().await;
                    }
                    SCHED_N as u64
                }))
                .expect("chain task")
        }),
        Workload::new(format!("schedule fan-out ({}k jobs from a worker)", SCHED_N / 1000), move || {
            let fan = just(()).let_async_scope(move |tk, ()| {
                for _ in 0..SCHED_N {
                    spawn(schedule(sch), tk);
                }
            });
            sync_wait(starts_on(sch.clone(), fan)).expect("fan-out");
            SCHED_N as u64
        })
        .rayon(move || {
            p.rayon.install(|| {
                rayon::scope(|s| {
                    for _ in 0..SCHED_N {
                        s.spawn(|_| ());
                    }
                })
            });
            SCHED_N as u64
        })
        .tokio(move || {
            p.tokio
                .block_on(p.tokio.spawn(async {
                    let handles: Vec<_> = (0..SCHED_N).map(|_| tokio::spawn(async {})).collect();
                    for h in handles {
                        h.await.expect("empty task");
                    }
                    SCHED_N as u64
                }))
                .expect("fan-out task")
        }),
        Workload::new("round trip main → worker → main", move || {
            sync_wait(schedule(sch)).expect("round trip");
            1
        })
        .rayon(move || p.rayon.install(|| 1))
        .tokio(move || p.tokio.block_on(p.tokio.spawn(async { 1 })).expect("empty task")),
        bulk("`bulk_each` x += 1", p, bulk_len, add_one),
        bulk("`bulk_each` x = sin(√x) + 1", p, bulk_len, sin_sqrt),
        reduce_sum(p, reduce_n),
        scale_rows(p, reduce_n),
        sort(p, sort_n),
        matrix_product(
            format!("matmul z-order {matrix_n}²"),
            p,
            matrix_n,
            |sch, a, b, n| {
                let mut dest = vec![0.0f32; n * n];
                sync_wait_value(starts_on(sch.clone(), matmul::mul_add(a, b, &mut dest, n)));
                dest
            },
            |a, b, n| {
                let mut dest = vec![0.0f32; n * n];
                rayon_mul_add(a, b, &mut dest, n);
                dest
            },
        ),
        matrix_product(
            format!("Strassen {matrix_n}²"),
            p,
            matrix_n,
            |sch, a, b, n| sync_wait_value(starts_on(sch.clone(), strassen::multiply(a, b, n))),
            rayon_strassen,
        ),
        Workload::new("`sync_wait(just(1).then(..))`", || {
            sync_wait(just(black_box(1u64)).then(|x| x + 1)).unwrap().unwrap()
        }),
        Workload::new(format!("{}k × `just(i).await` in a `Task`", awaits / 1000), move || {
            sync_wait(Task::<_, Infallible>::new(async move {
                let mut s = 0u64;
                for i in 0..black_box(awaits) {
                    s += just(i).await?;
                }
                Ok(s)
            }))
            .unwrap()
            .unwrap()
        }),
    ]
}

/// The rows of `benches/trees.rs`, each of our forms (`benches/common/tree_forms.rs`)
/// against rayon's `par_iter` form: `--quick` times T1's `CountingScope` spawn form;
/// `--full` every form on T1 and the `CountingScope` spawn form on T3 and nqueens(12)
/// (about 3 minutes more). Every call checks the tree's counts.
fn tree_rows(threads: usize, mode: Mode) -> Vec<Workload<'static>> {
    use uts::TreeWork;
    fn rows<W: TreeWork>(ctx: &'static tree_forms::Ctx, w: W, every: bool, out: &mut Vec<Workload<'static>>) {
        let all = tree_forms::forms::<W>();
        let rayon_run = all.iter().find(|f| f.name == "rayon_par_iter").expect("rayon's par_iter form").run;
        let checked = move |got: uts::Counts| {
            assert_eq!(got, w.expect(), "{}: the counts", w.name());
            got.nodes
        };
        let ours = all.into_iter().filter(|f| !f.rayon && f.name != "seq");
        for f in ours.filter(|f| every || f.name == "counting_spawn") {
            let run = f.run;
            out.push(
                Workload::new(format!("{} ({}k nodes), {}", w.name(), w.expect().nodes / 1000, f.label), move || {
                    checked(run(ctx, w))
                })
                .against("`par_iter`")
                .rayon(move || checked(rayon_run(ctx, w))),
            );
        }
    }
    let ctx: &'static tree_forms::Ctx = Box::leak(Box::new(tree_forms::Ctx::new(threads)));
    let mut out = Vec::new();
    rows(ctx, uts::T1, mode == Mode::Full, &mut out);
    if mode == Mode::Full {
        rows(ctx, uts::T3, false, &mut out);
        rows(ctx, nqueens::NQ12, false, &mut out);
    }
    out
}

/// `left` chained `rayon::spawn`s, the last one sending the count.
fn rayon_chain(left: usize, done: std::sync::mpsc::SyncSender<u64>) {
    if left == 0 {
        done.send(SCHED_N as u64).expect("the report waits for the chain");
    } else {
        rayon::spawn(move || rayon_chain(left - 1, done));
    }
}

// ---------------------------------------------------------------------------------------
// Timing
// ---------------------------------------------------------------------------------------

/// The medians (nanoseconds per call) of one workload.
struct Row {
    name: String,
    ours: f64,
    rayon: Option<f64>,
    tokio: Option<f64>,
}

/// Checks that every side of `w` computes the same value (one call each, which also
/// warms it up and sizes its batch), then times `rounds` interleaved rounds.
fn measure(w: &mut Workload<'_>, mode: Mode) -> Row {
    let mut sides: Vec<&mut Routine<'_>> =
        std::iter::once(&mut w.ours).chain(w.rayon.as_mut()).chain(w.tokio.as_mut()).collect();
    let mut batch = Vec::with_capacity(sides.len());
    let mut want = None;
    for f in &mut sides {
        let start = Instant::now();
        let got = f();
        let ns = start.elapsed().as_nanos() as f64;
        assert_eq!(*want.get_or_insert(got), got, "{}: the sides disagree", w.name);
        batch.push((mode.batch_ns() / ns.max(1.0)).ceil().max(1.0) as u32);
    }
    let mut times = vec![Vec::with_capacity(mode.rounds()); sides.len()];
    for round in 0..mode.rounds() {
        for k in 0..sides.len() {
            let i = (round + k) % sides.len();
            let start = Instant::now();
            for _ in 0..batch[i] {
                black_box(sides[i]());
            }
            times[i].push(start.elapsed().as_nanos() as f64 / f64::from(batch[i]));
        }
    }
    let mut medians = times.iter().map(|t| median(t));
    let ours = medians.next().expect("ours");
    let rayon = w.rayon.as_ref().and_then(|_| medians.next());
    let tokio = w.tokio.as_ref().and_then(|_| medians.next());
    let name = match w.baseline {
        Some(b) => format!("{}, rayon: {b}", w.name),
        None => w.name.clone(),
    };
    Row { name, ours, rayon, tokio }
}

/// The median of `v` (which is not empty).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A duration in nanoseconds, in the unit that reads best.
fn format_ns(ns: f64) -> String {
    match ns {
        ns if ns >= 1e6 => format!("{:.2} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.2} µs", ns / 1e3),
        ns => format!("{ns:.1} ns"),
    }
}

// ---------------------------------------------------------------------------------------
// Output: the table and the chart
// ---------------------------------------------------------------------------------------

/// Today's date (UTC), as `YYYY-MM-DD`.
fn today() -> String {
    let days = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() / 86_400) as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's `civil_from_days`).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// The markdown report: a line on the run, then the table.
fn markdown(rows: &[Row], mode: Mode, threads: usize) -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let threads_arg = if threads == THREADS { String::new() } else { format!(" --threads {threads}") };
    let mut md = format!(
        "Run {} with `cargo run --release --example report -- --{}{threads_arg}`: {threads} workers on every \
         side, {cores} cores seen, {} interleaved rounds per workload, medians per call.\n\n",
        today(),
        mode.name(),
        mode.rounds(),
    );
    md.push_str("| workload | ours (median) | rayon (median) | ours ÷ rayon | tokio (median) | ours ÷ tokio |\n");
    md.push_str("|---|---:|---:|---:|---:|---:|\n");
    let cell = |t: Option<f64>| t.map_or_else(|| "—".to_owned(), format_ns);
    let ratio = |ours: f64, t: Option<f64>| t.map_or_else(|| "—".to_owned(), |t| format!("{:.2}×", ours / t));
    for r in rows {
        writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} |",
            r.name,
            format_ns(r.ours),
            cell(r.rayon),
            ratio(r.ours, r.rayon),
            cell(r.tokio),
            ratio(r.ours, r.tokio),
        )
        .expect("writing to a String");
    }
    md
}

/// Registers the first font of [`FONTS`] found for the chart's text; false if none is.
fn load_font() -> bool {
    FONTS.iter().any(|path| {
        std::fs::read(path).is_ok_and(|bytes| {
            plotters::style::register_font("sans-serif", FontStyle::Normal, Box::leak(bytes.into_boxed_slice())).is_ok()
        })
    })
}

/// Chart size in pixels.
const CHART: (u32, u32) = (1200, 820);
/// The colour of our bars.
const OURS: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
/// The colour of tokio's bars.
const TOKIO: RGBColor = RGBColor(0xff, 0x7f, 0x0e);

/// Draws the chart of every row with a rayon time on `root`: per workload, a bar from
/// rayon's 1.0 to ours ÷ rayon and, if it has one, to tokio ÷ rayon, on a log scale.
/// Text (title, axis, names, values, legend) only if `text`.
fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    rows: &[Row],
    text: bool,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    let rows: Vec<&Row> = rows.iter().filter(|r| r.rayon.is_some()).collect();
    let bars: Vec<(usize, f64, RGBColor)> = rows
        .iter()
        .enumerate()
        .flat_map(|(i, r)| {
            let base = r.rayon.expect("filtered");
            std::iter::once((i, r.ours / base, OURS)).chain(r.tokio.map(|t| (i, t / base, TOKIO)))
        })
        .collect();
    let lo = bars.iter().map(|b| b.1).fold(1.0, f64::min) / 1.6;
    let hi = bars.iter().map(|b| b.1).fold(1.0, f64::max) * 1.6;
    root.fill(&WHITE).map_err(err)?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(16);
    if text {
        builder
            .caption("time ÷ rayon's time (log scale; 1.0 = rayon, lower is better)", ("sans-serif", 20))
            .x_label_area_size(36)
            .y_label_area_size(440);
    }
    let n = rows.len() as f64;
    let mut chart = builder.build_cartesian_2d((lo..hi).log_scale(), 0.0..n).map_err(err)?;
    let mut mesh = chart.configure_mesh();
    mesh.disable_y_mesh().disable_y_axis().light_line_style(WHITE.mix(0.0));
    if text {
        mesh.x_desc("× rayon").x_label_formatter(&|x| format!("{x:.2}"));
    } else {
        mesh.x_labels(0);
    }
    mesh.draw().map_err(err)?;

    // Rows from the top; within a row, ours above tokio.
    let slot = |i: usize, color: RGBColor| {
        let top = n - i as f64 - 0.15;
        if color == OURS { (top - 0.35, top) } else { (top - 0.7, top - 0.35) }
    };
    chart
        .draw_series(bars.iter().map(|&(i, ratio, color)| {
            let (y0, y1) = slot(i, color);
            Rectangle::new([(1.0, y0), (ratio, y1)], color.filled())
        }))
        .map_err(err)?;
    chart.draw_series(std::iter::once(PathElement::new([(1.0, 0.0), (1.0, n)], BLACK.stroke_width(2)))).map_err(err)?;
    if !text {
        return root.present().map_err(err);
    }
    chart
        .draw_series(bars.iter().map(|&(i, ratio, color)| {
            let (y0, y1) = slot(i, color);
            Text::new(
                format!(" {ratio:.2}×"),
                (ratio.max(1.0), (y0 + y1) / 2.0),
                ("sans-serif", 13).into_font().color(&BLACK),
            )
        }))
        .map_err(err)?;
    for (i, r) in rows.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(lo, n - i as f64 - 0.5));
        let name = r.name.replace('`', "");
        let style = ("sans-serif", 14).into_font().color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center));
        root.draw(&Text::new(name, (x - 8, y), style)).map_err(err)?;
    }
    let legend = [(OURS, "senders (ours)"), (TOKIO, "tokio"), (BLACK, "rayon = 1.0")];
    for (k, (color, label)) in legend.iter().enumerate() {
        let (x, y) = (CHART.0 as i32 - 170, 50 + 22 * k as i32);
        root.draw(&Rectangle::new([(x, y - 6), (x + 14, y + 6)], color.filled())).map_err(err)?;
        root.draw(&Text::new(*label, (x + 20, y - 7), ("sans-serif", 14))).map_err(err)?;
    }
    root.present().map_err(err)
}

/// Writes `report.md`, `report.svg` and `report.png` into `dir`.
fn write_outputs(dir: &Path, md: &str, rows: &[Row]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("report.md"), md).map_err(|e| e.to_string())?;
    let text = load_font();
    if !text {
        eprintln!("no font found (tried {FONTS:?}): the chart is drawn without text");
    }
    draw(SVGBackend::new(&dir.join("report.svg"), CHART).into_drawing_area(), rows, text)?;
    draw(BitMapBackend::new(&dir.join("report.png"), CHART).into_drawing_area(), rows, text)
}

/// Parses a duration as [`format_ns`] writes it (`—` is none).
fn parse_ns(cell: &str) -> Result<Option<f64>, String> {
    if cell == "—" {
        return Ok(None);
    }
    let (number, unit) = cell.split_once(' ').ok_or_else(|| format!("not a duration: {cell:?}"))?;
    let number: f64 = number.parse().map_err(|e| format!("{cell:?}: {e}"))?;
    let scale = match unit {
        "ms" => 1e6,
        "µs" => 1e3,
        "ns" => 1.0,
        other => return Err(format!("unknown unit {other:?}")),
    };
    Ok(Some(number * scale))
}

/// The rows of a table that [`markdown`] wrote.
fn parse_rows(md: &str) -> Result<Vec<Row>, String> {
    md.lines()
        .filter(|l| l.starts_with("| ") && !l.starts_with("| workload"))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").map(str::trim).collect();
            let [name, ours, rayon, _, tokio, _] = cells[..] else {
                return Err(format!("not a row of the report: {l:?}"));
            };
            let ours = parse_ns(ours)?.ok_or_else(|| format!("no time of ours: {l:?}"))?;
            Ok(Row { name: name.to_owned(), ours, rayon: parse_ns(rayon)?, tokio: parse_ns(tokio)? })
        })
        .collect()
}

/// Runs every workload with a progress bar, prints the table and writes the report.
fn main() {
    let Options { mode, threads, redraw } = Options::from_args();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/report");
    if let Some(file) = redraw {
        let drawn = std::fs::read_to_string(&file)
            .map_err(|e| format!("{}: {e}", file.display()))
            .and_then(|md| Ok((parse_rows(&md)?, md)))
            .and_then(|(rows, md)| write_outputs(&dir, &md, &rows));
        match drawn {
            Ok(()) => println!("redrew {} into {}", file.display(), dir.display()),
            Err(e) => {
                eprintln!("redrawing {}: {e}", file.display());
                std::process::exit(1);
            }
        }
        return;
    }
    let pools = Pools::new(threads);
    let mut work = workloads(&pools, mode);
    work.extend(tree_rows(threads, mode));
    work.extend(data_workloads(&pools, mode));
    if mode.pick(false, true) {
        work.extend(collect_workloads(&pools));
        work.extend(sort_workloads(&pools));
    }
    let bar = ProgressBar::new(work.len() as u64);
    bar.set_style(ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}").expect("progress template"));
    let rows: Vec<Row> = work
        .iter_mut()
        .map(|w| {
            bar.set_message(w.name.replace('`', ""));
            let row = measure(w, mode);
            bar.inc(1);
            row
        })
        .collect();
    bar.finish_and_clear();

    let md = markdown(&rows, mode, threads);
    println!("{md}");
    match write_outputs(&dir, &md, &rows) {
        Ok(()) => println!("wrote {0}/report.md, {0}/report.svg and {0}/report.png", dir.display()),
        Err(e) => {
            eprintln!("writing the report into {}: {e}", dir.display());
            std::process::exit(1);
        }
    }
}
