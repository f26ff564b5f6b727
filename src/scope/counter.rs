//! The scope counter: per-worker shards under an SNZI-style root word.
//!
//! The protocol and its correctness argument are in `README.md` beside this file; in short:
//!
//! * The **root word** packs the scope's state flags, a generation, and a count: the
//!   number of *active shards* (shards whose count is above zero) plus the number of
//!   associations made from threads that have no shard (counted on the root directly).
//! * Each pool worker owns one cache-padded **shard**. Only its owner increments it;
//!   any thread decrements it, when an association made there ends (an association
//!   remembers its *home*). So a shard never goes below zero.
//! * Only a shard's 0→1 and 1→0 transitions touch the root. The owner adds the shard to
//!   the root after its 0→1 (a compare-exchange that also checks that the scope is open
//!   and of the right generation, and fails otherwise); whoever makes the 1→0 removes it.
//! * Zero is decided on the root alone, by the compare-exchange that brings its count to
//!   zero: if a join is waiting, the same compare-exchange sets `JOINED`, so no
//!   association can slip in between seeing zero and committing the join.
//!
//! `root == 0` implies that no association that completed `try_associate` is alive: a
//! live association keeps its home shard above zero, and a shard above zero whose 0→1
//! finished has its contribution in the root until a later 1→0 removes it.

use crossbeam_utils::CachePadded;

use crate::job::JobRef;
use crate::sync::{AtomicU64, AtomicUsize, Mutex, Ordering, lock};

/// Count bits of the root word.
const COUNT_MASK: u64 = (1 << 32) - 1;
/// The scope has been associated at least once (left `unused`).
pub(crate) const USED: u64 = 1 << 32;
/// `close()` was called, or the scope is joined: `try_associate` fails.
pub(crate) const CLOSED: u64 = 1 << 33;
/// A join operation has started and waits for the count to reach zero.
pub(crate) const JOINING: u64 = 1 << 34;
/// The count reached zero with a join started: `try_associate` fails for good.
pub(crate) const JOINED: u64 = 1 << 35;
/// The join machinery is done with the scope's memory: the owner may drop it.
pub(crate) const RELEASED: u64 = 1 << 36;
/// The generation starts here (27 bits; it only guards against stale tokens, see
/// `core.rs`, and a wrap-around is still memory-safe).
const GEN_SHIFT: u32 = 37;
/// The root word's generation bits.
const GEN_BITS: u64 = !((1 << GEN_SHIFT) - 1);
const FLAG_MASK: u64 = USED | CLOSED | JOINING | JOINED | RELEASED;
/// How many associations a thread without a shard reserves in the root at once: it
/// keeps the rest as credits in the spare word (see [`Counter::spare`]).
const BATCH: u64 = if cfg!(loom) { 3 } else { 64 };

/// Where an association was counted, so that its end is counted there too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Home {
    /// On a worker's shard.
    Shard(usize),
    /// Directly on the root (threads without a shard).
    Root,
}

/// What `start_join` found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum JoinStart {
    /// The count was zero: the scope is joined and the join completes now.
    Done,
    /// The waiter was queued; it is notified once, when the count reaches zero.
    Pending,
}

/// The scope's state as the P3149 state machine names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScopeState {
    /// No association yet; dropping the scope is allowed.
    Unused,
    /// Associations may succeed; the scope must be joined before it is dropped.
    Open,
    /// Closed to new associations; must be joined.
    Closed,
    /// A join is running; associations may still succeed.
    OpenAndJoining,
    /// A join is running; associations fail.
    ClosedAndJoining,
    /// Closed before any association; dropping is allowed.
    UnusedAndClosed,
    /// The count reached zero under a join; dropping is allowed.
    Joined,
}

