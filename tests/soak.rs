//! Soak under faults: millions of spawns in random trees, with injected panics, stop
//! requests, scope closes and pools dropped under load, then an exact account.
//!
//! Ignored by default. Run it with
//!
//! ```text
//! cargo test --release --test soak -- --ignored soak
//! ```
//!
//! It runs rounds until `SOAK_SPAWNS` spawns have been made (default 10,000,000; the
//! nodes of task trees come on top) or `SOAK_SECS` seconds (default 900) have passed,
//! whichever comes first; CI runs it with
//! `SOAK_SECS=60`. `SOAK_SEED` replays a run (the seed is printed at the end and in every
//! failure message).
//!
//! A round builds a pool of 1 to 3 workers and grows one random tree in one of three
//! ways:
//!
//! - **counting**: one `spawn` per node into a [`CountingScope`]; the driver may
//!   `request_stop` the scope, `close` it, or drop the pool, at a random moment while
//!   the tree grows;
//! - **let**: the same tree in a `let_async_scope` under `stop_when` of a source the
//!   driver may stop;
//! - **task**: a tree of [`Task`]s, each awaiting `when_all` of its children, spawned
//!   into a counting scope.
//!
//! Faults, each at a small random rate per node: a panic in the node's work, a panic in
//! the `Drop` of a value its work owns (on the run path, and on the path where the work
//! is dropped without running), and a stop callback that panics when the driver requests
//! stop. At the end of every round:
//!
//! - every node was dropped exactly once and ran at most once; a node that did not run
//!   completed stopped, was refused by a closed scope, or had its `Drop` fault fire
//!   while being discarded;
//! - the join completed (the driver would hang otherwise; a watchdog aborts after a
//!   minute), and reported a panic exactly when a panic was injected into that round's
//!   work (and never a panic from nowhere);
//! - the pool's workers exited (the pool is dropped and joined).
//!
//! At the very end the number of live heap allocations (a counting global allocator)
//! equals the number before the first round, after the per-thread block caches of
//! exited threads are settled (see [`settle`]).

use std::alloc::{GlobalAlloc, Layout, System};
use std::convert::Infallible;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicIsize, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use senders::{
    CountingScope, InplaceStopSource, LetScopeToken, PoolScheduler, SenderExt, StaticThreadPool, StopCallback, Task,
    just, schedule, spawn, starts_on, stop_when, sync_wait, when_all,
};

// ---------------------------------------------------------------------------------------
// The counting allocator.

struct Counting;

/// Live allocations (allocations minus deallocations).
static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to `System` unchanged; the counter is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's layout.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(1, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
        // SAFETY: `ptr` came from `System` with this layout (every allocation does).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded; a reallocation keeps the live count unchanged.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Brings the crate's per-thread block caches of exited threads to their resting state.
///
/// A thread keeps freed blocks on its own lists and gives them back when it exits; blocks
/// of an exited thread that another thread frees later wait on that thread's parked
/// remote stack until a new thread adopts it and exits in turn. So the live count
/// depends on which parked stacks hold blocks. Starting [`SETTLE_THREADS`] threads at
/// once, each of which allocates one block (so that it adopts a parked stack) and then
/// exits, gives every parked stack's blocks back, as long as no more threads than that
/// ever used the crate at once (a round uses at most 6). Then it drains crossbeam's
/// epoch garbage.
fn settle() {
    let barrier = Barrier::new(SETTLE_THREADS);
    std::thread::scope(|s| {
        let threads: Vec<_> = (0..SETTLE_THREADS)
            .map(|_| {
                s.spawn(|| {
                    // One recycled block (an erased sender), freed on this thread.
                    // `AnySender` keeps a bare `just`, and a `then` of a `just` whose
                    // state fits a word and needs no drop, without a block; a `Vec`
                    // needs a drop, so this one takes a block.
                    assert_eq!(sync_wait(just(vec![1]).then(|v: Vec<i32>| v.len()).boxed()).unwrap(), Some(1));
                    barrier.wait();
                    // Park once with every settle thread alive: parking_lot sizes its
                    // global table for the most threads that have parked at once, and
                    // never frees an outgrown table; this grows it once, here.
                    let (lock, cv) = (parking_lot::Mutex::new(()), parking_lot::Condvar::new());
                    cv.wait_for(&mut lock.lock(), Duration::from_micros(100));
                    barrier.wait();
                })
            })
            .collect();
        // Joined one by one: unlike the end of the scope, `join` waits for the thread's
        // thread-local destructors (which give the caches back).
        for t in threads {
            t.join().expect("settle thread");
        }
    });
    // The pool's deques retire their buffers (and exited threads their epoch records)
    // through crossbeam's epoch garbage collector, which frees them a few steps later:
    // advance it until nothing is left to free.
    for _ in 0..1_000 {
        crossbeam_epoch::pin().flush();
    }
}

