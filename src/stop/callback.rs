//! [`StopCallback`] and its crate-internal engine [`RawStopCallback`].

use std::fmt;
use std::marker::PhantomPinned;
use std::pin::Pin;

use super::source::{Node, StopToken};
use crate::sync::UnsafeCell;

/// Something a stop callback can run: any `FnOnce() + Send` closure, or a crate-internal
/// named type (closures cannot be named in struct fields, e.g. in
/// [`MergedStopSource`](super::MergedStopSource)).
pub(crate) trait Invoke: Send {
    /// Runs the callback.
    fn invoke(self);
}

impl<F: FnOnce() + Send> Invoke for F {
    fn invoke(self) {
        self()
    }
}

/// Where a callback is in its life, as its owner sees it. Only the owner reads or writes
/// it, so it needs no synchronization.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    /// Constructed, not registered.
    Idle,
    /// Linked into the source (it may since have been popped and run by `request_stop`).
    Registered,
    /// Never linked: the token never stops, or stop had already been requested and the
    /// callback ran inline in `register`.
    Finished,
}

/// The node and the callback, laid out so a `*const Node` derived from a pointer to the
/// whole struct can be cast back to it.
#[repr(C)]
struct Inner<C> {
    /// Must stay the first field (see [`execute`]).
    node: Node,
    /// `Some` until the callback is taken out to run (or dropped with the struct). Owned
    /// by the owner, except while the node is running (see the module docs).
    callback: UnsafeCell<Option<C>>,
}

/// The `execute` function of an `Inner<C>`'s node: takes the callback out and runs it.
///
/// # Safety
///
/// `node` must point to the `node` field of a live `Inner<C>` and be derived from a
/// pointer to that whole `Inner<C>`; the caller must have the right to take the callback
/// (it is the notifying thread and has unlinked the node).
unsafe fn execute<C: Invoke>(node: *const Node) {
    let inner = node.cast::<Inner<C>>();
    // SAFETY: `Inner<C>` is `#[repr(C)]` with `node` first, and `node`'s provenance
    // covers the whole `Inner<C>` (caller); the caller has the right to take the callback.
    let callback = unsafe { (*inner).callback.with_mut(|c| (*c).take()) };
    // The node may be freed while the callback runs (it may drop its own registration):
    // do not touch `inner` again.
    if let Some(callback) = callback {
        callback.invoke();
    }
}

/// The engine behind [`StopCallback`], generic over any [`Invoke`] so crate code can
/// store callbacks of nameable types.
pub(crate) struct RawStopCallback<'a, C: Invoke> {
    inner: Inner<C>,
    token: StopToken<'a>,
    /// Owner-only, but in a race-checked cell: the callback may drop this struct on the
    /// requesting thread, so under loom an access racing with that drop is reported.
    status: UnsafeCell<Status>,
    _pin: PhantomPinned,
}

// SAFETY: the callback `C` is `Send`, so it may be moved to, run on, or dropped on
// another thread; the node's shared fields are synchronized by the source's protocol
// from any thread; the token is `Send` (the source is `Sync`).
unsafe impl<C: Invoke> Send for RawStopCallback<'_, C> {}
// SAFETY: no method takes `&self` to reach the callback or the node, so sharing a
// reference gives access to nothing unsynchronized.
unsafe impl<C: Invoke> Sync for RawStopCallback<'_, C> {}

impl<'a, C: Invoke> RawStopCallback<'a, C> {
    /// An unregistered callback.
    pub(crate) fn new(token: StopToken<'a>, callback: C) -> Self {
        RawStopCallback {
            inner: Inner { node: Node::new(execute::<C>), callback: UnsafeCell::new(Some(callback)) },
            token,
            status: UnsafeCell::new(Status::Idle),
            _pin: PhantomPinned,
        }
    }

