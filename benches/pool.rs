//! The static work-stealing pool against rayon, in the same run, with the same number of
//! workers ([`THREADS`] = 2) on both sides.
//!
//! | group | ours (`senders`) | rayon | also |
//! |---|---|---|---|
//! | `schedule/outside` | `sync_wait(sch.schedule())` | `pool.install(\|\| ())` | |
//! | `round_trip_cold` | the same, each after a pause in which the workers fell asleep | the same | |
//! | `schedule/chain` | [`SCHED_N`] sequential `schedule()`s from a worker | as many chained `rayon::spawn`s | |
//! | `schedule/fanout` | [`SCHED_N`] independent `schedule()`s from a worker | `rayon::scope` with as many `spawn`s | |
//! | `bulk_mem` | `bulk_each(x += 1)`, early and late customized | `par_iter_mut` | a sequential loop |
//! | `bulk_compute` | `bulk_each(x = sin(√x) + 1)`, early and late | `par_iter_mut` | a sequential loop |
//! | `bulk_expensive_8x2ms`, `bulk_expensive_2x20ms` | `bulk` and `bulk_unchunked` of 8 items of 2 ms, 2 of 20 ms | `par_iter().for_each` | the ideal time (items spread evenly) |
//! | `bulk_cheap_16` | `bulk` of 16 items of ~50 ns | `par_iter().for_each` | a sequential loop |
//! | `nbody` | one step of rayon-demo's n-body (2000 bodies) with `bulk_each` | `par_iter_mut` | |
//! | `tree8`, `tree8_work_300ns` | an 8-ary tree of 2.4 M nodes, each summing its children through `when_all_iter` of `AnySender`s, built in a `let_value` (`senders`) and as the natural recursion (`senders_natural`) | `par_iter().map(..).sum()` over the children | |
//! | `tree` | a 2^20 − 1 node binary tree through `when_all` | `rayon::join` | plain recursion; our default domain; the erased floor |
//! | `fib` | `fib(30)` through `when_all`, no cutoff | `rayon::join` | as for `tree` |
//! | `nested_fib`, `nested_tree`, `nested_factorial` | `fib(30)`, the 2^20 tree and `9999!` (rayon-demo's divide and conquer, a schoolbook big-integer product), each node `sync_wait`ing a `when_all` of its two children on the pool: nested fork-join (`common/nested.rs`) | `rayon::join` | |
//! | `tree1023` | chili's bench: 100 trees of 1023 nodes through `when_all`, awaited one after another by a `Task` on a worker | the same with `rayon::join` in one `install` | plain recursion |
//!
//! `tree8`, `tree`, `fib`, `tree1023`, `schedule/chain` and `schedule/fanout` also run
//! ours on a second pool with latent forks (`senders_latent`,
//! `PoolBuilder::latent_forks(true)`), so that one run compares the two.
//!
//! The erased floor (`floor_erased`, see `common/floor.rs`) is the `rayon::join`
//! recursion with every call erased, as our recursion erases every node: a block per
//! call from a per-thread free list and one indirect call. Its ratio to rayon is what
//! erasing every node costs any implementation. `floor_indirect` keeps only the indirect
//! call, as if storage were free. `floor_completion` adds to the erased floor what a
//! sender adds at every node: the value is delivered by an indirect call into a slot of
//! the parent (its receiver) instead of being returned, and the parent completes the
//! same way once both arrived.
//!
//! Run one group at a time (2 cores: the numbers are noisy):
//!
//! ```text
//! cargo bench --bench pool -- bulk_mem --warm-up-time 1 --measurement-time 3
//! ```
//!
//! After each group, every benchmark that ran is also run against rayon's benchmark of
//! the same case in interleaved rounds (ours, rayon, rayon, ours, ...), which resists
//! the background load of a shared machine far better than two separate criterion
//! runs. At the end the binary prints, per benchmark, the median time per iteration of
//! its criterion samples, that time ÷ rayon's, and the interleaved ratio (median and
//! range over the rounds).
//!
//! For profilers, `SENDERS_POOL_PROFILE=fib:22:200 target/release/deps/pool-*` runs
//! `fib(22)` 200 times on the pool, without criterion. Also: `tree:<depth>:<repeats>`,
//! `fib_latent` and `tree_latent` (latent forks on), `nested_fib`, `nested_tree`,
//! `nested_factorial` and `rayon_factorial` (the product `1..=n`), `fib_default` (sequential
//! `when_all`), `rayon_fib`, `rayon_tree`, `tree8`, `tree8_natural` and `rayon_tree8` (the 8-ary tree of
//! depth `n`), `tree8_spin` and `rayon_tree8_spin` (the same with one spin per node, so
//! that our leaves are erased blocks as in `tree8_work_300ns`), `floor_fib`,
//! `floor_tree`, `completion_fib`, `completion_tree`, and
//! `chain` / `rayon_chain` (`n` sequential hops from a worker) and `outside` /
//! `rayon_outside` (`n` round trips from outside), and `outside_cold` /
//! `rayon_outside_cold` (`n` round trips, each to a pool gone to sleep: the median), and
//! `bulk_mem` / `bulk_compute` (the `bulk` groups' early `bulk_each` over `n` elements).
//! `SENDERS_PROFILE_THREADS=1` gives
//! both pools one worker, so that callgrind counts instructions without an idle worker's
//! spinning.
//!
//! `fib` and `tree` need a recursive sender, which Rust cannot name directly (its
//! operation state would contain itself): they use [`AnySender`], the crate's
//! type-erased sender, as a user would (see [`fib_node`]).

#[path = "common/paired.rs"]
mod paired;

#[path = "common/floor.rs"]
mod floor;

#[path = "common/work.rs"]
mod work;

#[path = "common/spawn_fib.rs"]
mod spawn_fib;

#[path = "common/nested.rs"]
mod nested;
use nested::{nested_fib, nested_product, nested_tree, rayon_product, seq_product};
use spawn_fib::fib_spawned;

use paired::{format_ns, median};

use std::cell::{Cell, RefCell, UnsafeCell};
use std::convert::Infallible;
use std::hint::black_box;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, Once, mpsc};
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use rayon::prelude::*;
use senders::{
    AnySender, EmptyEnv, OperationState, Panic, PoolScheduler, Receiver, Scheduler, Sender, SenderExt, SenderTo,
    StaticThreadPool, Task, domain::NoDomain, fork_join, just, pool::PoolOp, schedulers::NoScheduler, starts_on,
    sync_wait, when_all, when_all_iter,
};

/// Workers in both pools.
const THREADS: usize = 2;
/// Schedule operations per iteration of `schedule/chain` and `schedule/fanout`.
const SCHED_N: usize = 10_000;
/// Elements of the `bulk` vectors (16 Mi `f64`, 128 MiB).
const BULK_LEN: usize = 16 << 20;
/// Depth of the `tree` benchmark: `Tree(TREE_DEPTH)` has `2^TREE_DEPTH - 1` nodes.
const TREE_DEPTH: u32 = 20;
/// Argument of the `fib` benchmark.
const FIB_N: u64 = 30;
/// Depth of the `tree1023` benchmark (chili's): 1023 nodes.
const TREE1023_DEPTH: u32 = 10;
/// Trees per call of `tree1023`, run back to back from a worker.
const TREE1023_REPEAT: u64 = 100;

/// Our pool with latent forks on (`PoolBuilder::latent_forks`), to compare with the
/// default in one run.
fn latent_pool() -> StaticThreadPool {
    let threads = paired::threads(THREADS);
    StaticThreadPool::builder().num_threads(threads).latent_forks(true).build().expect("senders pool")
}

fn pools() -> (StaticThreadPool, rayon::ThreadPool) {
    let threads = paired::threads(THREADS);
    let ours = StaticThreadPool::new(threads).expect("senders pool");
    let theirs = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("rayon pool");
    (ours, theirs)
}

// ---------------------------------------------------------------------------------------
// Recording: criterion's samples, plus an interleaved comparison with rayon.
// ---------------------------------------------------------------------------------------

