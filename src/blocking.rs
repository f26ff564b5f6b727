//! What a thread does before it blocks, set by whoever owns the thread. A pool worker
//! sets it to hand the forks it holds latent to the other workers: what the thread is
//! about to wait for may be one of them, and only the other workers can run them
//! meanwhile. A blocking wait (the run loop's) calls [`before_blocking`] and needs to
//! know nothing of the pool.

use std::cell::Cell;

crate::sync::const_thread_local! {
    static BEFORE_BLOCKING: Cell<Option<fn()>> = Cell::new(None);
}

/// Sets what the calling thread does before it blocks, for the rest of its life.
pub(crate) fn set_before_blocking(hook: fn()) {
    BEFORE_BLOCKING.with(|before| before.set(Some(hook)));
}

/// Called by the calling thread just before it blocks: runs what its owner set, if any.
pub(crate) fn before_blocking() {
    if let Some(hook) = BEFORE_BLOCKING.with(Cell::get) {
        hook();
    }
}
