//! [`InplaceStopSource`], [`StopToken`], and the intrusive list the callbacks live in.

use std::cell::Cell;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::ptr;

use crate::panic::Panic;
use crate::sync::thread::{self, ThreadId};
use crate::sync::{self, AtomicBool, AtomicUsize, Ordering, UnsafeCell};

/// State bit: stop has been requested. Set once, never cleared.
const STOP_REQUESTED: usize = 0b01;
/// State bit: the spinlock guarding the callback list (and the notifying thread id).
const LOCKED: usize = 0b10;

/// How many times [`Backoff::snooze`] spins before it starts yielding the thread.
const SPIN_LIMIT: u32 = 64;

/// Bounded spinning, then yielding the thread.
pub(super) struct Backoff(u32);

impl Backoff {
    pub(super) const fn new() -> Self {
        Backoff(0)
    }

    /// Waits a little: [`sync::spin_wait`] for the first [`SPIN_LIMIT`] calls, then
    /// [`thread::yield_now`].
    pub(super) fn snooze(&mut self) {
        if self.0 < SPIN_LIMIT {
            self.0 += 1;
            sync::spin_wait();
        } else {
            thread::yield_now();
        }
    }
}

/// The type-erased part of a registered callback: the list links and the completion
/// handshake. It is the first field of a `#[repr(C)]` callback struct, so a pointer to
/// it (derived from a pointer to the whole struct) is also a pointer to the struct.
///
/// Field access rules are in the [module docs](super).
pub(super) struct Node {
    /// The previous node in the list; null for the head. Guarded by the source lock.
    prev: UnsafeCell<*const Node>,
    /// The next node in the list; null for the tail. Guarded by the source lock.
    next: UnsafeCell<*const Node>,
    /// Whether the node is in the list. Guarded by the source lock.
    linked: UnsafeCell<bool>,
    /// Set (Release) by the notifying thread once the callback has returned; read
    /// (Acquire) by an owner that waits for it on another thread.
    completed: AtomicBool,
    /// While the callback runs: points at a flag on the notifying thread's stack that the
    /// owner sets when it drops the callback from inside the callback. Only ever touched
    /// by the notifying thread (which may be the owner's thread).
    removed: UnsafeCell<*const Cell<bool>>,
    /// Takes the callback out of the enclosing struct and runs it.
    ///
    /// Called with a pointer to this node, derived from a pointer to the enclosing
    /// struct, by the notifying thread once it has unlinked the node.
    execute: unsafe fn(*const Node),
}

impl Node {
    pub(super) fn new(execute: unsafe fn(*const Node)) -> Self {
        Node {
            prev: UnsafeCell::new(ptr::null()),
            next: UnsafeCell::new(ptr::null()),
            linked: UnsafeCell::new(false),
            completed: AtomicBool::new(false),
            removed: UnsafeCell::new(ptr::null()),
            execute,
        }
    }
}

/// A stop source that lives in place: no allocation, no reference counting.
///
/// Hand out [`StopToken`]s with [`token`](Self::token); code that wants to hear about a
/// stop request registers a [`StopCallback`](super::StopCallback) on a token. Calling
/// [`request_stop`](Self::request_stop) sets the stop flag and runs every registered
/// callback, each exactly once, on the calling thread.
///
/// The source is `Send + Sync`. Safe callbacks borrow it, so it cannot be dropped while
/// any is registered.
///
/// # Example
///
/// ```
/// use std::pin::pin;
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use senders::{InplaceStopSource, StopCallback};
///
/// static CALLS: AtomicUsize = AtomicUsize::new(0);
///
/// let source = InplaceStopSource::new();
/// let token = source.token();
/// assert!(token.stop_possible() && !token.stop_requested());
///
/// let mut callback = pin!(StopCallback::new(token, || {
///     CALLS.fetch_add(1, Ordering::Relaxed);
/// }));
/// callback.as_mut().register();
///
/// assert!(source.request_stop()); // the first request: runs the callback
/// assert!(!source.request_stop()); // later ones do nothing
/// assert!(token.stop_requested());
/// assert_eq!(CALLS.load(Ordering::Relaxed), 1);
/// ```
pub struct InplaceStopSource {
    /// [`STOP_REQUESTED`] | [`LOCKED`].
    state: AtomicUsize,
    /// The most recently registered node not yet run. Guarded by the lock.
    head: UnsafeCell<*const Node>,
    /// The thread that requested stop and runs (ran) the callbacks. Written once under
    /// the lock; read under the lock.
    notifying: UnsafeCell<Option<ThreadId>>,
}