    /// The token the callback is (to be) registered on.
    pub(crate) fn token(&self) -> StopToken<'a> {
        self.token
    }

    /// The registration status. Only the owner calls this (or the thread the callback
    /// dropped the struct on, after the source's synchronization).
    fn status(&self) -> Status {
        // SAFETY: owner-only: no write can run concurrently with this read.
        self.status.with(|s| unsafe { *s })
    }

    /// Sets the registration status, as `status`.
    fn set_status(&self, status: Status) {
        // SAFETY: owner-only: no other access can run concurrently with this write.
        self.status.with_mut(|s| unsafe { *s = status })
    }

    /// The callback, while it is not registered yet (`None` afterwards).
    pub(crate) fn callback_mut(self: Pin<&mut Self>) -> Option<&mut C> {
        // SAFETY: nothing is moved out of the pinned struct.
        let this = unsafe { self.get_unchecked_mut() };
        if this.status() != Status::Idle {
            return None;
        }
        // SAFETY: while idle the node is not shared, so we own the callback, and the
        // returned borrow is tied to `&mut self`.
        this.inner.callback.with_mut(|c| unsafe { (*c).as_mut() })
    }

    /// Registers the callback; see [`StopCallback::register`].
    ///
    /// # Safety
    ///
    /// Until this struct is dropped, the callback and everything it borrows must stay
    /// valid for as long as the source may call it. That holds if `C: 'static`, or if
    /// the struct is guaranteed to be dropped (not leaked) before anything `C` borrows
    /// becomes invalid.
    pub(crate) unsafe fn register(self: Pin<&mut Self>) {
        // SAFETY: nothing is moved out of the pinned struct; from here on we work through
        // a raw pointer, as the node's shared fields may be touched by other threads.
        let this: *mut Self = unsafe { self.get_unchecked_mut() };
        // SAFETY: `this` is valid, and `status` and `token` are owner-only fields.
        let (status, token) = unsafe { ((*this).status(), (*this).token) };
        if status != Status::Idle {
            return;
        }
        let Some(source) = token.source() else {
            // SAFETY: as above.
            unsafe { (*this).set_status(Status::Finished) };
            return;
        };
        // Derived from the pointer to the whole struct, so `execute` may cast it back.
        // SAFETY: `this` is valid; this only computes a field address.
        let node: *const Node = unsafe { &raw const (*this).inner }.cast();
        // Marked registered before the node is published: once `try_add` has linked it,
        // a stop request on another thread may run the callback, and the callback may
        // drop this struct there (a sender completing from its stop callback), so this
        // thread must not touch the struct again (ThreadSanitizer found the late write).
        // SAFETY: as above.
        unsafe { (*this).set_status(Status::Registered) };
        // SAFETY: the struct is pinned and its `Drop` removes the node (or it is leaked,
        // and the caller guarantees the callback stays valid); `node` is unlinked and
        // derived from the whole `Inner<C>`, matching `execute::<C>`.
        if !unsafe { source.try_add(node) } {
            // Stop was already requested: run it here and now, on this thread.
            // SAFETY: as above; the node was never shared, so the callback is ours.
            let callback = unsafe {
                (*this).set_status(Status::Finished);
                (*this).inner.callback.with_mut(|c| (*c).take())
            };
            if let Some(callback) = callback {
                callback.invoke();
            }
        }
    }
}

impl<C: Invoke> Drop for RawStopCallback<'_, C> {
    fn drop(&mut self) {
        if self.status() == Status::Registered {
            let this: *const Self = self;
            // Derived exactly as in `register`.
            // SAFETY: `this` is valid; this only computes a field address.
            let node: *const Node = unsafe { &raw const (*this).inner }.cast();
            if let Some(source) = self.token.source() {
                // SAFETY: `register` linked this node into this source; only this `Drop`
                // removes it, and the node is alive until `drop` returns.
                unsafe { source.remove(node) };
            }
        }
        // The callback is ours again: it never ran (drop it now), ran and was taken, or
        // is running on this thread (already taken out of the node).
        // SAFETY: after `remove`, nobody else touches the callback.
        drop(self.inner.callback.with_mut(|c| unsafe { (*c).take() }));
    }
}

impl<C: Invoke> fmt::Debug for RawStopCallback<'_, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StopCallback")
            .field("token", &self.token)
            .field("status", &self.status())
            .finish_non_exhaustive()
    }
}

/// A callback run when stop is requested on a token's source: the in-place,
/// allocation-free counterpart of C++'s `std::inplace_stop_callback`.
///
/// Construct it with [`new`](Self::new) (cheap, not yet registered), pin it, then
/// [`register`](Self::register) it. Dropping it deregisters it, with the semantics of
/// `inplace_stop_callback`'s destructor:
///
/// - if the callback has not run, it is unlinked and never will run (it is dropped);
/// - if it is running right now on another thread (inside
///   [`request_stop`](super::InplaceStopSource::request_stop)), `drop` blocks until it
///   has returned;
/// - if it is running on this thread (the callback drops its own registration, directly
///   or indirectly), `drop` returns at once, and `request_stop` leaves the node alone.
///
/// It can be built unregistered inside a larger structure (say an `Option` field of an
/// operation state) and registered once that structure is pinned.
///
/// # Example
///
/// ```
/// use std::pin::pin;
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use senders::{InplaceStopSource, StopCallback, StopToken};
///
/// let source = InplaceStopSource::new();
/// let stopped = Arc::new(AtomicBool::new(false));
///
/// let flag = stopped.clone();
/// let mut callback = pin!(StopCallback::new(source.token(), move || {
///     flag.store(true, Ordering::Relaxed);
/// }));
/// callback.as_mut().register();
/// source.request_stop();
/// assert!(stopped.load(Ordering::Relaxed));
///
/// // Registered after the request: runs inline, in `register`.
/// let mut late = pin!(StopCallback::new(source.token(), || println!("stopped already")));
/// late.as_mut().register();
///
/// // On the never-stop token the callback is never run.
/// let mut never = pin!(StopCallback::new(StopToken::never(), || unreachable!()));
/// never.as_mut().register();
/// ```
pub struct StopCallback<'a, F: FnOnce() + Send> {
    raw: RawStopCallback<'a, F>,
}

