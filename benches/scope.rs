//! Async scopes (P3149 `CountingScope` + `spawn`) against rayon's scopes and tokio's
//! `spawn`, in the same run, with the same number of workers ([`THREADS`] = 2) everywhere.
//!
//! | group | ours (`senders`) | baseline(s) | target |
//! |---|---|---|---|
//! | `tree_spawn/no_work` | a 2^20 − 1 node binary tree, one `spawn` per node, from the workers | `rayon::scope` + `s.spawn` per node | ≤ 0.20× rayon's time |
//! | `tree_spawn/work_300ns` | the same with ~300 ns of spinning per node | rayon as above; plain recursion | ≥ 1.85× faster than sequential |
//! | `flat_spawn` | [`FLAT_N`] empty spawns from the main thread, then `join` | `in_place_scope` + `s.spawn`; `tokio::spawn` + awaiting the handles | ≥ 3× rayon's throughput |
//! | `bookkeeping` | the no-work tree into a sharded `CountingScope` | the same with `CounterKind::SingleAtomic` | ≥ 2× faster than the single atomic |
//! | `let_scope_vec` | a tree laid out in a `Vec<Node>` through `let_async_scope`, the closures capturing `&[Node]` and an index | the same in a `CountingScope` over a leaked `'static` slice | ≤ 1.05× `CountingScope`'s time |
//! | `spawn_floor/no_work`, `spawn_floor/work_300ns` | the `tree_spawn` tree (`senders`; `senders_latent`: a pool with `latent_forks`) | its floor (`floor_count`: `rayon::join` with a heap block and a counted association per child; `floor_storage`: no count); `rayon::join`; plain recursion | ≤ 1.5× `rayon::join`'s time; ≥ 1.85× faster than sequential |
//! | `reduce_tree` | a 2^20 − 1 node tree whose nodes return their heap index, summed through `let_async_scope_reduce` (`let_reduce`) and a `ReducingScope` (`counting_reduce`) | the same sum into one shared `AtomicU64` in a `let_async_scope` (`let_atomic`, the README's old form); the plain `let_async_scope` tree without values (`let_plain`); `rayon::scope` + an `AtomicU64`; rayon's `par_iter().map().sum()` over each node's children | ≤ 1.05× `let_plain`'s time (a speedup ≥ 0.95) |
//! | `let_scope/no_work`, `let_scope/work_300ns` | the tree through `let_async_scope` + `spawn` (borrowing the scheduler and the counters, not `'static`) | the `CountingScope` tree above; `rayon::join` recursion | no slower than `CountingScope` (≤ 1.05× its time, a speedup ≥ 0.95) |
//!
//! ```text
//! cargo bench --bench scope -- --warm-up-time 1 --measurement-time 3
//! ```
//!
//! For profilers, `SENDERS_SCOPE_PROFILE=tree:20 target/release/deps/scope-*` runs one
//! workload 20 times without criterion (see [`profile`] for the workloads);
//! `SENDERS_PROFILE_THREADS=1` gives every pool one worker, for exact callgrind counts.
//!
//! Every workload is checked once, before its group is timed: a counting variant visits
//! the tree (or runs the flat spawns) and the count must equal the node count, with
//! every node of ours and of rayon's run on a pool worker. The timed variants count
//! nothing, so they time the spawns and the work alone.
//!
//! After each group, each compared pair is also timed in interleaved rounds (ours,
//! baseline, baseline, ours, ...), which resists the background load of a shared
//! machine far better than two separate criterion runs (as in `benches/pool.rs`). The
//! table printed after each group (and again at the end) gives the medians of the
//! criterion samples, the speedup `baseline ÷ ours` from those medians and from the
//! interleaved rounds (median and range), and whether the target is met.

#[path = "common/work.rs"]
mod work;
use work::{calibrate, spin};

#[path = "common/paired.rs"]
mod paired;

#[path = "common/floor.rs"]
mod floor;

use paired::{format_ns, median};

use std::cell::RefCell;
use std::hint::black_box;
use std::rc::Rc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use crossbeam_utils::CachePadded;
use rayon::prelude::*;
use senders::{
    CountingScope, CountingToken, LetReduceToken, LetScopeToken, PoolScheduler, ReduceToken, ReducingScope, Scheduler,
    Sender, SenderExt, SenderTo, Spawnable, StaticThreadPool, just, schedule, scope::CounterKind, spawn, starts_on,
    sync_wait,
};

/// Workers in every pool.
const THREADS: usize = 2;
/// Depth of the trees: `2^TREE_DEPTH - 1` nodes.
const TREE_DEPTH: u32 = 20;
/// Nodes of a tree of depth [`TREE_DEPTH`].
const TREE_NODES: usize = (1 << TREE_DEPTH) - 1;
/// Spawns per iteration of `flat_spawn`.
const FLAT_N: usize = 1 << 20;
/// Nanoseconds of work per node in `tree_spawn/work_300ns`.
const WORK_NS: f64 = 300.0;
/// Samples of every group (criterion's minimum; the iterations are long).
const SAMPLES: usize = 10;
/// Rounds of the interleaved comparison.
const PAIRED_ROUNDS: usize = 9;

// ---------------------------------------------------------------------------------------
// The work: a calibrated spin loop.
// ---------------------------------------------------------------------------------------

/// The mean time of one `spin(iters)`, over many calls.
fn time_spin(iters: u64) -> f64 {
    let start = Instant::now();
    for _ in 0..10_000 {
        spin(iters);
    }
    start.elapsed().as_nanos() as f64 / 10_000.0
}

// ---------------------------------------------------------------------------------------
// The workloads. `count`, when given, counts visited nodes and those not run on a pool
// worker; only the one-time checks pass it.
// ---------------------------------------------------------------------------------------

