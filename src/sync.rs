//! The one sync facade of the crate.
//!
//! Every atomic, lock and thread primitive that concurrency code uses comes from
//! here, so that building with `RUSTFLAGS="--cfg loom"` swaps the whole crate onto
//! loom's model-checked versions and the loom tests exercise the real code.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread;

/// Back off inside a spin loop. Under loom this yields to the model's scheduler, which
/// is what lets loom explore spin-waits without diverging.
#[inline]
pub(crate) fn spin_wait() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Lock a mutex, ignoring poisoning: the crate never panics while holding one of its
/// own locks, and user code never runs under them.
#[inline]
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

/// A cell for data whose accesses the surrounding code synchronizes by hand. Under loom
/// it is loom's own cell, which checks every `with` / `with_mut` access against the
/// model's happens-before order.
#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// A cell for data whose accesses the surrounding code synchronizes by hand: `std`'s
/// [`UnsafeCell`](std::cell::UnsafeCell) behind loom's closure-based API, so the same
/// code is race-checked when built with `--cfg loom`.
#[cfg(not(loom))]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T: ?Sized>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    /// Wraps `data`.
    #[inline]
    pub(crate) const fn new(data: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(data))
    }
}

#[cfg(not(loom))]
impl<T: ?Sized> UnsafeCell<T> {
    /// Runs `f` with a pointer for reading the contents.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Runs `f` with a pointer for writing the contents.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}
