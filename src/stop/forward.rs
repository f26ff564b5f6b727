//! Forwarding a stop request into an operation that the request may complete.
//!
//! Several operations register a callback on their receiver's stop token that requests
//! stop on a source of their own: `when_all` on its children's, `spawn_future` on its
//! work's, `let_async_scope` on its scope's. The request may complete the operation
//! inline (the children's own callbacks complete them, and the last completion ends the
//! operation and frees its memory) while `request_stop` is still walking the source
//! inside it. So the forwarder first takes a *hold* on the operation, a count that keeps
//! it alive, then requests stop, then releases the hold, which may complete and free it.
//! An operation that is already completing gives no hold, and the forwarder does
//! nothing: nothing is left to stop.
//!
//! [`ForwardStop`] is that callback, one type for every operation, so that it can be
//! named in a field (`RawStopCallback<'static, ForwardStop>`); the operation says how it
//! is held by implementing [`ForwardTarget`].

use super::callback::Invoke;
use crate::job::JobRef;
use crate::panic::catch;
use crate::sync::{AtomicUsize, Ordering};

/// An operation a [`ForwardStop`] forwards stop requests into.
///
/// # Safety
///
/// While a hold that [`hold`](Self::hold) returned is not released, the target, and the
/// source that [`source`](Self::source) returns, stay alive.
pub(crate) unsafe trait ForwardTarget {
    /// What a hold remembers, for its release.
    type Hold;

    /// Takes a hold, or returns `None` if the operation is completing.
    fn hold(&self) -> Option<Self::Hold>;

    /// Requests stop on what the request is forwarded to (a stop source; for a scope,
    /// its source and its shards'). A stop callback's panic is either kept by the
    /// operation, which completes with it (an operation stopping its own children), or
    /// unwinds out of this call to the requester, after the hold is released.
    fn request_stop(&self);

    /// Releases a hold; this may complete the operation and free `this`.
    ///
    /// # Safety
    ///
    /// `hold` came from `hold` on `this`, and is released once.
    unsafe fn release(this: *const Self, hold: Self::Hold);
}

/// The stop callback that forwards a request into a [`ForwardTarget`]: holds it,
/// requests stop on its source, releases it.
pub(crate) struct ForwardStop(JobRef);

impl ForwardStop {
    /// A forwarder into `target`.
    ///
    /// # Safety
    ///
    /// `target` is alive whenever the callback may run: its owner drops the callback
    /// (which waits for a run in progress on another thread) before the target goes away.
    /// Holding, requesting stop and releasing (which may complete the operation) must be
    /// sound on whichever thread requests stop.
    pub(crate) unsafe fn new<T: ForwardTarget>(target: *const T) -> Self {
        // SAFETY: the caller's contract keeps the target alive for the one run and lets
        // it run on any thread.
        ForwardStop(unsafe { JobRef::new(target, forward::<T>) })
    }
}

/// # Safety
///
/// `target` is a live `T` (see [`ForwardStop::new`]).
unsafe fn forward<T: ForwardTarget>(target: *const (), (): ()) {
    let target = target.cast::<T>();
    // SAFETY: alive by the caller's contract until the hold is taken, and by the hold
    // after; nothing touches the target after its release.
    unsafe {
        if let Some(hold) = (*target).hold() {
            // The hold is released on the unwinding path too: a panic (a stop callback's,
            // from a target that hands it to its requester) resumes after the release.
            let requested = catch(|| (*target).request_stop());
            T::release(target, hold);
            if let Err(p) = requested {
                p.resume();
            }
        }
    }
}

/// The hold of an operation counted by `count` (children still to arrive, plus holds):
/// one more count, taken only while the count is above zero. At zero every child has
/// arrived and the completer is waiting for this forwarder to return (it drops the
/// callback first), so there is nothing to stop and the count must not come back.
pub(crate) fn hold_live_count(count: &AtomicUsize) -> Option<()> {
    let mut n = count.load(Ordering::Relaxed);
    loop {
        if n == 0 {
            return None;
        }
        match count.compare_exchange_weak(n, n + 1, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return Some(()),
            Err(actual) => n = actual,
        }
    }
}

impl Invoke for ForwardStop {
    fn invoke(self) {
        self.0.execute()
    }
}