/// What a checked run saw.
#[derive(Default)]
struct Counts {
    nodes: AtomicUsize,
    off_pool: AtomicUsize,
}

impl Counts {
    fn visit(&self, on_pool: impl FnOnce() -> bool) {
        self.nodes.fetch_add(1, Ordering::Relaxed);
        if !on_pool() {
            self.off_pool.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn take(&self) -> (usize, usize) {
        (self.nodes.swap(0, Ordering::Relaxed), self.off_pool.swap(0, Ordering::Relaxed))
    }
}

/// Counters of the checked runs (never touched by the timed ones).
static COUNTS: Counts = Counts { nodes: AtomicUsize::new(0), off_pool: AtomicUsize::new(0) };

fn on_our_pool() -> bool {
    std::thread::current().name().is_some_and(|n| n.starts_with("senders-worker-"))
}

fn on_rayon_pool() -> bool {
    rayon::current_thread_index().is_some()
}

/// One node of our tree: its work, then one spawn per child. The children are
/// `schedule().then(..)`: the pool's domain pushes them on the current worker's deque.
fn ours_node(sch: &'static PoolScheduler, tk: CountingToken, depth: u32, iters: u64, count: Option<&'static Counts>) {
    if let Some(c) = count {
        c.visit(on_our_pool);
    }
    if iters > 0 {
        spin(iters);
    }
    if depth > 1 {
        for _ in 0..2 {
            spawn(sch.schedule().then(move |()| ours_node(sch, tk, depth - 1, iters, count)), tk);
        }
    }
}

/// The whole tree into a fresh scope: the root is spawned from the calling thread (onto
/// the pool's injector), the rest from the workers; then `join`.
fn ours_tree(sch: &'static PoolScheduler, kind: CounterKind, iters: u64, count: Option<&'static Counts>) {
    let scope = CountingScope::with_counter(kind);
    let tk = scope.token();
    spawn(sch.schedule().then(move |()| ours_node(sch, tk, TREE_DEPTH, iters, count)), tk);
    sync_wait(scope.join()).unwrap();
}

/// A sender whose domain is the default one, whose `apply_spawn` starts spawned work
/// inline (a sender without a domain is queued on the spawning worker, as the pool's).
struct OnDefault<S>(S);

impl<S: Sender> Sender for OnDefault<S> {
    type Value = S::Value;
    type Error = S::Error;
    const SENDS_STOPPED: bool = S::SENDS_STOPPED;
    type Domain = senders::DefaultDomain;
    type CompletionScheduler = senders::schedulers::NoScheduler;
    fn completion_scheduler(&self) -> Self::CompletionScheduler {
        senders::schedulers::NoScheduler
    }
}

impl<S: SenderTo<R>, R: senders::Receiver<S::Value, S::Error>> SenderTo<R> for OnDefault<S> {
    type Operation = S::Operation;
    fn connect(self, rcvr: R) -> S::Operation {
        self.0.connect(rcvr)
    }
}

/// The same tree with the children spawned in the default domain, which starts them
/// inline (a sequential walk that still pays for the scope).
fn inline_node(tk: CountingToken, depth: u32, count: Option<&'static Counts>) {
    if let Some(c) = count {
        c.visit(on_our_pool);
    }
    if depth > 1 {
        for _ in 0..2 {
            spawn(OnDefault(just(()).then(move |()| inline_node(tk, depth - 1, count))), tk);
        }
    }
}

fn inline_tree(sch: &'static PoolScheduler, count: Option<&'static Counts>) {
    let scope = CountingScope::new();
    let tk = scope.token();
    spawn(sch.schedule().then(move |()| inline_node(tk, TREE_DEPTH, count)), tk);
    sync_wait(scope.join()).unwrap();
}

/// The token of a `let_async_scope` run under `starts_on(pool)`.
type Token<'s, 'e> = LetScopeToken<'s, 'e, PoolScheduler>;

/// One node of the `let_async_scope` tree: as `ours_node`, with the scheduler and the
/// counters borrowed for the scope's lifetime.
fn let_node<'s, 'e>(
    tk: Token<'s, 'e>,
    sch: &'s PoolScheduler,
    depth: u32,
    iters: u64,
    count: Option<&'s Counts>,
) -> impl Spawnable<Token<'s, 'e>> {
    schedule(sch).then(move |()| {
        if let Some(c) = count {
            c.visit(on_our_pool);
        }
        if iters > 0 {
            spin(iters);
        }
        if depth > 1 {
            for _ in 0..2 {
                spawn(let_node(tk, sch, depth - 1, iters, count), tk);
            }
        }
    })
}

/// The whole tree in a `let_async_scope` started on the pool: the root from a worker,
/// the rest from the workers; the scope is joined before `sync_wait` returns.
fn let_tree(sch: &PoolScheduler, iters: u64, count: Option<&Counts>) {
    let work = just(()).let_async_scope(|tk, ()| {
        spawn(let_node(tk, sch, TREE_DEPTH, iters, count), tk);
    });
    sync_wait(starts_on(sch.clone(), work)).unwrap();
}

/// The sum of the reduction trees' heap indices `1..=TREE_NODES`.
const REDUCE_SUM: u64 = TREE_NODES as u64 * (TREE_NODES as u64 + 1) / 2;

/// The heap-numbered children of node `i` that exist.
fn children(i: u64) -> impl Iterator<Item = u64> {
    [2 * i, 2 * i + 1].into_iter().filter(|&c| c <= TREE_NODES as u64)
}

/// The token of a reducing `let_async_scope` whose work returns `u64`.
type ReduceTk<'s, 'e> = LetReduceToken<'s, 'e, PoolScheduler, u64>;

/// A node of the reducing tree: spawns its children, returns its index.
fn let_reduce_node<'s, 'e>(tk: ReduceTk<'s, 'e>, sch: &'s PoolScheduler, i: u64) -> impl Spawnable<ReduceTk<'s, 'e>> {
    schedule(sch).then(move |()| {
        for c in children(i) {
            spawn(let_reduce_node(tk, sch, c), tk);
        }
        i
    })
}

/// The sum of the tree's indices, returned through a `let_async_scope_reduce`.
fn let_reduce_tree(sch: &PoolScheduler) -> u64 {
    let work = just(()).let_async_scope_reduce(
        || 0,
        |a: &mut u64, v| *a += v,
        |a, b| a + b,
        |tk, ()| {
            spawn(let_reduce_node(tk, sch, 1), tk);
        },
    );
    sync_wait(starts_on(sch.clone(), work)).unwrap().unwrap()
}

/// The same tree adding into one shared atomic (a line every worker writes at every
/// node), in a plain `let_async_scope`.
fn let_atomic_node<'s, 'e>(
    tk: Token<'s, 'e>,
    sch: &'s PoolScheduler,
    i: u64,
    sum: &'s AtomicU64,
) -> impl Spawnable<Token<'s, 'e>> {
    schedule(sch).then(move |()| {
        for c in children(i) {
            spawn(let_atomic_node(tk, sch, c, sum), tk);
        }
        sum.fetch_add(i, Ordering::Relaxed);
    })
}

fn let_atomic_tree(sch: &PoolScheduler) -> u64 {
    let sum = AtomicU64::new(0);
    let sum_ref = &sum;
    let work = just(()).let_async_scope(|tk, ()| {
        spawn(let_atomic_node(tk, sch, 1, sum_ref), tk);
    });
    sync_wait(starts_on(sch.clone(), work)).unwrap();
    sum.into_inner()
}

/// The reducing tree in a `ReducingScope` (`'static` work).
type CountReduceTk = ReduceToken<CountingToken, u64>;

fn counting_reduce_node(tk: CountReduceTk, sch: &'static PoolScheduler, i: u64) {
    for c in children(i) {
        spawn(sch.schedule().then(move |()| counting_reduce_node_value(tk, sch, c)), tk);
    }
}

fn counting_reduce_node_value(tk: CountReduceTk, sch: &'static PoolScheduler, i: u64) -> u64 {
    counting_reduce_node(tk, sch, i);
    i
}

fn counting_reduce_tree(sch: &'static PoolScheduler) -> u64 {
    let mut scope = ReducingScope::new(|| 0, |a: &mut u64, v: u64| *a += v, |a, b| a + b);
    let tk = scope.token();
    spawn(sch.schedule().then(move |()| counting_reduce_node_value(tk, sch, 1)), tk);
    sync_wait(scope.join()).unwrap().unwrap()
}

fn rayon_scope_atomic_node<'s>(s: &rayon::Scope<'s>, i: u64, sum: &'s AtomicU64) {
    for c in children(i) {
        s.spawn(move |s| rayon_scope_atomic_node(s, c, sum));
    }
    sum.fetch_add(i, Ordering::Relaxed);
}

fn rayon_scope_atomic_tree(rpool: &rayon::ThreadPool) -> u64 {
    let sum = AtomicU64::new(0);
    rpool.install(|| rayon::scope(|s| rayon_scope_atomic_node(s, 1, &sum)));
    sum.into_inner()
}

fn rayon_par_iter_node(i: u64) -> u64 {
    i + [2 * i, 2 * i + 1].into_par_iter().filter(|&c| c <= TREE_NODES as u64).map(rayon_par_iter_node).sum::<u64>()
}

fn rayon_par_iter_tree(rpool: &rayon::ThreadPool) -> u64 {
    rpool.install(|| rayon_par_iter_node(1))
}

fn seq_reduce_node(i: u64) -> u64 {
    i + children(black_box(i)).map(seq_reduce_node).sum::<u64>()
}

/// A node of the trees laid out in an array (`vec_tree`, `let_vec_tree`): node `i`'s
/// children are `2i + 1` and `2i + 2`, where they exist.
#[derive(Clone, Copy)]
struct Node {
    weight: u64,
}

/// The array of a complete binary tree of [`TREE_NODES`] nodes.
fn vec_nodes() -> Vec<Node> {
    (0..TREE_NODES as u64).map(|weight| Node { weight }).collect()
}

/// One node of the array tree in a `CountingScope`: reads its node, spawns its children
/// with closures that capture the (`'static`) slice and an index.
fn vec_node(
    sch: &'static PoolScheduler,
    tk: CountingToken,
    nodes: &'static [Node],
    i: usize,
    count: Option<&'static Counts>,
) {
    if let Some(c) = count {
        c.visit(on_our_pool);
    }
    black_box(nodes[i].weight);
    for child in [2 * i + 1, 2 * i + 2] {
        if child < nodes.len() {
            spawn(sch.schedule().then(move |()| vec_node(sch, tk, nodes, child, count)), tk);
        }
    }
}

fn vec_tree(sch: &'static PoolScheduler, nodes: &'static [Node], count: Option<&'static Counts>) {
    let scope = CountingScope::new();
    let tk = scope.token();
    spawn(sch.schedule().then(move |()| vec_node(sch, tk, nodes, 0, count)), tk);
    sync_wait(scope.join()).unwrap();
}

/// One node of the array tree in a `let_async_scope`: the slice is borrowed.
fn let_vec_node<'s, 'e>(
    tk: Token<'s, 'e>,
    sch: &'s PoolScheduler,
    nodes: &'s [Node],
    i: usize,
    count: Option<&'s Counts>,
) -> impl Spawnable<Token<'s, 'e>> {
    schedule(sch).then(move |()| {
        if let Some(c) = count {
            c.visit(on_our_pool);
        }
        black_box(nodes[i].weight);
        for child in [2 * i + 1, 2 * i + 2] {
            if child < nodes.len() {
                spawn(let_vec_node(tk, sch, nodes, child, count), tk);
            }
        }
    })
}

fn let_vec_tree(sch: &PoolScheduler, nodes: &[Node], count: Option<&Counts>) {
    let work = just(()).let_async_scope(|tk, ()| {
        spawn(let_vec_node(tk, sch, nodes, 0, count), tk);
    });
    sync_wait(starts_on(sch.clone(), work)).unwrap();
}

/// The tree with `rayon::join` per node.
fn rayon_join_node(depth: u32, iters: u64, count: Option<&Counts>) {
    if let Some(c) = count {
        c.visit(on_rayon_pool);
    }
    if iters > 0 {
        spin(iters);
    }
    if depth > 1 {
        rayon::join(|| rayon_join_node(depth - 1, iters, count), || rayon_join_node(depth - 1, iters, count));
    }
}

fn rayon_join_tree(rpool: &rayon::ThreadPool, iters: u64, count: Option<&Counts>) {
    rpool.install(|| rayon_join_node(TREE_DEPTH, iters, count));
}

/// Association counts of the spawn floor: one cache-padded word per rayon worker, each
/// written only by its worker (so never contended), with locked read-modify-writes as
/// the scope's count needs, since an association may end on another worker than the one
/// that began it.
static FLOOR_COUNTS: [CachePadded<AtomicUsize>; FLOOR_SHARDS] =
    [const { CachePadded::new(AtomicUsize::new(0)) }; FLOOR_SHARDS];
const FLOOR_SHARDS: usize = 8;

fn floor_shard() -> &'static AtomicUsize {
    &FLOOR_COUNTS[rayon::current_thread_index().unwrap_or(0) % FLOOR_SHARDS]
}