const SETTLE_THREADS: usize = 32;

/// The live allocation count once [`settle`] no longer changes it. crossbeam's epoch
/// collector keeps a few bags of garbage in flight (freeing a bag queues its node as new
/// garbage), and their number reaches its resting value only after a few rounds of
/// collection; the count is read when two settles in a row leave it unchanged.
fn settled() -> isize {
    let mut last = isize::MIN;
    for _ in 0..50 {
        settle();
        let now = LIVE.load(Ordering::SeqCst);
        if now == last {
            return now;
        }
        last = now;
    }
    panic!("the live allocation count does not settle (last {last})");
}

// ---------------------------------------------------------------------------------------
// Random numbers (SplitMix64) and the per-node plan.

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(1);
        mix(self.0)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// What one node does, derived from the round's seed and the node's id.
#[derive(Clone, Copy)]
struct Plan {
    children: usize,
    panic_in_work: bool,
    panic_in_drop: bool,
    stop_callback: bool,
    stop_callback_panics: bool,
}

impl Plan {
    fn of(seed: u64, id: usize, depth: u32) -> Plan {
        let r = mix(seed ^ mix(id as u64));
        // Mean fan-out a little above one, so trees grow large before depth or the
        // node budget cuts them; the root always has children.
        let children = if depth >= MAX_DEPTH {
            0
        } else if id == 0 {
            3
        } else {
            [0, 1, 1, 2, 2, 2, 3, 0][(r & 7) as usize]
        };
        Plan {
            children,
            panic_in_work: (r >> 8).is_multiple_of(20_000),
            panic_in_drop: (r >> 24).is_multiple_of(20_000),
            stop_callback: (r >> 40).is_multiple_of(4_000),
            stop_callback_panics: (r >> 52) & 1 == 0,
        }
    }
}

const MAX_DEPTH: u32 = 40;

/// The largest pool a round builds.
const MAX_WORKERS: usize = 3;

// ---------------------------------------------------------------------------------------
// The ledger of a round.

const RAN: u8 = 1;
const STOPPED: u8 = 2;
const REFUSED: u8 = 4;

/// Everything a round's nodes record.
struct Round {
    seed: u64,
    /// Nodes allowed in this round.
    budget: usize,
    next_id: AtomicUsize,
    /// Per node: `RAN`, `STOPPED`, `REFUSED` bits.
    state: Vec<AtomicU8>,
    /// Per node: how many times its owned value was dropped.
    drops: Vec<AtomicU8>,
    /// Per node: its drop fault fired (it panicked in `Drop`).
    drop_fault: Vec<AtomicBool>,
    /// Panics injected into work that reaches a scope (work, `Drop` on the run path).
    panics: AtomicUsize,
    /// Stop callbacks registered and panics they raised.
    callbacks: AtomicUsize,
    callback_panics: AtomicUsize,
    /// The round's stop source (the `let` way's outer stop; stop callbacks register here).
    source: InplaceStopSource,
}

impl Round {
    fn new(seed: u64, budget: usize) -> Arc<Round> {
        Arc::new(Round {
            seed,
            budget,
            next_id: AtomicUsize::new(0),
            state: (0..budget).map(|_| AtomicU8::new(0)).collect(),
            drops: (0..budget).map(|_| AtomicU8::new(0)).collect(),
            drop_fault: (0..budget).map(|_| AtomicBool::new(false)).collect(),
            panics: AtomicUsize::new(0),
            callbacks: AtomicUsize::new(0),
            callback_panics: AtomicUsize::new(0),
            source: InplaceStopSource::new(),
        })
    }

    /// A new node id, or `None` when the budget is spent.
    fn take_id(&self) -> Option<usize> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        (id < self.budget).then_some(id)
    }

    fn nodes(&self) -> usize {
        self.next_id.load(Ordering::Relaxed).min(self.budget)
    }

    fn mark(&self, id: usize, bit: u8) {
        let before = self.state[id].fetch_or(bit, Ordering::Relaxed);
        assert_eq!(before, 0, "seed {:#x}: node {id} completed twice ({before:#b} then {bit:#b})", self.seed);
    }
}

/// A value owned by a node's work: dropped when the work runs or when it is discarded.
/// Its `Drop` records the drop and, for a node planned so, panics.
struct Owned {
    round: Arc<Round>,
    id: usize,
    panic: bool,
}

