//! The timer service: pending timers in sharded binary heaps, and one thread that sleeps
//! until the earliest deadline and fires what is due.
//!
//! A timer is a [`TimerNode`] inside a pinned operation state (intrusive: setting a timer
//! allocates nothing but, now and then, a heap's array). Its deadline is kept as
//! nanoseconds since the service's epoch. Each shard is a mutex around a min-heap of
//! `(deadline, node)` entries; the node knows its position, so a stop request removes it
//! at once (`O(log n)`) and the memory it held in the heap is given back as the heap
//! shrinks. A thread picks its shard once, round-robin, so threads that set timers at
//! the same time rarely share a lock.
//!
//! The node's state changes only under its shard's lock:
//!
//! | state | meaning | next |
//! |---|---|---|
//! | `Idle` | not in a heap yet (its operation is starting) | `Pending` (inserted), `Fired` (already due), `Cancelled` (a stop request came first) |
//! | `Pending(i)` | at position `i` of its shard's heap | `Fired` (the timer thread popped it), `Cancelled` (a stop request removed it) |
//! | `Fired` | popped: its operation runs on | — |
//! | `Cancelled` | removed, or refused before insertion: its operation completes stopped | — |
//!
//! Whoever moves a node out of `Idle` or `Pending` decides how its operation ends, so
//! firing and cancelling never both complete it.
//!
//! **Sleeping.** The timer thread publishes in `sleeping_until` the deadline it will
//! wake for: `u64::MAX` while it scans (and while it has nothing to wait for). A thread
//! that inserts a deadline earlier than the published one takes the wake lock, marks the
//! service `dirty` and notifies; the thread rescans before it sleeps if `dirty` is set.
//! No insertion is missed: every scan starts by publishing `u64::MAX` (under the lock),
//! so an insertion that a scan did not see reads either `u64::MAX` (and notifies) or the
//! deadline a later scan published, which saw it. Idle, the thread waits on a condition
//! variable without a timeout: no timer, no wake-up, no CPU.

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::sync::{self, AtomicU64, Condvar, Mutex, Ordering};

/// Where a node is; changed only under its shard's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NodeState {
    Idle,
    Pending(usize),
    Fired,
    Cancelled,
}

/// A timer, embedded in its operation state. Its fields other than `state` are written
/// by the owner before the node is inserted (which publishes them, under the shard lock)
/// and only read afterwards.
pub(crate) struct TimerNode {
    /// The deadline, in nanoseconds since the service's epoch.
    at: u64,
    shard: usize,
    state: sync::UnsafeCell<NodeState>,
    /// What firing runs: `fire(op)`, on the timer thread, outside every lock. It runs no
    /// user code (a timed sender starts a queueing scheduler's hop, or hands the hop to a
    /// firing thread: `schedule_at.rs`), so it cannot block the thread.
    op: *const (),
    fire: unsafe fn(*const ()),
}

// SAFETY: `op` is an address the node only hands to `fire` (whose contract, from `set`,
// lets it run on the timer thread); `state` is touched only under the shard lock.
unsafe impl Send for TimerNode {}
// SAFETY: as above: shared, the node is read (`at`, `shard`, `op`, `fire`, written before
// it is shared) or changed under the shard lock (`state`).
unsafe impl Sync for TimerNode {}

impl TimerNode {
    /// A node not yet set.
    pub(crate) fn new() -> Self {
        TimerNode { at: 0, shard: 0, state: sync::UnsafeCell::new(NodeState::Idle), op: std::ptr::null(), fire: |_| {} }
    }

    /// Sets the node up, before it is inserted: at `at`, in `shard`, running `fire(op)`
    /// when due.
    ///
    /// # Safety
    ///
    /// `fire(op)` may be called once, on the timer thread, until the node is cancelled or
    /// its operation has completed, and returns without waiting for anything but the
    /// crate's own short locks (it runs no user code); the node is not shared yet.
    pub(crate) unsafe fn set(&mut self, at: u64, shard: usize, op: *const (), fire: unsafe fn(*const ())) {
        self.at = at;
        self.shard = shard;
        self.op = op;
        self.fire = fire;
    }
}