/// The counter of one scope. `shards` is empty in single-atomic mode.
pub(crate) struct Counter {
    root: CachePadded<AtomicU64>,
    /// Credits of the threads without a shard: associations already counted in the root
    /// but not handed out yet, with the root's generation and a `CLOSED` mark, in the
    /// root's layout. Such a thread reserves [`BATCH`] associations in the root with one
    /// compare-exchange and takes the rest from here, a word the pool's workers never
    /// write, so that a thread spawning from outside the pool does not fetch the root's
    /// line back from the workers (who decrement it) on every spawn. `close` marks it, a
    /// join gives its credits back to the root, so the count can reach zero.
    spare: CachePadded<AtomicU64>,
    shards: Box<[CachePadded<AtomicUsize>]>,
    waiters: Mutex<Vec<JobRef>>,
}

impl Counter {
    /// A counter in the `unused` state with `shards` worker shards (zero: single atomic).
    pub(crate) fn new(shards: usize) -> Self {
        Counter {
            root: CachePadded::new(AtomicU64::new(0)),
            spare: CachePadded::new(AtomicU64::new(0)),
            shards: (0..shards).map(|_| CachePadded::new(AtomicUsize::new(0))).collect(),
            waiters: Mutex::new(Vec::new()),
        }
    }

    /// The number of worker shards.
    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The current generation.
    pub(crate) fn generation(&self) -> u64 {
        self.root.load(Ordering::Acquire) >> GEN_SHIFT
    }