impl Drop for Owned {
    fn drop(&mut self) {
        self.round.drops[self.id].fetch_add(1, Ordering::Relaxed);
        if self.panic && !std::thread::panicking() {
            self.round.drop_fault[self.id].store(true, Ordering::Relaxed);
            if self.round.state[self.id].load(Ordering::Relaxed) == RAN {
                self.round.panics.fetch_add(1, Ordering::Relaxed);
            }
            panic!("soak: injected panic in Drop of node {}", self.id);
        }
    }
}

/// The work of a node, after its children are spawned: faults, then the drop of `owned`.
fn node_work(round: &Round, id: usize, plan: Plan, owned: Owned) {
    if plan.stop_callback {
        round.callbacks.fetch_add(1, Ordering::Relaxed);
        let panics = plan.stop_callback_panics;
        let cb_round = owned.round.clone();
        let registering = std::thread::current().id();
        let mut cb = pin!(StopCallback::new(round.source.token(), move || {
            if panics {
                cb_round.callback_panics.fetch_add(1, Ordering::Relaxed);
                // Registered after stop, it runs inline, here: its panic is this work's.
                if std::thread::current().id() == registering {
                    cb_round.panics.fetch_add(1, Ordering::Relaxed);
                }
                panic!("soak: injected panic in a stop callback");
            }
        }));
        cb.as_mut().register();
        // Stay registered for a while, so that the driver's request meets some callbacks.
        for _ in 0..2_000 {
            std::hint::spin_loop();
        }
    }
    if plan.panic_in_work {
        round.panics.fetch_add(1, Ordering::Relaxed);
        panic!("soak: injected panic in the work of node {id}");
    }
    drop(owned);
}

// ---------------------------------------------------------------------------------------
// The three ways to grow a tree.

/// One node spawned into a scope through `tk`: on the pool, it marks itself run, spawns
/// its children, then does its work; if the pool completes it stopped, it marks itself
/// stopped.
fn spawn_node<'s, Tk>(tk: Tk, sch: &PoolScheduler, round: &Arc<Round>, id: usize, depth: u32)
where
    Tk: senders::scope::ScopeLifetime<'s> + Copy + Send + 's,
    Infallible: Into<<Tk::Association as senders::scope::Association>::Error>,
{
    let plan = Plan::of(round.seed, id, depth);
    let owned = Owned { round: round.clone(), id, panic: plan.panic_in_drop };
    let (r1, r2, sch1) = (round.clone(), round.clone(), sch.clone());
    let work = schedule(sch)
        .then(move |()| {
            r1.mark(id, RAN);
            for _ in 0..plan.children {
                let Some(child) = r1.take_id() else { break };
                spawn_node(tk, &sch1, &r1, child, depth + 1);
            }
            node_work(&r1, id, plan, owned);
        })
        .upon_stopped(move || r2.mark(id, STOPPED));
    if !spawn(work, tk) {
        round.mark(id, REFUSED);
    }
}

/// A tree of tasks: each marks itself run and awaits `when_all` of up to three
/// children (a missing child is `just(())`), then does its work.
fn task_node(round: Arc<Round>, id: usize, depth: u32) -> Task<'static, ()> {
    let plan = Plan::of(round.seed, id, depth);
    let owned = Owned { round: round.clone(), id, panic: plan.panic_in_drop };
    let stopped = StopMark { round: round.clone(), id, ran: false };
    Task::new(async move {
        let mut stopped = stopped;
        stopped.ran = true;
        round.mark(id, RAN);
        let child = || {
            (plan.children > 0)
                .then(|| round.take_id())
                .flatten()
                .map(|c| task_node(round.clone(), c, depth + 1).boxed())
                .unwrap_or_else(|| just(()).boxed())
        };
        let (a, b, c) = (child(), child(), child());
        // A stopped child completes this task stopped here, without resuming it.
        let _ = when_all((a, b, c)).await;
        node_work(&round, id, plan, owned);
        Ok(())
    })
}

/// Marks a task node stopped if its task is dropped without having started.
struct StopMark {
    round: Arc<Round>,
    id: usize,
    ran: bool,
}