/// One benchmark that ran: its criterion samples and, if it has a rayon sibling, the
/// interleaved ratios.
struct Record {
    key: String,
    /// The criterion sample size: the last `sample_size` entries of `per_iter` are the
    /// measured samples (criterion calls the routine for warm-up first).
    sample_size: usize,
    /// Nanoseconds per iteration of each call of the routine.
    per_iter: Vec<f64>,
    /// `ours / rayon` of each interleaved round.
    paired: Vec<f64>,
}

/// Every benchmark that ran, in order.
static RECORDS: Mutex<Vec<Record>> = Mutex::new(Vec::new());

fn with_record<T>(key: &str, sample_size: usize, f: impl FnOnce(&mut Record) -> T) -> T {
    let mut records = RECORDS.lock().unwrap();
    let i = match records.iter().position(|r| r.key == key) {
        Some(i) => i,
        None => {
            records.push(Record { key: key.to_owned(), sample_size, per_iter: Vec::new(), paired: Vec::new() });
            records.len() - 1
        }
    };
    f(&mut records[i])
}

/// Prints, for every benchmark that ran: the median of its criterion samples (time per
/// iteration), the ratio of that to the rayon benchmark of the same case (same id with
/// the last segment replaced by `rayon`), and the interleaved ratio (median and range
/// of [`PAIRED_ROUNDS`] rounds that alternate the two), which resists the background
/// load of a shared 2-core machine much better.
fn print_ratios() {
    let records = RECORDS.lock().unwrap();
    if records.is_empty() {
        return;
    }
    let medians: Vec<(&str, f64)> = records
        .iter()
        .map(|r| (r.key.as_str(), median(&r.per_iter[r.per_iter.len().saturating_sub(r.sample_size)..])))
        .collect();
    println!("\n{:<34} {:>11} {:>9} {:>28}", "benchmark", "median/iter", "÷ rayon", "interleaved ÷ rayon [range]");
    for (r, &(key, t)) in records.iter().zip(&medians) {
        let rayon_key = rayon_sibling(key);
        let ratio = medians
            .iter()
            .find(|(k, _)| *k == rayon_key)
            .map_or_else(|| "-".to_owned(), |&(_, base)| format!("{:.2}×", t / base));
        let paired = if r.paired.is_empty() {
            "-".to_owned()
        } else {
            let lo = r.paired.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.paired.iter().copied().fold(0.0, f64::max);
            format!("{:.2}× [{lo:.2}–{hi:.2}]", median(&r.paired))
        };
        println!("{key:<34} {:>11} {ratio:>9} {paired:>28}", format_ns(t));
    }
    let ideals = IDEALS.lock().unwrap();
    for &(group, ideal) in ideals.iter() {
        for &(key, t) in medians.iter().filter(|(k, _)| k.starts_with(group)) {
            println!("{key:<34} {:>11} ÷ ideal ({}) = {:.2}×", format_ns(t), format_ns(ideal), t / ideal);
        }
    }
}

fn rayon_sibling(key: &str) -> String {
    match key.rsplit_once('/') {
        Some((prefix, _)) => format!("{prefix}/rayon"),
        None => String::new(),
    }
}

/// Rounds of the interleaved comparison.
const PAIRED_ROUNDS: usize = 15;

/// A benchmark routine kept for the interleaved comparison.
type Routine<'f> = Box<dyn FnMut() + 'f>;

/// A criterion group whose benchmarks also feed [`RECORDS`], and which, when finished,
/// compares every benchmark that ran with its rayon sibling in interleaved rounds.
struct Group<'c, 'f> {
    name: &'static str,
    samples: usize,
    group: BenchmarkGroup<'c, WallTime>,
    routines: Vec<(String, Routine<'f>)>,
}

impl<'c, 'f> Group<'c, 'f> {
    fn new(c: &'c mut Criterion, name: &'static str, samples: usize) -> Self {
        let mut group = c.benchmark_group(name);
        group.sample_size(samples).sampling_mode(SamplingMode::Flat);
        Group { name, samples, group, routines: Vec::new() }
    }

    /// Benchmarks `f`, one call per iteration.
    fn bench<T>(&mut self, id: &str, mut f: impl FnMut() -> T + 'f) {
        let key = format!("{}/{id}", self.name);
        let samples = self.samples;
        let mut routine: Routine<'f> = Box::new(move || {
            black_box(f());
        });
        self.group.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    routine();
                }
                let elapsed = start.elapsed();
                with_record(&key, samples, |r| r.per_iter.push(elapsed.as_nanos() as f64 / iters as f64));
                elapsed
            })
        });
        self.routines.push((key, routine));
    }

    /// Finishes the criterion group, then runs the interleaved comparison: for every
    /// benchmark that ran and has a rayon sibling that ran, [`PAIRED_ROUNDS`] rounds of
    /// one batch of each, alternating which goes first; each round's ratio is recorded.
    fn finish(self) {
        let Group { group, mut routines, samples, .. } = self;
        group.finish();
        let ran: Vec<(String, f64)> = RECORDS
            .lock()
            .unwrap()
            .iter()
            .map(|r| (r.key.clone(), median(&r.per_iter[r.per_iter.len().saturating_sub(r.sample_size)..])))
            .collect();
        let time_of = |key: &str| ran.iter().find(|(k, _)| k == key).map(|&(_, t)| t);
        for i in 0..routines.len() {
            let key = routines[i].0.clone();
            let rayon_key = rayon_sibling(&key);
            let Some(rayon) = routines.iter().position(|(k, _)| *k == rayon_key) else { continue };
            let (Some(t), Some(rayon_t)) = (time_of(&key), time_of(&rayon_key)) else { continue };
            if i == rayon {
                continue;
            }
            let (ours, theirs) = paired::two_mut(&mut routines, i, rayon);
            let ratios = paired::paired_rounds(
                PAIRED_ROUNDS,
                (&mut *ours.1, paired::batch(t)),
                (&mut *theirs.1, paired::batch(rayon_t)),
            )
            .into_iter()
            .map(|(o, r)| o / r)
            .collect();
            with_record(&key, samples, |r| r.paired = ratios);
        }
    }
}

// ---------------------------------------------------------------------------------------
// `schedule`: the cost of one trip through the pool's queues.
// ---------------------------------------------------------------------------------------

/// How a schedule operation of [`Chain`] or [`FanOut`] ended.
enum Done {
    Value,
    Stopped,
    Panic(Panic),
}

/// The receiver of the schedule operations of [`Chain`] and [`FanOut`]: a pointer to the
/// operation that owns them and the function that takes the completion.
struct Hop {
    op: *const (),
    done: unsafe fn(*const (), Done),
}

// SAFETY: `Hop`s are made only by `ChainOp<R>` and `FanOutOp<R>`, which require `R: Send`;
// `done` may run on any worker and touches only that operation's atomics, its (`Send`)
// final receiver and, for `Chain`, its next schedule operation, never concurrently.
unsafe impl Send for Hop {}

impl Hop {
    fn finish(self, done: Done) {
        // SAFETY: `op` is the live operation that made this receiver (it outlives its
        // schedule operations) and `done` is its own function.
        unsafe { (self.done)(self.op, done) }
    }
}

impl Receiver<(), Infallible> for Hop {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, (): ()) {
        self.finish(Done::Value)
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        self.finish(Done::Stopped)
    }
    fn set_panic(self, panic: Panic) {
        self.finish(Done::Panic(panic))
    }
}

fn complete<R: Receiver<(), Infallible>>(rcvr: R, done: Done) {
    match done {
        Done::Value => rcvr.set_value(()),
        Done::Stopped => rcvr.set_stopped(),
        Done::Panic(p) => rcvr.set_panic(p),
    }
}

/// `n` schedule operations on the pool, one after the other: each completes on a worker
/// and starts the next from there (a push on that worker's deque and a pop, possibly by
/// the other worker). No allocation: the one operation state is rebuilt in place.
struct Chain {
    sch: PoolScheduler,
    n: usize,
}