/// The floor of a spawn per node (see `common/floor.rs`): [`rayon_join_node`]'s
/// recursion, where each child is first given a heap block of its own by the parent
/// (what it needs to outlive the spawning frame), freed when it completes and, with
/// `COUNT`, an association counted (a locked increment by the parent, a locked
/// decrement after the free, on the worker it completes on). It has no type erasure,
/// no stop token, no panic handling, and the parent's join is `rayon::join`'s, not a
/// scope's.
fn floor_node<const COUNT: bool>(depth: u32, iters: u64, count: Option<&Counts>) {
    if let Some(c) = count {
        c.visit(on_rayon_pool);
    }
    if iters > 0 {
        spin(iters);
    }
    if depth > 1 {
        let (a, b) = (floor_spawn::<COUNT>(depth - 1), floor_spawn::<COUNT>(depth - 1));
        rayon::join(move || floor_run::<COUNT>(a, iters, count), move || floor_run::<COUNT>(b, iters, count));
    }
}

fn floor_spawn<const COUNT: bool>(depth: u32) -> floor::Slot<u32> {
    if COUNT {
        floor_shard().fetch_add(1, Ordering::Relaxed);
    }
    floor::Slot::new(depth)
}

fn floor_run<const COUNT: bool>(slot: floor::Slot<u32>, iters: u64, count: Option<&Counts>) {
    floor_node::<COUNT>(slot.get(), iters, count);
    drop(slot);
    if COUNT {
        floor_shard().fetch_sub(1, Ordering::Release);
    }
}

