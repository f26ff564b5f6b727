//! The registry's reference count, sharded per worker.
//!
//! Every `schedule()` sender and every operation queued on the pool owns a reference to
//! the pool's registry (a `RegistryRef`, in `registry.rs`), so that a sender which outlives its pool still has a registry
//! to ask (and is refused there) instead of a dangling pointer. With one shared count
//! (`Arc`), a recursive tree that schedules one node per job makes every worker write
//! the same cache line twice per node; profiling the scope benchmark showed that line
//! taking about two thirds of the time.
//!
//! So a registry counts its references in several places:
//!
//! - one cache-padded **shard per worker**, written only by that worker (a relaxed load
//!   and store, no read-modify-write), for references taken or dropped *on* a worker of
//!   this pool;
//! - one **outside** word for every other thread, with read-modify-writes.
//!
//! A reference taken on one worker may be dropped on another or outside the pool, so a
//! shard alone means nothing (it may be negative); only the sum of all of them is the
//! number of live references. The sum is only ever taken once the shards are
//! quiescent:
//!
//! 1. While the pool runs, the outside word also holds a [`BIAS`] far larger than any
//!    real count, so it never reaches zero, whatever the shards hold.
//! 2. Each worker finds its shard through a thread-local that its loop sets and clears
//!    when the loop ends (from then on it counts in the outside word). Once every loop
//!    has ended, shutdown *folds*: adds the sum of the shards minus the bias to the
//!    outside word in one read-modify-write. A drop from outside the pool folds after
//!    joining the workers (their last shard writes happen-before the join returns); a
//!    drop from a worker leaves it to the last worker whose loop ends (the workers
//!    count their ended loops with acquire-release decrements, so every last shard
//!    write happens-before the last decrement). From then on the outside word is the
//!    exact count.
//! 3. Whoever brings the outside word to zero after the fold frees the registry (a
//!    release decrement, and an acquire load before the free, as `Arc` does under ThreadSanitizer).
//!
//! No shard is ever written after the fold: every worker's loop has ended and cleared
//! its thread's shard before it. The loom model at the bottom checks the fold against references
//! moving between workers and outside threads.

use crossbeam_utils::CachePadded;

use crate::sync::{AtomicUsize, Ordering};

/// Added to the outside word until the fold, so that it cannot reach zero before.
const BIAS: usize = 1 << (usize::BITS - 2);

/// The counts of one registry.
pub(crate) struct Refs {
    outside: CachePadded<AtomicUsize>,
    shards: Box<[CachePadded<AtomicUsize>]>,
}

impl Refs {
    /// Counts for `workers` shards and one reference, held outside the pool.
    pub(crate) fn new(workers: usize) -> Self {
        Refs {
            outside: CachePadded::new(AtomicUsize::new(BIAS + 1)),
            shards: (0..workers).map(|_| CachePadded::new(AtomicUsize::new(0))).collect(),
        }
    }

    /// The shard of worker `index`, for that worker alone to count on until the fold.
    pub(crate) fn shard(&self, index: usize) -> &AtomicUsize {
        &self.shards[index]
    }

