//! [`PoolScheduler`]: `schedule()` on the pool, whose operation is the job it queues.

use std::convert::Infallible;
use std::fmt;
use std::marker::PhantomPinned;
use std::pin::Pin;

use super::domain::{MAX_TAKEN_BACK_DEPTH, PoolDomain};
use super::registry::{Registry, RegistryRef, WorkerThread};
use crate::adaptors::when_all::{FIRST_HOP, NO_HOP, take_inline_hop};
use crate::env::Env;
use crate::job::JobRef;
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, SenderTo, sender};

/// The scheduler of a [`StaticThreadPool`](super::StaticThreadPool); its domain is [`PoolDomain`].
///
/// ```
/// use senders::{Scheduler, SenderExt, StaticThreadPool, just, starts_on, sync_wait};
/// let pool = StaticThreadPool::new(1).unwrap();
/// let sch = pool.scheduler();
/// let on_pool = starts_on(sch.clone(), just(()).then(move |()| sch.is_current()));
/// assert_eq!(sync_wait(on_pool).unwrap(), Some(true));
/// ```
#[derive(Clone)]
pub struct PoolScheduler {
    pub(super) registry: RegistryRef,
}

impl PoolScheduler {
    pub(super) fn new(registry: RegistryRef) -> Self {
        PoolScheduler { registry }
    }
}

impl PartialEq for PoolScheduler {
    fn eq(&self, other: &Self) -> bool {
        RegistryRef::ptr_eq(&self.registry, &other.registry)
    }
}

impl fmt::Debug for PoolScheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PoolScheduler")
    }
}

impl Scheduler for PoolScheduler {
    type Domain = PoolDomain;
    type Sender = PoolSender;
    #[inline]
    fn schedule(&self) -> PoolSender {
        PoolSender { sch: self.clone() }
    }
    fn is_current(&self) -> bool {
        WorkerThread::current_of(&self.registry).is_some()
    }
}

/// The sender of `PoolScheduler::schedule()`: completes on a worker of the pool.
#[must_use = "senders do nothing unless connected and started"]
#[derive(Clone)]
pub struct PoolSender {
    sch: PoolScheduler,
}

sender!(impl [] PoolSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = PoolDomain;
    type CompletionScheduler = PoolScheduler;
    fn completion_scheduler(&self) -> PoolScheduler {
        self.sch.clone()
    }
});

impl<R: Receiver<(), Infallible> + Send> SenderTo<R> for PoolSender {
    type Operation = PoolOp<R>;
    fn connect(self, receiver: R) -> PoolOp<R> {
        PoolOp { registry: self.sch.registry, rcvr: Some(receiver), _pin: PhantomPinned }
    }
}

/// The operation state of `schedule()` on the pool. It is the job itself: scheduling
/// allocates nothing.
pub struct PoolOp<R> {
    registry: RegistryRef,
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible>> PoolOp<R> {
    /// # Safety
    ///
    /// `data` points to a live, started `PoolOp<R>`; called once.
    #[inline]
    unsafe fn run(data: *const (), (): ()) {
        let this = data.cast_mut().cast::<PoolOp<R>>();
        // SAFETY: the job's operation is alive until it completes, which is now; nobody
        // else reads `registry` concurrently.
        let exited = unsafe { (*this).registry.exited() };
        // SAFETY: forwarded.
        unsafe { Self::complete(this, exited) }
    }

    /// Completes the operation: stopped if the pool's workers have `exited` or a stop
    /// was requested, with a value otherwise.
    ///
    /// # Safety
    ///
    /// `this` is a live, started `PoolOp<R>` whose job has not run and never will
    /// (it is running, or it completes inline instead); called once.
    #[inline(always)]
    unsafe fn complete(this: *mut Self, exited: bool) {
        // SAFETY: the caller's contract: nobody else touches `rcvr` concurrently.
        let Some(rcvr) = (unsafe { (*this).rcvr.take() }) else { return };
        if exited || rcvr.env().stop_token().stop_requested() {
            rcvr.set_stopped();
        } else {
            rcvr.set_value(());
        }
    }
}

impl<R: Receiver<(), Infallible>> OperationState for PoolOp<R> {
    #[inline]
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is moved out of the pinned operation; we take its address.
        let this = unsafe { self.get_unchecked_mut() };
        let data: *const Self = this;
        // SAFETY: the operation is pinned and, by `start`'s contract, alive until it
        // completes, which only the job does; `run` matches `data`'s type.
        let job = unsafe { JobRef::new(data, Self::run) };
        // Once queued, the job may run and free this operation (and its registry
        // reference) at once. On a worker of this pool, the worker's own handle keeps the registry alive, so
        // the common case touches no shared reference count.
        if let Some(worker) = WorkerThread::current_of(&this.registry) {
            // One thread-local word says whether this `schedule()` is on the pool
            // already; the common hop reads it and pushes.
            match take_inline_hop() {
                NO_HOP => worker.push_local(job),
                // The first `schedule()` of the first child of a `when_all` on this pool
                // that this worker is starting inline: complete now, unless that nests
                // too deep on this stack.
                // Completed here rather than through the job: this worker runs, so the
                // pool's workers have not exited.
                FIRST_HOP if worker.taken_back_depth() < MAX_TAKEN_BACK_DEPTH => {
                    // SAFETY: the operation is alive and started, and its job is dropped
                    // unrun.
                    worker.run_first_hop(|| unsafe { Self::complete(data.cast_mut(), false) })
                }
                FIRST_HOP => worker.push_local(job),
                // `FRESH_HOP`: the first `schedule()` of a spawned operation (or forked
                // child) this worker just took from a queue: it was queued once; complete
                // now, as above.
                _ => {
                    // SAFETY: as above.
                    unsafe { Self::complete(data.cast_mut(), false) }
                }
            }
            return;
        }
        // No clone of the registry reference for the push: `Registry::push` keeps the
        // registry alive for its own duration, even if the job runs and frees this
        // operation first (see there).
        let registry: *const Registry = &*this.registry;
        // SAFETY: the registry is alive now (this operation holds a reference), and
        // `push` does not need it to stay alive beyond its start.
        if !unsafe { &*registry }.push(job) {
            // SAFETY: the push was refused, so the job will never run; we still own it.
            let rcvr = unsafe { (*data.cast_mut()).rcvr.take() };
            if let Some(rcvr) = rcvr {
                rcvr.set_stopped();
            }
        }
    }
}
