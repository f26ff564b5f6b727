//! The pool's queues: `crossbeam-deque`'s, or under `--cfg loom` a model of the subset
//! the pool uses.
//!
//! Loom cannot run crossbeam's internals (its atomics and epochs are not loom's), so
//! the whole-pool models (`tests/loom_pool.rs`) run on queues built from a loom mutex
//! around a `VecDeque`. They keep the interface and the visible behaviour the pool
//! relies on: the owner pushes and pops at the back of its deque (LIFO), stealers and
//! the injector take from the front, `is_empty` may be stale but a push that
//! happens-before it is seen, and `Retry` is never returned (a lock never loses a race).

#[cfg(not(loom))]
pub(crate) use crossbeam_deque::{Injector, Steal, Stealer, Worker};

#[cfg(loom)]
pub(crate) use model::{Injector, Steal, Stealer, Worker};

#[cfg(loom)]
mod model {
    use std::collections::VecDeque;

    use crate::sync::{Arc, Mutex, lock};

    /// The outcome of a steal, as crossbeam's.
    pub(crate) enum Steal<T> {
        Empty,
        Success(T),
        /// Never produced by the model; kept so the pool's matches are the same.
        #[allow(dead_code)]
        Retry,
    }

    /// The owner's end of a LIFO deque.
    pub(crate) struct Worker<T> {
        queue: Arc<Mutex<VecDeque<T>>>,
    }

    impl<T> Worker<T> {
        pub(crate) fn new_lifo() -> Self {
            Worker { queue: Arc::new(Mutex::new(VecDeque::new())) }
        }

        pub(crate) fn stealer(&self) -> Stealer<T> {
            Stealer { queue: self.queue.clone() }
        }

        pub(crate) fn push(&self, value: T) {
            lock(&self.queue).push_back(value);
        }

        pub(crate) fn pop(&self) -> Option<T> {
            lock(&self.queue).pop_back()
        }

        pub(crate) fn is_empty(&self) -> bool {
            lock(&self.queue).is_empty()
        }
    }

    /// Another thread's end of a deque: takes the oldest job.
    pub(crate) struct Stealer<T> {
        queue: Arc<Mutex<VecDeque<T>>>,
    }

    impl<T> Stealer<T> {
        pub(crate) fn steal(&self) -> Steal<T> {
            lock(&self.queue).pop_front().map_or(Steal::Empty, Steal::Success)
        }

        pub(crate) fn is_empty(&self) -> bool {
            lock(&self.queue).is_empty()
        }

        /// Takes the oldest job, and moves up to half of the rest to `dest`.
        pub(crate) fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
            take_batch(&self.queue, dest)
        }
    }

    /// Takes the oldest job of `queue`, and moves up to half of the rest (as crossbeam
    /// does, bounded) to `dest`.
    fn take_batch<T>(queue: &Mutex<VecDeque<T>>, dest: &Worker<T>) -> Steal<T> {
        let mut queue = lock(queue);
        let Some(first) = queue.pop_front() else { return Steal::Empty };
        let half = queue.len() / 2;
        let batch: Vec<T> = queue.drain(..half).collect();
        drop(queue);
        let mut own = lock(&dest.queue);
        for value in batch {
            own.push_back(value);
        }
        Steal::Success(first)
    }

    /// The shared FIFO queue for work from outside the pool.
    pub(crate) struct Injector<T> {
        queue: Mutex<VecDeque<T>>,
    }

    impl<T> Injector<T> {
        pub(crate) fn new() -> Self {
            Injector { queue: Mutex::new(VecDeque::new()) }
        }

        pub(crate) fn push(&self, value: T) {
            lock(&self.queue).push_back(value);
        }

        pub(crate) fn steal(&self) -> Steal<T> {
            lock(&self.queue).pop_front().map_or(Steal::Empty, Steal::Success)
        }

        /// Takes the oldest job, and moves up to half of the rest to `dest`.
        pub(crate) fn steal_batch_and_pop(&self, dest: &Worker<T>) -> Steal<T> {
            take_batch(&self.queue, dest)
        }

        pub(crate) fn is_empty(&self) -> bool {
            lock(&self.queue).is_empty()
        }
    }
}