impl Sender for Chain {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

impl<R: Receiver<(), Infallible> + Send> SenderTo<R> for Chain {
    type Operation = ChainOp<R>;
    fn connect(self, rcvr: R) -> ChainOp<R> {
        ChainOp {
            sch: self.sch,
            left: Cell::new(self.n),
            rcvr: UnsafeCell::new(Some(rcvr)),
            hop: UnsafeCell::new(None),
            _pin: PhantomPinned,
        }
    }
}

/// The operation state of [`Chain`].
struct ChainOp<R> {
    sch: PoolScheduler,
    /// Schedule operations still to start; touched by one thread at a time (each hop
    /// happens after the previous one's push, which orders the accesses).
    left: Cell<usize>,
    rcvr: UnsafeCell<Option<R>>,
    hop: UnsafeCell<Option<PoolOp<Hop>>>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible> + Send> ChainOp<R> {
    /// Starts the next schedule operation, or completes when none is left.
    ///
    /// # Safety
    ///
    /// `this` is this started, pinned operation; no schedule operation of it is pending.
    unsafe fn next(this: *const Self) {
        // SAFETY: no schedule operation is pending, so nobody else touches the fields.
        let left = unsafe { (*this).left.get() };
        if left == 0 {
            // SAFETY: as above; this is the operation's single completion.
            unsafe { Self::finish(this, Done::Value) };
            return;
        }
        // SAFETY: as above.
        unsafe { (*this).left.set(left - 1) };
        let hop = Hop { op: this.cast(), done: Self::done };
        // SAFETY: the previous schedule operation (if any) has delivered its completion
        // and does not touch its memory again, so it may be replaced in place; the new
        // one is pinned in the slot (inside the pinned `ChainOp`) and started once.
        unsafe {
            let slot = &mut *(*this).hop.get();
            let op = slot.insert((*this).sch.schedule().connect(hop));
            Pin::new_unchecked(op).start();
        }
    }

    /// # Safety
    ///
    /// `op` is a started `ChainOp<R>` whose pending schedule operation just completed.
    unsafe fn done(op: *const (), done: Done) {
        let this = op.cast::<Self>();
        match done {
            // SAFETY: forwarded; nothing is pending any more.
            Done::Value => unsafe { Self::next(this) },
            // SAFETY: as above.
            other => unsafe { Self::finish(this, other) },
        }
    }

    /// # Safety
    ///
    /// `this` is live, nothing of it is pending, and it completes once.
    unsafe fn finish(this: *const Self, done: Done) {
        // SAFETY: exclusive access by the contract; the receiver is taken once.
        let rcvr = unsafe { (*(*this).rcvr.get()).take() }.expect("chain completes once");
        complete(rcvr, done);
    }
}

impl<R: Receiver<(), Infallible> + Send> OperationState for ChainOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: the operation is only addressed, never moved.
        let this: *const Self = unsafe { self.get_unchecked_mut() };
        // SAFETY: started once and pinned; nothing is pending yet.
        unsafe { Self::next(this) };
    }
}

/// `n` independent schedule operations on the pool, all started from the thread that
/// starts this (a worker, under `starts_on`), joined by an atomic count: one push on
/// the starting worker's deque each, run by whichever worker gets to it. One allocation
/// per iteration: the vector of the `n` operation states.
struct FanOut {
    sch: PoolScheduler,
    n: usize,
}

impl Sender for FanOut {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

impl<R: Receiver<(), Infallible> + Send> SenderTo<R> for FanOut {
    type Operation = FanOutOp<R>;
    fn connect(self, rcvr: R) -> FanOutOp<R> {
        FanOutOp {
            sch: self.sch,
            n: self.n,
            remaining: AtomicUsize::new(self.n),
            failure: Mutex::new(None),
            rcvr: UnsafeCell::new(Some(rcvr)),
            ops: UnsafeCell::new(Vec::new()),
            _pin: PhantomPinned,
        }
    }
}

/// The operation state of [`FanOut`].
struct FanOutOp<R> {
    sch: PoolScheduler,
    n: usize,
    remaining: AtomicUsize,
    /// The first non-value completion of a child (never happens while the pool lives).
    failure: Mutex<Option<Done>>,
    rcvr: UnsafeCell<Option<R>>,
    ops: UnsafeCell<Vec<PoolOp<Hop>>>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible> + Send> FanOutOp<R> {
    /// # Safety
    ///
    /// `op` is a started `FanOutOp<R>`; each of its schedule operations calls this once.
    unsafe fn done(op: *const (), done: Done) {
        let this = op.cast::<Self>();
        // SAFETY: alive until the last arrival, which is at the earliest this one.
        let s = unsafe { &*this };
        if !matches!(done, Done::Value) {
            s.failure.lock().unwrap().get_or_insert(done);
        }
        if s.remaining.fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        let done = s.failure.lock().unwrap().take().unwrap_or(Done::Value);
        // SAFETY: every schedule operation has arrived: the receiver is ours to take,
        // once. Nothing of `s` is touched after the completion.
        let rcvr = unsafe { (*s.rcvr.get()).take() }.expect("fan-out completes once");
        complete(rcvr, done);
    }
}

impl<R: Receiver<(), Infallible> + Send> OperationState for FanOutOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: the operation is only addressed, never moved.
        let this: *const Self = unsafe { self.get_unchecked_mut() };
        // SAFETY: nothing has started yet: exclusive access.
        let n = unsafe { (*this).n };
        if n == 0 {
            // SAFETY: as above; the single completion.
            let rcvr = unsafe { (*(*this).rcvr.get()).take() }.expect("fan-out completes once");
            rcvr.set_value(());
            return;
        }
        // SAFETY: as above. The vector gets its final capacity before any operation is
        // pushed, so the operation states never move once connected.
        let base = unsafe {
            let ops = &mut *(*this).ops.get();
            ops.reserve_exact(n);
            for _ in 0..n {
                ops.push((*this).sch.schedule().connect(Hop { op: this.cast(), done: Self::done }));
            }
            ops.as_mut_ptr()
        };
        for i in 0..n {
            // SAFETY: each operation is pinned in the vector (never reallocated) and
            // started once. After the last start this frame touches nothing of `this`,
            // which the last completion may already have freed.
            unsafe { Pin::new_unchecked(&mut *base.add(i)).start() };
        }
    }
}

fn rayon_chain(left: usize, done: mpsc::SyncSender<()>) {
    if left == 0 {
        done.send(()).expect("bench waits for the chain");
    } else {
        rayon::spawn(move || rayon_chain(left - 1, done));
    }
}