/// A heap entry: the deadline, copied for locality, and the node.
#[derive(Clone, Copy)]
struct Entry {
    at: u64,
    node: *const TimerNode,
}

/// A min-heap of pending timers whose nodes know their positions.
struct Heap {
    entries: Vec<Entry>,
}

// SAFETY: the nodes an entry points to are touched only under the lock that guards the
// heap, from whichever thread holds it; their operations are `Send`.
unsafe impl Send for Heap {}

/// Heaps keep at least this capacity when they shrink.
const MIN_CAPACITY: usize = 64;

impl Heap {
    /// Writes `e`'s position into its node.
    fn place(&mut self, i: usize, e: Entry) {
        self.entries[i] = e;
        // SAFETY: a node in the heap is alive (its operation cannot complete while it is
        // `Pending`), and its state is ours under the shard lock held by `&mut self`.
        unsafe { (*e.node).state.with_mut(|s| *s = NodeState::Pending(i)) };
    }

    fn sift_up(&mut self, mut i: usize, e: Entry) {
        while i > 0 {
            let parent = (i - 1) / 2;
            let p = self.entries[parent];
            if p.at <= e.at {
                break;
            }
            self.place(i, p);
            i = parent;
        }
        self.place(i, e);
    }

    fn sift_down(&mut self, mut i: usize, e: Entry) {
        let n = self.entries.len();
        loop {
            let left = 2 * i + 1;
            if left >= n {
                break;
            }
            let right = left + 1;
            let c = if right < n && self.entries[right].at < self.entries[left].at { right } else { left };
            let child = self.entries[c];
            if child.at >= e.at {
                break;
            }
            self.place(i, child);
            i = c;
        }
        self.place(i, e);
    }

    fn push(&mut self, e: Entry) {
        self.entries.push(e);
        self.sift_up(self.entries.len() - 1, e);
    }

    /// Removes the entry at `i`, which exists.
    fn remove(&mut self, i: usize) -> Entry {
        let last = self.entries.pop().expect("timers: removing from an empty heap");
        let removed = if i == self.entries.len() {
            last
        } else {
            let removed = self.entries[i];
            if i > 0 && self.entries[(i - 1) / 2].at > last.at {
                self.sift_up(i, last);
            } else {
                self.sift_down(i, last);
            }
            removed
        };
        let cap = self.entries.capacity();
        if cap > MIN_CAPACITY && self.entries.len() < cap / 4 {
            self.entries.shrink_to((cap / 2).max(MIN_CAPACITY));
        }
        removed
    }
}

/// What [`Timers::insert`] did with a node.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Inserted {
    /// It waits in a heap.
    Pending,
    /// Its deadline has passed: the caller runs it on now.
    Due,
    /// A stop request came first: the caller completes it stopped.
    Cancelled,
}

/// What [`Timers::cancel`] did with a node.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Cancel {
    /// It was pending and is removed: the caller completes it stopped.
    Removed,
    /// It was not inserted yet: its inserter completes it stopped.
    BeforeInsert,
    /// It fired, or was already cancelled: nothing to do.
    TooLate,
}

/// Linux's coarse monotonic clock (`CLOCK_MONOTONIC_COARSE`): the monotonic clock as of
/// the last tick, read from the vDSO at a third of the precise clock's cost here. It lags
/// the precise clock (which `Instant` reads) by less than a tick, so a deadline more than
/// [`Coarse::slack`] after it has surely not passed.
#[cfg(all(target_os = "linux", not(loom)))]
struct Coarse {
    /// The precise monotonic clock read just after the service's epoch (in ns): at or
    /// after the epoch, so times measured from it are at most the true ones.
    epoch: Option<u64>,
    /// Twice the coarse clock's resolution (its tick), plus a millisecond.
    slack: u64,
}

