//! Senders, operation states, and the extension trait that chains adaptors.

use std::pin::Pin;

use crate::domain::MaybeDomain;
use crate::job::JobRef;
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
    ///
    /// ```
    /// use senders::{Sender, SingleThreadContext, just, schedule};
    /// use senders::schedulers::NoScheduler;
    /// let ctx = SingleThreadContext::new();
    /// let sch = ctx.scheduler();
    /// assert!(schedule(&sch).completion_scheduler() == sch);
    /// assert_eq!(just(1).completion_scheduler(), NoScheduler, "`just` completes where it is started");
    /// ```
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

    /// The value this sender holds, if it does nothing but complete with it at once (as
    /// [`just`](crate::just) does); otherwise the sender itself (the default). Sealed: only
    /// the crate's [`Just`](crate::factories::Just) says `Ok`, so the value is one that the
    /// sender held, and is `Send` when the sender is.
    #[doc(hidden)]
    fn into_held_value(self, _: Seal) -> Result<Self::Value, Self> {
        Err(self)
    }

    /// The computation, if this sender does nothing but complete at once with a value
    /// that a function makes from a state of at most one word, without its receiver's
    /// environment or stop token, when connected to a receiver whose environment is `En`
    /// (as `just(x).then(f)` does where the domain leaves `then` as it is); otherwise the
    /// sender itself (the default). Sealed: only the crate's `Then` says `Ok`.
    ///
    /// [`AnySender`](crate::AnySender) asks, to keep such a leaf without a heap block.
    #[doc(hidden)]
    fn into_ready_fn<'a, En: crate::env::Env>(self, _: Seal) -> Result<crate::ready::ReadyFn<'a, Self::Value>, Self>
    where
        Self: 'a,
    {
        Err(self)
    }
}

/// The sealed hooks' token: a type outside the crate cannot name, so that only the
/// crate's own senders answer [`Sender::into_held_value`] and [`Sender::into_ready_fn`].
pub(crate) mod seal {
    /// The token; only the crate makes one.
    #[derive(Clone, Copy, Debug)]
    pub struct Seal(pub(crate) ());
}
use seal::Seal;

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
    ///
    /// ```
    /// # use std::cell::Cell;
    /// # use std::convert::Infallible;
    /// # use senders::{EmptyEnv, Panic, Receiver};
    /// # struct Store<'a>(&'a Cell<Option<i32>>);
    /// # impl Receiver<i32, Infallible> for Store<'_> {
    /// #     type Env = EmptyEnv;
    /// #     fn env(&self) -> &EmptyEnv { &EmptyEnv }
    /// #     fn set_value(self, value: i32) { self.0.set(Some(value)) }
    /// #     fn set_error(self, error: Infallible) { match error {} }
    /// #     fn set_stopped(self) {}
    /// #     fn set_panic(self, _panic: Panic) {}
    /// # }
    /// use senders::{OperationState, SenderExt, SenderTo, just};
    /// // `Store` is a receiver that keeps the value in a `Cell` (see `Receiver`).
    /// let out = Cell::new(None);
    /// let op = just(6).then(|x| x * 7).connect(Store(&out));
    /// assert_eq!(out.get(), None, "connecting runs nothing");
    /// let op = std::pin::pin!(op);
    /// // SAFETY: started once; it completes inside `start`, before `op` and `out` go away.
    /// unsafe { op.start() };
    /// assert_eq!(out.get(), Some(42));
    /// ```
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
    ///
    /// ```
    /// # use std::cell::Cell;
    /// # use std::convert::Infallible;
    /// # use senders::{EmptyEnv, Panic, Receiver};
    /// # struct Store<'a>(&'a Cell<Option<i32>>);
    /// # impl Receiver<i32, Infallible> for Store<'_> {
    /// #     type Env = EmptyEnv;
    /// #     fn env(&self) -> &EmptyEnv { &EmptyEnv }
    /// #     fn set_value(self, value: i32) { self.0.set(Some(value)) }
    /// #     fn set_error(self, error: Infallible) { match error {} }
    /// #     fn set_stopped(self) {}
    /// #     fn set_panic(self, _panic: Panic) {}
    /// # }
    /// use senders::{OperationState, SenderExt, SenderTo, just};
    /// // `Store` is a receiver that keeps the value in a `Cell` (see `Receiver`).
    /// let out = Cell::new(None);
    /// let op = just(6).then(|x| x * 7).connect(Store(&out));
    /// assert_eq!(out.get(), None, "connecting runs nothing");
    /// let op = std::pin::pin!(op);
    /// // SAFETY: started once; it completes inside `start`, before `op` and `out` go away.
    /// unsafe { op.start() };
    /// assert_eq!(out.get(), Some(42));
    /// ```
    unsafe fn start(self: Pin<&mut Self>);

    /// Whether starting this operation completes it at once, on the starting thread,
    /// without running user code or doing other work (the operation of a ready
    /// [`AnySender`](crate::AnySender) does). A `when_all` on the pool starts such children
    /// where it runs instead of handing them to other workers. The default says `false`;
    /// a wrong `true` costs only parallelism.
    ///
    /// # Safety
    ///
    /// The operation has not been started.
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// # use senders::{EmptyEnv, Panic, Receiver};
    /// # struct Ignore;
    /// # impl Receiver<i32, Infallible> for Ignore {
    /// #     type Env = EmptyEnv;
    /// #     fn env(&self) -> &EmptyEnv { &EmptyEnv }
    /// #     fn set_value(self, _value: i32) {}
    /// #     fn set_error(self, error: Infallible) { match error {} }
    /// #     fn set_stopped(self) {}
    /// #     fn set_panic(self, _panic: Panic) {}
    /// # }
    /// use senders::{AnySender, OperationState, SenderExt, SenderTo, just};
    /// // `Ignore` is a receiver that drops what it receives.
    /// let ready = AnySender::<i32>::new(just(1)).connect(Ignore);
    /// // SAFETY: not started.
    /// assert!(unsafe { ready.completes_at_once() }, "a ready `AnySender` completes at once");
    /// let work = just(1).then(|x| x + 1).connect(Ignore);
    /// // SAFETY: not started.
    /// assert!(!unsafe { work.completes_at_once() }, "`then` runs user code");
    /// ```
    #[inline]
    unsafe fn completes_at_once(&self) -> bool {
        false
    }
}

