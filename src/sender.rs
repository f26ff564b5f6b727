//! Senders, operation states, and the extension trait that chains adaptors.

use std::pin::Pin;

use crate::domain::MaybeDomain;
use crate::receiver::Receiver;
use crate::scheduler::MaybeScheduler;

/// A description of asynchronous work: what it completes with, and where.
///
/// The completion signatures of P2300 become associated items: one value type (use a
/// tuple for several values, `()` for none), one error type
/// ([`Infallible`](std::convert::Infallible) when the sender cannot fail), and whether
/// it may complete stopped. Panics in user code travel on a separate channel (see
/// [`Receiver::set_panic`]) and are not part of `Error`.
///
/// The attributes of P2300's `get_env(sndr)` are the sender's [`Domain`](Self::Domain)
/// (`get_domain`, or the completion domain) and its completion scheduler.
///
/// ```
/// use std::convert::Infallible;
/// use senders::{Sender, just, just_error};
/// fn completes_with<S: Sender<Value = V, Error = E>, V, E>(_: &S) {}
/// completes_with::<_, i32, Infallible>(&just(1));
/// completes_with::<_, (), &str>(&just_error("no"));
/// ```
pub trait Sender: Sized {
    /// The value this sender completes with.
    type Value;
    /// The error this sender may complete with.
    type Error;
    /// Whether this sender may complete with `set_stopped`.
    const SENDS_STOPPED: bool;
    /// The domain of this sender's completion ([`NoDomain`](crate::domain::NoDomain) if unknown);
    /// used for early customization and first in late customization.
    type Domain: MaybeDomain;
    /// The scheduler this sender completes on ([`NoScheduler`](crate::schedulers::NoScheduler) if
    /// unknown): `get_completion_scheduler<set_value_t>`.
    type CompletionScheduler: MaybeScheduler;

    /// The completion scheduler's value.
    fn completion_scheduler(&self) -> Self::CompletionScheduler;

    /// The value, if this sender does nothing but complete with it at once when started,
    /// whatever the receiver and its environment (as [`just`](crate::just) does);
    /// otherwise the sender itself, unchanged (the default).
    ///
    /// [`AnySender`](crate::AnySender) asks, to keep such a value (the leaves of a
    /// recursion) in place of a heap block. A sender that says `Ok` must not observe its
    /// receiver's stop token or environment.
    ///
    /// ```
    /// use senders::{Sender, SenderExt, just};
    /// assert_eq!(just(7).into_ready_value().ok(), Some(7));
    /// assert!(just(7).then(|x| x + 1).into_ready_value().is_err());
    /// ```
    fn into_ready_value(self) -> Result<Self::Value, Self> {
        Err(self)
    }
}

/// A sender that can be connected to receivers of type `R`.
///
/// Connecting is where late customization happens: the customizable algorithms
/// (`then`, `bulk`, `when_all`) ask the domain found from the sender and `R`'s
/// environment to transform them before they build their operation state.
/// [`Receiver`]'s example connects a sender by hand.
pub trait SenderTo<R: Receiver<Self::Value, Self::Error>>: Sender {
    /// The operation state `connect` produces.
    type Operation: OperationState;

    /// Binds the work to its continuation. Nothing runs until
    /// [`OperationState::start`].
    fn connect(self, receiver: R) -> Self::Operation;
}

/// The state of one asynchronous operation: a sender connected to a receiver.
///
/// Operation states are pinned before they start and are usually intrusive: child
/// operation states and queue nodes live inside their parent, so a running operation
/// allocates nothing.
///
/// [`Receiver`]'s example connects a sender and starts its operation by hand.
pub trait OperationState {
    /// Starts the operation. It completes by calling exactly one completion method of
    /// its receiver, on this thread (inline) or later on another one.
    ///
    /// # Safety
    ///
    /// - `start` is called at most once.
    /// - Once started, the operation state is not dropped, and its memory is not
    ///   reused, until its receiver has received a completion. Pinning already forbids
    ///   reuse of the memory without running `drop`; this adds that `drop` itself must
    ///   wait for the completion. A leaked (`mem::forget`) operation state is fine: its
    ///   memory is never freed.
    /// - Everything the operation borrows (its lifetime parameters) stays valid until
    ///   the completion, even if the operation state is leaked.
    ///
    /// In return, the operation keeps these promises, which parents rely on:
    ///
    /// - it completes its receiver exactly once;
    /// - before completing, it deregisters every stop callback it registered (the
    ///   token's source may go away with the parent right after);
    /// - after calling a completion method, it does not touch its own memory again
    ///   (the parent may destroy it during that call).
    ///
    /// Safe code reaches `start` only through the blocking consumer
    /// [`sync_wait`](crate::sync_wait), which keeps its operation on its stack and does
    /// not return before the completion.
    unsafe fn start(self: Pin<&mut Self>);
}

/// Implements [`Sender`] for an adaptor whose predecessor is its `sndr` field and whose
/// domain and completion scheduler are the predecessor's.
///
/// `adaptor_sender!([generics] Type where [bounds] { value = V, error = E, stopped = expr });`
macro_rules! adaptor_sender {
    ([$($g:tt)*] $ty:ty where [$($w:tt)*] { value = $v:ty, error = $e:ty, stopped = $st:expr $(,)? }) => {
        impl<$($g)*> $crate::sender::Sender for $ty
        where
            $($w)*
        {
            type Value = $v;
            type Error = $e;
            const SENDS_STOPPED: bool = $st;
            type Domain = S::Domain;
            type CompletionScheduler = S::CompletionScheduler;
            fn completion_scheduler(&self) -> Self::CompletionScheduler {
                self.sndr.completion_scheduler()
            }
        }
    };
}
pub(crate) use adaptor_sender;
