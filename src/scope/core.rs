//! A scope's memory: its counter, its stop source (and the per-worker sources that
//! spawned futures forward it through) and its first panic, in type-stable storage.
//!
//! Scope tokens are `Copy + 'static` handles (P3149 tokens behave like pointers, and
//! spawned work, which is `'static`, must be able to carry one). A token must then stay
//! harmless after its scope is dropped. So a scope's core is never freed: a dropped
//! scope's core returns to a free list and is reused by a later scope under a new
//! generation. A token remembers its generation; `try_associate` on a stale token fails
//! (it reads a core that is always valid memory), and no association can outlive its
//! scope (the scope cannot be dropped while one is alive). The memory kept is bounded
//! by the largest number of scopes alive at once.

use crossbeam_utils::CachePadded;

use crate::panic::Panic;
use crate::stop::{InplaceStopSource, StopToken};

use super::counter::{Counter, Home};

/// The shared state of one scope.
pub(crate) struct ScopeCore {
    pub(crate) counter: Counter,
    /// The scope's stop source: its token is the one spawned work sees.
    pub(crate) stop: InplaceStopSource,
    /// One source per counter shard, stopped right after `stop` (see
    /// [`request_stop`](Self::request_stop)). A `spawn_future` forwards the scope's stop
    /// into its work with a callback, registered when it is spawned and removed when the
    /// work ends: on `stop` itself, every spawn and every completion on every worker
    /// would take the one lock of that source and link into its one list. On the shard
    /// of the spawning worker, that line is the worker's own, as the counter's shard is.
    stop_shards: Box<[CachePadded<InplaceStopSource>]>,
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
        reused.unwrap_or_else(|| Box::leak(Box::new(Self::new(shards))))
    }

    /// A fresh core, not from the free list, for a loom model: the free list would hand
    /// a core whose atomics belong to one loom execution to the next one.
    ///
    /// Its counter has `shards` shards, and it has `stop_shards` shard stop sources (none
    /// gives every association the scope's own source to forward through, as a thread
    /// without a shard has). `let_async_scope`'s models use none: they register no
    /// forwarding callback, so shard sources would only add, to every stop request, the
    /// steps of sources nobody registered on, and multiply those models' run time; the
    /// model below checks the shard sources against a stop request.
    #[cfg(all(test, loom))]
    pub(crate) fn new_for_model(shards: usize, stop_shards: usize) -> ScopeCore {
        Self::with_shards(shards, stop_shards)
    }

    /// Under loom, without shard stop sources, as in `let_async_scope`'s models (see
    /// [`new_for_model`](Self::new_for_model)): the whole-pool models' stop request would
    /// otherwise walk one more source per shard. (The counter's batch is smaller under
    /// loom for the same reason.)
    fn new(shards: usize) -> ScopeCore {
        Self::with_shards(shards, if cfg!(loom) { 0 } else { shards })
    }

    fn with_shards(shards: usize, stop_shards: usize) -> ScopeCore {
        ScopeCore {
            counter: Counter::new(shards),
            stop: InplaceStopSource::new(),
            stop_shards: (0..stop_shards).map(|_| CachePadded::new(InplaceStopSource::new())).collect(),
            panic: parking_lot::Mutex::new(None),
        }
    }

    /// Requests stop on the scope: its source, then every shard's. When this returns,
    /// every callback registered on any of them has run or is running (a callback
    /// registered meanwhile runs in its registration).
    ///
    /// A callback's panic is recorded for the join, as a panic of spawned work is: it
    /// is recorded before the callback's owner may go on, so before the work that
    /// registered it can end its association and let the join complete.
    pub(crate) fn request_stop(&self) {
        self.stop.request_stop_with(|p| self.record_panic(p));
        for shard in self.stop_shards.iter() {
            shard.request_stop_with(|p| self.record_panic(p));
        }
    }

    /// The token a callback that forwards the scope's stop (and nothing else) registers
    /// on, for an association counted at `home`: that shard's source, which
    /// [`request_stop`](Self::request_stop) stops after the scope's own, or the scope's
    /// source for an association counted on the root.
    pub(crate) fn forwarding_token(&self, home: Home) -> StopToken<'_> {
        match home {
            Home::Shard(i) => self.stop_shards.get(i).map_or_else(|| self.stop.token(), |s| s.token()),
            Home::Root => self.stop.token(),
        }
    }

    /// Returns the stop sources to their initial state.
    ///
    /// # Safety
    ///
    /// As for [`InplaceStopSource::reset`], for every source of the core: the scope is
    /// droppable (no association is alive, so no forwarding callback is registered) and
    /// only its owner could request stop.
    ///
    /// Only [`request_stop`](Self::request_stop) stops the shards' sources, after the
    /// scope's own: while that one was never stopped, they are as new and are not
    /// touched (each is a line that the workers' forwarders last wrote).
    pub(crate) unsafe fn reset_stop(&self) {
        let shards_stopped = self.stop.stop_requested();
        // SAFETY: the caller's contract.
        unsafe {
            self.stop.reset();
            if shards_stopped {
                for shard in self.stop_shards.iter() {
                    shard.reset();
                }
            }
        }
    }

    /// A core with one shard per pool worker slot there may be.
    pub(crate) fn acquire_sharded() -> &'static ScopeCore {
        Self::acquire(crate::pool::shard_index::high_water().max(num_cpus::get()))
    }

    /// Returns a droppable core to the free list under a new generation.
    pub(crate) fn release(&'static self) {
        debug_assert!(self.counter.droppable());
        self.counter.recycle();
        // SAFETY: the scope is droppable, so no association is alive: every stop callback
        // registered on these sources by associated work is gone, and only the owner (who
        // is releasing it) can request stop. Stale tokens never touch the sources.
        unsafe { self.reset_stop() };
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::ScopeCore;
    use crate::scope::counter::Home;

    fn stopped(core: &ScopeCore) -> Vec<bool> {
        let shards = (0..3).map(|i| core.forwarding_token(Home::Shard(i)).stop_requested());
        shards.chain([core.forwarding_token(Home::Root).stop_requested()]).collect()
    }

    #[test]
    fn a_reset_core_is_not_stopped_on_any_shard_whether_or_not_it_was_stopped() {
        let core = ScopeCore::with_shards(3, 3);
        // SAFETY: nothing is registered on the sources, and only this thread uses them.
        unsafe { core.reset_stop() };
        assert_eq!(stopped(&core), [false; 4]);
        core.request_stop();
        assert_eq!(stopped(&core), [true; 4]);
        // SAFETY: as above.
        unsafe { core.reset_stop() };
        assert_eq!(stopped(&core), [false; 4], "[shard 0, 1, 2, the scope's own]");
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    use std::sync::Arc;

    use loom::thread;

    use super::ScopeCore;
    use crate::scope::counter::Home;
    use crate::stop::{Invoke, RawStopCallback};
    use crate::sync::{AtomicBool, Ordering};

    struct SetFlag(Arc<AtomicBool>);

    impl Invoke for SetFlag {
        fn invoke(self) {
            self.0.store(true, Ordering::Release);
        }
    }

    /// A forwarding callback registered on a shard's source while another thread
    /// requests stop on the scope runs exactly when it must: by the time the request
    /// returns, or in its own registration if it comes later. Removing the shards'
    /// requests from `request_stop` fails it.
    #[test]
    fn a_forwarder_on_a_shard_racing_the_scopes_stop_request_runs() {
        loom::model(|| {
            let core: &'static ScopeCore = Box::leak(Box::new(ScopeCore::new_for_model(1, 1)));
            let ran = Arc::new(AtomicBool::new(false));
            let stopper = thread::spawn(move || core.request_stop());
            let token = core.forwarding_token(Home::Shard(0));
            assert!(token.stop_possible());
            let mut cb = Box::pin(RawStopCallback::new(token, SetFlag(ran.clone())));
            // SAFETY: the callback is pinned in its box and dropped before the core, which
            // is leaked.
            unsafe { cb.as_mut().register() };
            stopper.join().unwrap();
            assert!(core.stop.stop_requested());
            assert!(ran.load(Ordering::Acquire), "the scope's stop request did not reach the shard's callback");
            drop(cb);
        });
    }
}