impl Drop for StopMark {
    fn drop(&mut self) {
        if !self.ran {
            self.round.mark(self.id, STOPPED);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Way {
    Counting,
    Let,
    Task,
}

/// What the driver does while the tree grows.
#[derive(Clone, Copy, Debug)]
enum Fault {
    None,
    RequestStop,
    Close,
    DropPool,
}

/// The account of the whole soak.
#[derive(Default, Debug)]
struct Totals {
    rounds: usize,
    /// Nodes: one `spawn` each in the counting and let ways, one task in the task way.
    nodes: usize,
    spawns: usize,
    tasks: usize,
    ran: usize,
    stopped: usize,
    refused: usize,
    work_panics: usize,
    drop_faults: usize,
    callbacks: usize,
    callback_panics: usize,
    stop_requests: usize,
    closes: usize,
    pools_dropped_under_load: usize,
    joins_with_panic: usize,
}

/// Waits until the tree has `n` nodes (or has stopped growing).
fn wait_for_nodes(round: &Round, n: usize) {
    let deadline = Instant::now() + Duration::from_millis(50);
    while round.nodes() < n && Instant::now() < deadline {
        std::thread::yield_now();
    }
}

/// One round; `force` fixes its way and its number of workers (for the warm-up).
fn run_round(rng: &mut Rng, totals: &mut Totals, force: Option<(Way, usize)>) {
    let seed = rng.next();
    let workers = 1 + rng.below(MAX_WORKERS as u64) as usize;
    let way = [Way::Counting, Way::Counting, Way::Let, Way::Task][rng.below(4) as usize];
    let (way, workers) = force.unwrap_or((way, workers));
    let fault = [Fault::None, Fault::RequestStop, Fault::Close, Fault::DropPool][rng.below(4) as usize];
    let budget = 1_000 + rng.below(40_000) as usize;
    let fault_at = rng.below(budget as u64) as usize;
    let round = Round::new(seed, budget);
    let pool = StaticThreadPool::new(workers).expect("pool");
    let sch = pool.scheduler();
    let pool = std::sync::Mutex::new(Some(pool));
    let drop_pool = || drop(pool.lock().expect("pool lock").take());

    // The join's outcome: whether it reported a panic (`sync_wait` resumes it here).
    let joined_with_panic: bool = match way {
        Way::Counting | Way::Task => {
            let scope = CountingScope::new();
            let root = round.take_id().expect("budget > 0");
            if way == Way::Counting {
                spawn_node(scope.token(), &sch, &round, root, 0);
            } else {
                let task = starts_on(sch.clone(), task_node(round.clone(), root, 0));
                assert!(spawn(task, scope.token()));
            }
            wait_for_nodes(&round, fault_at);
            match fault {
                Fault::None => {}
                Fault::RequestStop => {
                    totals.stop_requests += 1;
                    scope.request_stop();
                    if catch_unwind(AssertUnwindSafe(|| round.source.request_stop())).is_err() {
                        assert!(
                            round.callback_panics.load(Ordering::Relaxed) > 0,
                            "seed {seed:#x}: a stop panic from nowhere"
                        );
                    }
                }
                Fault::Close => {
                    totals.closes += 1;
                    scope.close();
                }
                Fault::DropPool => {
                    totals.pools_dropped_under_load += 1;
                    drop_pool();
                }
            }
            catch_unwind(AssertUnwindSafe(|| sync_wait(scope.join()).expect("join is infallible"))).is_err()
        }
        Way::Let => {
            let root = round.take_id().expect("budget > 0");
            let work = just(()).let_async_scope(|tk: LetScopeToken<'_, '_, PoolScheduler>, ()| {
                spawn_node(tk, &sch, &round, root, 0);
            });
            let outcome = std::thread::scope(|s| {
                let driver = s.spawn(|| {
                    wait_for_nodes(&round, fault_at);
                    match fault {
                        Fault::None => {}
                        // The let way has no close: its scope closes when the function returns.
                        Fault::RequestStop | Fault::Close => {
                            let _ = catch_unwind(AssertUnwindSafe(|| round.source.request_stop()));
                        }
                        Fault::DropPool => drop_pool(),
                    }
                });
                let outcome = catch_unwind(AssertUnwindSafe(|| {
                    sync_wait(stop_when(starts_on(sch.clone(), work), round.source.token()))
                }));
                driver.join().expect("driver");
                outcome
            });
            match fault {
                Fault::None => {}
                Fault::RequestStop | Fault::Close => totals.stop_requests += 1,
                Fault::DropPool => totals.pools_dropped_under_load += 1,
            }
            match outcome {
                Ok(r) => {
                    // Infallible; `None` when the outer stop reached the scope.
                    let _ = r.expect("infallible");
                    false
                }
                Err(_) => true,
            }
        }
    };
    drop_pool();

    // The account.
    let nodes = round.nodes();
    let injected = round.panics.load(Ordering::Relaxed);
    let mut unrun_drop_faults = 0;
    for id in 0..nodes {
        let drops = round.drops[id].load(Ordering::Relaxed);
        let state = round.state[id].load(Ordering::Relaxed);
        let fault = round.drop_fault[id].load(Ordering::Relaxed);
        assert_eq!(drops, 1, "seed {seed:#x} ({way:?}, {fault:?}): node {id} dropped {drops} times");
        match state {
            RAN => totals.ran += 1,
            STOPPED => totals.stopped += 1,
            REFUSED => totals.refused += 1,
            0 => {
                assert!(fault, "seed {seed:#x} ({way:?}): node {id} neither ran, stopped nor was refused");
                unrun_drop_faults += 1;
            }
            _ => panic!("seed {seed:#x}: node {id} has state {state:#b}"),
        }
        totals.drop_faults += usize::from(fault);
    }
    // A panic from the run path always reaches the join. A `Drop` fault on the discard
    // path may reach it too (it unwinds through a parent's work, which then panics) or
    // not (a node discarded by the pool as it shuts down has no work left to panic in);
    // either way the join reports a panic only when some fault fired.
    if injected > 0 {
        assert!(joined_with_panic, "seed {seed:#x} ({way:?}, {fault:?}): {injected} injected panics were lost");
    } else if joined_with_panic {
        assert!(
            unrun_drop_faults > 0 || round.drop_fault.iter().any(|f| f.load(Ordering::Relaxed)),
            "seed {seed:#x} ({way:?}, {fault:?}): the join reported a panic nobody raised"
        );
    }
    totals.rounds += 1;
    totals.nodes += nodes;
    if way == Way::Task {
        totals.tasks += nodes;
    } else {
        totals.spawns += nodes;
    }
    totals.work_panics += injected;
    totals.callbacks += round.callbacks.load(Ordering::Relaxed);
    totals.callback_panics += round.callback_panics.load(Ordering::Relaxed);
    totals.joins_with_panic += usize::from(joined_with_panic);
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

#[test]
#[ignore = "a long soak: cargo test --release --test soak -- --ignored soak"]
fn soak() {
    let secs = env_u64("SOAK_SECS", 900);
    let target = env_u64("SOAK_SPAWNS", 10_000_000) as usize;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_nanos();
    let seed = env_u64("SOAK_SEED", mix(now as u64));

    // Injected panics print nothing (thousands of them would flood the output).
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map(String::as_str)
            .or(info.payload().downcast_ref::<&str>().copied());
        if !msg.is_some_and(|m| m.starts_with("soak: injected")) {
            eprintln!("{info}");
        }
    }));

    let watchdog_done = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU64::new(0));