/// - `outside`: one cross-thread round trip from the bench thread: ours queues a job on
///   the injector and blocks in `sync_wait` (its run loop) until a worker completes it;
///   rayon's `install(|| ())` injects a job and blocks on a latch until it ran.
/// - `chain`: [`SCHED_N`] sequential hops from inside a worker. Ours: [`Chain`] under
///   `starts_on` (1 outside hop, then `SCHED_N` pushes on a worker's deque, each started
///   from the previous one's completion). Rayon: `pool.spawn` of a job that
///   `rayon::spawn`s the next, `SCHED_N` deep (one heap job per spawn), the last one
///   signalling a channel the bench thread waits on.
/// - `fanout`: [`SCHED_N`] independent jobs from inside a worker, joined. Ours:
///   [`FanOut`] under `starts_on` (one `Vec` of operation states, `SCHED_N` pushes, an
///   atomic count). Rayon: `install(|| scope(|s| SCHED_N × s.spawn(|_| ())))` (one heap
///   job per spawn, the scope's counter).
fn schedule(c: &mut Criterion) {
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    let latent = latent_pool();
    let latent_sch = latent.scheduler();
    assert_eq!(sync_wait(starts_on(sch.clone(), Chain { sch: sch.clone(), n: 3 })), Ok(Some(())));
    assert_eq!(sync_wait(starts_on(latent_sch.clone(), Chain { sch: latent_sch.clone(), n: 3 })), Ok(Some(())));
    assert_eq!(sync_wait(starts_on(sch.clone(), FanOut { sch: sch.clone(), n: 3 })), Ok(Some(())));
    assert_eq!(sync_wait(starts_on(latent_sch.clone(), FanOut { sch: latent_sch.clone(), n: 3 })), Ok(Some(())));

    let mut g = Group::new(c, "schedule", 20);
    g.group.throughput(Throughput::Elements(1));
    g.bench("outside/senders", || sync_wait(sch.schedule()));
    g.bench("outside/rayon", || rpool.install(|| ()));

    g.group.throughput(Throughput::Elements(SCHED_N as u64));
    g.bench("chain/senders", || sync_wait(starts_on(sch.clone(), Chain { sch: sch.clone(), n: SCHED_N })));
    g.bench("chain/senders_latent", || {
        sync_wait(starts_on(latent_sch.clone(), Chain { sch: latent_sch.clone(), n: SCHED_N }))
    });
    g.bench("chain/rayon", || {
        let (tx, rx) = mpsc::sync_channel(1);
        rpool.spawn(move || rayon_chain(SCHED_N, tx));
        rx.recv().expect("chain finished")
    });
    g.bench("fanout/senders", || sync_wait(starts_on(sch.clone(), FanOut { sch: sch.clone(), n: SCHED_N })));
    g.bench("fanout/senders_latent", || {
        sync_wait(starts_on(latent_sch.clone(), FanOut { sch: latent_sch.clone(), n: SCHED_N }))
    });
    g.bench("fanout/rayon", || {
        rpool.install(|| {
            rayon::scope(|s| {
                for _ in 0..SCHED_N {
                    s.spawn(|_| ());
                }
            })
        })
    });
    g.finish();
}

/// The pause before each round trip of [`round_trip_cold`]: long enough for the
/// workers of both pools to have gone to sleep.
const COLD_PAUSE: Duration = Duration::from_millis(1);

/// One round trip `f` from this thread to a pool whose workers sleep: pauses, then times
/// only the trip.
fn time_cold(f: &mut dyn FnMut()) -> Duration {
    std::thread::sleep(COLD_PAUSE);
    let start = Instant::now();
    f();
    start.elapsed()
}

/// `round_trip_cold`: `sync_wait(sch.schedule())` against `install(|| ())` when the
/// workers have gone to sleep (the issue's "main → sleeping worker → main"). Criterion
/// sees only the trips (the pauses are not timed), so its measurement time is kept
/// short (a few hundred trips, each with its pause); the interleaved comparison
/// alternates rounds of 100 trips of each side.
fn round_trip_cold(c: &mut Criterion) {
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    let mut ours = || {
        sync_wait(sch.schedule()).expect("round trip");
    };
    let mut theirs = || rpool.install(|| ());
    // Fresh pools: their first trips (threads starting, first sleeps) are not timed.
    for _ in 0..20 {
        time_cold(&mut ours);
        time_cold(&mut theirs);
    }
    let mut g = c.benchmark_group("round_trip_cold");
    g.sample_size(10).sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_millis(100));
    g.measurement_time(Duration::from_millis(300));
    for (id, f) in [("senders", &mut ours as &mut dyn FnMut()), ("rayon", &mut theirs)] {
        let key = format!("round_trip_cold/{id}");
        g.bench_function(id, |b| {
            b.iter_custom(|iters| {
                let total: Duration = (0..iters).map(|_| time_cold(f)).sum();
                with_record(&key, 10, |r| r.per_iter.push(total.as_nanos() as f64 / iters as f64));
                total
            })
        });
    }
    g.finish();
    // Compared only when criterion ran both (the group was not filtered out).
    let ran = |key: &str| RECORDS.lock().unwrap().iter().any(|r| r.key == key && !r.per_iter.is_empty());
    if !(ran("round_trip_cold/senders") && ran("round_trip_cold/rayon")) {
        return;
    }
    let round = |f: &mut dyn FnMut()| median(&(0..100).map(|_| time_cold(f).as_nanos() as f64).collect::<Vec<_>>());
    let ratios = (0..PAIRED_ROUNDS)
        .map(|i| {
            if i % 2 == 0 {
                let o = round(&mut ours);
                o / round(&mut theirs)
            } else {
                let t = round(&mut theirs);
                round(&mut ours) / t
            }
        })
        .collect();
    with_record("round_trip_cold/senders", 10, |r| r.paired = ratios);
}

// ---------------------------------------------------------------------------------------
// `bulk`: a parallel loop over 16 Mi f64, memory bound and compute bound.
// ---------------------------------------------------------------------------------------

#[inline]
fn add_one(x: &mut f64) {
    *x += 1.0;
}

#[inline]
fn sin_sqrt(x: &mut f64) {
    *x = x.sqrt().sin() + 1.0;
}

/// A fresh vector for the `bulk` groups, after checking on it that both forms of our
/// `bulk_each` visit every element exactly once.
fn bulk_data<K: Fn(&mut f64) + Copy + Send + Sync + 'static>(sch: &PoolScheduler, kernel: K) -> Vec<f64> {
    let v: Vec<f64> = (0..BULK_LEN).map(|i| (i % 1000) as f64 * 1e-3).collect();
    let before = v.clone();
    let v = sync_wait(sch.schedule().then(move |()| v).bulk_each(move |_, x: &mut f64| kernel(x)))
        .unwrap()
        .expect("not stopped");
    let v = sync_wait(starts_on(sch.clone(), just(v).bulk_each(move |_, x: &mut f64| kernel(x))))
        .unwrap()
        .expect("not stopped");
    for (i, (&got, &was)) in v.iter().zip(&before).enumerate() {
        let mut want = was;
        kernel(&mut want);
        kernel(&mut want);
        assert_eq!(got, want, "element {i}");
    }
    v
}

