//! A binary tree of 2^20 − 1 nodes, built on `main`'s stack and processed with one
//! `spawn` per node into a `let_async_scope_reduce` on a `StaticThreadPool` (the spawned
//! work borrows the tree: nothing is leaked or `'static`; each node returns its
//! contribution, which the worker that ran it folds into its own accumulator, and the
//! scope's join merges them), and, for comparison, with `rayon::scope`, with `rayon::join`
//! and sequentially.
//!
//! Run it with `cargo run --release --example tree`; an argument sets the depth (at most
//! 20), e.g. `cargo run --release --example tree -- 10` for a small tree. Every node hashes its value;
//! the hash, tagged with a count, is returned through the scope (ours) or added into a
//! per-thread accumulator (rayon's and the sequential ways); after each run the total
//! must equal the expected one, so every node was visited exactly once (the example
//! panics otherwise). The table gives the best wall time of [`RUNS`] runs of each
//! way and the ratios.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use senders::{
    LetReduceToken, PoolScheduler, SenderExt, Spawnable, StaticThreadPool, just, schedule, spawn, starts_on, sync_wait,
};

/// Depth of the tree by default: `2^DEPTH - 1` nodes.
const DEPTH: u32 = 20;
/// Runs of each way; the best is reported.
const RUNS: usize = 5;
/// Rounds of the hash each node computes (its "work").
const HASH_ROUNDS: u32 = 16;

/// A node of the tree.
struct Tree {
    left: Option<Box<Tree>>,
    right: Option<Box<Tree>>,
    value: u64,
}

/// A full tree of the given depth whose values are `next, next + 1, ...` in preorder.
fn build(depth: u32, next: &mut u64) -> Option<Box<Tree>> {
    if depth == 0 {
        return None;
    }
    let value = *next;
    *next += 1;
    let left = build(depth - 1, next);
    let right = build(depth - 1, next);
    Some(Box::new(Tree { left, right, value }))
}

/// The work of one node: `HASH_ROUNDS` rounds of splitmix64 over its value.
fn hash(value: u64) -> u64 {
    let mut x = value;
    for _ in 0..HASH_ROUNDS {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^= x >> 31;
    }
    x
}

/// What one node adds to the total: one in the count bits (from bit 40 up) plus the low
/// 20 bits of its hash (at most 2^20 × 2^20 = 2^40 over the whole tree, so the two
/// fields never overlap).
fn contribution(value: u64) -> u64 {
    (1 << 40) + (hash(value) & 0xF_FFFF)
}

/// Accumulators of rayon's and the sequential ways, one cache line each; a thread adds
/// into its own, so visiting a node costs an uncontended atomic add.
const SLOTS: usize = 64;

#[repr(align(128))]
struct Padded(AtomicU64);

static ACC: [Padded; SLOTS] = [const { Padded(AtomicU64::new(0)) }; SLOTS];
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static SLOT: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed) % SLOTS;
}

/// Visits one node: its work, added to the calling thread's accumulator.
fn visit(node: &Tree) {
    let c = contribution(node.value);
    SLOT.with(|&i| ACC[i].0.fetch_add(c, Ordering::Relaxed));
}

/// The sum of every accumulator, which it resets.
fn take_total() -> u64 {
    ACC.iter().map(|a| a.0.swap(0, Ordering::Relaxed)).fold(0, u64::wrapping_add)
}

/// The token of a scope whose outer scheduler is the pool (it runs under
/// `starts_on(pool)`) and whose work returns a `u64`: its work may borrow anything that
/// lives for `'s`.
type Token<'s, 'e> = LetReduceToken<'s, 'e, PoolScheduler, u64>;

/// Ours: each node's work spawns one `schedule().then(..)` per child into the scope (from
/// a worker, the pool pushes it on that worker's deque) and returns its contribution,
/// folded into the accumulator of the worker that ran it. The tree and the scheduler are
/// borrowed.
fn ours_node<'s, 'e>(tk: Token<'s, 'e>, sch: &'s PoolScheduler, node: &'s Tree) -> impl Spawnable<Token<'s, 'e>> {
    schedule(sch).then(move |()| {
        for child in [&node.left, &node.right].into_iter().flatten() {
            spawn(ours_node(tk, sch, child), tk);
        }
        contribution(node.value)
    })
}

