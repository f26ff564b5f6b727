//! Jobs: the crate's one type-erased "run this, once".
//!
//! A [`JobRef`] is a pointer to state that lives elsewhere (a pinned operation state, a
//! heap block) and the function that runs it. Whoever holds the `JobRef` may run it, on
//! any thread, exactly once; until then the state it points to stays alive. It is what
//! travels wherever a concrete operation type cannot be named:
//!
//! | where | the job |
//! |---|---|
//! | the pool's deques, lanes and injector (`pool/registry.rs`) | a scheduled operation, a forked `when_all` child, a piece of a bulk |
//! | a spawned operation (`scope/spawn.rs`, [`SpawnedOp`](crate::scope::SpawnedOp)) | starts it |
//! | a join waiting for a scope's count (`scope/counter.rs`), a `spawn_future` waiting for its work (`scope/future.rs`) | completes it |
//! | a stop callback that forwards a request (`stop/forward.rs`) | takes a count, requests stop, releases the count |
//! | an erased `schedule()`'s completion (`task/scheduler.rs`), a poll of `from_future` (`bridge.rs`) | completes the operation with an argument (`JobRef<A>`) |
//!
//! The job's function takes the pointer and an argument of type `A` (`()` for most),
//! which the runner supplies: a way to pass a small result without a slot in the state.
//!
//! A `JobRef` is neither `Copy` nor `Clone`, and [`run`](JobRef::run) consumes it, so
//! running a job twice does not compile. Dropping one without running it leaks its job
//! (nothing is freed, so nothing is used after a free).
//!
//! A job's state is aligned to 2 or more (checked at compile time), so the low bit of its
//! pointer is free: a queue may tag a job there ([`JobRef::tagged`]) and read the tag back
//! when it takes the job; the job runs with its pointer untagged. The pool tags the jobs
//! of spawned operations (`WorkerThread::push_spawned`).
//!
//! [`SpawnedOp`] is the job of a spawned operation, which must not be lost: dropped
//! unstarted, it ends the operation instead.

use std::fmt;
use std::mem::ManuallyDrop;

/// A type-erased job: a pointer and the function that runs it, once, with an `A`.
///
/// Invariant (the contract of [`new`](Self::new)): calling the function with the
/// pointer, once, from any thread, is sound until it has been called.
pub(crate) struct JobRef<A = ()> {
    data: *const (),
    run: unsafe fn(*const (), A),
}

// SAFETY: `new`'s contract: the job may run on any thread. The argument is not stored.
unsafe impl<A> Send for JobRef<A> {}
// SAFETY: a shared reference only reads the pointer's address (`data`, `is_tagged`).
unsafe impl<A> Sync for JobRef<A> {}

impl<A> fmt::Debug for JobRef<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("JobRef").field(&self.data).finish()
    }
}

/// The low bit of a job's pointer, which [`JobRef::tagged`] sets.
const TAG: usize = 1;

impl<A> JobRef<A> {
    /// A job that runs `run(data, arg)`, with `data` cast to `*const ()`.
    ///
    /// `T` must be aligned to 2 or more (checked at compile time), so that the low bit of
    /// every job's pointer is free for [`tagged`](Self::tagged).
    ///
    /// # Safety
    ///
    /// Calling `run(data, arg)` once, from any thread, with any `arg`, must be sound at
    /// any time until it is called: `data` stays valid until then, and whatever `run`
    /// touches may be touched from the thread that runs it.
    #[inline]
    pub(crate) const unsafe fn new<T>(data: *const T, run: unsafe fn(*const (), A)) -> Self {
        const { assert!(align_of::<T>() >= 2, "a job's state must be aligned to 2 or more") };
        JobRef { data: data.cast(), run }
    }

    /// The job's pointer as it is queued (with its tag, if [`tagged`](Self::tagged)): its
    /// identity, for a queue that looks for a job it holds.
    #[inline]
    pub(crate) fn data(&self) -> *const () {
        self.data
    }