    /// Tries to associate, counting on shard `index` if the calling thread owns one
    /// (`index` must be the calling thread's own shard index, unique among live threads).
    /// Fails if the scope is closed or joined, or is no longer generation `generation`.
    #[inline]
    pub(crate) fn try_associate(&self, generation: u64, index: Option<usize>) -> Option<Home> {
        let Some(shard) = index.and_then(|s| self.shards.get(s)) else {
            return self.associate_without_shard(generation).then_some(Home::Root);
        };
        let index = index.unwrap_or_default();
        debug_assert!(generation << GEN_SHIFT >> GEN_SHIFT == generation, "a generation fits its bits");
        // Only this thread increments this shard, and nothing decrements it below the
        // number of live associations counted here.
        if shard.fetch_add(1, Ordering::AcqRel) == 0 {
            // 0→1: the shard becomes active and must be counted in the root, which also
            // checks the state and the generation in the same step.
            if self.root_try_add(generation) {
                return Some(Home::Shard(index));
            }
            // No association is counted here (it was zero), so nobody else can have
            // moved it: going back down is not a 1→0 transition.
            shard.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        // The shard was active, so its contribution keeps the root count above zero and
        // the scope cannot be joined; only close and the generation need checking. This
        // load is where the association takes effect against `close`.
        let root = self.root.load(Ordering::Acquire);
        // Open and of `generation`, in one test: the generation fills the bits from
        // `GEN_SHIFT` up, so the word differs from `generation << GEN_SHIFT` there, or
        // has `CLOSED`, exactly when the association must fail.
        if (root ^ (generation << GEN_SHIFT)) & (CLOSED | GEN_BITS) == 0 {
            Some(Home::Shard(index))
        } else {
            // A 1→0 may have happened meanwhile (an association counted here ended on
            // another thread), so undo as a normal dissociation.
            self.dissociate(Home::Shard(index));
            None
        }
    }

    /// Ends an association counted at `home`. After the decrement that may release the
    /// scope, this touches the scope only if it made the count reach zero under a join,
    /// which makes it the one thread that finishes the join (see `root_sub`).
    #[inline]
    pub(crate) fn dissociate(&self, home: Home) {
        match home {
            Home::Root => self.root_sub(1),
            Home::Shard(i) => {
                if self.shards[i].fetch_sub(1, Ordering::AcqRel) == 1 {
                    self.root_sub(1);
                }
            }
        }
    }

    /// The association of a thread without a shard (or of any thread in single-atomic
    /// mode, which counts everything on the root, as it says). Out of line, so that the
    /// workers' path, inlined into every spawn, stays small.
    #[inline(never)]
    fn associate_without_shard(&self, generation: u64) -> bool {
        if self.shards.is_empty() { self.root_try_add(generation) } else { self.outside_try_add(generation) }
    }

    /// Adds one to the root count if the scope is open and of `generation`; marks it used.
    fn root_try_add(&self, generation: u64) -> bool {
        self.root_try_reserve(generation, 1) == Some(1)
    }

    /// Adds up to `most` (at least one) to the root count if the scope is open and of
    /// `generation`, and marks it used; returns how many. Only one while a join waits,
    /// so that no credits are made that the join would have to take back.
    fn root_try_reserve(&self, generation: u64, most: u64) -> Option<u64> {
        let mut old = self.root.load(Ordering::Relaxed);
        loop {
            if old & (CLOSED | JOINED) != 0 || old >> GEN_SHIFT != generation {
                return None;
            }
            let count = old & COUNT_MASK;
            assert!(count < COUNT_MASK, "senders: scope association count overflow");
            let n = if old & JOINING != 0 { 1 } else { most.min(COUNT_MASK - count) };
            match self.root.compare_exchange_weak(old, (old + n) | USED, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Some(n),
                Err(now) => old = now,
            }
        }
    }

    /// The association of a thread without a shard: a credit from the spare word, or,
    /// when there is none, a new batch reserved in the root (whose first association is
    /// this one).
    ///
    /// A credit is an association the root already counts, so taking one needs no check
    /// of the root: the scope cannot be joined while the credit is counted, `close` marks
    /// the spare word before it returns, and the generation is checked in the spare word
    /// itself. (An association racing `close` may succeed by a credit after another one
    /// failed on the root; either way it is counted, and none succeeds once `close` has
    /// returned.)
    fn outside_try_add(&self, generation: u64) -> bool {
        let mut spare = self.spare.load(Ordering::Relaxed);
        loop {
            if spare & CLOSED != 0 || spare >> GEN_SHIFT != generation {
                return false;
            }
            if spare & COUNT_MASK == 0 {
                return self.refill(generation);
            }
            match self.spare.compare_exchange_weak(spare, spare - 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return true,
                Err(now) => spare = now,
            }
        }
    }

    /// Reserves a batch in the root and puts all but one (this association) in the spare
    /// word.
    #[cold]
    fn refill(&self, generation: u64) -> bool {
        let Some(n) = self.root_try_reserve(generation, BATCH) else {
            return false;
        };
        let credits = n - 1;
        if credits == 0 {
            return true;
        }
        // The association counted by the reservation keeps the scope from being joined
        // (and so recycled), so the spare word is of this generation; `close` may have
        // marked it since the reservation.
        let published = self
            .spare
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |spare| (spare & CLOSED == 0).then_some(spare + credits))
            .is_ok();
        if !published {
            self.root_sub(credits);
            return true;
        }
        // A join whose read-modify-write of the root came after the reservation may have
        // taken the spare word's credits back before they were published here. Either its
        // taking comes after this publication in the spare word's order (and it took
        // these credits too), or it synchronized with this publication, so this load sees
        // `JOINING`: then give the credits back here (whoever takes them first does).
        // (`close` needs no such check: its mark makes the publication fail.)
        if self.root.load(Ordering::Acquire) & JOINING != 0 {
            self.take_back_credits(false);
        }
        true
    }

    /// Takes every credit out of the spare word and subtracts them from the root (the
    /// subtraction may be the one that joins the scope); with `close`, also marks the
    /// word so that no credit is taken or published again.
    fn take_back_credits(&self, close: bool) {
        let mark = if close { CLOSED } else { 0 };
        // AcqRel: see `refill` for the pairing with a publication.
        let (Ok(old) | Err(old)) =
            self.spare.fetch_update(Ordering::AcqRel, Ordering::Acquire, |spare| Some((spare & !COUNT_MASK) | mark));
        if old & COUNT_MASK != 0 {
            self.root_sub(old & COUNT_MASK);
        }
    }