    // Warm up what lives for the whole process by design, then take the baseline: lazy
    // statics, the caches' parked stacks, and the scopes' cores, which are never freed
    // but reused (one per scope alive at once and per shard count, which grows with the
    // number of pool workers alive at once: src/scope/core.rs).
    let mut rng = Rng(seed);
    let mut warm = Totals::default();
    for way in [Way::Counting, Way::Let, Way::Task] {
        let mut warm_rng = Rng(!seed);
        std::thread::scope(|s| s.spawn(|| run_round(&mut warm_rng, &mut warm, Some((way, MAX_WORKERS)))).join())
            .expect("warm-up round");
    }
    let baseline = settled();

    let watchdog = {
        let (done, progress) = (watchdog_done.clone(), progress.clone());
        std::thread::spawn(move || {
            let mut last = (u64::MAX, Instant::now());
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                let p = progress.load(Ordering::Relaxed);
                if p != last.0 {
                    last = (p, Instant::now());
                } else if last.1.elapsed() > Duration::from_secs(60) {
                    eprintln!("soak: no round finished for 60 s (seed {seed:#x}): a join hangs");
                    std::process::abort();
                }
            }
        })
    };

    let start = Instant::now();
    let mut totals = Totals::default();
    while totals.spawns < target && start.elapsed() < Duration::from_secs(secs) {
        // Rounds run on their own thread, which exits, like the pools' workers.
        std::thread::scope(|s| s.spawn(|| run_round(&mut rng, &mut totals, None)).join())
            .unwrap_or_else(|_| panic!("soak failed (seed {seed:#x}, round {})", totals.rounds));
        progress.fetch_add(1, Ordering::Relaxed);
    }
    watchdog_done.store(true, Ordering::Relaxed);
    watchdog.join().expect("watchdog");

    let end = settled();
    std::panic::set_hook(hook);
    eprintln!("soak: seed {seed:#x}, {:.1} s: {totals:#?}", start.elapsed().as_secs_f64());
    eprintln!("soak: live allocations {baseline} before, {end} after");
    assert_eq!(end, baseline, "seed {seed:#x}: {} allocations leaked", end - baseline);
}
