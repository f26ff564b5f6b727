//! How an operation ended, stored until someone hands it on: the four completions as a
//! value (used by the consumers, the bridges and the adaptors that park a result), and
//! the one conversion of a receiver's four channels into it.

use crate::panic::Panic;
use crate::receiver::Receiver;

/// A completion, stored.
pub(crate) enum Outcome<V, E> {
    Value(V),
    Error(E),
    Stopped,
    Panic(Panic),
}

impl<V, E> Outcome<V, E> {
    /// Completes `rcvr` with it.
    pub(crate) fn deliver<R: Receiver<V, E>>(self, rcvr: R) {
        match self {
            Outcome::Value(v) => rcvr.set_value(v),
            Outcome::Error(e) => rcvr.set_error(e),
            Outcome::Stopped => rcvr.set_stopped(),
            Outcome::Panic(p) => rcvr.set_panic(p),
        }
    }

    /// The panic it holds; anything else it holds is dropped here, in this call, and a
    /// panic of that `Drop` is returned instead.
    pub(crate) fn into_panic(self) -> Option<Panic> {
        match self {
            Outcome::Panic(p) => Some(p),
            Outcome::Value(v) => crate::panic::discard(v).err(),
            Outcome::Error(e) => crate::panic::discard(e).err(),
            Outcome::Stopped => None,
        }
    }

    /// `Ok(Some(v))`, `Err(e)`, or `Ok(None)` for stopped; a panic resumes here.
    pub(crate) fn resume(self) -> Result<Option<V>, E> {
        match self {
            Outcome::Value(v) => Ok(Some(v)),
            Outcome::Error(e) => Err(e),
            Outcome::Stopped => Ok(None),
            Outcome::Panic(p) => p.resume(),
        }
    }
}

/// How an operation failed, stored until its completion (the first failure of several
/// children wins).
pub(crate) enum Failure<E> {
    Error(E),
    Panic(Panic),
}

impl<E> Failure<E> {
    /// Completes `rcvr` with it.
    pub(crate) fn deliver<V, R: Receiver<V, E>>(self, rcvr: R) {
        match self {
            Failure::Error(e) => rcvr.set_error(e),
            Failure::Panic(p) => rcvr.set_panic(p),
        }
    }
}

/// The four completion methods of a `Receiver<V, E>` impl whose type stores whatever
/// arrives as an [`Outcome`] (an impl over type parameters named `V` and `E`): each calls
/// `self.$complete(outcome)`. The one conversion
/// from the four channels into an `Outcome`.
macro_rules! outcome_completions {
    ($complete:ident) => {
        fn set_value(self, value: V) {
            self.$complete($crate::outcome::Outcome::Value(value))
        }
        fn set_error(self, error: E) {
            self.$complete($crate::outcome::Outcome::Error(error))
        }
        fn set_stopped(self) {
            self.$complete($crate::outcome::Outcome::Stopped)
        }
        fn set_panic(self, panic: $crate::panic::Panic) {
            self.$complete($crate::outcome::Outcome::Panic(panic))
        }
    };
}
pub(crate) use outcome_completions;
