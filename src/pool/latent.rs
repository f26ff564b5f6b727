//! Latent forks: the children a worker forked and has not published yet.
//!
//! With `PoolBuilder::latent_forks`, a fork on the pool (`when_all`'s children) made while
//! the worker's deque holds a job goes on its worker's private ring, with plain stores and
//! no fence, while no other worker is hungry. The worker runs it itself, at the cost of a
//! call, when the fork's first child completes inline (the join takes it back from the
//! top) or when it returns to its loop (which looks here before its deque). It is
//! published, oldest first (the largest piece of work, since forks nest), when another
//! worker is hungry, when the ring is full, and before the worker blocks. The argument
//! that no fork is lost or starved is in `README.md` beside this file, *Latent forks*.

use std::cell::Cell;

use crate::job::JobRef;

/// Forks a worker holds at most; a fork beyond them publishes the oldest.
const CAPACITY: usize = 256;
const MASK: usize = CAPACITY - 1;
const _: () = assert!(CAPACITY.is_power_of_two());

/// One worker's unpublished forks: a ring, oldest at `head`, newest just below `tail`.
/// `Cell`s: the ring is the worker's alone (it is not `Sync`), so plain loads and stores.
pub(super) struct LatentForks {
    slots: [Cell<Option<JobRef>>; CAPACITY],
    /// The position of the oldest fork held (counts up, wrapping; masked to index).
    head: Cell<usize>,
    /// One past the position of the newest fork held.
    tail: Cell<usize>,
}

impl LatentForks {
    pub(super) fn new() -> Self {
        LatentForks { slots: [const { Cell::new(None) }; CAPACITY], head: Cell::new(0), tail: Cell::new(0) }
    }

    /// Holds `job` as the newest fork. If the ring was full, returns the oldest fork,
    /// which the caller publishes.
    #[inline]
    pub(super) fn push(&self, job: JobRef) -> Option<JobRef> {
        let tail = self.tail.get();
        let evicted = if tail.wrapping_sub(self.head.get()) == CAPACITY { self.take_oldest() } else { None };
        self.slots[tail & MASK].set(Some(job));
        self.tail.set(tail.wrapping_add(1));
        evicted
    }

    /// Takes the newest fork.
    #[inline]
    pub(super) fn pop(&self) -> Option<JobRef> {
        let tail = self.tail.get();
        if tail == self.head.get() {
            return None;
        }
        let tail = tail.wrapping_sub(1);
        self.tail.set(tail);
        self.slots[tail & MASK].take()
    }

    /// Takes the newest fork if its data is `data`; otherwise leaves the ring as it was.
    #[inline]
    pub(super) fn pop_if(&self, data: *const ()) -> Option<JobRef> {
        let job = self.pop()?;
        if job.data() == data {
            return Some(job);
        }
        // Not ours: put it back where it was.
        let tail = self.tail.get();
        self.slots[tail & MASK].set(Some(job));
        self.tail.set(tail.wrapping_add(1));
        None
    }

    /// Takes the oldest fork, to publish it.
    #[inline]
    pub(super) fn take_oldest(&self) -> Option<JobRef> {
        let head = self.head.get();
        if head == self.tail.get() {
            return None;
        }
        self.head.set(head.wrapping_add(1));
        self.slots[head & MASK].take()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn job(n: usize) -> JobRef {
        unsafe fn nothing(_: *const (), (): ()) {}
        // SAFETY: the jobs are never run; only their pointers are compared.
        unsafe { JobRef::new((n * 8) as *const u64, nothing) }
    }

    fn data(job: Option<JobRef>) -> Option<usize> {
        job.map(|j| j.data().addr() / 8)
    }

    #[test]
    fn newest_is_popped_and_oldest_is_published() {
        let ring = LatentForks::new();
        for n in 1..=3 {
            assert!(ring.push(job(n)).is_none());
        }
        assert_eq!(data(ring.take_oldest()), Some(1));
        assert_eq!(data(ring.pop_if(job(2).data())), None, "the newest is 3, not 2");
        assert_eq!(data(ring.pop_if(job(3).data())), Some(3));
        assert_eq!(data(ring.pop()), Some(2));
        assert_eq!(data(ring.pop()), None);
        assert_eq!(data(ring.take_oldest()), None);
    }

    #[test]
    fn a_full_ring_hands_back_its_oldest_and_wraps() {
        let ring = LatentForks::new();
        for round in 0..3 {
            for n in 0..CAPACITY {
                assert!(ring.push(job(round * 1000 + n + 1)).is_none());
            }
            assert_eq!(data(ring.push(job(round * 1000 + 999))), Some(round * 1000 + 1), "the oldest is evicted");
            assert_eq!(data(ring.pop()), Some(round * 1000 + 999));
            for n in (1..CAPACITY).rev() {
                assert_eq!(data(ring.pop()), Some(round * 1000 + n + 1));
            }
            assert_eq!(data(ring.pop()), None, "the evicted fork is not held twice");
        }
    }
}