/// The whole floor tree; with `COUNT`, checks that the associations balance.
fn floor_tree<const COUNT: bool>(rpool: &rayon::ThreadPool, iters: u64, count: Option<&Counts>) {
    rpool.install(|| floor_node::<COUNT>(TREE_DEPTH, iters, count));
    if COUNT {
        let live = FLOOR_COUNTS.iter().fold(0usize, |sum, c| sum.wrapping_add(c.load(Ordering::Acquire)));
        assert_eq!(live, 0, "floor: associations left");
    }
}

fn rayon_node<'s>(s: &rayon::Scope<'s>, depth: u32, iters: u64, count: Option<&'s Counts>) {
    if let Some(c) = count {
        c.visit(on_rayon_pool);
    }
    if iters > 0 {
        spin(iters);
    }
    if depth > 1 {
        for _ in 0..2 {
            s.spawn(move |s| rayon_node(s, depth - 1, iters, count));
        }
    }
}

fn rayon_tree(rpool: &rayon::ThreadPool, iters: u64, count: Option<&Counts>) {
    rpool.install(|| rayon::scope(|s| rayon_node(s, TREE_DEPTH, iters, count)));
}

fn seq_node(depth: u32, iters: u64, count: Option<&Counts>) {
    if let Some(c) = count {
        c.visit(|| true);
    }
    spin(iters);
    if depth > 1 {
        seq_node(black_box(depth - 1), iters, count);
        seq_node(black_box(depth - 1), iters, count);
    }
}

/// [`FLAT_N`] spawns of `schedule()` from the calling thread (not a worker), then `join`.
fn ours_flat(sch: &PoolScheduler, count: Option<&'static Counts>) {
    let scope = CountingScope::new();
    let tk = scope.token();
    for _ in 0..FLAT_N {
        match count {
            Some(c) => spawn(sch.schedule().then(move |()| c.visit(on_our_pool)), tk),
            None => spawn(sch.schedule(), tk),
        };
    }
    sync_wait(scope.join()).unwrap();
}