/// One group: the same kernel through our `bulk_each` (early customized:
/// `schedule().then(move |()| v).bulk_each(..)`; late: `starts_on(sch, just(v).bulk_each(..))`),
/// rayon's `par_iter_mut().for_each` under `install`, and a sequential `for_each`. The
/// kernel is a generic parameter (a zero-sized fn item), so every variant inlines it.
///
/// The vector is allocated (and checked) once for the whole group, on first use, and
/// moved through every sender and back, so no iteration allocates or touches fresh pages.
fn bulk_group<K>(c: &mut Criterion, name: &'static str, kernel: K)
where
    K: Fn(&mut f64) + Copy + Send + Sync + 'static,
{
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    // Shared by every routine of the group (they also run interleaved after criterion).
    let slot: RefCell<Option<Vec<f64>>> = RefCell::new(None);
    let take = || slot.borrow_mut().take().unwrap_or_else(|| bulk_data(&sch, kernel));
    let with = |f: &mut dyn FnMut(&mut Vec<f64>)| {
        let mut v = take();
        f(&mut v);
        *slot.borrow_mut() = Some(v);
    };

    let mut g = Group::new(c, name, 10);
    g.group.throughput(Throughput::Elements(BULK_LEN as u64));
    g.bench("senders_early", || {
        let v = take();
        let sndr = sch.schedule().then(move |()| v).bulk_each(move |_, x: &mut f64| kernel(x));
        *slot.borrow_mut() = sync_wait(sndr).unwrap();
    });
    g.bench("senders_late", || {
        let v = take();
        let sndr = starts_on(sch.clone(), just(v).bulk_each(move |_, x: &mut f64| kernel(x)));
        *slot.borrow_mut() = sync_wait(sndr).unwrap();
    });
    g.bench("rayon", || with(&mut |v| rpool.install(|| v.par_iter_mut().for_each(kernel))));
    g.bench("sequential", || with(&mut |v| v.iter_mut().for_each(kernel)));
    g.finish();
}

fn bulk_mem(c: &mut Criterion) {
    bulk_group(c, "bulk_mem", add_one);
}

fn bulk_compute(c: &mut Criterion) {
    bulk_group(c, "bulk_compute", sin_sqrt);
}

// ---------------------------------------------------------------------------------------
// Small bulks: a few expensive items, a few cheap ones; and rayon-demo's n-body step.
// ---------------------------------------------------------------------------------------

/// Busy-waits `d`: an item whose cost is its time, whoever runs it.
fn spin_for(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// About 50 ns of arithmetic that the optimizer cannot remove.
#[inline]
fn cheap_item(i: usize) -> u64 {
    let mut x = black_box(i as u64) | 1;
    for _ in 0..40 {
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(7);
    }
    x
}

/// The time each `bulk_expensive_*` group would take with its items spread perfectly
/// over [`THREADS`] workers, by group name: printed beside the ratios.
static IDEALS: Mutex<Vec<(&'static str, f64)>> = Mutex::new(Vec::new());

/// `shape` items of `item` each, through our `bulk` and `bulk_unchunked` on the pool and
/// through rayon's `par_iter().for_each`; the ideal is `shape × item ÷ workers`.
fn bulk_expensive(c: &mut Criterion, name: &'static str, shape: usize, item: Duration) {
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    let ideal = shape.div_ceil(THREADS) as f64 * item.as_nanos() as f64;
    IDEALS.lock().unwrap().push((name, ideal));
    let mut g = Group::new(c, name, 10);
    g.bench("senders", || sync_wait(sch.schedule().bulk(shape, move |_, ()| spin_for(item))).unwrap());
    g.bench("senders_unchunked", || {
        sync_wait(sch.schedule().bulk_unchunked(shape, move |_, ()| spin_for(item))).unwrap()
    });
    g.bench("rayon", || rpool.install(|| (0..shape).into_par_iter().for_each(|_| spin_for(item))));
    g.finish();
}

fn bulk_small(c: &mut Criterion) {
    bulk_expensive(c, "bulk_expensive_8x2ms", 8, Duration::from_millis(2));
    bulk_expensive(c, "bulk_expensive_2x20ms", 2, Duration::from_millis(20));

    // 16 items of about 50 ns: the overhead of splitting and waking dominates.
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    let mut g = Group::new(c, "bulk_cheap_16", 50);
    g.bench("senders", || {
        let sums: Vec<AtomicUsize> = (0..16).map(|_| AtomicUsize::new(0)).collect();
        sync_wait(sch.schedule().then(move |()| sums).bulk(16, |i, s: &Vec<AtomicUsize>| {
            s[i].store(cheap_item(i) as usize, Ordering::Relaxed);
        }))
        .unwrap()
    });
    g.bench("rayon", || {
        let sums: Vec<AtomicUsize> = (0..16).map(|_| AtomicUsize::new(0)).collect();
        rpool
            .install(|| (0..16).into_par_iter().for_each(|i| sums[i].store(cheap_item(i) as usize, Ordering::Relaxed)));
        sums
    });
    g.bench("sequential", || (0..16).map(cheap_item).fold(0, u64::wrapping_add));
    g.finish();
}

/// A body of the n-body simulation.
#[derive(Clone, Copy)]
struct Body {
    pos: [f64; 3],
    vel: [f64; 3],
    mass: f64,
}

/// Bodies of the n-body group (rayon-demo's size).
const NBODY: usize = 2000;

fn bodies() -> Vec<Body> {
    (0..NBODY)
        .map(|i| {
            let t = i as f64 * 0.618_034;
            Body { pos: [t.sin() * 10.0, t.cos() * 10.0, (t * 0.5).sin()], vel: [0.0; 3], mass: 1.0 + (i % 7) as f64 }
        })
        .collect()
}

/// One step of body `b` against the positions of all of `old` (softened gravity).
#[inline]
fn advance(b: &mut Body, old: &[Body]) {
    const DT: f64 = 1e-3;
    let mut acc = [0.0; 3];
    for o in old {
        let d = [o.pos[0] - b.pos[0], o.pos[1] - b.pos[1], o.pos[2] - b.pos[2]];
        let r2 = d[0] * d[0] + d[1] * d[1] + d[2] * d[2] + 1e-3;
        let inv = o.mass / (r2 * r2.sqrt());
        for k in 0..3 {
            acc[k] += d[k] * inv;
        }
    }
    for ((v, p), a) in b.vel.iter_mut().zip(&mut b.pos).zip(acc) {
        *v += a * DT;
        *p += *v * DT;
    }
}

/// One step of rayon-demo's n-body simulation (2000 bodies, every body against every
/// other): ours with `bulk_each`, rayon's with `par_iter_mut`, against a snapshot of the
/// previous positions.
fn nbody(c: &mut Criterion) {
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    let slot: RefCell<Option<Vec<Body>>> = RefCell::new(Some(bodies()));
    let mut g = Group::new(c, "nbody", 10);
    g.bench("senders", || {
        let v = slot.borrow_mut().take().expect("bodies");
        let old = v.clone();
        let old = &old;
        let sndr = sch.schedule().then(move |()| v).bulk_each(move |_, b: &mut Body| advance(b, old));
        *slot.borrow_mut() = sync_wait(sndr).unwrap();
    });
    g.bench("rayon", || {
        let mut v = slot.borrow_mut().take().expect("bodies");
        let old = v.clone();
        rpool.install(|| v.par_iter_mut().for_each(|b| advance(b, &old)));
        *slot.borrow_mut() = Some(v);
    });
    g.finish();
}

// ---------------------------------------------------------------------------------------
// `tree8`: a run-time number of children per node, through `when_all_iter`.
// ---------------------------------------------------------------------------------------

/// Depth of the `tree8` groups: `8^TREE8_DEPTH` leaves, about 2.4 M nodes.
const TREE8_DEPTH: u32 = 7;

/// A node's own value, one, after `work` spin iterations.
fn node_value(work: u64) -> u64 {
    if work > 0 {
        black_box(work::spin(work));
    }
    1
}

/// A node of the 8-ary tree: the sum of its children's values plus one (so the root's
/// value is the node count), with `work` spin iterations at every node.
fn tree8_node(d: u32, work: u64) -> AnySender<'static, u64> {
    if d == 0 {
        // Without work a leaf is a plain value, as a user would write it.
        return if work == 0 { just(1).boxed() } else { just(()).then(move |()| node_value(work)).boxed() };
    }
    just(())
        .let_value(move |()| {
            when_all_iter((0..8).map(move |_| tree8_node(d - 1, work)))
                .then(move |children| children.iter().sum::<u64>() + node_value(work))
        })
        .boxed()
}

/// The same node as a user writes the recursion, with no `let_value` around it:
/// `when_all_iter` pulls its children when it starts, so building the root builds one
/// node.
fn tree8_natural(d: u32, work: u64) -> AnySender<'static, u64> {
    if d == 0 {
        return if work == 0 { just(1).boxed() } else { just(()).then(move |()| node_value(work)).boxed() };
    }
    when_all_iter((0..8).map(move |_| tree8_natural(d - 1, work)))
        .then(move |children| children.iter().sum::<u64>() + node_value(work))
        .boxed()
}

fn rayon_tree8(d: u32, work: u64) -> u64 {
    let own = node_value(work);
    if d == 0 {
        return own;
    }
    (0..8).into_par_iter().map(|_| rayon_tree8(d - 1, work)).sum::<u64>() + own
}

fn tree8_nodes(d: u32) -> u64 {
    (0..=d).map(|k| 8u64.pow(k)).sum()
}

/// The 8-ary tree through our run-time `when_all` of `AnySender`s against rayon's
/// `par_iter().map(..).sum()` over the children, without work and with about 300 ns of
/// work at every node.
fn tree8(c: &mut Criterion) {
    let (pool, rpool) = pools();
    let latent = latent_pool();
    let nodes = tree8_nodes(TREE8_DEPTH);
    for (name, work) in [("tree8", 0), ("tree8_work_300ns", work::calibrate(300.0))] {
        let mut g = Group::new(c, name, 10);
        g.group.throughput(Throughput::Elements(nodes));
        for (id, pool) in [("senders", &pool), ("senders_latent", &latent)] {
            let sch = pool.scheduler();
            g.bench(id, move || {
                let v = sync_wait(starts_on(sch.clone(), tree8_node(TREE8_DEPTH, work))).unwrap();
                assert_eq!(v, Some(nodes));
            });
        }
        let sch = pool.scheduler();
        g.bench("senders_natural", move || {
            let v = sync_wait(starts_on(sch.clone(), tree8_natural(TREE8_DEPTH, work))).unwrap();
            assert_eq!(v, Some(nodes));
        });
        g.bench("rayon", || assert_eq!(rpool.install(|| rayon_tree8(TREE8_DEPTH, work)), nodes));
        g.finish();
    }
}

// ---------------------------------------------------------------------------------------
// `tree` and `fib`: fork-join recursion through `when_all`, against `rayon::join`.
// ---------------------------------------------------------------------------------------

/// `fib(n)`, naively: `fib(n - 1) + fib(n - 2)` with both calls in a `when_all`, as a
/// user writes it with the crate's type-erased sender: one erased block per node, whose
/// children are built when the node runs (`let_value`). The erased environment's domain is
/// the pool's, so on a worker the `when_all` forks (and on the bench thread it does not).
fn fib_node(n: u64) -> AnySender<'static, u64> {
    if n < 2 {
        return just(n).boxed();
    }
    just(()).let_value(move |()| when_all((fib_node(n - 1), fib_node(n - 2))).then(fib_combine)).boxed()
}

