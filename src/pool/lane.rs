//! Lanes: deques of their own for threads outside the pool that submit work.
//!
//! A thread outside the pool (`main` spawning a million jobs, a `sync_wait` handing its
//! work over) used to push every job onto the shared injector, between two locked
//! read-modify-writes of the registry's `submitting` count. Those locked instructions,
//! and the injector's own two, kept each submission's cache misses (on the lines the
//! workers had written: the block it reuses, the queue's slots) from overlapping with
//! the next submission's, and that, not their own cost, bounded the thread's rate.
//!
//! So the registry keeps [`LANES`] lanes. The first time a thread outside the pool
//! submits to it, the thread claims a free lane for good (the claim is never given back:
//! jobs left in the lane of a thread that exited stay there for the workers to steal,
//! and a thread-local that might outlive the registry never has to touch it). From then
//! on its submissions are a push on the lane's deque, with no locked instruction: the
//! owner's push on a crossbeam deque is plain stores, and the lane's own `busy` flag,
//! which only the owner writes, stands in for the shared `submitting` count (see
//! `Registry::push_lane` and `src/pool/README.md`, *Lanes*). The workers steal from the lanes after the injector, and look at them
//! before they sleep and before they exit. A thread that finds every lane taken, or
//! that holds a lane of another pool, submits through the injector as before.

use std::cell::Cell;

use crossbeam_utils::CachePadded;

use super::deque::{Stealer, Worker};
use crate::job::JobRef;
use crate::sync::{AtomicBool, AtomicUsize, Ordering, UnsafeCell};

/// Lanes per registry: the outside threads that get one. Two under loom, where every
/// lane is a model mutex that each look for work takes: enough for a submitter to hold
/// one and for a claim to race another.
#[cfg(not(loom))]
pub(crate) const LANES: usize = 4;
#[cfg(loom)]
pub(crate) const LANES: usize = 2;

/// One outside thread's deque.
pub(crate) struct Lane {
    /// Claimed by an outside thread, for good.
    held: AtomicBool,
    /// What only the owner writes, on a cache line of its own.
    pub(crate) owner: CachePadded<OwnerWords>,
    /// The owner's end: touched only by the thread that claimed the lane.
    deque: UnsafeCell<Worker<JobRef>>,
    /// The workers' end.
    pub(crate) stealer: Stealer<JobRef>,
}

/// The words of a lane that only its owner writes.
pub(crate) struct OwnerWords {
    /// Raised by the owner from before its look at `terminating` until after its push
    /// and wake-up; shutdown waits for it to fall.
    pub(crate) busy: AtomicBool,
    /// How many jobs the owner has pushed: tells a busy worker that the lane may hold
    /// work it has not seen (`WorkerThread::take_outside_work`) without a look at the
    /// deque, whose `is_empty` takes a fence.
    pushes: AtomicUsize,
}

// SAFETY: the deque's owner end is touched only by the thread holding the lane (`held`
// is claimed by one compare-and-swap and never released, so that thread alone), which
// is how a `Worker` is meant to be used; everything else is atomics and a `Stealer`.
unsafe impl Sync for Lane {}
// SAFETY: a `Worker` may be sent to another thread; the other fields are `Send`.
unsafe impl Send for Lane {}

impl Lane {
    pub(crate) fn new() -> Self {
        // The owner never pops: stealers take the oldest job first, as from the injector.
        let deque = Worker::new_lifo();
        let stealer = deque.stealer();
        Lane {
            held: AtomicBool::new(false),
            owner: CachePadded::new(OwnerWords { busy: AtomicBool::new(false), pushes: AtomicUsize::new(0) }),
            deque: UnsafeCell::new(deque),
            stealer,
        }
    }

    /// Pushes `job` on the lane.
    ///
    /// # Safety
    ///
    /// The calling thread holds the lane ([`claim`]).
    pub(crate) unsafe fn push(&self, job: JobRef) {
        // SAFETY: the caller's contract: the owner end is ours alone.
        self.deque.with(|deque| unsafe { (*deque).push(job) });
        // Only the owner writes the count: a load and a store, no locked instruction, on
        // the line it wrote `busy` on. Release: a worker that reads this count and then
        // steals finds the job, unless another took it.
        let pushes = self.owner.pushes.load(Ordering::Relaxed);
        self.owner.pushes.store(pushes.wrapping_add(1), Ordering::Release);
    }

    /// How many jobs the owner has pushed so far (see [`OwnerWords::pushes`]).
    #[inline]
    pub(crate) fn pushes(&self) -> usize {
        self.owner.pushes.load(Ordering::Acquire)
    }
}

/// A registry's identity for the thread-local claim: unique for the process's life, so
/// that a registry allocated where a dropped one was is never taken for it.
pub(crate) fn next_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

crate::sync::const_thread_local! {
    /// The lane this thread holds: its registry's id (0 for none) and its index.
    static HELD: Cell<(u64, usize)> = Cell::new((0, 0));
}

/// The lane of `lanes` (of the registry `id`) that the calling thread holds, claiming a
/// free one if it holds none of this registry's; `None` if every lane is taken.
///
/// A thread remembers one lane: claiming one of another registry abandons its lane of
/// the last (still held, so never reused; the workers still empty it). A thread that
/// submits to one pool after another keeps a lane; one that alternates between two
/// pools uses up their lanes after a few switches and then submits through the
/// injectors.
pub(crate) fn claim(id: u64, lanes: &[Lane]) -> Option<&Lane> {
    let (held_id, index) = HELD.with(Cell::get);
    if held_id == id {
        return Some(&lanes[index]);
    }
    let (index, lane) = lanes.iter().enumerate().find(|(_, lane)| {
        // A lane is claimed once, so there is no earlier owner to synchronize with: the
        // exchange only has to pick one claimer.
        !lane.held.load(Ordering::Relaxed)
            && lane.held.compare_exchange(false, true, Ordering::Relaxed, Ordering::Relaxed).is_ok()
    })?;
    HELD.with(|h| h.set((id, index)));
    Some(lane)
}
