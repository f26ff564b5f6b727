//! [`MergedStopSource`]: a stop source that also stops when either of two tokens does.

use std::fmt;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::ptr;

use super::callback::{Invoke, RawStopCallback};
use super::source::{InplaceStopSource, StopToken};

/// The forwarding callback: requests stop on the merged source.
struct Forward(*const InplaceStopSource);

// SAFETY: the pointer targets the `source` field of a pinned `MergedStopSource`, and
// `InplaceStopSource` is `Sync`: requesting stop on it from any thread is fine.
unsafe impl Send for Forward {}

impl Invoke for Forward {
    fn invoke(self) {
        // SAFETY: `MergedStopSource::register` set the pointer to its own pinned `source`
        // field before registering this callback; the callback is deregistered (and a
        // run in progress on another thread waited for) by the forwarding callbacks'
        // `Drop`, which runs before `source` is dropped (field order), so the source is
        // alive whenever this runs.
        unsafe { (*self.0).request_stop() };
    }
}

/// A stop source whose token stops when either of two input tokens stops, or when
/// [`request_stop`](Self::request_stop) is called on it: the combinator behind
/// `stop_when`-style operations (for instance, a counting scope merging its own stop
/// source with a nested operation's receiver token).
///
/// Build it with [`new`](Self::new), pin it, then [`register`](Self::register) the
/// forwarding callbacks on the inputs. Dropping it deregisters them.
///
/// ```
/// use std::pin::pin;
/// use senders::InplaceStopSource;
/// use senders::stop::MergedStopSource;
///
/// let a = InplaceStopSource::new();
/// let b = InplaceStopSource::new();
/// let mut merged = pin!(MergedStopSource::new(a.token(), b.token()));
/// merged.as_mut().register();
/// assert!(!merged.as_ref().token().stop_requested());
/// b.request_stop();
/// assert!(merged.as_ref().token().stop_requested());
/// assert!(!a.stop_requested());
/// ```
pub struct MergedStopSource<'a> {
    // Declared before `source`, so they are dropped (deregistered) first.
    from_a: RawStopCallback<'a, Forward>,
    from_b: RawStopCallback<'a, Forward>,
    source: InplaceStopSource,
    _pin: PhantomPinned,
}

impl<'a> MergedStopSource<'a> {
    /// A merged source over `a` and `b`, with its forwarding callbacks not registered
    /// yet. A [never](StopToken::never) input is simply ignored.
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopToken, stop::MergedStopSource};
    /// let a = InplaceStopSource::new();
    /// let merged = std::pin::pin!(MergedStopSource::new(a.token(), StopToken::never()));
    /// assert!(!merged.stop_requested());
    /// ```
    pub fn new(a: StopToken<'a>, b: StopToken<'a>) -> Self {
        MergedStopSource {
            from_a: RawStopCallback::new(a, Forward(ptr::null())),
            from_b: RawStopCallback::new(b, Forward(ptr::null())),
            source: InplaceStopSource::new(),
            _pin: PhantomPinned,
        }
    }

    /// Attaches the forwarding callbacks to both inputs. If either input has already
    /// stopped, the merged source is stopped when this returns (running any callbacks
    /// registered on it). Calling it again is a no-op.
    ///
    /// ```
    /// use senders::{InplaceStopSource, StopToken, stop::MergedStopSource};
    /// let a = InplaceStopSource::new();
    /// a.request_stop();
    /// let mut merged = std::pin::pin!(MergedStopSource::new(a.token(), StopToken::never()));
    /// assert!(!merged.stop_requested(), "nothing forwards before `register`");
    /// merged.as_mut().register();
    /// assert!(merged.stop_requested(), "an input already stopped stops it at once");
    /// ```
    pub fn register(self: Pin<&mut Self>) {
        // SAFETY: the fields are structurally pinned: nothing is moved out of them, and
        // `MergedStopSource` has no `Drop` impl.
        let this = unsafe { self.get_unchecked_mut() };
        let target: *const InplaceStopSource = &raw const this.source;
        for callback in [&mut this.from_a, &mut this.from_b] {
            // SAFETY: structural pinning, as above.
            let mut callback = unsafe { Pin::new_unchecked(callback) };
            if let Some(forward) = callback.as_mut().callback_mut() {
                *forward = Forward(target);
            }
            // SAFETY: `Forward` borrows nothing: it points into this pinned struct, whose
            // `source` outlives the forwarding callbacks (see `Forward::invoke`), even if
            // the struct is leaked.
            unsafe { callback.register() };
        }
    }

    /// A token that stops when `a` or `b` stops, or when
    /// [`request_stop`](Self::request_stop) is called.
    ///
    /// ```
    /// use senders::{InplaceStopSource, SenderExt, StaticThreadPool, schedule, stop::MergedStopSource, stop_when, sync_wait};
    /// let pool = StaticThreadPool::new(1)?;
    /// let (a, b) = (InplaceStopSource::new(), InplaceStopSource::new());
    /// let mut merged = std::pin::pin!(MergedStopSource::new(a.token(), b.token()));
    /// merged.as_mut().register();
    /// a.request_stop();
    /// // Work under the merged token sees the stop of `a`: the pool's `schedule()`
    /// // completes stopped instead of running `then`.
    /// let work = stop_when(schedule(&pool.scheduler()).then(|()| 1), merged.as_ref().token());
    /// assert_eq!(sync_wait(work).unwrap(), None);
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn token(self: Pin<&Self>) -> StopToken<'_> {
        self.get_ref().source.token()
    }

    /// Requests stop on the merged source (not on the inputs). Returns `true` iff this
    /// call made the request; see [`InplaceStopSource::request_stop`].
    ///
    /// ```
    /// use senders::{InplaceStopSource, stop::MergedStopSource};
    /// let (a, b) = (InplaceStopSource::new(), InplaceStopSource::new());
    /// let mut merged = std::pin::pin!(MergedStopSource::new(a.token(), b.token()));
    /// merged.as_mut().register();
    /// assert!(merged.as_ref().request_stop(), "the first request");
    /// assert!(!merged.as_ref().request_stop());
    /// assert!(!a.stop_requested() && !b.stop_requested(), "the inputs are untouched");
    /// ```
    pub fn request_stop(self: Pin<&Self>) -> bool {
        self.get_ref().source.request_stop()
    }

    /// Whether stop has been requested on the merged source.
    ///
    /// ```
    /// use senders::{InplaceStopSource, stop::MergedStopSource};
    /// let (a, b) = (InplaceStopSource::new(), InplaceStopSource::new());
    /// let mut merged = std::pin::pin!(MergedStopSource::new(a.token(), b.token()));
    /// merged.as_mut().register();
    /// assert!(!merged.stop_requested());
    /// std::thread::scope(|s| { s.spawn(|| b.request_stop()); });
    /// assert!(merged.stop_requested());
    /// ```
    pub fn stop_requested(&self) -> bool {
        self.source.stop_requested()
    }
}

impl fmt::Debug for MergedStopSource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MergedStopSource")
            .field("a", &self.from_a.token())
            .field("b", &self.from_b.token())
            .field("stop_requested", &self.stop_requested())
            .finish_non_exhaustive()
    }
}