fn fib_combine((a, b): (u64, u64)) -> u64 {
    a + b
}

/// [`fib_node`] written with [`fork_join`]: each node is one `when_all` operation whose
/// children are built when it starts, with no `let_value` around it.
fn fib_fork_join(n: u64) -> AnySender<'static, u64> {
    if n < 2 {
        return just(n).boxed();
    }
    fork_join(move || fib_fork_join(n - 1), move || fib_fork_join(n - 2)).then(fib_combine).boxed()
}

/// [`tree_node`] written with [`fork_join`].
fn tree_fork_join(d: u32) -> AnySender<'static, u64> {
    if d <= 1 {
        return just(1).boxed();
    }
    fork_join(move || tree_fork_join(d - 1), move || tree_fork_join(d - 1)).then(|(a, b)| a + b + 1).boxed()
}

/// A full binary tree of depth `d` (`2^d - 1` nodes) whose value is its node count, as
/// [`fib_node`] builds it.
fn tree_node(d: u32) -> AnySender<'static, u64> {
    if d <= 1 {
        return just(1).boxed();
    }
    just(()).let_value(move |()| when_all((tree_node(d - 1), tree_node(d - 1))).then(|(a, b)| a + b + 1)).boxed()
}

fn seq_fib(n: u64) -> u64 {
    if n < 2 { n } else { seq_fib(n - 1) + seq_fib(n - 2) }
}

fn seq_tree(d: u32) -> u64 {
    // `black_box` keeps the compiler from merging the two identical calls into one.
    if d <= 1 { 1 } else { seq_tree(black_box(d - 1)) + seq_tree(black_box(d - 1)) + 1 }
}

fn rayon_fib(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        let (a, b) = rayon::join(|| rayon_fib(n - 1), || rayon_fib(n - 2));
        a + b
    }
}

fn rayon_tree(d: u32) -> u64 {
    if d <= 1 {
        1
    } else {
        let (a, b) = rayon::join(|| rayon_tree(d - 1), || rayon_tree(d - 1));
        a + b + 1
    }
}

/// One node of the erased floor (see `common/floor.rs`): a block holding the function
/// that runs the node and its argument, made by the parent and run by one indirect call
/// on whichever worker runs the child. It is the least that any recursion which erases
/// every node must do: no sender, receiver, stop token or panic handling.
type ErasedNode = floor::Slot<(fn(u64) -> u64, u64)>;

fn erased(f: fn(u64) -> u64, arg: u64) -> ErasedNode {
    floor::Slot::new((f, arg))
}

/// Frees the node's block, then runs it.
fn run_erased(node: ErasedNode) -> u64 {
    let (f, arg) = node.get();
    drop(node);
    // `black_box`: the call stays indirect, as an erased sender's is.
    black_box(f)(arg)
}

/// [`rayon_fib`] with every call erased, as [`fib_node`] erases every node.
fn floor_fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = (erased(floor_fib, n - 1), erased(floor_fib, n - 2));
    let (a, b) = rayon::join(move || run_erased(a), move || run_erased(b));
    a + b
}

/// [`rayon_tree`] with every call erased.
fn floor_tree(d: u64) -> u64 {
    if d <= 1 {
        return 1;
    }
    let (a, b) = (erased(floor_tree, d - 1), erased(floor_tree, d - 1));
    let (a, b) = rayon::join(move || run_erased(a), move || run_erased(b));
    a + b + 1
}

/// Where a node of the completion floor delivers its value: a function called
/// indirectly with the parent's slot, as a sender completes by calling its (erased)
/// receiver instead of returning.
struct Completion<'a> {
    f: fn(&mut u64, u64),
    slot: &'a mut u64,
}

impl Completion<'_> {
    fn complete(self, value: u64) {
        // `black_box`: the call stays indirect, as an erased receiver's is.
        black_box(self.f)(self.slot, value);
    }
}

fn store(slot: &mut u64, value: u64) {
    *slot = value;
}

