//! `SenderExt`: the blanket extension trait that chains adaptors.

use crate::adaptors::bulk::{self, BulkOutcome};
use crate::adaptors::then::{self, UponError, UponStopped};
use crate::domain::MaybeDomain;
use crate::sender::Sender;

/// Adaptor methods for every [`Sender`]. Each returns a named `#[must_use]` sender type
/// (or, for the customizable algorithms, whatever the predecessor's domain turns the
/// default one into).
pub trait SenderExt: Sender {
    /// `then(sndr, f)`: completes with `f(value)`. Customizable by domains.
    ///
    /// ```
    /// use senders::{just, sync_wait, SenderExt};
    /// assert_eq!(sync_wait(just(2).then(|x| x * 10)).unwrap(), Some(20));
    /// ```
    fn then<F, U>(self, f: F) -> <Self::Domain as MaybeDomain>::EarlyThen<Self, F>
    where
        F: FnOnce(Self::Value) -> U,
    {
        then::then(self, f)
    }

    /// `upon_error(sndr, f)`: an error `e` becomes the value `f(e)`.
    ///
    /// ```
    /// use senders::{just_error, sync_wait, SenderExt};
    /// let v = sync_wait(just_error::<i32, _>("no").upon_error(|e: &str| e.len() as i32));
    /// assert_eq!(v.unwrap(), Some(2));
    /// ```
    fn upon_error<F>(self, f: F) -> UponError<Self, F>
    where
        F: FnOnce(Self::Error) -> Self::Value,
    {
        UponError::new(self, f)
    }

    /// `upon_stopped(sndr, f)`: a stop becomes the value `f()`.
    ///
    /// ```
    /// use senders::{just_stopped, sync_wait, SenderExt};
    /// use std::convert::Infallible;
    /// let v = sync_wait(just_stopped::<i32, Infallible>().upon_stopped(|| -1));
    /// assert_eq!(v.unwrap(), Some(-1));
    /// ```
    fn upon_stopped<F>(self, f: F) -> UponStopped<Self, F>
    where
        F: FnOnce() -> Self::Value,
    {
        UponStopped::new(self, f)
    }

    /// `bulk(sndr, shape, f)`: runs `f(i, &value)` for every `i` in `0..shape`, then
    /// completes with the value. An iteration returns `()` or `Result<(), Error>`.
    /// Customizable by domains; the default runs the iterations in order.
    ///
    /// ```
    /// use senders::{just, sync_wait, SenderExt};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let hits = sync_wait(just(AtomicUsize::new(0)).bulk(4, |_, n: &AtomicUsize| {
    ///     n.fetch_add(1, Ordering::Relaxed);
    /// }));
    /// assert_eq!(hits.unwrap().unwrap().into_inner(), 4);
    /// ```
    fn bulk<F, O>(self, shape: usize, f: F) -> <Self::Domain as MaybeDomain>::EarlyBulk<Self, F>
    where
        F: Fn(usize, &Self::Value) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk(self, shape, f)
    }
}

impl<S: Sender> SenderExt for S {}