/// The job that starts the operation state at `op`, in place.
///
/// # Safety
///
/// `op` is a pinned, unstarted operation state that stays alive until it completes, and
/// that may be started on any thread; the job is run once.
pub(crate) unsafe fn start_job<Op: OperationState>(op: *const Op) -> JobRef {
    // SAFETY: the caller's contract.
    unsafe { JobRef::new(op, start_at::<Op>) }
}

/// # Safety
///
/// As for [`start_job`]: `op` is the `Op` it was given, started once.
unsafe fn start_at<Op: OperationState>(op: *const (), (): ()) {
    // SAFETY: the caller's contract.
    unsafe { Pin::new_unchecked(&mut *op.cast_mut().cast::<Op>()).start() }
}

/// A sender that a [`Task`](crate::Task) can `.await`: every sender that connects to the
/// receiver of an awaited sender (implemented in `task`, for all of them).
///
/// Every sender of this crate is `.await`able inside a task because its `IntoFuture`
/// goes through this trait (the crate declares each sender with one macro that writes
/// both). A sender of another crate is awaited with [`awaited`](crate::awaited) (or
/// [`SenderExt::awaited`](crate::SenderExt::awaited)), or made `.await`able the same way:
///
/// ```
/// use std::convert::Infallible;
/// use std::future::IntoFuture;
/// use std::pin::Pin;
/// use senders::{Awaitable, OperationState, Receiver, Sender, SenderTo, Task, sync_wait};
/// use senders::{domain::NoDomain, schedulers::NoScheduler};
///
/// struct Seven;
/// impl Sender for Seven {
///     type Value = i32;
///     type Error = Infallible;
///     const SENDS_STOPPED: bool = false;
///     type Domain = NoDomain;
///     type CompletionScheduler = NoScheduler;
///     fn completion_scheduler(&self) -> NoScheduler { NoScheduler }
/// }
/// struct SevenOp<R>(Option<R>);
/// impl<R: Receiver<i32, Infallible>> SenderTo<R> for Seven {
///     type Operation = SevenOp<R>;
///     fn connect(self, rcvr: R) -> SevenOp<R> { SevenOp(Some(rcvr)) }
/// }
/// impl<R: Receiver<i32, Infallible>> OperationState for SevenOp<R> {
///     unsafe fn start(self: Pin<&mut Self>) {
///         // SAFETY: nothing is structurally pinned.
///         let this = unsafe { self.get_unchecked_mut() };
///         this.0.take().expect("started once").set_value(7);
///     }
/// }
/// impl IntoFuture for Seven {
///     type Output = Result<i32, Infallible>;
///     type IntoFuture = <Self as Awaitable>::Awaited;
///     fn into_future(self) -> Self::IntoFuture {
///         self.into_awaited()
///     }
/// }
///
/// let task: Task<'_, i32> = Task::new(async { Ok(Seven.await? * 6) });
/// assert_eq!(sync_wait(task).unwrap(), Some(42));
/// ```
pub trait Awaitable: Sender {
    /// The future that `.await` inside a task polls.
    type Awaited: Future<Output = Result<Self::Value, Self::Error>>;
    /// Makes it; nothing starts until a task polls it.
    ///
    /// ```
    /// use senders::{Awaitable, SenderExt, Task, just, sync_wait};
    /// let task: Task<'_, i32> = Task::new(async { Ok(just(6).then(|x| x * 7).into_awaited().await?) });
    /// assert_eq!(sync_wait(task).unwrap(), Some(42));
    /// ```
    fn into_awaited(self) -> Self::Awaited;
}