fn rayon_flat(rpool: &rayon::ThreadPool, count: Option<&Counts>) {
    rpool.in_place_scope(|s| {
        for _ in 0..FLAT_N {
            match count {
                Some(c) => s.spawn(move |_| c.visit(on_rayon_pool)),
                None => s.spawn(|_| {}),
            }
        }
    });
}

fn tokio_flat(rt: &tokio::runtime::Runtime, count: Option<&'static Counts>) {
    rt.block_on(async {
        let handles: Vec<_> = (0..FLAT_N)
            .map(|_| match count {
                Some(c) => tokio::spawn(async move { c.visit(|| true) }),
                None => tokio::spawn(async {}),
            })
            .collect();
        for h in handles {
            h.await.unwrap();
        }
    });
}

/// Runs `f` with the counters and checks that it visited `want` nodes, all on a pool
/// worker.
fn check(what: &str, want: usize, f: impl FnOnce(&'static Counts)) {
    COUNTS.take();
    f(&COUNTS);
    let (nodes, off_pool) = COUNTS.take();
    assert_eq!(nodes, want, "{what}: visited nodes");
    assert_eq!(off_pool, 0, "{what}: nodes run outside the pool");
}

// ---------------------------------------------------------------------------------------
// Recording: criterion's samples, interleaved comparisons, and the tables.
// ---------------------------------------------------------------------------------------

/// A comparison to report: `base ÷ ours` (a speedup), and the target it should reach.
struct Pair {
    ours: &'static str,
    base: &'static str,
    /// The minimum speedup the issue asks for, if any.
    target: Option<f64>,
}

/// One reported comparison.
struct Row {
    ours: String,
    base: String,
    ours_ns: f64,
    base_ns: f64,
    /// `base ÷ ours` of each interleaved round.
    paired: Vec<f64>,
    /// The medians of the interleaved rounds' own times: ours, baseline.
    paired_ns: (f64, f64),
    target: Option<f64>,
}

/// Every comparison reported so far, for the final summary.
static ROWS: Mutex<Vec<Row>> = Mutex::new(Vec::new());

fn print_rows(rows: &[Row]) {
    println!(
        "\n{:<34} {:<36} {:>10} {:>10} {:>8} {:>10} {:>10} {:>22} {:>12}",
        "ours", "baseline", "ours", "baseline", "speedup", "ours (il)", "base (il)", "interleaved [range]", "target"
    );
    for r in rows {
        let paired = if r.paired.is_empty() {
            "-".to_owned()
        } else {
            let lo = r.paired.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.paired.iter().copied().fold(0.0, f64::max);
            format!("{:.2}× [{lo:.2}–{hi:.2}]", median(&r.paired))
        };
        let target = match r.target {
            None => "-".to_owned(),
            Some(t) => {
                let got = if r.paired.is_empty() { r.base_ns / r.ours_ns } else { median(&r.paired) };
                format!("≥ {t:.2}× {}", if got >= t { "met" } else { "MISSED" })
            }
        };
        println!(
            "{:<34} {:<36} {:>10} {:>10} {:>7.2}× {:>10} {:>10} {paired:>22} {target:>12}",
            r.ours,
            r.base,
            format_ns(r.ours_ns),
            format_ns(r.base_ns),
            r.base_ns / r.ours_ns,
            format_ns(r.paired_ns.0),
            format_ns(r.paired_ns.1),
        );
    }
}

/// A benchmark routine, kept for the interleaved comparison.
type Routine<'f> = Box<dyn FnMut() + 'f>;

/// The per-iteration times of one benchmark's samples, shared with its timing closure.
type Times = Rc<RefCell<Vec<f64>>>;

/// A criterion group that records the time per iteration of every sample.
struct Group<'c, 'f> {
    name: &'static str,
    group: BenchmarkGroup<'c, WallTime>,
    /// Each benchmark's key, routine and per-iteration times (warm-up calls included:
    /// the last [`SAMPLES`] are the measured samples).
    benches: Vec<(String, Routine<'f>, Times)>,
}

impl<'c, 'f> Group<'c, 'f> {
    fn new(c: &'c mut Criterion, name: &'static str) -> Self {
        let mut group = c.benchmark_group(name);
        group.sample_size(SAMPLES).sampling_mode(SamplingMode::Flat);
        Group { name, group, benches: Vec::new() }
    }

    fn throughput(&mut self, elements: usize) -> &mut Self {
        self.group.throughput(Throughput::Elements(elements as u64));
        self
    }

    /// Benchmarks `f`, one call per iteration.
    fn bench(&mut self, id: &str, f: impl FnMut() + 'f) {
        let times: Times = Rc::new(RefCell::new(Vec::new()));
        let mut routine: Routine<'f> = Box::new(f);
        let record = times.clone();
        self.group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    routine();
                }
                let elapsed = start.elapsed();
                record.borrow_mut().push(elapsed.as_nanos() as f64 / iters as f64);
                elapsed
            })
        });
        self.benches.push((id.to_owned(), routine, times));
    }

    /// Finishes the criterion group, times every pair (both of which ran) in
    /// interleaved rounds, and prints the group's table.
    fn finish(self, pairs: &[Pair]) {
        let Group { name, group, mut benches } = self;
        group.finish();
        let medians: Vec<Option<f64>> = benches
            .iter()
            .map(|(_, _, t)| {
                let t = t.borrow();
                (!t.is_empty()).then(|| median(&t[t.len().saturating_sub(SAMPLES)..]))
            })
            .collect();
        let keys: Vec<String> = benches.iter().map(|(k, _, _)| k.clone()).collect();
        let find = |id: &str| keys.iter().position(|k| k == id);
        let mut rows = Vec::new();
        for p in pairs {
            let (Some(i), Some(j)) = (find(p.ours), find(p.base)) else { continue };
            let (Some(ours_ns), Some(base_ns)) = (medians[i], medians[j]) else { continue };
            let (ours_b, base_b) = paired::two_mut(&mut benches, i, j);
            let rounds = paired::paired_rounds(
                PAIRED_ROUNDS,
                (&mut *ours_b.1, paired::batch(ours_ns)),
                (&mut *base_b.1, paired::batch(base_ns)),
            );
            let paired: Vec<f64> = rounds.iter().map(|(o, b)| b / o).collect();
            let ours_t: Vec<f64> = rounds.iter().map(|r| r.0).collect();
            let base_t: Vec<f64> = rounds.iter().map(|r| r.1).collect();
            rows.push(Row {
                ours: format!("{name}/{}", p.ours),
                base: format!("{name}/{}", p.base),
                ours_ns,
                base_ns,
                paired,
                paired_ns: (median(&ours_t), median(&base_t)),
                target: p.target,
            });
        }
        if !rows.is_empty() {
            print_rows(&rows);
            ROWS.lock().unwrap().extend(rows);
        }
    }
}