// SAFETY: the raw node pointers and the thread id are only accessed under the source's
// spinlock (see the module docs); nothing in the source is tied to a thread.
unsafe impl Send for InplaceStopSource {}
// SAFETY: every `&self` method synchronizes through the atomic state word: the list and
// the thread id are read and written only while holding the spinlock it contains.
unsafe impl Sync for InplaceStopSource {}

impl Default for InplaceStopSource {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for InplaceStopSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("InplaceStopSource").field("stop_requested", &self.stop_requested()).finish_non_exhaustive()
    }
}

impl InplaceStopSource {
    /// A source on which stop has not been requested and no callback is registered.
    ///
    /// ```
    /// use senders::InplaceStopSource;
    /// let source = InplaceStopSource::new();
    /// assert!(!source.stop_requested());
    /// ```
    pub fn new() -> Self {
        InplaceStopSource {
            state: AtomicUsize::new(0),
            head: UnsafeCell::new(ptr::null()),
            notifying: UnsafeCell::new(None),
        }
    }

    /// Returns the source to its initial state (not stopped, no callbacks), for a scope
    /// whose memory is reused.
    ///
    /// # Safety
    ///
    /// No callback may be registered, and no other thread may use the source (or hold a
    /// token it could still use) until this returns.
    pub(crate) unsafe fn reset(&self) {
        debug_assert!(self.state.load(Ordering::Acquire) & LOCKED == 0);
        // SAFETY: exclusive use by the caller's contract; the list is already empty.
        self.head.with_mut(|h| unsafe { *h = ptr::null() });
        // SAFETY: as above.
        self.notifying.with_mut(|t| unsafe { *t = None });
        self.state.store(0, Ordering::Release);
    }

