//! Panics in user code, carried as a completion.
//!
//! Rust closures may always panic; there is no `noexcept`. Every adaptor that calls
//! user code catches the unwind and delivers it on the receiver's fourth channel,
//! [`Receiver::set_panic`](crate::Receiver::set_panic). Consumers decide what to do
//! with it: [`sync_wait`](crate::sync_wait) resumes the unwind on the waiting thread.

use std::any::Any;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};

/// The payload of a panic caught in user code.
///
/// It travels through the completion graph on the panic channel until a consumer
/// re-raises it with [`Panic::resume`] (as `sync_wait` does) or stores it.
///
/// ```
/// use senders::{SenderExt, just, sync_wait};
/// let resumed = std::panic::catch_unwind(|| sync_wait(just(()).then(|()| panic!("boom"))));
/// assert_eq!(resumed.unwrap_err().downcast_ref::<&str>(), Some(&"boom"));
/// ```
pub struct Panic(Box<dyn Any + Send + 'static>);

impl Panic {
    /// Wraps a payload as returned by [`std::panic::catch_unwind`].
    ///
    /// ```
    /// use senders::Panic;
    /// let caught = std::panic::catch_unwind(|| panic!("at {}", 7)).unwrap_err();
    /// assert_eq!(Panic::new(caught).message(), Some("at 7"));
    /// ```
    pub fn new(payload: Box<dyn Any + Send + 'static>) -> Self {
        Panic(payload)
    }

    /// Continues unwinding with the original payload on the current thread.
    ///
    /// ```
    /// use senders::Panic;
    /// let p = Panic::new(Box::new("boom"));
    /// let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| p.resume()));
    /// assert_eq!(again.unwrap_err().downcast_ref::<&str>(), Some(&"boom"));
    /// ```
    pub fn resume(self) -> ! {
        resume_unwind(self.0)
    }

    /// The panic message, when the payload is a string (as `panic!("...")` makes it).
    ///
    /// ```
    /// use senders::Panic;
    /// assert_eq!(Panic::new(Box::new(String::from("owned"))).message(), Some("owned"));
    /// assert_eq!(Panic::new(Box::new(42_u32)).message(), None);
    /// ```
    pub fn message(&self) -> Option<&str> {
        if let Some(s) = self.0.downcast_ref::<&'static str>() {
            Some(s)
        } else {
            self.0.downcast_ref::<String>().map(String::as_str)
        }
    }

    /// The raw payload.
    ///
    /// ```
    /// use senders::Panic;
    /// let payload = Panic::new(Box::new(42_u32)).into_payload();
    /// assert_eq!(payload.downcast_ref::<u32>(), Some(&42));
    /// ```
    pub fn into_payload(self) -> Box<dyn Any + Send + 'static> {
        self.0
    }
}

impl fmt::Debug for Panic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.message() {
            Some(m) => write!(f, "Panic({m:?})"),
            None => f.write_str("Panic(<non-string payload>)"),
        }
    }
}

/// Drops user data that the library discards (a function a completion does not call, a
/// value it does not deliver), turning a panic in a user `Drop` into `Err(Panic)`.
///
/// A receiver calls it *before* it completes the receiver downstream: after that
/// completion the operation may be gone, and with it whatever the data borrows. On a
/// panic completion, the first panic wins and this one's `Err` is dropped.
#[inline]
pub(crate) fn discard<T>(data: T) -> Result<(), Panic> {
    catch(move || drop(data))
}

/// Runs user code, turning an unwind into `Err(Panic)`.
///
/// Unwind safety is asserted: the caller hands the closure's captures to nobody else
/// after a panic, so no broken invariant can be observed.
#[inline]
pub(crate) fn catch<T>(f: impl FnOnce() -> T) -> Result<T, Panic> {
    catch_unwind(AssertUnwindSafe(f)).map_err(Panic::new)
}
/// Aborts the process if dropped during an unwind through code that must not unwind.
pub(crate) struct AbortOnUnwind(pub(crate) &'static str);

impl Drop for AbortOnUnwind {
    fn drop(&mut self) {
        eprintln!("senders: {}; aborting (completions and `start` must not unwind)", self.0);
        std::process::abort();
    }
}