    /// Subtracts `n` from the root count. If that reaches zero while a join waits, the
    /// same step sets `JOINED`, and this thread then hands the waiters their notice.
    fn root_sub(&self, n: u64) {
        let mut old = self.root.load(Ordering::Relaxed);
        loop {
            debug_assert!(old & COUNT_MASK >= n, "scope count underflow");
            let mut new = old - n;
            if new & COUNT_MASK == 0 && old & JOINING != 0 {
                new |= JOINED | CLOSED;
            }
            match self.root.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    if new & JOINED != 0 {
                        self.release_waiters();
                    }
                    return;
                }
                Err(now) => old = now,
            }
        }
    }

    /// Called once, by the thread that set `JOINED`: takes the waiters, marks the scope
    /// released (the last touch of its memory), then notifies them.
    fn release_waiters(&self) {
        let waiters = {
            let mut list = lock(&self.waiters);
            let waiters = std::mem::take(&mut *list);
            // Under the lock: a join starting after this sees `RELEASED` and completes
            // inline; one that started before is in `waiters`.
            self.root.fetch_or(RELEASED, Ordering::AcqRel);
            waiters
        };
        for w in waiters {
            w.execute();
        }
    }

    /// Closes the scope to new associations: on the root first (the shards' path checks
    /// it there), then on the spare word, whose credits go back to the root. Every
    /// association that starts after this returns fails.
    pub(crate) fn close(&self) {
        self.root.fetch_or(CLOSED, Ordering::AcqRel);
        self.take_back_credits(true);
    }

    /// Starts a join: completes now if the count is zero, else queues `waiter`.
    ///
    /// Unused credits are given back first, so that a scope with no association alive
    /// joins here and now; and again once `JOINING` is set, in case a batch reserved
    /// before that was published after the first time (`refill` explains why one of the
    /// two sides sees the other). The second time may join the scope and notify
    /// `waiter` before this returns `Pending`; or it may come after another thread joined
    /// and released the scope, even after its core was recycled: it then takes no
    /// credit, or a later generation's, which it subtracts from that generation's root,
    /// so that count stays exact (the core is type-stable memory).
    pub(crate) fn start_join(&self, waiter: JobRef) -> JoinStart {
        // The first time only if there are credits: it is an optimization, the second
        // time is what the argument needs (and so is a read-modify-write).
        if self.spare.load(Ordering::Relaxed) & COUNT_MASK != 0 {
            self.take_back_credits(false);
        }
        let start = self.start_join_on_root(waiter);
        if start == JoinStart::Pending {
            self.take_back_credits(false);
        }
        start
    }

    fn start_join_on_root(&self, waiter: JobRef) -> JoinStart {
        let mut list = lock(&self.waiters);
        let mut old = self.root.load(Ordering::Acquire);
        loop {
            if old & RELEASED != 0 {
                return JoinStart::Done;
            }
            if old & JOINED != 0 {
                // Joined, but the thread that joined it has not taken the list yet: it
                // will notify this waiter too.
                list.push(waiter);
                return JoinStart::Pending;
            }
            let new = if old & COUNT_MASK == 0 { old | JOINING | JOINED | CLOSED | RELEASED } else { old | JOINING };
            match self.root.compare_exchange_weak(old, new, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) if new & RELEASED != 0 => return JoinStart::Done,
                Ok(_) => {
                    list.push(waiter);
                    return JoinStart::Pending;
                }
                Err(now) => old = now,
            }
        }
    }

    /// The P3149 state.
    pub(crate) fn state(&self) -> ScopeState {
        decode(self.root.load(Ordering::Acquire))
    }

    /// Whether the owner may drop the scope (unused, unused-and-closed, or joined and
    /// released by the join machinery).
    pub(crate) fn droppable(&self) -> bool {
        let root = self.root.load(Ordering::Acquire);
        root & (USED | JOINING) == 0 || root & RELEASED != 0
    }

    /// Prepares the counter for a new scope: the next generation, `unused`, count zero.
    /// Tokens of the old generation fail to associate from now on.
    ///
    /// Must only be called on a droppable counter (no association is alive, no join
    /// will touch it); stale tokens may still run `try_associate` concurrently.
    pub(crate) fn recycle(&self) {
        let old = self.root.load(Ordering::Acquire);
        debug_assert!(self.droppable());
        let generation = ((old >> GEN_SHIFT) + 1) & ((1 << (64 - GEN_SHIFT)) - 1);
        // A stale `root_try_add` compares against the old word and fails; a stale shard
        // increment is undone by its own thread. The spare word holds no credit (the
        // count is zero); a stale credit taker fails on its generation.
        self.root.store(generation << GEN_SHIFT, Ordering::Release);
        self.spare.store(generation << GEN_SHIFT, Ordering::Release);
    }

    /// The credits in the spare word, for tests.
    #[cfg(test)]
    pub(crate) fn debug_credits(&self) -> u64 {
        self.spare.load(Ordering::Acquire) & COUNT_MASK
    }

    /// Sum of the shards and the root's outside count, for tests (not a snapshot).
    #[cfg(test)]
    pub(crate) fn debug_counts(&self) -> (u64, Vec<usize>) {
        (
            self.root.load(Ordering::Acquire) & COUNT_MASK,
            self.shards.iter().map(|s| s.load(Ordering::Acquire)).collect(),
        )
    }
}