    /// A token that observes this source.
    ///
    /// ```
    /// use senders::{InplaceStopSource, SenderExt, StaticThreadPool, schedule, stop_when, sync_wait};
    /// // Work under `stop_when(.., source.token())` sees the source's stop request: here
    /// // the pool's `schedule()` completes stopped instead of running `then`.
    /// let pool = StaticThreadPool::new(1)?;
    /// let source = InplaceStopSource::new();
    /// source.request_stop();
    /// let work = stop_when(schedule(&pool.scheduler()).then(|()| 1), source.token());
    /// assert_eq!(sync_wait(work).unwrap(), None);
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn token(&self) -> StopToken<'_> {
        StopToken { source: Some(self) }
    }

    /// Whether stop has been requested.
    ///
    /// A `true` result synchronizes with the [`request_stop`](Self::request_stop) call
    /// that made the request.
    ///
    /// ```
    /// use senders::InplaceStopSource;
    /// let source = InplaceStopSource::new();
    /// std::thread::scope(|s| { s.spawn(|| source.request_stop()); });
    /// assert!(source.stop_requested());
    /// ```
    #[inline]
    pub fn stop_requested(&self) -> bool {
        self.state.load(Ordering::Acquire) & STOP_REQUESTED != 0
    }

    /// Requests stop. Returns `true` iff this call made the request (it was the first).
    ///
    /// The first call runs every registered callback on the calling thread, one at a
    /// time, each exactly once, and returns when all have returned. Callbacks may
    /// register or drop other callbacks (and drop their own) on this same source. If a
    /// callback panics, the remaining callbacks still run, and the first panic is
    /// resumed once they all have.
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopCallback};
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// static RAN: AtomicBool = AtomicBool::new(false);
    /// let source = InplaceStopSource::new();
    /// let mut cb = std::pin::pin!(StopCallback::new(source.token(), || RAN.store(true, Ordering::Relaxed)));
    /// cb.as_mut().register();
    /// assert!(source.request_stop(), "the first request");
    /// assert!(RAN.load(Ordering::Relaxed), "its callback ran before request_stop returned");
    /// assert!(!source.request_stop(), "a second request does nothing");
    /// ```
    pub fn request_stop(&self) -> bool {
        match self.request_stop_catching() {
            Ok(requested) => requested,
            Err(p) => p.resume(),
        }
    }

    /// [`request_stop`](Self::request_stop), returning the first callback's panic
    /// instead of resuming it: for the crate's own requests, made where an unwind must
    /// not pass (a completion, a stop callback), by an operation that then completes
    /// with the panic.
    pub(crate) fn request_stop_catching(&self) -> Result<bool, Panic> {
        let mut first = None;
        let requested = self.request_stop_with(|p| {
            first.get_or_insert(p);
        });
        first.map_or(Ok(requested), Err)
    }

    /// [`request_stop`](Self::request_stop), handing each callback's panic to
    /// `on_panic` as soon as that callback has returned, before its owner may go on (an
    /// owner on another thread waits for its callback to finish): so that a panic can
    /// be recorded where the owner's completion will find it. Returns whether this call
    /// made the request.
    pub(crate) fn request_stop_with(&self, mut on_panic: impl FnMut(Panic)) -> bool {
        if !self.try_lock_unless_stopped(true) {
            return false;
        }
        // Locked, and the stop flag is set: no node can join the list any more.
        let me = thread::current().id();
        // SAFETY: we hold the lock, which guards `notifying`.
        self.notifying.with_mut(|t| unsafe { *t = Some(me) });

        loop {
            // SAFETY: we hold the lock, which guards `head`.
            let node = self.head.with(|h| unsafe { *h });
            if node.is_null() {
                break;
            }
            // SAFETY: `node` is linked, so its owner's `Drop` has not finished (it must
            // take the lock to unlink it) and it is alive; its links are ours under the
            // lock.
            unsafe { self.pop_head(node) };
            self.unlock(STOP_REQUESTED);

            // From here the node is "running": the owner may no longer unlink it and, on
            // another thread, waits for `completed`; on this thread it sets `removed`.
            let removed = Cell::new(false);
            // SAFETY: the node is alive (its owner waits for `completed` or is us), and
            // `removed` is only ever touched by the notifying thread, which is us.
            unsafe { (*node).removed.with_mut(|r| *r = &removed) };
            let result = catch_unwind(AssertUnwindSafe(|| {
                // SAFETY: `node` came from a callback struct's registration, which
                // derived it from a pointer to the whole struct with the matching
                // `execute`; the node is unlinked and running, so only we may take the
                // callback out of it.
                unsafe { ((*node).execute)(node) }
            }));
            if let Err(payload) = result {
                // A panic in `on_panic` would leave the owner waiting: it is the crate's
                // own code, which records and does not unwind.
                on_panic(Panic::new(payload));
            }
            if !removed.get() {
                // The owner has not dropped the node from inside the callback, so it is
                // still alive: an owner on another thread is waiting for `completed`.
                // SAFETY: as above; `removed` is ours.
                unsafe { (*node).removed.with_mut(|r| *r = ptr::null()) };
                // SAFETY: still alive until this store is observed.
                unsafe { (*node).completed.store(true, Ordering::Release) };
                // The node may be freed from here on: touch it no more.
            }
            self.lock();
        }
        self.unlock(STOP_REQUESTED);
        true
    }

    /// Links `node` at the head of the list, unless stop has already been requested.
    /// Returns whether it was linked; if not, the caller runs the callback itself.
    ///
    /// # Safety
    ///
    /// `node` must point to an unlinked node inside a pinned callback struct that
    /// [`remove`](Self::remove)s it before it is freed or repurposed (or is leaked), and
    /// the pointer must be derived from a pointer to that whole struct, matching the
    /// node's `execute` function.
    pub(super) unsafe fn try_add(&self, node: *const Node) -> bool {
        if !self.try_lock_unless_stopped(false) {
            return false;
        }
        // SAFETY: we hold the lock, which guards `head` and every linked node's links;
        // `node` is valid (caller) and not yet shared with anyone.
        unsafe {
            let head = self.head.with(|h| *h);
            (*node).prev.with_mut(|p| *p = ptr::null());
            (*node).next.with_mut(|n| *n = head);
            (*node).linked.with_mut(|l| *l = true);
            if !head.is_null() {
                (*head).prev.with_mut(|p| *p = node);
            }
            self.head.with_mut(|h| *h = node);
        }
        self.unlock(0);
        true
    }

    /// Deregisters `node`, which [`try_add`](Self::try_add) linked. On return the
    /// callback either never ran and never will, or has finished running, or it is
    /// running on this very thread (the callback is dropping its own registration) and
    /// [`request_stop`](Self::request_stop) has been told to leave the node alone.
    ///
    /// # Safety
    ///
    /// `node` must have been linked into this source by `try_add`, must not have been
    /// removed yet, and must still be alive.
    pub(super) unsafe fn remove(&self, node: *const Node) {
        let state = self.lock();
        // SAFETY: we hold the lock, which guards `linked` and the links.
        if unsafe { (*node).linked.with(|l| *l) } {
            // Never ran: unlink it, and nobody will ever touch it again.
            // SAFETY: as above; the node is linked, so its neighbours are alive too.
            unsafe { self.unlink(node) };
            self.unlock(state);
            return;
        }
        // Popped by `request_stop`: running, or finished.
        // SAFETY: we hold the lock, which guards `notifying`.
        let notifying = self.notifying.with(|t| unsafe { *t });
        self.unlock(state);

        if notifying == Some(thread::current().id()) {
            // The notifying thread is us, so the callback is not running concurrently:
            // either it has finished, or we are inside it (it drops its own
            // registration). Only in the latter case is `removed` non-null.
            // SAFETY: `removed` is only touched by the notifying thread, which is us;
            // when non-null it points to a live flag in `request_stop`'s frame below us.
            unsafe {
                let removed = (*node).removed.with(|r| *r);
                if let Some(removed) = removed.as_ref() {
                    removed.set(true);
                }
            }
        } else {
            let mut backoff = Backoff::new();
            // SAFETY: the node is alive until we return; the notifying thread only sets
            // `completed` (Release) when it is done with the node.
            while !unsafe { (*node).completed.load(Ordering::Acquire) } {
                backoff.snooze();
            }
        }
    }

    /// Unlinks the head node `node`.
    ///
    /// # Safety
    ///
    /// The lock must be held and `node` must be the (non-null) head.
    unsafe fn pop_head(&self, node: *const Node) {
        // SAFETY: the caller holds the lock and `node` is the linked head.
        unsafe {
            let next = (*node).next.with(|n| *n);
            self.head.with_mut(|h| *h = next);
            if !next.is_null() {
                (*next).prev.with_mut(|p| *p = ptr::null());
            }
            (*node).linked.with_mut(|l| *l = false);
        }
    }

    /// Unlinks the linked node `node`, wherever it is in the list.
    ///
    /// # Safety
    ///
    /// The lock must be held and `node` must be linked into this source.
    unsafe fn unlink(&self, node: *const Node) {
        // SAFETY: the caller holds the lock, `node` is linked, and so are its neighbours,
        // which are therefore alive.
        unsafe {
            let prev = (*node).prev.with(|p| *p);
            let next = (*node).next.with(|n| *n);
            if prev.is_null() {
                self.head.with_mut(|h| *h = next);
            } else {
                (*prev).next.with_mut(|n| *n = next);
            }
            if !next.is_null() {
                (*next).prev.with_mut(|p| *p = prev);
            }
            (*node).linked.with_mut(|l| *l = false);
        }
    }

    /// Takes the lock unless stop has been requested, setting the stop flag as well if
    /// `request` is true. Returns whether the lock was taken.
    fn try_lock_unless_stopped(&self, request: bool) -> bool {
        let add = if request { LOCKED | STOP_REQUESTED } else { LOCKED };
        let mut backoff = Backoff::new();
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            if state & STOP_REQUESTED != 0 {
                return false;
            }
            if state & LOCKED != 0 {
                backoff.snooze();
                state = self.state.load(Ordering::Acquire);
                continue;
            }
            match self.state.compare_exchange_weak(state, state | add, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(current) => state = current,
            }
        }
    }

    /// Takes the lock, whatever the stop flag. Returns the state to pass to
    /// [`unlock`](Self::unlock) (the state word without the lock bit).
    fn lock(&self) -> usize {
        let mut backoff = Backoff::new();
        let mut state = self.state.load(Ordering::Relaxed);
        loop {
            if state & LOCKED != 0 {
                backoff.snooze();
                state = self.state.load(Ordering::Relaxed);
                continue;
            }
            match self.state.compare_exchange_weak(state, state | LOCKED, Ordering::Acquire, Ordering::Relaxed) {
                Ok(_) => return state,
                Err(current) => state = current,
            }
        }
    }

    /// Releases the lock. `state` is the state word without the lock bit: only the lock
    /// holder changes the word, so it is exactly what the word must become.
    fn unlock(&self, state: usize) {
        debug_assert_eq!(state & LOCKED, 0);
        self.state.store(state, Ordering::Release);
    }
}