    /// Takes one reference, on `shard`, the calling worker's own (see
    /// [`shard`](Self::shard)), or (`None`) in the outside word.
    #[inline]
    pub(crate) fn acquire(&self, shard: Option<&AtomicUsize>) {
        match shard {
            // Only this worker writes its shard: no read-modify-write needed.
            Some(s) => s.store(s.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed),
            // Relaxed as for `Arc`: the new reference is made from an existing one.
            None => {
                self.outside.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Drops one reference, on `shard` as for [`acquire`](Self::acquire); returns `true`
    /// if it was the last one, and the caller must free the registry (the acquire that
    /// makes that safe is already done).
    #[inline]
    pub(crate) fn release(&self, shard: Option<&AtomicUsize>) -> bool {
        match shard {
            Some(s) => {
                s.store(s.load(Ordering::Relaxed).wrapping_sub(1), Ordering::Relaxed);
                false
            }
            None => self.release_outside(),
        }
    }

    /// [`release`](Self::release) from a thread that may not use a shard: out of line,
    /// so that the shard path inlined into every `schedule()` operation stays small.
    #[cold]
    #[inline(never)]
    fn release_outside(&self) -> bool {
        if self.outside.fetch_sub(1, Ordering::Release) != 1 {
            return false;
        }
        // Acquire: every other release happens-before the free. A load reading our own
        // decrement synchronizes with all earlier ones (they head release sequences that
        // our RMW continues), as a fence would; unlike a fence, ThreadSanitizer
        // understands it, and on x86 both cost nothing.
        self.outside.load(Ordering::Acquire);
        true
    }

    /// The outside word, for white-box tests.
    #[cfg(all(test, not(loom)))]
    pub(crate) fn outside(&self) -> usize {
        self.outside.load(Ordering::Acquire)
    }

    /// Stops the shards and moves their sum into the outside word, removing the bias.
    ///
    /// Called once, after every worker's loop has ended and cleared its shard: by the
    /// thread dropping the pool from outside once it has joined the workers, or, after
    /// a drop from a worker, by the last worker whose loop ends (`Registry::loop_ended`),
    /// whose decrement of the count of running loops acquired every other's. The
    /// caller still holds its own reference, which it releases afterwards (so the fold
    /// itself never frees).
    pub(crate) fn fold(&self) {
        let sum = self.shards.iter().fold(0usize, |acc, s| acc.wrapping_add(s.load(Ordering::Relaxed)));
        self.outside.fetch_add(sum.wrapping_sub(BIAS), Ordering::AcqRel);
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The fold against references that move between workers and outside threads: the
    //! count reaches zero exactly once, only after every reference is gone.
    use super::*;
    use loom::sync::Arc;

    /// Worker 0 takes a reference and hands it to an outside thread, which drops it
    /// while the pool (this thread) joins worker 0, folds and drops its own reference;
    /// an outside thread's own clone is dropped on worker 1. Exactly one release
    /// reports the last reference, and only once all three are gone.
    #[test]
    fn references_crossing_threads_reach_zero_once_after_the_fold() {
        loom::model(|| {
            let refs = Arc::new(Refs::new(2));
            let freed = Arc::new(AtomicUsize::new(0));
            // Worker 0 clones; the reference travels to the outside thread.
            let (tx, rx) = loom::sync::mpsc::channel::<()>();
            let (r0, f0) = (refs.clone(), freed.clone());
            let worker0 = loom::thread::spawn(move || {
                r0.acquire(Some(r0.shard(0)));
                tx.send(()).unwrap();
                // Worker 0 also takes and drops one of its own.
                r0.acquire(Some(r0.shard(0)));
                if r0.release(Some(r0.shard(0))) {
                    f0.fetch_add(1, Ordering::Relaxed);
                }
            });
            let (r1, f1) = (refs.clone(), freed.clone());
            let outside = loom::thread::spawn(move || {
                rx.recv().unwrap();
                if r1.release(None) {
                    f1.fetch_add(1, Ordering::Relaxed);
                }
            });
            // An outside clone dropped on worker 1.
            refs.acquire(None);
            let (r2, f2) = (refs.clone(), freed.clone());
            let worker1 = loom::thread::spawn(move || {
                if r2.release(Some(r2.shard(1))) {
                    f2.fetch_add(1, Ordering::Relaxed);
                }
            });
            // The pool's drop: join the workers, fold, release its own reference.
            worker0.join().unwrap();
            worker1.join().unwrap();
            refs.fold();
            if refs.release(None) {
                freed.fetch_add(1, Ordering::Relaxed);
            }
            outside.join().unwrap();
            assert_eq!(freed.load(Ordering::Relaxed), 1, "freed exactly once");
            assert_eq!(refs.outside.load(Ordering::Relaxed), 0);
        });
    }
}