#[cfg(all(target_os = "linux", not(loom)))]
impl Coarse {
    fn new() -> Self {
        let mut res = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `clock_getres` writes the resolution into the valid timespec given.
        let ok = unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC_COARSE, &mut res) } == 0;
        // Without a coarse clock, no slack is enough: every deadline reads the clock.
        let slack = if ok { 2 * Self::nanos(res) + 1_000_000 } else { u64::MAX };
        Coarse { epoch: Self::read(libc::CLOCK_MONOTONIC), slack }
    }

    fn nanos(t: libc::timespec) -> u64 {
        u64::try_from(t.tv_sec)
            .unwrap_or(0)
            .saturating_mul(1_000_000_000)
            .saturating_add(u64::try_from(t.tv_nsec).unwrap_or(0))
    }

    fn read(clock: libc::clockid_t) -> Option<u64> {
        let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `clock_gettime` writes the time into the valid timespec given.
        (unsafe { libc::clock_gettime(clock, &mut t) } == 0).then(|| Self::nanos(t))
    }

    /// Whether `at` (ns since the epoch) is surely in the future (never, if the clocks
    /// cannot be read).
    fn surely_ahead(&self, at: u64) -> bool {
        let (Some(epoch), Some(now)) = (self.epoch, Self::read(libc::CLOCK_MONOTONIC_COARSE)) else { return false };
        at > now.saturating_sub(epoch).saturating_add(self.slack)
    }
}

/// The state of the timer thread's sleep, under the wake lock.
struct Wake {
    /// An insertion may have been missed by the current scan.
    dirty: bool,
}

/// The timer service.
pub(crate) struct Timers {
    epoch: Instant,
    shards: Box<[CachePadded<Mutex<Heap>>]>,
    /// The deadline the timer thread will wake for (see the module docs).
    sleeping_until: AtomicU64,
    /// A time known to have passed (the latest clock reading of the timer thread or of an
    /// insertion): an insertion at or before it is due without reading the clock.
    seen: AtomicU64,
    /// The epoch on the coarse clock (see [`Coarse`]).
    #[cfg(all(target_os = "linux", not(loom)))]
    coarse: Coarse,
    wake: Mutex<Wake>,
    cv: Condvar,
}

/// The next shard a thread without one takes: a round-robin hint, part of no protocol
/// (std's atomic, also under loom, whose atomics cannot be `static`).
static NEXT_SHARD: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

crate::sync::const_thread_local! {
    /// This thread's shard, `usize::MAX` until it sets its first timer.
    static SHARD: std::cell::Cell<usize> = std::cell::Cell::new(usize::MAX);
}

impl Timers {
    /// A service with `shards` heaps (at least one) and no thread.
    pub(crate) fn new(shards: usize) -> Self {
        Timers {
            epoch: Instant::now(),
            shards: (0..shards.max(1)).map(|_| CachePadded::new(Mutex::new(Heap { entries: Vec::new() }))).collect(),
            sleeping_until: AtomicU64::new(u64::MAX),
            seen: AtomicU64::new(0),
            #[cfg(all(target_os = "linux", not(loom)))]
            coarse: Coarse::new(),
            wake: Mutex::new(Wake { dirty: false }),
            cv: Condvar::new(),
        }
    }

