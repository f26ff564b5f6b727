//! Receivers: the continuation half of an asynchronous operation.

use crate::env::Env;
use crate::panic::Panic;

/// The receiving end of an operation that completes with `V` or fails with `E`.
///
/// A receiver is consumed by exactly one completion call: the type system makes a
/// second call impossible. The four channels are P2300's three plus one:
///
/// | channel | C++ | meaning |
/// |---|---|---|
/// | [`set_value`](Receiver::set_value) | `set_value` | success with a value |
/// | [`set_error`](Receiver::set_error) | `set_error` | failure with a typed error |
/// | [`set_stopped`](Receiver::set_stopped) | `set_stopped` | cancelled |
/// | [`set_panic`](Receiver::set_panic) | `set_error(exception_ptr)` | user code panicked |
///
/// Completion methods must not unwind. They run inside other operations' code paths
/// (often on pool threads) where an unwind would skip the completion of a parent;
/// the crate's own receivers never unwind because they catch panics of user code.
///
/// A receiver that stores the value, connected by hand (`sync_wait` does this for you):
///
/// ```
/// use std::cell::Cell;
/// use std::convert::Infallible;
/// use std::pin::pin;
/// use senders::{EmptyEnv, OperationState, Panic, Receiver, SenderTo, just};
///
/// struct Store<'a>(&'a Cell<Option<i32>>);
/// impl Receiver<i32, Infallible> for Store<'_> {
///     type Env = EmptyEnv;
///     fn env(&self) -> &EmptyEnv { &EmptyEnv }
///     fn set_value(self, value: i32) { self.0.set(Some(value)) }
///     fn set_error(self, error: Infallible) { match error {} }
///     fn set_stopped(self) {}
///     fn set_panic(self, _panic: Panic) {}
/// }
///
/// let out = Cell::new(None);
/// let op = pin!(just(7).connect(Store(&out)));
/// // SAFETY: started once; `just` completes inside `start`, before `op` and `out` go away.
/// unsafe { op.start() };
/// assert_eq!(out.get(), Some(7));
/// ```
pub trait Receiver<V, E>: Sized {
    /// The environment this receiver exposes to the operation it is connected to.
    type Env: Env;

    /// The receiver's environment (`get_env(rcvr)`). The reference lives only as long
    /// as the receiver is borrowed, so nothing read from it can outlive the operation.
    fn env(&self) -> &Self::Env;

    /// Completes with a value.
    fn set_value(self, value: V);

    /// Completes with an error.
    fn set_error(self, error: E);

    /// Completes as cancelled.
    fn set_stopped(self);

    /// Completes with a panic caught in user code.
    fn set_panic(self, panic: Panic);
}