impl<'a, F: FnOnce() + Send> StopCallback<'a, F> {
    /// A callback for `token`'s source, not registered yet. Cheap: no allocation, no
    /// synchronization.
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopCallback};
    /// let source = InplaceStopSource::new();
    /// let cb = StopCallback::new(source.token(), || println!("stop"));
    /// source.request_stop(); // not registered: nothing runs
    /// drop(cb);
    /// ```
    pub fn new(token: StopToken<'a>, f: F) -> Self {
        StopCallback { raw: RawStopCallback::new(token, f) }
    }

    /// The token the callback is (to be) registered on.
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopCallback};
    /// let source = InplaceStopSource::new();
    /// let cb = StopCallback::new(source.token(), || ());
    /// assert!(cb.token().stop_possible() && !cb.token().stop_requested());
    /// ```
    pub fn token(&self) -> StopToken<'a> {
        self.raw.token()
    }

    /// Registers the callback.
    ///
    /// If stop has already been requested, runs `f` inline, on this thread, before
    /// returning. For the [never](StopToken::never) token it does nothing (`f` is dropped
    /// with `self`, never run). Calling it again is a no-op.
    ///
    /// `F: 'static` is required because a registered callback may be leaked (say with
    /// [`mem::forget`](std::mem::forget) on a `Pin<Box<_>>`): its source could then still
    /// call `f` after data it borrows is gone. See
    /// [`register_unchecked`](Self::register_unchecked) for borrowing callbacks.
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopCallback};
    /// use std::sync::mpsc;
    /// let source = InplaceStopSource::new();
    /// let (tx, rx) = mpsc::channel();
    /// let mut cb = std::pin::pin!(StopCallback::new(source.token(), move || tx.send("stopped").unwrap()));
    /// cb.as_mut().register();
    /// std::thread::scope(|s| { s.spawn(|| source.request_stop()); });
    /// assert_eq!(rx.recv().unwrap(), "stopped");
    /// ```
    pub fn register(self: Pin<&mut Self>)
    where
        F: 'static,
    {
        // SAFETY: `F: 'static`, so `f` stays valid as long as the source may call it.
        unsafe { self.register_unchecked() }
    }

    /// [`register`](Self::register) for a callback that borrows data.
    ///
    /// # Safety
    ///
    /// Until this `StopCallback` is dropped, `f` and everything it borrows must stay
    /// valid for as long as the source may call it: the caller must not leak this
    /// `StopCallback` (or whatever owns it) while `f` borrows data that can be freed
    /// before stop is requested on the source for the last time (i.e. before the source
    /// itself is gone).
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopCallback};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let source = InplaceStopSource::new();
    /// let calls = AtomicUsize::new(0); // borrowed, not 'static
    /// {
    ///     let mut cb = std::pin::pin!(StopCallback::new(source.token(), || { calls.fetch_add(1, Ordering::Relaxed); }));
    ///     // SAFETY: `cb` is pinned on this stack frame and dropped at the end of the
    ///     // block, before `calls`; it is never leaked.
    ///     unsafe { cb.as_mut().register_unchecked() };
    ///     source.request_stop();
    /// }
    /// assert_eq!(calls.load(Ordering::Relaxed), 1);
    /// ```
    pub unsafe fn register_unchecked(self: Pin<&mut Self>) {
        // SAFETY: structural pinning of the only field; the caller's guarantee is
        // exactly `RawStopCallback::register`'s.
        unsafe { self.map_unchecked_mut(|s| &mut s.raw).register() }
    }
}

impl<F: FnOnce() + Send> fmt::Debug for StopCallback<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.raw.fmt(f)
    }
}
