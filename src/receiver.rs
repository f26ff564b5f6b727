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
    ///
    /// ```
    /// use senders::{Env, InplaceStopSource, stop_when};
    /// # use std::pin::Pin;
    /// # use senders::{OperationState, Receiver, Sender, SenderTo, sync_wait};
    /// # use senders::{domain::NoDomain, schedulers::NoScheduler};
    /// # struct Work;
    /// # impl Sender for Work {
    /// #     type Value = i32; type Error = &'static str; const SENDS_STOPPED: bool = true;
    /// #     type Domain = NoDomain; type CompletionScheduler = NoScheduler;
    /// #     fn completion_scheduler(&self) -> NoScheduler { NoScheduler }
    /// # }
    /// # impl<R: Receiver<i32, &'static str>> SenderTo<R> for Work {
    /// #     type Operation = WorkOp<R>;
    /// #     fn connect(self, rcvr: R) -> WorkOp<R> { WorkOp(Some(rcvr)) }
    /// # }
    /// struct WorkOp<R>(Option<R>);
    /// impl<R: Receiver<i32, &'static str>> OperationState for WorkOp<R> {
    ///     unsafe fn start(self: Pin<&mut Self>) {
    ///         // SAFETY: nothing is structurally pinned.
    ///         let rcvr = unsafe { self.get_unchecked_mut() }.0.take().expect("started once");
    ///         if rcvr.env().stop_token().stop_requested() {
    ///             rcvr.set_stopped();
    ///         } else {
    ///             rcvr.set_value(1);
    ///         }
    ///     }
    /// }
    /// let source = InplaceStopSource::new();
    /// assert_eq!(sync_wait(stop_when(Work, source.token())), Ok(Some(1)));
    /// source.request_stop();
    /// assert_eq!(sync_wait(stop_when(Work, source.token())), Ok(None));
    /// ```
    fn env(&self) -> &Self::Env;

    /// Completes with a value.
    ///
    /// ```
    /// # use std::pin::Pin;
    /// # use senders::{OperationState, Receiver, Sender, SenderTo, sync_wait};
    /// # use senders::{domain::NoDomain, schedulers::NoScheduler};
    /// # struct Work;
    /// # impl Sender for Work {
    /// #     type Value = i32; type Error = &'static str; const SENDS_STOPPED: bool = true;
    /// #     type Domain = NoDomain; type CompletionScheduler = NoScheduler;
    /// #     fn completion_scheduler(&self) -> NoScheduler { NoScheduler }
    /// # }
    /// # impl<R: Receiver<i32, &'static str>> SenderTo<R> for Work {
    /// #     type Operation = WorkOp<R>;
    /// #     fn connect(self, rcvr: R) -> WorkOp<R> { WorkOp(Some(rcvr)) }
    /// # }
    /// struct WorkOp<R>(Option<R>);
    /// impl<R: Receiver<i32, &'static str>> OperationState for WorkOp<R> {
    ///     unsafe fn start(self: Pin<&mut Self>) {
    ///         // SAFETY: nothing is structurally pinned.
    ///         let rcvr = unsafe { self.get_unchecked_mut() }.0.take().expect("started once");
    ///         rcvr.set_value(42);
    ///     }
    /// }
    /// assert_eq!(sync_wait(Work), Ok(Some(42)));
    /// ```
    fn set_value(self, value: V);

    /// Completes with an error.
    ///
    /// ```
    /// # use std::pin::Pin;
    /// # use senders::{OperationState, Receiver, Sender, SenderTo, sync_wait};
    /// # use senders::{domain::NoDomain, schedulers::NoScheduler};
    /// # struct Work;
    /// # impl Sender for Work {
    /// #     type Value = i32; type Error = &'static str; const SENDS_STOPPED: bool = true;
    /// #     type Domain = NoDomain; type CompletionScheduler = NoScheduler;
    /// #     fn completion_scheduler(&self) -> NoScheduler { NoScheduler }
    /// # }
    /// # impl<R: Receiver<i32, &'static str>> SenderTo<R> for Work {
    /// #     type Operation = WorkOp<R>;
    /// #     fn connect(self, rcvr: R) -> WorkOp<R> { WorkOp(Some(rcvr)) }
    /// # }
    /// struct WorkOp<R>(Option<R>);
    /// impl<R: Receiver<i32, &'static str>> OperationState for WorkOp<R> {
    ///     unsafe fn start(self: Pin<&mut Self>) {
    ///         // SAFETY: nothing is structurally pinned.
    ///         let rcvr = unsafe { self.get_unchecked_mut() }.0.take().expect("started once");
    ///         rcvr.set_error("disk full");
    ///     }
    /// }
    /// assert_eq!(sync_wait(Work), Err("disk full"));
    /// ```
    fn set_error(self, error: E);

    /// Completes as cancelled.
    ///
    /// ```
    /// use senders::{Env, InplaceStopSource, stop_when};
    /// # use std::pin::Pin;
    /// # use senders::{OperationState, Receiver, Sender, SenderTo, sync_wait};
    /// # use senders::{domain::NoDomain, schedulers::NoScheduler};
    /// # struct Work;
    /// # impl Sender for Work {
    /// #     type Value = i32; type Error = &'static str; const SENDS_STOPPED: bool = true;
    /// #     type Domain = NoDomain; type CompletionScheduler = NoScheduler;
    /// #     fn completion_scheduler(&self) -> NoScheduler { NoScheduler }
    /// # }
    /// # impl<R: Receiver<i32, &'static str>> SenderTo<R> for Work {
    /// #     type Operation = WorkOp<R>;
    /// #     fn connect(self, rcvr: R) -> WorkOp<R> { WorkOp(Some(rcvr)) }
    /// # }
    /// struct WorkOp<R>(Option<R>);
    /// impl<R: Receiver<i32, &'static str>> OperationState for WorkOp<R> {
    ///     unsafe fn start(self: Pin<&mut Self>) {
    ///         // SAFETY: nothing is structurally pinned.
    ///         let rcvr = unsafe { self.get_unchecked_mut() }.0.take().expect("started once");
    ///         if rcvr.env().stop_token().stop_requested() {
    ///             rcvr.set_stopped();
    ///         } else {
    ///             rcvr.set_value(1);
    ///         }
    ///     }
    /// }
    /// let source = InplaceStopSource::new();
    /// assert_eq!(sync_wait(stop_when(Work, source.token())), Ok(Some(1)));
    /// source.request_stop();
    /// assert_eq!(sync_wait(stop_when(Work, source.token())), Ok(None));
    /// ```
    fn set_stopped(self);

    /// Completes with a panic caught in user code.
    ///
    /// ```
    /// use senders::Panic;
    /// # use std::pin::Pin;
    /// # use senders::{OperationState, Receiver, Sender, SenderTo, sync_wait};
    /// # use senders::{domain::NoDomain, schedulers::NoScheduler};
    /// # struct Work;
    /// # impl Sender for Work {
    /// #     type Value = i32; type Error = &'static str; const SENDS_STOPPED: bool = true;
    /// #     type Domain = NoDomain; type CompletionScheduler = NoScheduler;
    /// #     fn completion_scheduler(&self) -> NoScheduler { NoScheduler }
    /// # }
    /// # impl<R: Receiver<i32, &'static str>> SenderTo<R> for Work {
    /// #     type Operation = WorkOp<R>;
    /// #     fn connect(self, rcvr: R) -> WorkOp<R> { WorkOp(Some(rcvr)) }
    /// # }
    /// struct WorkOp<R>(Option<R>);
    /// impl<R: Receiver<i32, &'static str>> OperationState for WorkOp<R> {
    ///     unsafe fn start(self: Pin<&mut Self>) {
    ///         // SAFETY: nothing is structurally pinned.
    ///         let rcvr = unsafe { self.get_unchecked_mut() }.0.take().expect("started once");
    ///         let caught = std::panic::catch_unwind(|| -> i32 { panic!("boom") });
    ///         match caught {
    ///             Ok(v) => rcvr.set_value(v),
    ///             Err(payload) => rcvr.set_panic(Panic::new(payload)),
    ///         }
    ///     }
    /// }
    /// // `sync_wait` resumes the panic on the waiting thread.
    /// let resumed = std::panic::catch_unwind(|| sync_wait(Work)).unwrap_err();
    /// assert_eq!(resumed.downcast_ref::<&str>(), Some(&"boom"));
    /// ```
    fn set_panic(self, panic: Panic);
}