// ---------------------------------------------------------------------------------------
// The groups.
// ---------------------------------------------------------------------------------------

/// Both pools, and our scheduler with a `'static` lifetime for the spawned closures
/// (one leaked `Arc` clone per group).
fn pools() -> (StaticThreadPool, &'static PoolScheduler, rayon::ThreadPool) {
    let threads = paired::threads(THREADS);
    let (ours, sch) = ours_pool(false);
    let theirs = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool");
    (ours, sch, theirs)
}

/// Our pool alone, holding its workers' forks and spawns latent or not
/// (`PoolBuilder::latent_forks`), with its scheduler leaked as in [`pools`].
fn ours_pool(latent: bool) -> (StaticThreadPool, &'static PoolScheduler) {
    let ours = StaticThreadPool::builder()
        .num_threads(paired::threads(THREADS))
        .latent_forks(latent)
        .build()
        .expect("senders pool");
    let sch: &'static PoolScheduler = Box::leak(Box::new(ours.scheduler()));
    (ours, sch)
}

fn tree_no_work(c: &mut Criterion) {
    let (_pool, sch, rpool) = pools();
    check("tree, ours", TREE_NODES, |c| ours_tree(sch, CounterKind::Sharded, 0, Some(c)));
    check("tree, ours inline", TREE_NODES, |c| inline_tree(sch, Some(c)));
    check("tree, rayon", TREE_NODES, |c| rayon_tree(&rpool, 0, Some(c)));

    let mut g = Group::new(c, "tree_spawn/no_work");
    g.bench("senders", || ours_tree(sch, CounterKind::Sharded, 0, None));
    g.bench("rayon", || rayon_tree(&rpool, 0, None));
    g.bench("senders_inline", || inline_tree(sch, None));
    g.finish(&[
        Pair { ours: "senders", base: "rayon", target: Some(5.0) },
        Pair { ours: "senders", base: "senders_inline", target: None },
    ]);
}

fn tree_work(c: &mut Criterion) {
    let iters = calibrate(WORK_NS);
    println!("work per node: {iters} spin iterations ≈ {:.0} ns (target {WORK_NS} ns)", time_spin(iters));
    let (_pool, sch, rpool) = pools();
    check("tree+work, ours", TREE_NODES, |c| ours_tree(sch, CounterKind::Sharded, iters, Some(c)));
    check("tree+work, rayon", TREE_NODES, |c| rayon_tree(&rpool, iters, Some(c)));
    check("tree+work, sequential", TREE_NODES, |c| seq_node(TREE_DEPTH, iters, Some(c)));

    let mut g = Group::new(c, "tree_spawn/work_300ns");
    g.bench("senders", || ours_tree(sch, CounterKind::Sharded, iters, None));
    g.bench("rayon", || rayon_tree(&rpool, iters, None));
    g.bench("sequential", || seq_node(black_box(TREE_DEPTH), iters, None));
    g.finish(&[
        Pair { ours: "senders", base: "sequential", target: Some(1.85) },
        Pair { ours: "senders", base: "rayon", target: None },
    ]);
}

fn flat_spawn(c: &mut Criterion) {
    let (_pool, sch, rpool) = pools();
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(THREADS).build().expect("tokio runtime");
    check("flat, ours", FLAT_N, |c| ours_flat(sch, Some(c)));
    check("flat, rayon", FLAT_N, |c| rayon_flat(&rpool, Some(c)));
    check("flat, tokio", FLAT_N, |c| tokio_flat(&rt, Some(c)));

    let mut g = Group::new(c, "flat_spawn");
    g.throughput(FLAT_N);
    g.bench("senders", || ours_flat(sch, None));
    g.bench("rayon", || rayon_flat(&rpool, None));
    g.bench("tokio", || tokio_flat(&rt, None));
    g.finish(&[
        Pair { ours: "senders", base: "rayon", target: Some(3.0) },
        Pair { ours: "senders", base: "tokio", target: None },
    ]);
}

fn bookkeeping(c: &mut Criterion) {
    let (_pool, sch, _rpool) = pools();
    check("bookkeeping, single atomic", TREE_NODES, |c| ours_tree(sch, CounterKind::SingleAtomic, 0, Some(c)));

    let mut g = Group::new(c, "bookkeeping");
    g.bench("sharded", || ours_tree(sch, CounterKind::Sharded, 0, None));
    g.bench("single_atomic", || ours_tree(sch, CounterKind::SingleAtomic, 0, None));
    g.finish(&[Pair { ours: "sharded", base: "single_atomic", target: Some(2.0) }]);
}

