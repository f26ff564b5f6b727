//! What [`Domain::transform_then`](crate::Domain::transform_then) takes: the
//! untransformed sender [`Then`], plain data, and [`ThenFn`], the function it applies.
//! Its `impl Sender` and default lowering are in `mod.rs`.

/// A function `then` can apply to a value of type `V`. Implemented for every
/// `FnOnce(V) -> U`.
pub trait ThenFn<V> {
    /// The function's result, the new value.
    type Output;
    /// Calls the function.
    ///
    /// ```
    /// use senders::adaptors::ThenFn;
    /// assert_eq!(ThenFn::call(|x: i32| x * 2, 21), 42);
    /// ```
    fn call(self, value: V) -> Self::Output;
}

impl<V, U, F: FnOnce(V) -> U> ThenFn<V> for F {
    type Output = U;
    #[inline]
    fn call(self, value: V) -> U {
        self(value)
    }
}

/// The untransformed sender of `then(sndr, f)`, made by
/// [`SenderExt::then`](crate::SenderExt::then).
///
/// It is what early customization hands to a domain, and, if no domain replaced it
/// early, what `connect` hands to the late domain. Decompose it with
/// [`into_parts`](Then::into_parts) or lower it to the default with
/// [`lower`](Then::lower).
#[must_use = "senders do nothing unless connected and started"]
pub struct Then<S, F> {
    pub(super) sndr: S,
    pub(super) f: F,
}

impl<S, F> Then<S, F> {
    /// Builds the untransformed sender. Prefer [`SenderExt::then`](crate::SenderExt::then),
    /// which also applies early customization.
    ///
    /// ```
    /// use senders::adaptors::Then;
    /// use senders::{just, sync_wait};
    /// let t = Then::new(just(20), |x: i32| x + 1);
    /// assert_eq!(sync_wait(t).unwrap(), Some(21));
    /// ```
    pub fn new(sndr: S, f: F) -> Self {
        Then { sndr, f }
    }
    /// The predecessor and the function (P2999's `[tag, data, child]`).
    ///
    /// ```
    /// use senders::adaptors::Then;
    /// use senders::{just, sync_wait};
    /// let (pred, f) = Then::new(just(20), |x: i32| x + 1).into_parts();
    /// assert_eq!(f(1), 2);
    /// assert_eq!(sync_wait(pred).unwrap(), Some(20));
    /// ```
    pub fn into_parts(self) -> (S, F) {
        (self.sndr, self.f)
    }
}