/// A handle for observing an [`InplaceStopSource`], or one that never stops.
///
/// Tokens are `Copy` and borrow their source. Register a
/// [`StopCallback`](super::StopCallback) on a token to be called when stop is
/// requested.
///
/// ```
/// use senders::InplaceStopSource;
/// let source = InplaceStopSource::new();
/// let token = source.token();
/// assert!(token.stop_possible() && !token.stop_requested());
/// source.request_stop();
/// assert!(token.stop_requested());
/// ```
#[derive(Clone, Copy)]
pub struct StopToken<'a> {
    /// `None` for the token that never stops.
    source: Option<&'a InplaceStopSource>,
}

impl StopToken<'_> {
    /// The token that never stops: [`stop_possible`](Self::stop_possible) is false, and
    /// callbacks registered on it are never run.
    ///
    /// ```
    /// use senders::StopToken;
    /// let never = StopToken::never();
    /// assert!(!never.stop_possible() && !never.stop_requested());
    /// ```
    pub const fn never() -> StopToken<'static> {
        StopToken { source: None }
    }

    /// Whether stop has been requested on the source.
    ///
    /// ```
    /// use senders::InplaceStopSource;
    /// let source = InplaceStopSource::new();
    /// let token = source.token();
    /// assert!(!token.stop_requested());
    /// source.request_stop();
    /// assert!(token.stop_requested());
    /// ```
    #[inline]
    pub fn stop_requested(&self) -> bool {
        self.source.is_some_and(InplaceStopSource::stop_requested)
    }

    /// Whether stop can ever be requested: false only for [`never`](Self::never).
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopToken};
    /// assert!(InplaceStopSource::new().token().stop_possible());
    /// assert!(!StopToken::never().stop_possible());
    /// ```
    pub fn stop_possible(&self) -> bool {
        self.source.is_some()
    }

    /// Erases the borrow of the source, for storing the token (and callbacks registered
    /// through it) in places that cannot carry a lifetime, such as operation states.
    ///
    /// # Safety
    ///
    /// The caller guarantees that the source outlives every use of the returned token
    /// and of callbacks registered through it: each such callback must be dropped (or
    /// leaked) before the source is dropped or moved.
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopToken};
    /// let source = InplaceStopSource::new();
    /// // SAFETY: `source` outlives `stored`: both live to the end of this block, and
    /// // `stored` registers no callback.
    /// let stored: StopToken<'static> = unsafe { source.token().detach() };
    /// source.request_stop();
    /// assert!(stored.stop_requested());
    /// assert!(stored == source.token(), "it still observes the same source");
    /// ```
    pub unsafe fn detach(self) -> StopToken<'static> {
        StopToken {
            // SAFETY: the caller guarantees the source outlives every use of the token.
            source: self.source.map(|s| unsafe { &*ptr::from_ref(s) }),
        }
    }

    /// The source, if any.
    pub(super) fn source(&self) -> Option<&InplaceStopSource> {
        self.source
    }
}

impl Default for StopToken<'_> {
    /// The token that never stops.
    fn default() -> Self {
        StopToken { source: None }
    }
}

impl PartialEq for StopToken<'_> {
    /// Equal when both observe the same source, or both never stop.
    fn eq(&self, other: &Self) -> bool {
        match (self.source, other.source) {
            (Some(a), Some(b)) => ptr::eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }
}

impl Eq for StopToken<'_> {}

impl fmt::Debug for StopToken<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            None => f.write_str("StopToken(never)"),
            Some(s) => f
                .debug_struct("StopToken")
                .field("source", &ptr::from_ref(s))
                .field("stop_requested", &s.stop_requested())
                .finish(),
        }
    }
}