/// A node of the completion floor: [`ErasedNode`] whose function completes through a
/// [`Completion`].
type CompletionNode = floor::Slot<(fn(u64, Completion<'_>), u64)>;

/// Frees the node's block, then runs it by one indirect call.
fn run_completion(node: CompletionNode, done: Completion<'_>) {
    let (f, arg) = node.get();
    drop(node);
    black_box(f)(arg, done);
}

/// The erased floor with what a sender adds to it at every node: each node delivers
/// its value by an indirect call into a slot of its parent's (a receiver), and the
/// parent completes by such a call once both slots are filled (the join of
/// `when_all`). Still no stop token, no panic handling, no operation state.
fn completion_floor(node: fn(u64, Completion<'_>), arg: u64) -> u64 {
    let mut out = 0;
    node(arg, Completion { f: store, slot: &mut out });
    out
}

/// Forks the children `(f, a)` and `(f, b)` of a completion-floor node, returning both
/// values once both delivered them.
fn completion_join(f: fn(u64, Completion<'_>), a: u64, b: u64) -> (u64, u64) {
    let (na, nb) = (floor::Slot::new((f, a)), floor::Slot::new((f, b)));
    let (mut va, mut vb) = (0, 0);
    let (da, db) = (Completion { f: store, slot: &mut va }, Completion { f: store, slot: &mut vb });
    rayon::join(move || run_completion(na, da), move || run_completion(nb, db));
    (va, vb)
}

/// [`floor_fib`] completing through receivers.
fn completion_fib(n: u64, done: Completion<'_>) {
    if n < 2 {
        return done.complete(n);
    }
    let (a, b) = completion_join(completion_fib, n - 1, n - 2);
    done.complete(a + b);
}

/// [`floor_tree`] completing through receivers.
fn completion_tree(d: u64, done: Completion<'_>) {
    if d <= 1 {
        return done.complete(1);
    }
    let (a, b) = completion_join(completion_tree, d - 1, d - 1);
    done.complete(a + b + 1);
}

/// [`rayon_fib`] with only the indirect call of the erased floor, no block: what erasure
/// costs even with free storage.
fn floor_fib_indirect(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let f: fn(u64) -> u64 = floor_fib_indirect;
    let (a, b) = rayon::join(|| black_box(f)(n - 1), || black_box(f)(n - 2));
    a + b
}

/// [`rayon_tree`] with only the indirect call.
fn floor_tree_indirect(d: u64) -> u64 {
    if d <= 1 {
        return 1;
    }
    let f: fn(u64) -> u64 = floor_tree_indirect;
    let (a, b) = rayon::join(|| black_box(f)(d - 1), || black_box(f)(d - 1));
    a + b + 1
}

/// How one recursion benchmark computes its value.
struct Recursion {
    name: &'static str,
    want: u64,
    /// `sync_wait(starts_on(pool, node))`: `when_all` forked by the pool.
    senders: fn(&PoolScheduler) -> u64,
    /// The same recursion written with `fork_join`.
    senders_fork_join: fn(&PoolScheduler) -> u64,
    /// `sync_wait(node)` on the bench thread: the default domain, sequential `when_all`
    /// (the per-node cost of our machinery without any queue).
    senders_default: fn() -> u64,
    /// `install(|| ..)` of the `rayon::join` recursion, without cutoff.
    rayon: fn() -> u64,
    /// `install(|| ..)` of the erased floor: the `rayon::join` recursion with every call
    /// erased.
    floor: fn() -> u64,
    /// The same with the indirect call alone (no block).
    floor_indirect: fn() -> u64,
    /// The erased floor completing through receivers.
    floor_completion: fn() -> u64,
    /// Plain recursion.
    sequential: fn() -> u64,
}

/// Checks that the four ways agree, then times them. The check runs once, when the
/// first benchmark of the group runs (outside its timed loop), so a filtered-out group
/// costs nothing.
fn recursion_group(c: &mut Criterion, r: Recursion) {
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    let latent = latent_pool();
    let latent_sch = latent.scheduler();
    let name = r.name;
    let checked = Once::new();
    let check = || {
        checked.call_once(|| {
            assert_eq!((r.sequential)(), r.want, "{name}: plain recursion");
            assert_eq!(rpool.install(r.rayon), r.want, "{name}: rayon");
            assert_eq!(rpool.install(r.floor), r.want, "{name}: erased floor");
            assert_eq!(rpool.install(r.floor_indirect), r.want, "{name}: indirect calls");
            assert_eq!(rpool.install(r.floor_completion), r.want, "{name}: completion floor");
            assert_eq!((r.senders_default)(), r.want, "{name}: senders, default domain");
            assert_eq!((r.senders)(&sch), r.want, "{name}: senders, pool");
            assert_eq!((r.senders)(&latent_sch), r.want, "{name}: senders, pool, latent forks");
            assert_eq!((r.senders_fork_join)(&sch), r.want, "{name}: senders, fork_join");
        })
    };

    let mut g = Group::new(c, name, 10);
    g.bench("senders", || {
        check();
        (r.senders)(&sch)
    });
    g.bench("senders_latent", || {
        check();
        (r.senders)(&latent_sch)
    });
    g.bench("senders_fork_join", || {
        check();
        (r.senders_fork_join)(&sch)
    });
    g.bench("rayon", || {
        check();
        rpool.install(r.rayon)
    });
    g.bench("floor_erased", || {
        check();
        rpool.install(r.floor)
    });
    g.bench("floor_indirect", || {
        check();
        rpool.install(r.floor_indirect)
    });
    g.bench("floor_completion", || {
        check();
        rpool.install(r.floor_completion)
    });
    g.bench("senders_default", || {
        check();
        (r.senders_default)()
    });
    g.bench("sequential", || {
        check();
        (r.sequential)()
    });
    g.finish();
}

fn tree(c: &mut Criterion) {
    recursion_group(
        c,
        Recursion {
            name: "tree",
            want: (1 << TREE_DEPTH) - 1,
            senders: |sch| sync_wait(starts_on(sch.clone(), tree_node(black_box(TREE_DEPTH)))).unwrap().unwrap(),
            senders_fork_join: |sch| {
                sync_wait(starts_on(sch.clone(), tree_fork_join(black_box(TREE_DEPTH)))).unwrap().unwrap()
            },
            senders_default: || sync_wait(tree_node(black_box(TREE_DEPTH))).unwrap().unwrap(),
            rayon: || rayon_tree(black_box(TREE_DEPTH)),
            floor: || floor_tree(black_box(u64::from(TREE_DEPTH))),
            floor_indirect: || floor_tree_indirect(black_box(u64::from(TREE_DEPTH))),
            floor_completion: || completion_floor(completion_tree, black_box(u64::from(TREE_DEPTH))),
            sequential: || seq_tree(black_box(TREE_DEPTH)),
        },
    );
}

/// chili's benchmark: a 1023-node tree without work, timed from a worker. Each call runs
/// [`TREE1023_REPEAT`] trees back to back on the pool (ours: one `Task` on a worker
/// awaiting each tree, whose `when_all`s fork there; rayon: one `install` looping
/// `rayon::join` trees), so the trip onto the pool is paid once per hundred trees; and
/// plain recursion, the issue's yardstick (≤ 4× sequential).
fn tree1023(c: &mut Criterion) {
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    let want = ((1u64 << TREE1023_DEPTH) - 1) * TREE1023_REPEAT;
    let latent = latent_pool();
    let trees = |sch: &PoolScheduler| {
        let trees = Task::<u64, Infallible>::new(async {
            let mut sum = 0;
            for _ in 0..TREE1023_REPEAT {
                sum += tree_node(black_box(TREE1023_DEPTH)).await?;
            }
            Ok(sum)
        });
        assert_eq!(sync_wait(starts_on(sch.clone(), trees)).unwrap(), Some(want));
    };
    let mut g = Group::new(c, "tree1023", 10);
    g.bench("senders", || trees(&sch));
    let latent_sch = latent.scheduler();
    g.bench("senders_latent", move || trees(&latent_sch));
    g.bench("rayon", || {
        let sum = rpool.install(|| (0..TREE1023_REPEAT).map(|_| rayon_tree(black_box(TREE1023_DEPTH))).sum::<u64>());
        assert_eq!(sum, want);
    });
    g.bench("sequential", || {
        assert_eq!((0..TREE1023_REPEAT).map(|_| seq_tree(black_box(TREE1023_DEPTH))).sum::<u64>(), want)
    });
    g.finish();
}

fn fib(c: &mut Criterion) {
    recursion_group(
        c,
        Recursion {
            name: "fib",
            want: 832_040,
            senders: |sch| sync_wait(starts_on(sch.clone(), fib_node(black_box(FIB_N)))).unwrap().unwrap(),
            senders_fork_join: |sch| {
                sync_wait(starts_on(sch.clone(), fib_fork_join(black_box(FIB_N)))).unwrap().unwrap()
            },
            senders_default: || sync_wait(fib_node(black_box(FIB_N))).unwrap().unwrap(),
            rayon: || rayon_fib(black_box(FIB_N)),
            floor: || floor_fib(black_box(FIB_N)),
            floor_indirect: || floor_fib_indirect(black_box(FIB_N)),
            floor_completion: || completion_floor(completion_fib, black_box(FIB_N)),
            sequential: || seq_fib(black_box(FIB_N)),
        },
    );
}

/// fib(30) through `spawn_future` + `when_all` (issue 26's row), beside the same
/// recursion through `fork_join` and `rayon::join`.
fn fib_spawn_future_group(c: &mut Criterion) {
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    assert_eq!(fib_spawned(&sch, FIB_N), 832_040);
    let mut g = Group::new(c, "fib_spawn_future", 10);
    g.bench("senders", || fib_spawned(&sch, black_box(FIB_N)));
    g.bench("senders_fork_join", || {
        sync_wait(starts_on(sch.clone(), fib_fork_join(black_box(FIB_N)))).unwrap().unwrap()
    });
    g.bench("rayon", || rpool.install(|| rayon_fib(black_box(FIB_N))));
    g.finish();
}

/// The argument of the `nested_factorial` rows: rayon-demo's `9999!`.
const FACTORIAL_N: u32 = 9999;

/// Nested fork-join (issue 39): `fib(30)`, the 2^20 tree and `9999!` by divide and
/// conquer, each node `sync_wait`ing a `when_all` of its two children on the pool
/// (`common/nested.rs`), against the same recursions with `rayon::join`; started from
/// the bench thread onto a worker of each pool.
fn nested(c: &mut Criterion) {
    let (pool, rpool) = pools();
    let sch = &pool.scheduler();
    let on_pool = |f: &(dyn Fn() -> u64 + Sync)| sync_wait(senders::schedule(sch).then(|()| f())).unwrap().unwrap();
    assert_eq!(on_pool(&|| nested_fib(black_box(FIB_N), sch)), 832_040);
    assert_eq!(on_pool(&|| nested_tree(black_box(TREE_DEPTH), sch)), (1 << TREE_DEPTH) - 1);
    let want = seq_product(1, FACTORIAL_N);
    assert_eq!(want.trailing_zeros(), u64::from(FACTORIAL_N - FACTORIAL_N.count_ones()), "9999! has 9991 factors 2");
    let ours = sync_wait(senders::schedule(sch).then(|()| nested_product(1, FACTORIAL_N, sch))).unwrap().unwrap();
    assert_eq!(ours, want, "9999!: senders");
    assert_eq!(rpool.install(|| rayon_product(1, FACTORIAL_N)), want, "9999!: rayon");

    let mut g = Group::new(c, "nested_fib", 10);
    g.bench("senders", || on_pool(&|| nested_fib(black_box(FIB_N), sch)));
    g.bench("rayon", || rpool.install(|| rayon_fib(black_box(FIB_N))));
    g.finish();
    let mut g = Group::new(c, "nested_tree", 10);
    g.bench("senders", || on_pool(&|| nested_tree(black_box(TREE_DEPTH), sch)));
    g.bench("rayon", || rpool.install(|| rayon_tree(black_box(TREE_DEPTH))));
    g.finish();
    let mut g = Group::new(c, "nested_factorial", 10);
    g.bench("senders", || {
        sync_wait(senders::schedule(sch).then(|()| nested_product(1, black_box(FACTORIAL_N), sch))).unwrap().unwrap()
    });
    g.bench("rayon", || rpool.install(|| rayon_product(1, black_box(FACTORIAL_N))));
    g.finish();
}

/// `n` round trips `f`, each timed by [`time_cold`] after the workers have gone to
/// sleep; prints the median time of one. Returns the number of round trips.
fn cold(n: u64, f: &mut dyn FnMut()) -> u64 {
    let times: Vec<f64> = (0..n).map(|_| time_cold(f).as_nanos() as f64).collect();
    println!("median round trip to a sleeping pool: {}", format_ns(median(&times)));
    n
}

/// `kernel` over `data` with the early `bulk_each` of the `bulk` groups, for [`profile`].
fn profile_bulk<K: Fn(&mut f64) + Copy + Send + Sync + 'static>(
    sch: &PoolScheduler,
    data: &mut Vec<f64>,
    kernel: K,
) -> u64 {
    let v = std::mem::take(data);
    *data = sync_wait(sch.schedule().then(move |()| v).bulk_each(move |_, x: &mut f64| kernel(x)))
        .unwrap()
        .expect("not stopped");
    data.len() as u64
}

/// `SENDERS_POOL_PROFILE=<what>:<n>:<repeats>`: runs one workload without criterion.
fn profile(spec: &str) {
    let mut parts = spec.split(':');
    let what = parts.next().unwrap_or("fib");
    let n: u64 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(22);
    let repeats: usize = parts.next().and_then(|s| s.parse().ok()).unwrap_or(100);
    let (pool, rpool) = pools();
    let sch = pool.scheduler();
    let latent = latent_pool();
    let latent_sch = latent.scheduler();
    let mut data = if what.starts_with("bulk") { vec![0.5; n as usize] } else { Vec::new() };
    let start = Instant::now();
    let mut sum = 0;
    for _ in 0..repeats {
        sum += match what {
            "fib" => sync_wait(starts_on(sch.clone(), fib_node(n))).unwrap().unwrap(),
            "tree" => sync_wait(starts_on(sch.clone(), tree_node(n as u32))).unwrap().unwrap(),
            "fib_join" => sync_wait(starts_on(sch.clone(), fib_fork_join(n))).unwrap().unwrap(),
            "tree_join" => sync_wait(starts_on(sch.clone(), tree_fork_join(n as u32))).unwrap().unwrap(),
            "fib_spawn_future" => fib_spawned(&sch, n),
            "nested_fib" => sync_wait(senders::schedule(&sch).then(|()| nested_fib(n, &sch))).unwrap().unwrap(),
            "nested_tree" => {
                sync_wait(senders::schedule(&sch).then(|()| nested_tree(n as u32, &sch))).unwrap().unwrap()
            }
            "nested_factorial" => {
                let f = sync_wait(senders::schedule(&sch).then(|()| nested_product(1, n as u32, &sch)));
                f.unwrap().unwrap().bits()
            }
            "rayon_factorial" => rpool.install(|| rayon_product(1, n as u32)).bits(),
            "fib_latent" => sync_wait(starts_on(latent_sch.clone(), fib_node(n))).unwrap().unwrap(),
            "tree_latent" => sync_wait(starts_on(latent_sch.clone(), tree_node(n as u32))).unwrap().unwrap(),
            "fib_default" => sync_wait(fib_node(n)).unwrap().unwrap(),
            "tree8" => sync_wait(starts_on(sch.clone(), tree8_node(n as u32, 0))).unwrap().unwrap(),
            "tree8_natural" => sync_wait(starts_on(sch.clone(), tree8_natural(n as u32, 0))).unwrap().unwrap(),
            "rayon_tree8" => rpool.install(|| rayon_tree8(n as u32, 0)),
            // One spin per node: the leaves are erased blocks, as in `tree8_work_300ns`.
            "tree8_spin" => sync_wait(starts_on(sch.clone(), tree8_node(n as u32, 1))).unwrap().unwrap(),
            "rayon_tree8_spin" => rpool.install(|| rayon_tree8(n as u32, 1)),
            "rayon_fib" => rpool.install(|| rayon_fib(n)),
            "rayon_tree" => rpool.install(|| rayon_tree(n as u32)),
            "floor_fib" => rpool.install(|| floor_fib(n)),
            "floor_tree" => rpool.install(|| floor_tree(n)),
            "completion_fib" => rpool.install(|| completion_floor(completion_fib, n)),
            "completion_tree" => rpool.install(|| completion_floor(completion_tree, n)),
            "chain" => sync_wait(starts_on(sch.clone(), Chain { sch: sch.clone(), n: n as usize })).map_or(0, |_| 1),
            "rayon_chain" => {
                let (tx, rx) = mpsc::sync_channel(1);
                rpool.spawn(move || rayon_chain(n as usize, tx));
                rx.recv().map_or(0, |()| 1)
            }
            "outside" => (0..n).map(|_| sync_wait(sch.schedule()).map_or(0, |_| 1)).sum(),
            "rayon_outside" => (0..n).map(|_| rpool.install(|| 1)).sum(),
            "outside_cold" => cold(n, &mut || {
                sync_wait(sch.schedule()).expect("round trip");
            }),
            "rayon_outside_cold" => cold(n, &mut || rpool.install(|| ())),
            "bulk_mem" => profile_bulk(&sch, &mut data, add_one),
            "bulk_compute" => profile_bulk(&sch, &mut data, sin_sqrt),
            other => panic!("unknown profile workload {other:?}"),
        };
    }
    let per = start.elapsed() / repeats.max(1) as u32;
    println!("{what}({n}) × {repeats}: {per:?} per run (checksum {sum})");
}

// No plots: criterion's plotting backend fails where it finds no font (it needs none
// to measure), and the tables printed here are the results.
criterion::criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = schedule, round_trip_cold, bulk_mem, bulk_compute, bulk_small, nbody, tree8, tree, tree1023, fib,
        fib_spawn_future_group, nested
}

fn main() {
    if let Ok(spec) = std::env::var("SENDERS_POOL_PROFILE") {
        profile(&spec);
        return;
    }
    benches();
    Criterion::default().without_plots().configure_from_args().final_summary();
    print_ratios();
}
