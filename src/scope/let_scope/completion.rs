//! The end of a `let_async_scope`: the tail that the final completion runs from, the hop
//! onto the outer scheduler, and the receiver of the returned sender.

use std::cell::UnsafeCell;
use std::convert::Infallible;

use crate::env::EmptyEnv;
use crate::outcome::Outcome;
use crate::panic::{Panic, discard};
use crate::receiver::Receiver;
use crate::scheduler::MaybeScheduler;
use crate::stop::{ForwardStop, RawStopCallback};
use crate::sync;

use crate::scope::token::Association;

use super::association::{LetAssociation, LetScopeShared};

/// What the final completion needs; the hop's receiver points here (it cannot name the
/// hop's own operation type).
pub(crate) struct LetTail<Sch, E, V2, R> {
    pub(super) rcvr: UnsafeCell<Option<R>>,
    pub(super) shared: UnsafeCell<Option<LetScopeShared<Sch, E>>>,
    /// The returned sender's completion: `Some(v)` for a value, `None` for stopped.
    pub(super) result: sync::UnsafeCell<Option<Option<V2>>>,
    /// Forwards the outer stop request to the scope.
    pub(super) stop_cb: UnsafeCell<Option<RawStopCallback<'static, ForwardStop>>>,
    /// Drops the scoped value (in the state that holds this tail), once the scope is
    /// joined: the state's address and a function that takes the value out and drops it,
    /// returning a panic of its `Drop`.
    pub(super) drop_value: UnsafeCell<Option<(StateAddr, DropValue)>>,
}

/// The address of the state that holds a [`LetTail`], for its `drop_value`.
pub(super) struct StateAddr(pub(super) *const ());

// SAFETY: only the final completion uses it, on whichever thread that runs, to drop the
// scoped value that the same state holds: the state is `Send` only where that value is.
unsafe impl Send for StateAddr {}

/// What [`LetTail::drop_value`] calls: drops the scoped value of the state at the
/// address.
pub(super) type DropValue = unsafe fn(*const ()) -> Result<(), Panic>;

impl<Sch, E, V2, R: Receiver<V2, E>> LetTail<Sch, E, V2, R> {
    pub(super) fn shared(&self) -> &LetScopeShared<Sch, E> {
        // SAFETY: written once before any token exists, then only read until `finish`.
        unsafe { (*self.shared.get()).as_ref() }.expect("let_async_scope: scope")
    }

    /// The final completion, after the join: the first panic, else the first error,
    /// else the returned sender's completion.
    ///
    /// # Safety
    ///
    /// Called once, after the scope is joined and released (no association is alive and
    /// the counter no longer touches the core).
    pub(super) unsafe fn finish(&self) {
        // SAFETY: the caller's contract: nothing else touches these cells any more. The
        // stop callback goes first (it may be running on another thread: its drop waits).
        // The shared state stays in place: the scope's core is released, so a token used
        // from now on (none can be: see `LetScopeToken`) would fail to associate.
        let (result, rcvr) = unsafe {
            *self.stop_cb.get() = None;
            (self.result.with_mut(|r| (*r).take()), (*self.rcvr.get()).take().expect("let_async_scope: completes once"))
        };
        let shared = self.shared();
        let panic = shared.core.take_panic();
        // DROP ORDER: the scoped value goes before the completion (nothing borrows it
        // any more: the scope is joined); a panic in its `Drop` loses to a panic and
        // replaces an error, a value or a stop.
        // SAFETY: the caller's contract: the scope is joined, and the state that holds
        // the value is the one that holds this tail, alive.
        let value_dropped = unsafe { (*self.drop_value.get()).take().map_or(Ok(()), |(state, f)| f(state.0)) };
        let panic = match (panic, value_dropped) {
            (Some(p), dropped) => {
                drop(dropped);
                Some(p)
            }
            (None, dropped) => dropped.err(),
        };
        // SAFETY: the join ordered every write of the slot before this read.
        let error = shared.error.with_mut(|e| unsafe { (*e).take() });
        shared.core.release();
        // DROP ORDER: what the completion does not deliver (the result after a panic or
        // an error, the error after a panic) is discarded in this `let`, before it; a
        // panic in a discarded value's drop loses to a panic and replaces an error.
        let outcome = match (panic, error, result) {
            (Some(p), error, result) => {
                let _ = discard((error, result));
                Outcome::Panic(p)
            }
            (None, Some(e), result) => match discard(result) {
                Ok(()) => Outcome::Error(e),
                Err(p) => {
                    let _ = discard(e);
                    Outcome::Panic(p)
                }
            },
            (None, None, Some(Some(v))) => Outcome::Value(v),
            (None, None, _) => Outcome::Stopped,
        };
        outcome.deliver(rcvr)
    }
}