/// Declares a sender of this crate: implements [`Sender`] for it, and `IntoFuture`
/// through [`Awaitable`], so that every sender of the crate can be `.await`ed in a
/// [`Task`](crate::Task). Every `impl Sender` of the crate is written through it (or
/// [`adaptor_sender!`], which uses it); `tests/awaitable.rs` checks that none is
/// written by hand.
///
/// - `sender!([generics] Type where [bounds] { value = V, error = E, stopped = expr, domain = D });`
///   for a sender with no known completion scheduler;
/// - `sender!(impl [generics] Type where [bounds] { the items of `Sender` });` for any other.
macro_rules! sender {
    ([$($g:tt)*] $ty:ty $(where [$($w:tt)*])? { value = $v:ty, error = $e:ty, stopped = $st:expr, domain = $d:ty $(,)? }) => {
        $crate::sender::sender!(impl [$($g)*] $ty $(where [$($w)*])? {
            type Value = $v;
            type Error = $e;
            const SENDS_STOPPED: bool = $st;
            type Domain = $d;
            type CompletionScheduler = $crate::scheduler::NoScheduler;
            fn completion_scheduler(&self) -> $crate::scheduler::NoScheduler {
                $crate::scheduler::NoScheduler
            }
        });
    };
    (impl [$($g:tt)*] $ty:ty $(where [$($w:tt)*])? { $($body:tt)* }) => {
        impl<$($g)*> $crate::sender::Sender for $ty
        where
            $($($w)*)?
        {
            $($body)*
        }

        impl<$($g)*> ::core::future::IntoFuture for $ty
        where
            $ty: $crate::sender::Awaitable,
            $($($w)*)?
        {
            type Output = ::core::result::Result<
                <$ty as $crate::sender::Sender>::Value,
                <$ty as $crate::sender::Sender>::Error,
            >;
            type IntoFuture = <$ty as $crate::sender::Awaitable>::Awaited;
            fn into_future(self) -> Self::IntoFuture {
                $crate::sender::Awaitable::into_awaited(self)
            }
        }
    };
}
pub(crate) use sender;

/// Declares (with [`sender!`]) an adaptor whose predecessor is its `sndr` field and whose
/// domain and completion scheduler are the predecessor's; a second brace holds more
/// items of `Sender` (its provided methods).
///
/// `adaptor_sender!([generics] Type where [bounds] { value = V, error = E, stopped = expr });`
macro_rules! adaptor_sender {
    ([$($g:tt)*] $ty:ty where [$($w:tt)*] { value = $v:ty, error = $e:ty, stopped = $st:expr $(,)? } $({ $($more:tt)* })?) => {
        $crate::sender::sender!(impl [$($g)*] $ty where [$($w)*] {
            type Value = $v;
            type Error = $e;
            const SENDS_STOPPED: bool = $st;
            type Domain = S::Domain;
            type CompletionScheduler = S::CompletionScheduler;
            fn completion_scheduler(&self) -> Self::CompletionScheduler {
                self.sndr.completion_scheduler()
            }
            $($($more)*)?
        });
    };
}
pub(crate) use adaptor_sender;