    /// The process's service, whose thread is started by the first call.
    ///
    /// # Panics
    ///
    /// If the operating system cannot start the timer thread (the next call tries again).
    #[cfg(not(loom))]
    pub(crate) fn global() -> &'static Timers {
        static GLOBAL: std::sync::OnceLock<&'static Timers> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(|| {
            let shards = std::thread::available_parallelism().map_or(1, |n| n.get()).min(64);
            let timers: &'static Timers = Box::leak(Box::new(Timers::new(shards)));
            std::thread::Builder::new()
                .name("senders-timer".into())
                .spawn(move || timers.run())
                .unwrap_or_else(|e| panic!("senders: cannot start the timer thread: {e}"));
            timers
        })
    }

    /// `instant` in nanoseconds since the epoch: 0 before it, `u64::MAX` (never) past
    /// what 64 bits hold (585 years).
    pub(crate) fn nanos(&self, instant: Instant) -> u64 {
        u64::try_from(instant.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// `delay` from now, in nanoseconds since the epoch (`u64::MAX`, never, past what 64
    /// bits hold). The reading is not recorded in `seen`: every thread that sets a timer
    /// calls this, and would contend on it.
    pub(crate) fn after(&self, delay: Duration) -> u64 {
        self.nanos(Instant::now()).saturating_add(u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX))
    }

    /// Reads the clock, and records the reading in `seen`.
    fn now(&self) -> u64 {
        let now = self.nanos(Instant::now());
        self.seen.fetch_max(now, Ordering::Relaxed);
        now
    }

    /// Whether `at` has passed. Reading the clock was a third of what setting a timer
    /// cost, so the answer comes without it where it can: at or before a time known to
    /// have passed, the deadline has passed; far after the coarse clock (Linux), it has
    /// not. Only a deadline near the present reads the clock.
    fn passed(&self, at: u64) -> bool {
        if at <= self.seen.load(Ordering::Relaxed) {
            return true;
        }
        #[cfg(all(target_os = "linux", not(loom)))]
        if self.coarse.surely_ahead(at) {
            return false;
        }
        at <= self.now()
    }

    /// The calling thread's shard.
    pub(crate) fn shard(&self) -> usize {
        let n = self.shards.len();
        SHARD.with(|s| {
            let mut i = s.get();
            if i == usize::MAX {
                i = NEXT_SHARD.fetch_add(1, Ordering::Relaxed);
                s.set(i);
            }
            i % n
        })
    }

    /// Inserts a node set up with [`TimerNode::set`].
    ///
    /// # Safety
    ///
    /// `node` is alive and stays so while it is `Pending`; it is inserted once.
    pub(crate) unsafe fn insert(&self, node: *const TimerNode) -> Inserted {
        // SAFETY: alive by the caller's contract; `at` and `shard` are only read.
        let (at, shard) = unsafe { ((*node).at, (*node).shard) };
        {
            let mut heap = sync::lock(&self.shards[shard]);
            // SAFETY: the state is ours under the shard lock.
            match unsafe { (*node).state.with(|s| *s) } {
                NodeState::Idle => {}
                NodeState::Cancelled => return Inserted::Cancelled,
                state => unreachable!("timers: inserting a node that is {state:?}"),
            }
            if self.passed(at) {
                // SAFETY: as above.
                unsafe { (*node).state.with_mut(|s| *s = NodeState::Fired) };
                return Inserted::Due;
            }
            heap.push(Entry { at, node });
        }
        if at < self.sleeping_until.load(Ordering::SeqCst) {
            let mut wake = sync::lock(&self.wake);
            wake.dirty = true;
            self.cv.notify_one();
        }
        Inserted::Pending
    }

    /// Cancels a node: see [`Cancel`].
    ///
    /// # Safety
    ///
    /// `node` is alive, and was set up with [`TimerNode::set`].
    pub(crate) unsafe fn cancel(&self, node: *const TimerNode) -> Cancel {
        // SAFETY: alive by the caller's contract; `shard` is only read.
        let shard = unsafe { (*node).shard };
        let mut heap = sync::lock(&self.shards[shard]);
        // SAFETY: the state is ours under the shard lock.
        match unsafe { (*node).state.with(|s| *s) } {
            NodeState::Idle => {
                // SAFETY: as above.
                unsafe { (*node).state.with_mut(|s| *s = NodeState::Cancelled) };
                Cancel::BeforeInsert
            }
            NodeState::Pending(i) => {
                heap.remove(i);
                // SAFETY: as above.
                unsafe { (*node).state.with_mut(|s| *s = NodeState::Cancelled) };
                Cancel::Removed
            }
            NodeState::Fired | NodeState::Cancelled => Cancel::TooLate,
        }
    }

    /// Pops every node due at `now` into `due` (marked `Fired`), and returns the
    /// earliest deadline left, if any.
    pub(crate) fn take_due(&self, now: u64, due: &mut Vec<*const TimerNode>) -> Option<u64> {
        let mut next: Option<u64> = None;
        for shard in self.shards.iter() {
            let mut heap = sync::lock(shard);
            while let Some(first) = heap.entries.first().copied() {
                if first.at > now {
                    next = Some(next.map_or(first.at, |n| n.min(first.at)));
                    break;
                }
                heap.remove(0);
                // SAFETY: a node in the heap is alive; its state is ours under the lock.
                unsafe { (*first.node).state.with_mut(|s| *s = NodeState::Fired) };
                due.push(first.node);
            }
        }
        next
    }

    /// Runs the nodes `take_due` returned.
    ///
    /// # Safety
    ///
    /// Each node was popped by `take_due` and not run yet.
    pub(crate) unsafe fn fire(due: &mut Vec<*const TimerNode>) {
        for node in due.drain(..) {
            // SAFETY: a `Fired` node's operation waits for this call (nothing else
            // completes it), so it is alive; `set`'s contract lets us run it here, once.
            unsafe { ((*node).fire)((*node).op) };
        }
    }

    /// One round of the timer thread: fires what is due, then sleeps until the next
    /// deadline (at most `cap`, if given: for models) or a notification.
    pub(crate) fn round(&self, due: &mut Vec<*const TimerNode>, cap: Option<Duration>) {
        {
            let mut wake = sync::lock(&self.wake);
            wake.dirty = false;
            self.sleeping_until.store(u64::MAX, Ordering::SeqCst);
        }
        let next = self.take_due(self.now(), due);
        {
            let wake = sync::lock(&self.wake);
            if wake.dirty {
                drop(wake);
                // SAFETY: popped by `take_due` just now.
                unsafe { Self::fire(due) };
                return;
            }
            self.sleeping_until.store(next.unwrap_or(u64::MAX), Ordering::SeqCst);
        }
        // SAFETY: popped by `take_due` just now.
        unsafe { Self::fire(due) };
        let wake = sync::lock(&self.wake);
        if wake.dirty {
            return;
        }
        let wait = match next {
            None => cap,
            Some(at) => {
                let left = Duration::from_nanos(at.saturating_sub(self.now()));
                if left.is_zero() {
                    return;
                }
                Some(cap.map_or(left, |c| c.min(left)))
            }
        };
        // A poisoned lock only means a panic elsewhere: the guard is dropped either way.
        match wait {
            None => drop(self.cv.wait(wake)),
            #[cfg(not(loom))]
            Some(d) => drop(self.cv.wait_timeout(wake, d)),
            // Loom's timed wait never times out; a timeout may come at once, so the model
            // returns here, and only an untimed wait (nothing pending) blocks: a lost
            // wake-up shows as a deadlock.
            #[cfg(loom)]
            Some(_) => drop(wake),
        }
    }

    /// The timer thread: rounds forever.
    #[cfg(not(loom))]
    fn run(&self) -> ! {
        let mut due = Vec::new();
        loop {
            self.round(&mut due, None);
        }
    }

    /// The capacity of `shard`'s heap (for tests: it shrinks as timers leave).
    #[cfg(all(test, not(loom)))]
    pub(crate) fn capacity(&self, shard: usize) -> usize {
        sync::lock(&self.shards[shard]).entries.capacity()
    }

    /// The number of pending timers (for tests).
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.shards.iter().map(|s| sync::lock(s).entries.len()).sum()
    }
}
