//! How an operation ended, stored until someone hands it on: the four completions as a
//! value (used by the consumers and the bridges that park a result).

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