/// `let_async_scope` against the `CountingScope` path and `rayon::join`, without and
/// with work per node.
fn let_scope(c: &mut Criterion) {
    let (_pool, sch, rpool) = pools();
    let iters = calibrate(WORK_NS);
    check("let tree, ours", TREE_NODES, |c| let_tree(sch, 0, Some(c)));
    check("let tree, rayon::join", TREE_NODES, |c| rayon_join_tree(&rpool, 0, Some(c)));
    for (name, iters) in [("let_scope/no_work", 0), ("let_scope/work_300ns", iters)] {
        let mut g = Group::new(c, name);
        g.bench("let_async_scope", || let_tree(sch, iters, None));
        g.bench("counting_scope", || ours_tree(sch, CounterKind::Sharded, iters, None));
        g.bench("rayon_join", || rayon_join_tree(&rpool, iters, None));
        g.finish(&[
            Pair { ours: "let_async_scope", base: "counting_scope", target: Some(1.0 / 1.05) },
            Pair { ours: "let_async_scope", base: "rayon_join", target: None },
        ]);
    }
}

/// Spawned work returning values: the reducing scopes against the shared atomic, the
/// plain spawn tree and rayon's forms. Every form's sum is checked against the
/// sequential one first.
fn reduce_tree(c: &mut Criterion) {
    let (_pool, sch, rpool) = pools();
    assert_eq!(seq_reduce_node(1), REDUCE_SUM, "sequential");
    assert_eq!(let_reduce_tree(sch), REDUCE_SUM, "let_async_scope_reduce");
    assert_eq!(counting_reduce_tree(sch), REDUCE_SUM, "ReducingScope");
    assert_eq!(let_atomic_tree(sch), REDUCE_SUM, "let_async_scope + AtomicU64");
    assert_eq!(rayon_scope_atomic_tree(&rpool), REDUCE_SUM, "rayon::scope + AtomicU64");
    assert_eq!(rayon_par_iter_tree(&rpool), REDUCE_SUM, "rayon par_iter");
    check("reduce group, plain let tree", TREE_NODES, |c| let_tree(sch, 0, Some(c)));

    let mut g = Group::new(c, "reduce_tree");
    g.bench("let_reduce", || assert_eq!(black_box(let_reduce_tree(sch)), REDUCE_SUM));
    g.bench("let_plain", || let_tree(sch, 0, None));
    g.bench("let_atomic", || assert_eq!(black_box(let_atomic_tree(sch)), REDUCE_SUM));
    g.bench("counting_reduce", || assert_eq!(black_box(counting_reduce_tree(sch)), REDUCE_SUM));
    g.bench("counting_plain", || ours_tree(sch, CounterKind::Sharded, 0, None));
    g.bench("rayon_scope_atomic", || assert_eq!(black_box(rayon_scope_atomic_tree(&rpool)), REDUCE_SUM));
    g.bench("rayon_par_iter", || assert_eq!(black_box(rayon_par_iter_tree(&rpool)), REDUCE_SUM));
    g.finish(&[
        Pair { ours: "let_reduce", base: "let_plain", target: Some(1.0 / 1.05) },
        Pair { ours: "let_reduce", base: "let_atomic", target: None },
        Pair { ours: "counting_reduce", base: "counting_plain", target: Some(1.0 / 1.05) },
        Pair { ours: "let_reduce", base: "rayon_scope_atomic", target: None },
        Pair { ours: "let_reduce", base: "rayon_par_iter", target: None },
    ]);
}

/// The array-laid tree: `let_async_scope` (closures borrowing the slice) against
/// `CountingScope` (a leaked `'static` slice), no work.
fn let_scope_vec(c: &mut Criterion) {
    let (_pool, sch, _rpool) = pools();
    let nodes: &'static [Node] = Vec::leak(vec_nodes());
    check("array tree, let_async_scope", TREE_NODES, |c| let_vec_tree(sch, nodes, Some(c)));
    check("array tree, CountingScope", TREE_NODES, |c| vec_tree(sch, nodes, Some(c)));
    let mut g = Group::new(c, "let_scope_vec");
    g.bench("let_async_scope", || let_vec_tree(sch, nodes, None));
    g.bench("counting_scope", || vec_tree(sch, nodes, None));
    g.finish(&[Pair { ours: "let_async_scope", base: "counting_scope", target: Some(1.0 / 1.05) }]);
}

