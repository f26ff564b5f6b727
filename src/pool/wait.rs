//! Waiting by working: what `sync_wait` does on a pool worker (README.md, *Waiting on a
//! worker*), and the handle that wakes a worker waiting so.

use std::cell::Cell;

use super::registry::{CURRENT, RegistryRef, SPIN_ROUNDS, WorkerThread, run_job};
use crate::job::JobRef;
use crate::sync::{Ordering, thread};

/// Waiting by working: what `sync_wait` does on a worker (README.md, *Waiting on a
/// worker*).
impl WorkerThread {
    /// The calling thread's worker state (any pool's), or null off the pools. It stays
    /// valid for as long as the caller runs inside one of this worker's jobs.
    #[inline(always)]
    pub(crate) fn current_ptr() -> *const WorkerThread {
        CURRENT.with(Cell::get)
    }

    /// Runs work on this worker until `done()`: what `run_local` runs first (the
    /// waiting run loop's work; it returns whether it ran something), then the jobs
    /// [`find_work`](Self::find_work) finds (this worker's latent forks and deque, the
    /// injector, the lanes, the other workers; outside work first at one look in
    /// `OUTSIDE_INTERVAL`, as in the worker loop, counted across nested waits). With
    /// nothing to run it looks again for `SPIN_ROUNDS` rounds, then sleeps through the
    /// pool's sleep protocol, whose re-check also reads `pending()`: a push anywhere in
    /// the pool wakes it as it wakes any sleeper, and whoever makes `pending()` true
    /// from another thread (`done()` implies it) wakes it with [`WakeWorker`] after
    /// doing so. Unlike the worker loop, it does not stop when the pool terminates: it
    /// returns once `done()`, whatever else runs.
    ///
    /// A job that unwinds here aborts the process, as in the worker loop.
    pub(crate) fn wait_until(
        &self,
        done: impl Fn() -> bool,
        mut run_local: impl FnMut() -> bool,
        pending: impl Fn() -> bool,
    ) {
        // Counted in `hungry` as the worker loop counts itself: from a look that found
        // nothing to the next that finds a job (only a pool with latent forks keeps it).
        let mut hungry = false;
        let run = |job: JobRef, hungry: &mut bool| {
            if std::mem::take(hungry) {
                self.registry.hungry.fetch_sub(1, Ordering::Relaxed);
            }
            run_job(job, Some(self));
        };
        while !done() {
            if run_local() {
                continue;
            }
            if let Some(job) = self.find_work_waiting() {
                run(job, &mut hungry);
                continue;
            }
            if self.latent_forks && !std::mem::replace(&mut hungry, true) {
                self.registry.hungry.fetch_add(1, Ordering::Relaxed);
            }
            let mut found = None;
            let mut ready = false;
            for round in 0..SPIN_ROUNDS {
                // As the worker loop: short spins, then yields. What a waiter waits for
                // is often a stolen sibling that completes microseconds later.
                if round < SPIN_ROUNDS / 2 {
                    std::hint::spin_loop();
                } else {
                    thread::yield_now();
                }
                ready = pending();
                if ready {
                    break;
                }
                found = self.find_work_waiting();
                if found.is_some() {
                    break;
                }
            }
            if let Some(job) = found {
                run(job, &mut hungry);
                continue;
            }
            if ready {
                continue;
            }
            let registry = &self.registry;
            registry.sleep.sleep(self.index, || pending() || registry.has_jobs());
        }
        if hungry {
            self.registry.hungry.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// [`find_work`](Self::find_work) for [`wait_until`](Self::wait_until), counting
    /// down the waits' shared countdown (the worker loop keeps its own in a register).
    #[inline]
    fn find_work_waiting(&self) -> Option<JobRef> {
        let mut until_outside = self.wait_until_outside.get();
        let job = self.find_work(&mut until_outside);
        self.wait_until_outside.set(until_outside);
        job
    }
}

/// What another thread needs to wake a worker that waits by working (after it published
/// what the worker waits for): a reference to the worker's registry, which keeps the
/// sleep state alive through the wake-up even if the worker returns at once, and the
/// worker's index.
pub(crate) struct WakeWorker {
    registry: RegistryRef,
    index: usize,
}

impl WakeWorker {
    /// Prepares the wake-up of `worker`, before publishing.
    ///
    /// # Safety
    ///
    /// `worker` is a worker's state ([`WorkerThread::current_ptr`] on its thread), and
    /// that worker is still waiting: the caller has not yet published what it waits for.
    pub(crate) unsafe fn new(worker: *const WorkerThread) -> Self {
        // SAFETY: the worker is alive in its loop (it waits), and neither field is ever
        // written after the worker started: reading them from this thread races nothing.
        // The registry handle is `Sync`; cloning it counts this thread's reference.
        unsafe { WakeWorker { registry: (*worker).registry.clone(), index: (*worker).index } }
    }

    /// Wakes the worker if it sleeps (`Sleep::wake_worker`). Call after publishing.
    pub(crate) fn wake(self) {
        self.registry.sleep.wake_worker(self.index);
    }
}