/// The total, returned through the scope: the merged accumulators.
fn ours(root: &Tree, sch: &PoolScheduler) -> u64 {
    let work = just(()).let_async_scope_reduce(
        || 0,
        |acc: &mut u64, c| *acc += c,
        |a, b| a + b,
        |tk, ()| {
            spawn(ours_node(tk, sch, root), tk);
        },
    );
    sync_wait(starts_on(sch.clone(), work)).expect("infallible").expect("not stopped")
}

fn rayon_scope_node<'s>(s: &rayon::Scope<'s>, node: &'s Tree) {
    visit(node);
    for child in [&node.left, &node.right].into_iter().flatten() {
        s.spawn(move |s| rayon_scope_node(s, child));
    }
}

fn rayon_join(node: &Tree) {
    visit(node);
    match (&node.left, &node.right) {
        (Some(l), Some(r)) => {
            rayon::join(|| rayon_join(l), || rayon_join(r));
        }
        (l, r) => {
            for child in [l, r].into_iter().flatten() {
                rayon_join(child);
            }
        }
    }
}

fn sequential(node: &Tree) {
    visit(node);
    for child in [&node.left, &node.right].into_iter().flatten() {
        sequential(child);
    }
}

/// Runs `f` [`RUNS`] times, checking the total it returns each time; returns the best
/// wall time.
fn best_of(name: &str, want: u64, mut f: impl FnMut() -> u64) -> Duration {
    take_total();
    (0..RUNS)
        .map(|run| {
            let start = Instant::now();
            let got = f();
            let elapsed = start.elapsed();
            assert_eq!(
                got,
                want,
                "{name}, run {run}: visited {} nodes (want {}), or a node was visited twice",
                got >> 40,
                want >> 40
            );
            elapsed
        })
        .min()
        .expect("at least one run")
}

fn main() {
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let depth: u32 = std::env::args().nth(1).map_or(DEPTH, |a| a.parse().expect("the depth, a number"));
    assert!((1..=DEPTH).contains(&depth), "the depth is between 1 and {DEPTH}");
    let nodes = (1u64 << depth) - 1;

    let mut next = 1;
    let tree = build(depth, &mut next).expect("depth > 0"); // owned by `main`
    let root: &Tree = &tree;
    assert_eq!(next - 1, nodes);
    let want = (1..=nodes).map(contribution).fold(0, u64::wrapping_add);

    let pool = StaticThreadPool::new(threads).expect("senders pool");
    let sch = pool.scheduler();
    let rpool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool");

    println!("binary tree: {nodes} nodes, {HASH_ROUNDS} hash rounds per node, {threads} workers, best of {RUNS} runs");
    let results = [
        ("senders: spawn per node, let_async_scope_reduce", best_of("senders", want, || ours(root, &sch))),
        (
            "rayon::scope + s.spawn per node",
            best_of("rayon::scope", want, || {
                rpool.install(|| rayon::scope(|s| rayon_scope_node(s, root)));
                take_total()
            }),
        ),
        (
            "rayon::join recursion",
            best_of("rayon::join", want, || {
                rpool.install(|| rayon_join(root));
                take_total()
            }),
        ),
        (
            "sequential recursion",
            best_of("sequential", want, || {
                sequential(root);
                take_total()
            }),
        ),
    ];
    let ours_t = results[0].1.as_secs_f64();
    let seq_t = results[3].1.as_secs_f64();

    println!("\n{:<46} {:>10} {:>9} {:>14} {:>12}", "way", "best", "ns/node", "÷ senders", "speedup");
    for (name, t) in &results {
        let t = t.as_secs_f64();
        println!(
            "{name:<46} {:>7.2} ms {:>9.1} {:>13.2}× {:>11.2}×",
            t * 1e3,
            t * 1e9 / nodes as f64,
            t / ours_t,
            seq_t / t
        );
    }
    println!("\n(÷ senders: time relative to ours; speedup: sequential time ÷ this time)");
    println!("every run visited each of the {nodes} nodes exactly once");
}