    /// Runs the job with `arg`.
    #[inline]
    pub(crate) fn run(self, arg: A) {
        // SAFETY: `new`'s contract; the job is consumed, so this is its one run, with the
        // pointer it was made with (a tag taken off).
        unsafe { (self.run)(self.data.map_addr(|a| a & !TAG), arg) }
    }

    /// The job, marked in the low bit of its pointer (free: see [`new`](Self::new)) for
    /// whoever queues it to read back with [`is_tagged`](Self::is_tagged). The job runs
    /// as before.
    #[inline]
    pub(crate) fn tagged(self) -> Self {
        JobRef { data: self.data.map_addr(|a| a | TAG), run: self.run }
    }

    /// Whether the job was [`tagged`](Self::tagged).
    #[inline]
    pub(crate) fn is_tagged(&self) -> bool {
        self.data.addr() & TAG != 0
    }
}

impl JobRef {
    /// Runs a job that takes no argument.
    #[inline]
    pub(crate) fn execute(self) {
        self.run(())
    }
}

/// A spawned operation, connected in its heap block and not started yet: what
/// [`Domain::apply_spawn`](crate::Domain::apply_spawn) decides how to start. It is a
/// job that must not be lost: dropping it without starting it ends the operation
/// unstarted (its block is freed, its association with the scope ends), so a domain
/// cannot lose a spawned operation's accounting.
///
/// It is made by [`spawn`](crate::spawn()) and [`spawn_future`](crate::spawn_future).
pub struct SpawnedOp {
    /// Starts the operation (which consumes `self` without running its drop).
    job: JobRef,
    /// Ends the operation unstarted, given the job's pointer.
    discard: unsafe fn(*const ()),
}

impl fmt::Debug for SpawnedOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpawnedOp").finish_non_exhaustive()
    }
}

impl SpawnedOp {
    /// A spawned operation that `start` starts, or `discard(start.data())` ends unstarted
    /// if it is dropped instead.
    ///
    /// # Safety
    ///
    /// Calling `discard` with the job's pointer, once, from any thread, in place of
    /// running the job, must be sound (as `JobRef::new` requires of the job itself).
    #[inline]
    pub(crate) unsafe fn new(start: JobRef, discard: unsafe fn(*const ())) -> Self {
        SpawnedOp { job: start, discard }
    }

    /// Starts the operation on the calling thread.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use senders::scope::SpawnedOp;
    /// use senders::{Domain, Scheduler, SenderExt, SimpleCountingScope, SingleThreadContext, default_transforms, spawn, sync_wait};
    ///
    /// static SPAWNED: AtomicUsize = AtomicUsize::new(0);
    ///
    /// #[derive(Clone, Copy, Default)]
    /// struct Counted;
    /// impl Domain for Counted {
    ///     default_transforms!(except apply_spawn);
    ///     fn apply_spawn(self, op: SpawnedOp) {
    ///         SPAWNED.fetch_add(1, Ordering::Relaxed);
    ///         op.start();
    ///     }
    /// }
    ///
    /// let ctx = SingleThreadContext::<Counted>::with_domain("counted");
    /// let scope = SimpleCountingScope::new();
    /// assert!(spawn(ctx.scheduler().schedule().then(|()| ()), scope.token()));
    /// sync_wait(scope.join()).unwrap();
    /// assert_eq!(SPAWNED.load(Ordering::Relaxed), 1, "the sender's domain started it");
    /// ```
    pub fn start(self) {
        self.into_job().execute()
    }

    /// The job that starts the operation, for a scheduler that queues it. Consumes the
    /// operation without discarding it: the job now owns it.
    #[inline]
    pub(crate) fn into_job(self) -> JobRef {
        let this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped nor used again, so the job is moved out once.
        unsafe { std::ptr::read(&this.job) }
    }
}

impl Drop for SpawnedOp {
    fn drop(&mut self) {
        // SAFETY: never started (`into_job` skips this drop), and now never will be:
        // `new`'s contract. The job is not tagged (only a queue tags one, after
        // `into_job`).
        unsafe { (self.discard)(self.job.data()) }
    }
}