/// The spawn tree against its floor (`floor_node`) and `rayon::join`, without and with
/// work per node: how much of the gap to `rayon::join` any spawn pays (`floor_*` ÷
/// `rayon_join`), and how much is ours (`senders` ÷ `floor_count`).
fn spawn_floor(c: &mut Criterion) {
    let (_pool, sch, rpool) = pools();
    let iters = calibrate(WORK_NS);
    check("floor tree, storage", TREE_NODES, |c| floor_tree::<false>(&rpool, 0, Some(c)));
    check("floor tree, storage and count", TREE_NODES, |c| floor_tree::<true>(&rpool, 0, Some(c)));
    check("floor tree+work", TREE_NODES, |c| floor_tree::<true>(&rpool, iters, Some(c)));

    let (_latent_pool, latent) = ours_pool(true);
    check("tree, ours, latent spawns", TREE_NODES, |c| ours_tree(latent, CounterKind::Sharded, 0, Some(c)));

    let mut g = Group::new(c, "spawn_floor/no_work");
    g.bench("senders", || ours_tree(sch, CounterKind::Sharded, 0, None));
    g.bench("senders_latent", || ours_tree(latent, CounterKind::Sharded, 0, None));
    g.bench("floor_count", || floor_tree::<true>(&rpool, 0, None));
    g.bench("floor_storage", || floor_tree::<false>(&rpool, 0, None));
    g.bench("rayon_join", || rayon_join_tree(&rpool, 0, None));
    g.finish(&[
        Pair { ours: "floor_storage", base: "rayon_join", target: None },
        Pair { ours: "floor_count", base: "rayon_join", target: None },
        Pair { ours: "senders", base: "floor_count", target: None },
        Pair { ours: "senders", base: "rayon_join", target: Some(1.0 / 1.5) },
        Pair { ours: "senders_latent", base: "rayon_join", target: Some(1.0 / 1.5) },
        Pair { ours: "senders_latent", base: "senders", target: None },
    ]);

    let mut g = Group::new(c, "spawn_floor/work_300ns");
    g.bench("senders", || ours_tree(sch, CounterKind::Sharded, iters, None));
    g.bench("senders_latent", || ours_tree(latent, CounterKind::Sharded, iters, None));
    g.bench("floor_count", || floor_tree::<true>(&rpool, iters, None));
    g.bench("rayon_join", || rayon_join_tree(&rpool, iters, None));
    g.bench("sequential", || seq_node(black_box(TREE_DEPTH), iters, None));
    g.finish(&[
        Pair { ours: "floor_count", base: "sequential", target: Some(1.85) },
        Pair { ours: "senders", base: "sequential", target: Some(1.85) },
        Pair { ours: "senders_latent", base: "sequential", target: Some(1.85) },
        Pair { ours: "rayon_join", base: "sequential", target: None },
        Pair { ours: "senders", base: "floor_count", target: None },
        Pair { ours: "senders_latent", base: "senders", target: None },
    ]);
}

// No plots: criterion's plotting backend fails where it finds no font (it needs none
// to measure), and the tables printed here are the results.
criterion::criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = tree_no_work, tree_work, flat_spawn, bookkeeping, let_scope, let_scope_vec, spawn_floor, reduce_tree
}

/// `SENDERS_SCOPE_PROFILE=<what>:<repeats>`: runs one workload without criterion, for
/// profilers. `what` is `tree`, `tree_single`, `tree_latent`, `tree_latent_work` (a pool
/// with latent forks), `tree_work`, `rayon_tree`, `flat`,
/// `rayon_flat`, `seq_work`, `let_tree`, `let_tree_work`, `rayon_join_tree`,
/// `rayon_join_tree_work`, `floor_tree`, `floor_tree_work`, `floor_storage_tree`,
/// `vec_tree`, `let_vec_tree`, `let_reduce_tree`, `let_atomic_tree` or
/// `counting_reduce_tree` (for the plain spawn form of the last, `tree`; of the first two,
/// `let_tree`).
fn profile(spec: &str) {
    let mut parts = spec.split(':');
    let what = parts.next().unwrap_or("tree");
    let repeats: usize = parts.next().and_then(|s| s.parse().ok()).unwrap_or(20);
    let (_pool, sch, rpool) = pools();
    let mut latent_pool = None;
    let mut latent = || latent_pool.get_or_insert_with(|| ours_pool(true)).1;
    let iters = if what.ends_with("work") { calibrate(WORK_NS) } else { 0 };
    let start = Instant::now();
    for _ in 0..repeats {
        match what {
            "tree" | "tree_work" => ours_tree(sch, CounterKind::Sharded, iters, None),
            "tree_single" => ours_tree(sch, CounterKind::SingleAtomic, 0, None),
            "tree_latent" | "tree_latent_work" => ours_tree(latent(), CounterKind::Sharded, iters, None),
            "rayon_tree" | "rayon_tree_work" => rayon_tree(&rpool, iters, None),
            "seq_work" => seq_node(black_box(TREE_DEPTH), iters, None),
            "let_tree" | "let_tree_work" => let_tree(sch, iters, None),
            "vec_tree" => vec_tree(sch, vec_leaked(), None),
            "let_vec_tree" => let_vec_tree(sch, vec_leaked(), None),
            "rayon_join_tree" | "rayon_join_tree_work" => rayon_join_tree(&rpool, iters, None),
            "floor_tree" | "floor_tree_work" => floor_tree::<true>(&rpool, iters, None),
            "floor_storage_tree" => floor_tree::<false>(&rpool, 0, None),
            "let_reduce_tree" => assert_eq!(let_reduce_tree(sch), REDUCE_SUM),
            "let_atomic_tree" => assert_eq!(let_atomic_tree(sch), REDUCE_SUM),
            "counting_reduce_tree" => assert_eq!(counting_reduce_tree(sch), REDUCE_SUM),
            "flat" => ours_flat(sch, None),
            "rayon_flat" => rayon_flat(&rpool, None),
            other => panic!("unknown profile workload {other:?}"),
        }
    }
    println!("{what} × {repeats}: {:?} per run", start.elapsed() / repeats.max(1) as u32);
}

/// The array tree's nodes, leaked once per process (for `profile`).
fn vec_leaked() -> &'static [Node] {
    static NODES: std::sync::OnceLock<&'static [Node]> = std::sync::OnceLock::new();
    NODES.get_or_init(|| Vec::leak(vec_nodes()))
}

fn main() {
    if let Ok(spec) = std::env::var("SENDERS_SCOPE_PROFILE") {
        profile(&spec);
        return;
    }
    benches();
    Criterion::default().without_plots().configure_from_args().final_summary();
    let rows = ROWS.lock().unwrap();
    if !rows.is_empty() {
        println!("\n==> summary (speedup = baseline time ÷ ours; the target applies to the interleaved median)");
        print_rows(&rows);
    }
}
