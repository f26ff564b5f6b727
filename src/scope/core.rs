//! A scope's memory: its counter, its stop source and its first panic, in type-stable
//! storage.
//!
//! Scope tokens are `Copy + 'static` handles (P3149 tokens behave like pointers, and
//! spawned work, which is `'static`, must be able to carry one). A token must then stay
//! harmless after its scope is dropped. So a scope's core is never freed: a dropped
//! scope's core returns to a free list and is reused by a later scope under a new
//! generation. A token remembers its generation; `try_associate` on a stale token fails
//! (it reads a core that is always valid memory), and no association can outlive its
//! scope (the scope cannot be dropped while one is alive). The memory kept is bounded
//! by the largest number of scopes alive at once.

use crate::panic::Panic;
use crate::stop::InplaceStopSource;

use super::counter::Counter;

/// The shared state of one scope.
pub(crate) struct ScopeCore {
    pub(crate) counter: Counter,
    pub(crate) stop: InplaceStopSource,
    /// The first panic of spawned work, resumed by the join.
    panic: parking_lot::Mutex<Option<Panic>>,
}

#[cfg(not(loom))]
static FREE: parking_lot::Mutex<Vec<&'static ScopeCore>> = parking_lot::Mutex::new(Vec::new());

#[cfg(not(loom))]
fn free_list() -> parking_lot::MutexGuard<'static, Vec<&'static ScopeCore>> {
    FREE.lock()
}

// One free list per loom execution: a core's atomics belong to the execution that made
// it, so a core must not be handed to the next one (it is leaked instead).
#[cfg(loom)]
loom::lazy_static! {
    static ref FREE: crate::sync::Mutex<Vec<&'static ScopeCore>> = crate::sync::Mutex::new(Vec::new());
}

#[cfg(loom)]
fn free_list() -> crate::sync::MutexGuard<'static, Vec<&'static ScopeCore>> {
    crate::sync::lock(&FREE)
}

impl ScopeCore {
    /// A fresh or recycled core in the `unused` state, with `shards` worker shards.
    pub(crate) fn acquire(shards: usize) -> &'static ScopeCore {
        let reused = {
            let mut free = free_list();
            free.iter().position(|c| c.counter.shards() == shards).map(|i| free.swap_remove(i))
        };
        reused.unwrap_or_else(|| {
            Box::leak(Box::new(ScopeCore {
                counter: Counter::new(shards),
                stop: InplaceStopSource::new(),
                panic: parking_lot::Mutex::new(None),
            }))
        })
    }

    /// A fresh core, not from the free list, for a loom model: the free list would hand
    /// a core whose atomics belong to one loom execution to the next one.
    #[cfg(all(test, loom))]
    pub(crate) fn new_for_model(shards: usize) -> ScopeCore {
        ScopeCore {
            counter: Counter::new(shards),
            stop: InplaceStopSource::new(),
            panic: parking_lot::Mutex::new(None),
        }
    }

    /// A core with one shard per pool worker slot there may be.
    pub(crate) fn acquire_sharded() -> &'static ScopeCore {
        Self::acquire(super::shard_index::high_water().max(num_cpus::get()))
    }

    /// Returns a droppable core to the free list under a new generation.
    pub(crate) fn release(&'static self) {
        debug_assert!(self.counter.droppable());
        self.counter.recycle();
        // SAFETY: the scope is droppable, so no association is alive: every stop callback
        // registered on this source by associated work is gone, and only the owner (who
        // is releasing it) can request stop. Stale tokens never touch the source.
        unsafe { self.stop.reset() };
        *self.panic.lock() = None;
        free_list().push(self);
    }

    /// Keeps the first panic of spawned work; later ones are dropped.
    pub(crate) fn record_panic(&self, panic: Panic) {
        let mut slot = self.panic.lock();
        if slot.is_none() {
            *slot = Some(panic);
        }
    }

    /// The recorded panic, for the join to resume.
    pub(crate) fn take_panic(&self) -> Option<Panic> {
        self.panic.lock().take()
    }
}