/// The receiver of the hop onto the outer scheduler.
pub struct LetHop<Sch, E, V2, R> {
    pub(super) tail: *const LetTail<Sch, E, V2, R>,
}

// SAFETY: the hop runs the final completion on the scheduler's thread; the receiver
// and the results it delivers are `Send` (required by the `SenderTo` impl).
unsafe impl<Sch, E: Send, V2: Send, R: Send> Send for LetHop<Sch, E, V2, R> {}
// SAFETY: a shared reference only reaches `env()`, a constant.
unsafe impl<Sch, E, V2, R> Sync for LetHop<Sch, E, V2, R> {}

impl<Sch, E, V2, R: Receiver<V2, E>> Receiver<(), Infallible> for LetHop<Sch, E, V2, R> {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, (): ()) {
        // SAFETY: the operation lives until this completion; the scope is joined.
        unsafe { (*self.tail).finish() }
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        // The scheduler refused (e.g. a pool shutting down): complete here rather than
        // lose the outcome. SAFETY: as above.
        unsafe { (*self.tail).finish() }
    }
    fn set_panic(self, panic: Panic) {
        // SAFETY: as above; the panic of the hop joins the scope's panics.
        unsafe {
            (*self.tail).shared().core.record_panic(panic);
            (*self.tail).finish()
        }
    }
}

/// The receiver of the sender the function returned; its association keeps the join
/// waiting until it completes.
pub struct LetResult<Sch, E, V2, R> {
    pub(super) tail: *const LetTail<Sch, E, V2, R>,
    pub(super) assoc: LetAssociation<'static, Sch, E>,
}

// SAFETY: it completes on any thread: it writes the result (`V2: Send`) or the error
// (`E: Send`) into the operation, which the final completion reads after the join.
unsafe impl<Sch: Send + Sync, E: Send, V2: Send, R> Send for LetResult<Sch, E, V2, R> {}
// SAFETY: a shared reference only reaches the environment (the association, `Sync`).
unsafe impl<Sch: Sync, E: Send, V2, R> Sync for LetResult<Sch, E, V2, R> {}

impl<Sch, E, V2, R> LetResult<Sch, E, V2, R> {
    fn store(self, result: Option<V2>) {
        // SAFETY: only this receiver writes the result, once; the final completion reads
        // it after the join, which waits for the association dropped right after.
        unsafe { (*self.tail).result.with_mut(|r| *r = Some(result)) };
    }
}

impl<Sch: MaybeScheduler, E: Send, V2, R, X: Into<E>> Receiver<V2, X> for LetResult<Sch, E, V2, R> {
    type Env = LetAssociation<'static, Sch, E>;
    fn env(&self) -> &Self::Env {
        &self.assoc
    }
    // DROP ORDER: each method stores or reports first; dropping `self` at its end ends the
    // association, the arrival that may let the join complete.
    fn set_value(self, value: V2) {
        self.store(Some(value))
    }
    fn set_error(self, error: X) {
        self.assoc.report_error(error.into())
    }
    fn set_stopped(self) {
        self.store(None)
    }
    fn set_panic(self, panic: Panic) {
        self.assoc.report_panic(panic)
    }
}