fn decode(root: u64) -> ScopeState {
    let flags = root & FLAG_MASK;
    if flags & JOINED != 0 {
        ScopeState::Joined
    } else if flags & JOINING != 0 {
        if flags & CLOSED != 0 { ScopeState::ClosedAndJoining } else { ScopeState::OpenAndJoining }
    } else if flags & USED != 0 {
        if flags & CLOSED != 0 { ScopeState::Closed } else { ScopeState::Open }
    } else if flags & CLOSED != 0 {
        ScopeState::UnusedAndClosed
    } else {
        ScopeState::Unused
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    //! White-box checks of the counter: which word each path touches.
    use super::*;

    /// Joins `c`, which must have no association alive: the join completes inline.
    fn join_inline(c: &Counter) {
        unsafe fn never(_: *const (), (): ()) {
            unreachable!("no association is alive: the join completes inline")
        }
        // SAFETY: the waiter is never run (the join completes inline).
        assert_eq!(c.start_join(unsafe { JobRef::new(std::ptr::null::<usize>(), never) }), JoinStart::Done);
    }

    #[test]
    fn a_worker_counts_on_its_own_shard_and_only_transitions_reach_the_root() {
        let c = Counter::new(2);
        let g = c.generation();
        let a = c.try_associate(g, Some(1)).unwrap();
        let b = c.try_associate(g, Some(1)).unwrap();
        assert_eq!((a, b), (Home::Shard(1), Home::Shard(1)));
        // The shard holds 2; the root counts one active shard.
        assert_eq!(c.debug_counts(), (1, vec![0, 2]));
        // Ending one on another thread's behalf decrements the home shard, not the root.
        c.dissociate(b);
        assert_eq!(c.debug_counts(), (1, vec![0, 1]));
        c.dissociate(a);
        assert_eq!(c.debug_counts(), (0, vec![0, 0]));
    }

    #[test]
    fn the_single_atomic_counts_every_association_on_the_root() {
        let c = Counter::new(0);
        let g = c.generation();
        let a = c.try_associate(g, Some(0)).unwrap();
        assert_eq!(a, Home::Root);
        assert_eq!((c.debug_counts().0, c.debug_credits()), (1, 0));
        c.dissociate(a);
        assert_eq!(c.debug_counts().0, 0);
    }

    #[test]
    fn threads_without_a_shard_reserve_a_batch_on_the_root_and_take_credits_from_it() {
        for index in [None, Some(5)] {
            let c = Counter::new(1);
            let g = c.generation();
            let a = c.try_associate(g, index).unwrap();
            assert_eq!(a, Home::Root);
            assert_eq!((c.debug_counts().0, c.debug_credits()), (BATCH, BATCH - 1), "one batch reserved");
            let more: Vec<Home> = (1..BATCH).map(|_| c.try_associate(g, index).unwrap()).collect();
            assert_eq!((c.debug_counts().0, c.debug_credits()), (BATCH, 0), "credits taken, root untouched");
            let next = c.try_associate(g, index).unwrap();
            assert_eq!((c.debug_counts().0, c.debug_credits()), (2 * BATCH, BATCH - 1), "the next batch");
            for home in more.into_iter().chain([a, next]) {
                c.dissociate(home);
            }
            assert_eq!(c.debug_counts().0, BATCH - 1, "the unused credits");
            join_inline(&c);
            assert_eq!((c.debug_counts().0, c.debug_credits()), (0, 0), "the join took the credits back");
            assert!(c.try_associate(g, index).is_none(), "joined");
        }
    }

    #[test]
    fn close_takes_the_credits_back_and_refuses_later_associations() {
        let c = Counter::new(1);
        let g = c.generation();
        let a = c.try_associate(g, None).unwrap();
        c.close();
        assert_eq!((c.debug_counts().0, c.debug_credits()), (1, 0));
        assert!(c.try_associate(g, None).is_none(), "no credit is handed out after close");
        assert_eq!(c.state(), ScopeState::Closed);
        c.dissociate(a);
        assert_eq!(c.debug_counts().0, 0);
        join_inline(&c);
        c.recycle();
        let g = c.generation();
        assert!(c.try_associate(g, None).is_some(), "a recycled counter is open again");
    }

    #[test]
    fn a_stale_generation_fails_on_every_path_and_leaves_the_counts_balanced() {
        let c = Counter::new(1);
        let g = c.generation();
        let live = c.try_associate(g, Some(0)).unwrap();
        assert!(c.try_associate(g + 1, Some(0)).is_none(), "fast path (shard active)");
        c.dissociate(live);
        assert!(c.try_associate(g + 1, Some(0)).is_none(), "0→1 path");
        assert!(c.try_associate(g + 1, None).is_none(), "root path");
        assert_eq!(c.debug_counts(), (0, vec![0]));
        join_inline(&c);
        c.recycle();
        assert_eq!(c.generation(), g + 1);
        assert_eq!(c.state(), ScopeState::Unused);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The counter protocol under loom: spawn on one worker and complete on another,
    //! a join racing the last completion, close racing associate.
    use super::*;
    use crate::sync::{Arc, thread};
    use loom::sync::atomic::AtomicUsize as Flag;

    /// A waiter that counts its notifications in `flag` and checks that no association
    /// is alive (`live`) when it is notified.
    fn waiter(state: &Arc<(Flag, Flag)>) -> JobRef {
        unsafe fn notify(data: *const (), (): ()) {
            // SAFETY: `data` is the model's `(notified, live)` pair, alive until the end.
            let (notified, live) = unsafe { &*data.cast::<(Flag, Flag)>() };
            assert_eq!(live.load(Ordering::Acquire), 0, "join notified with a live association");
            notified.fetch_add(1, Ordering::AcqRel);
        }
        // SAFETY: the pair outlives the model's threads, which all end before it drops.
        unsafe { JobRef::new(Arc::as_ptr(state), notify) }
    }

    fn join_done(c: &Counter, state: &Arc<(Flag, Flag)>) -> bool {
        match c.start_join(waiter(state)) {
            JoinStart::Done => {
                assert_eq!(state.1.load(Ordering::Acquire), 0, "inline join with a live association");
                true
            }
            JoinStart::Pending => false,
        }
    }

    #[test]
    fn spawn_on_one_worker_complete_on_another_while_joining() {
        loom::model(|| {
            let c = Arc::new(Counter::new(2));
            let st = Arc::new((Flag::new(0), Flag::new(0)));
            let g = c.generation();
            // The root task, counted on worker 0, is running on worker 1.
            let root = c.try_associate(g, Some(0)).unwrap();
            st.1.fetch_add(1, Ordering::AcqRel);
            let (c1, st1) = (c.clone(), st.clone());
            let worker1 = thread::spawn(move || {
                // It spawns a child (counted on worker 1), then completes (worker 0's shard).
                let child = c1.try_associate(g, Some(1)).expect("nested spawn succeeds");
                st1.1.fetch_add(1, Ordering::AcqRel);
                st1.1.fetch_sub(1, Ordering::AcqRel);
                c1.dissociate(root);
                child
            });
            let (c0, st0) = (c.clone(), st.clone());
            let joiner = thread::spawn(move || join_done(&c0, &st0));
            let child = worker1.join().unwrap();
            // The child completes on worker 0.
            st.1.fetch_sub(1, Ordering::AcqRel);
            c.dissociate(child);
            let inline = joiner.join().unwrap();
            let notified = st.0.load(Ordering::Acquire);
            assert_eq!(usize::from(inline) + notified, 1, "the join completes exactly once");
            assert_eq!(c.state(), ScopeState::Joined);
            assert!(c.droppable());
        });
    }

    #[test]
    fn a_join_racing_the_last_completion_is_told_exactly_once() {
        loom::model(|| {
            let c = Arc::new(Counter::new(1));
            let st = Arc::new((Flag::new(0), Flag::new(0)));
            let g = c.generation();
            let a = c.try_associate(g, Some(0)).unwrap();
            let b = c.try_associate(g, None).unwrap();
            st.1.fetch_add(2, Ordering::AcqRel);
            let (c1, st1) = (c.clone(), st.clone());
            let t = thread::spawn(move || {
                st1.1.fetch_sub(1, Ordering::AcqRel);
                c1.dissociate(a);
            });
            let (c2, st2) = (c.clone(), st.clone());
            let u = thread::spawn(move || {
                st2.1.fetch_sub(1, Ordering::AcqRel);
                c2.dissociate(b);
            });
            let inline = join_done(&c, &st);
            t.join().unwrap();
            u.join().unwrap();
            assert_eq!(usize::from(inline) + st.0.load(Ordering::Acquire), 1);
            assert!(c.droppable());
        });
    }

    #[test]
    fn close_racing_associate_is_linearizable() {
        loom::model(|| {
            let c = Arc::new(Counter::new(1));
            let g = c.generation();
            // Worker 0 already has an association (so it takes the fast path), and a thread
            // without a shard associates on the root; both race `close`.
            let held = c.try_associate(g, Some(0)).unwrap();
            let (c1, c2) = (c.clone(), c.clone());
            let worker = thread::spawn(move || c1.try_associate(g, Some(0)));
            let outside = thread::spawn(move || c2.try_associate(g, None));
            c.close();
            // After `close` returns, nothing associates.
            assert!(c.try_associate(g, Some(0)).is_none());
            assert!(c.try_associate(g, None).is_none());
            let (w, o) = (worker.join().unwrap(), outside.join().unwrap());
            assert_eq!(c.state(), ScopeState::Closed);
            // Whatever succeeded is counted: the join waits for it.
            let st = Arc::new((Flag::new(0), Flag::new(0)));
            st.1.fetch_add(1 + usize::from(w.is_some()) + usize::from(o.is_some()), Ordering::AcqRel);
            assert!(!join_done(&c, &st), "join cannot finish with associations alive");
            for home in [Some(held), w, o].into_iter().flatten() {
                st.1.fetch_sub(1, Ordering::AcqRel);
                c.dissociate(home);
            }
            assert_eq!(st.0.load(Ordering::Acquire), 1);
            assert_eq!(c.state(), ScopeState::Joined);
        });
    }

    /// Credits against the join: the outside thread already reserved a batch (so it
    /// holds credits), ends its first association and takes a credit while the join
    /// starts; then, the credits used up, it reserves a second batch, whose
    /// publication races the join's taking back of credits. Whatever the order, the
    /// join completes exactly once, never with an association alive, and no credit is
    /// left in the count.
    #[test]
    fn credits_and_a_new_batch_racing_the_join_are_all_given_back() {
        loom::model(|| {
            let c = Arc::new(Counter::new(1));
            let st = Arc::new((Flag::new(0), Flag::new(0)));
            let g = c.generation();
            let first = c.try_associate(g, None).unwrap();
            st.1.fetch_add(1, Ordering::AcqRel);
            let (c1, st1) = (c.clone(), st.clone());
            let outside = thread::spawn(move || {
                st1.1.fetch_sub(1, Ordering::AcqRel);
                c1.dissociate(first);
                // Every credit of the first batch, then one more: a new batch.
                for _ in 0..BATCH {
                    let Some(home) = c1.try_associate(g, None) else { break };
                    st1.1.fetch_add(1, Ordering::AcqRel);
                    st1.1.fetch_sub(1, Ordering::AcqRel);
                    c1.dissociate(home);
                }
            });
            let inline = join_done(&c, &st);
            outside.join().unwrap();
            assert_eq!(usize::from(inline) + st.0.load(Ordering::Acquire), 1, "the join completes exactly once");
            assert_eq!(c.state(), ScopeState::Joined);
            assert_eq!((c.debug_counts().0, c.debug_credits()), (0, 0));
        });
    }

    /// Credits against `close`: once `close` returns, no credit is handed out, and the
    /// credits it took back (or the ones a racing batch published) leave the count.
    #[test]
    fn close_racing_credits_and_a_new_batch_leaves_no_credit_behind() {
        loom::model(|| {
            let c = Arc::new(Counter::new(1));
            let g = c.generation();
            let first = c.try_associate(g, None).unwrap();
            let c1 = c.clone();
            let outside = thread::spawn(move || {
                let mut homes = vec![first];
                for _ in 0..BATCH {
                    match c1.try_associate(g, None) {
                        Some(home) => homes.push(home),
                        None => break,
                    }
                }
                homes
            });
            c.close();
            assert!(c.try_associate(g, None).is_none(), "closed");
            let homes = outside.join().unwrap();
            assert_eq!(c.debug_credits(), 0);
            assert_eq!(c.debug_counts().0, homes.len() as u64, "the count is exactly the live associations");
            for home in homes {
                c.dissociate(home);
            }
            let st = Arc::new((Flag::new(0), Flag::new(0)));
            assert!(join_done(&c, &st));
        });
    }

    #[test]
    fn an_outside_associate_racing_the_join_either_wins_or_is_refused() {
        loom::model(|| {
            let c = Arc::new(Counter::new(1));
            let st = Arc::new((Flag::new(0), Flag::new(0)));
            let g = c.generation();
            let a = c.try_associate(g, Some(0)).unwrap();
            st.1.fetch_add(1, Ordering::AcqRel);
            let (c1, st1) = (c.clone(), st.clone());
            // A thread outside the pool tries to associate while the last association ends
            // and a join starts: if it succeeds, the join must wait for it.
            let outside = thread::spawn(move || {
                let b = c1.try_associate(g, None);
                if let Some(b) = b {
                    st1.1.fetch_add(1, Ordering::AcqRel);
                    st1.1.fetch_sub(1, Ordering::AcqRel);
                    c1.dissociate(b);
                }
            });
            let (c2, st2) = (c.clone(), st.clone());
            let worker = thread::spawn(move || {
                st2.1.fetch_sub(1, Ordering::AcqRel);
                c2.dissociate(a);
            });
            let inline = join_done(&c, &st);
            outside.join().unwrap();
            worker.join().unwrap();
            assert_eq!(usize::from(inline) + st.0.load(Ordering::Acquire), 1);
            assert!(c.droppable());
        });
    }
}
