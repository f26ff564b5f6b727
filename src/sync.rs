//! The one sync facade of the crate.
//!
//! Every atomic, lock and thread primitive that concurrency code uses comes from
//! here, so that building with `RUSTFLAGS="--cfg loom"` swaps the whole crate onto
//! loom's model-checked versions and the loom tests exercise the real code.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(loom)]
pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(loom)]
pub(crate) use loom::thread;

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, AtomicU64, AtomicUsize, Ordering, fence};
#[cfg(not(loom))]
pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};
#[cfg(not(loom))]
pub(crate) use std::thread;

/// Declares thread-locals with constant initializers: std's `const` form, which needs no
/// lazy-initialization check on access, or under loom one per model thread (loom runs
/// every thread of a model on one OS thread).
macro_rules! const_thread_local {
    ($($(#[$attr:meta])* $vis:vis static $name:ident: $t:ty = $init:expr;)+) => {
        #[cfg(not(loom))]
        std::thread_local! { $($(#[$attr])* $vis static $name: $t = const { $init };)+ }
        #[cfg(loom)]
        loom::thread_local! { $($(#[$attr])* $vis static $name: $t = $init;)+ }
    };
}
pub(crate) use const_thread_local;

/// The fast side of an asymmetric fence pair: paired with [`heavy_fence`] on another
/// thread, the two order memory like two `SeqCst` fences. On Linux, once the process has
/// registered for `membarrier(2)`'s private expedited command, this is only a compiler
/// fence, because the heavy side makes every running thread of the process execute a
/// full barrier (the use `membarrier(2)` documents); before that, elsewhere, and under
/// loom, it is a real `SeqCst` fence, which pairs with either heavy side.
#[inline]
pub(crate) fn light_fence() {
    #[cfg(all(not(loom), target_os = "linux"))]
    if asymmetric::registered() {
        std::sync::atomic::compiler_fence(Ordering::SeqCst);
        return;
    }
    fence(Ordering::SeqCst);
}

/// The slow side of the pair (see [`light_fence`]): a process-wide barrier, a system call.
#[inline]
pub(crate) fn heavy_fence() {
    #[cfg(all(not(loom), target_os = "linux"))]
    if asymmetric::expedited() {
        asymmetric::barrier();
        return;
    }
    fence(Ordering::SeqCst);
}

/// Makes the choice between `membarrier(2)` and real fences for the process (registers
/// on first call), so that light fences are compiler fences from then on where the
/// system supports it. A pool calls it when it is built; a heavy fence makes the same
/// choice on its first call.
pub(crate) fn prepare_fences() {
    #[cfg(all(not(loom), target_os = "linux"))]
    asymmetric::expedited();
}

/// Linux `membarrier(2)`. The choice between it and real fences is made once per
/// process, by the heavy side (or [`prepare_fences`]), and never changes. The light side
/// only reads a flag that is raised after a successful registration and never lowered:
/// a light fence that sees it skips the real fence, and every heavy fence then uses the
/// system call (it reads the settled choice, which is `true` once the flag is raised);
/// a light fence that does not see it yet is a real fence, which pairs with either
/// heavy side. So no pair ever has both sides weak.
#[cfg(all(not(loom), target_os = "linux"))]
mod asymmetric {
    use std::sync::OnceLock;

    use super::{AtomicBool, Ordering};

    const QUERY: libc::c_int = 0;
    const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    /// Raised once this process registered for private expedited barriers.
    static REGISTERED: AtomicBool = AtomicBool::new(false);

    fn membarrier(cmd: libc::c_int) -> libc::c_long {
        // SAFETY: `membarrier(cmd, flags = 0, cpu_id = 0)` takes no pointers; an
        // unsupported command only returns an error.
        unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint, 0 as libc::c_int) }
    }

    /// Whether a light fence may be a compiler fence: the flag alone (relaxed), no
    /// initialization check on the push path.
    #[inline]
    pub(super) fn registered() -> bool {
        REGISTERED.load(Ordering::Relaxed)
    }

    /// Whether this process registered for private expedited barriers (first call
    /// registers, and raises the flag before the choice settles).
    pub(super) fn expedited() -> bool {
        static EXPEDITED: OnceLock<bool> = OnceLock::new();
        *EXPEDITED.get_or_init(|| {
            let supported = membarrier(QUERY);
            let needed = libc::c_long::from(PRIVATE_EXPEDITED | REGISTER_PRIVATE_EXPEDITED);
            let registered =
                supported >= 0 && supported & needed == needed && membarrier(REGISTER_PRIVATE_EXPEDITED) == 0;
            REGISTERED.store(registered, Ordering::Relaxed);
            registered
        })
    }

    /// A full barrier on every running thread of the process.
    pub(super) fn barrier() {
        if membarrier(PRIVATE_EXPEDITED) != 0 {
            // Registered, so this cannot fail; if it did, pushers that skipped their
            // fence could lose a wake-up, so stop rather than hang silently.
            eprintln!("senders: membarrier(PRIVATE_EXPEDITED) failed after registration");
            std::process::abort();
        }
    }
}

/// Where the code relies on the total order of `SeqCst` accesses to different locations
/// (a store-buffering pattern: each side writes one location, then reads the other), a
/// `SeqCst` fence under loom and nothing otherwise. Loom 0.7 models `SeqCst` fences but
/// treats `SeqCst` loads and stores as acquire/release, which would report lost updates
/// that the real accesses rule out; the fence gives loom the order the accesses already
/// give the hardware.
#[inline]
pub(crate) fn seq_cst_accesses() {
    #[cfg(loom)]
    fence(Ordering::SeqCst);
}

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
