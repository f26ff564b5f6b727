//! Schedulers, and the marker for "no scheduler".

use crate::domain::{MaybeDomain, NoDomain};
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo};
use std::convert::Infallible;
use std::pin::Pin;

/// A handle to an execution resource: `schedule()` returns a sender that completes
/// with `()` on that resource.
///
/// Schedulers are cheap to clone, comparable, and shareable between threads.
///
/// # Panics
///
/// A panic in a user scheduler's [`schedule`](Self::schedule), in `connect` of its
/// sender, or in [`is_current`](Self::is_current) is caught where the crate calls them
/// while an operation runs (`starts_on`, `continues_on`, [`on`](crate::on()), a counting
/// scope's join, the end of a `let_async_scope`, a [`Task`](crate::Task) resuming or
/// changing scheduler,
/// [`from_future`](crate::from_future()) hopping to poll) and
/// becomes the operation's completion (`set_panic`). So does a panic in a `connect` that
/// another operation makes inside its `start` (`when_all`'s children, `stop_when`'s and
/// `nest`'s child, the first stage of `schedule_from` and `let_*`). One case is not
/// caught (`docs/DESIGN.md` §2.6): a `connect` made directly by the caller (at the root,
/// the panic unwinds out of `sync_wait` before anything starts).
///
/// ```
/// use senders::{Scheduler, SenderExt, SingleThreadContext, schedule, sync_wait};
/// let ctx = SingleThreadContext::new();
/// let sch = ctx.scheduler();
/// assert!(!sch.is_current());
/// let there = sch.clone();
/// assert_eq!(sync_wait(schedule(&sch).then(move |()| there.is_current())).unwrap(), Some(true));
/// ```
pub trait Scheduler: Clone + PartialEq + Send + Sync + 'static {
    /// The scheduler's domain (`get_domain(sch)`), [`NoDomain`] for the default one.
    type Domain: MaybeDomain;
    /// The sender returned by [`schedule`](Self::schedule).
    type Sender: Sender<Value = (), Error = Infallible, Domain = Self::Domain, CompletionScheduler = Self>;

    /// A sender that completes on this scheduler's execution resource.
    ///
    /// ```
    /// use senders::{Scheduler, SenderExt, SingleThreadContext, sync_wait};
    /// let ctx = SingleThreadContext::with_name("worker");
    /// let name = ctx.scheduler().schedule().then(|()| std::thread::current().name().map(String::from));
    /// assert_eq!(sync_wait(name).unwrap(), Some(Some("worker".to_string())));
    /// ```
    fn schedule(&self) -> Self::Sender;

    /// Whether the calling thread already runs on this scheduler's execution resource, so
    /// that work meant for it may run right here (a [`Task`](crate::Task) resumes inline
    /// then instead of rescheduling). `false` when unknown, which is always safe.
    ///
    /// ```
    /// use senders::{Scheduler, SenderExt, StaticThreadPool, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(1)?;
    /// let sch = pool.scheduler();
    /// assert!(!sch.is_current(), "the caller is not a worker of this pool");
    /// let there = sch.clone();
    /// assert_eq!(sync_wait(schedule(&sch).then(move |()| there.is_current())).unwrap(), Some(true));
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    fn is_current(&self) -> bool {
        false
    }
}

/// Either a [`Scheduler`] or [`NoScheduler`]: the type-level optional used by
/// environments and sender attributes.
pub trait MaybeScheduler: Clone + Send + Sync + 'static {
    /// The domain of the scheduler, [`NoDomain`] if there is none.
    type Domain: MaybeDomain;
    /// `self` if it is a scheduler, otherwise `S`.
    type Or<S: MaybeScheduler>: MaybeScheduler;
    /// `self` if it is a scheduler, otherwise `other()`.
    ///
    /// ```
    /// use senders::InlineScheduler;
    /// use senders::schedulers::{MaybeScheduler, NoScheduler};
    /// assert_eq!(NoScheduler.or_else(|| InlineScheduler), InlineScheduler);
    /// assert_eq!(InlineScheduler.or_else(|| NoScheduler), InlineScheduler);
    /// ```
    fn or_else<S: MaybeScheduler>(self, other: impl FnOnce() -> S) -> Self::Or<S>;
}

/// The absence of a scheduler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoScheduler;

impl MaybeScheduler for NoScheduler {
    type Domain = NoDomain;
    type Or<S: MaybeScheduler> = S;
    fn or_else<S: MaybeScheduler>(self, other: impl FnOnce() -> S) -> S {
        other()
    }
}

impl<T: Scheduler> MaybeScheduler for T {
    type Domain = T::Domain;
    type Or<S: MaybeScheduler> = T;
    fn or_else<S: MaybeScheduler>(self, _other: impl FnOnce() -> S) -> T {
        self
    }
}

/// The sender of `schedule(sch)`: it completes with `()` on the scheduler's execution
/// resource.
///
/// ```
/// use senders::{SenderExt, SingleThreadContext, schedule, sync_wait};
/// let ctx = SingleThreadContext::with_name("worker");
/// let name = schedule(&ctx.scheduler()).then(|()| std::thread::current().name().map(String::from));
/// assert_eq!(sync_wait(name).unwrap(), Some(Some("worker".to_string())));
/// ```
pub fn schedule<S: Scheduler>(scheduler: &S) -> S::Sender {
    scheduler.schedule()
}

/// A hop onto a scheduler, or none: `connect(schedule(sch), rcvr)` for a scheduler, and
/// for [`NoScheduler`] nothing, so that the caller completes inline. The end of a
/// `let_async_scope`, a [`Task`](crate::Task) resuming on its scheduler and
/// [`from_future`](crate::from_future()) hopping to poll go through it.
pub trait HopTo<R>: MaybeScheduler {
    /// The operation of the hop.
    type Op: OperationState;
    /// `connect(schedule(self), rcvr)`, or `None` to complete inline.
    ///
    /// ```
    /// # use std::convert::Infallible;
    /// # use senders::{EmptyEnv, Panic, Receiver};
    /// # struct Ignore;
    /// # impl Receiver<(), Infallible> for Ignore {
    /// #     type Env = EmptyEnv;
    /// #     fn env(&self) -> &EmptyEnv { &EmptyEnv }
    /// #     fn set_value(self, _value: ()) {}
    /// #     fn set_error(self, error: Infallible) { match error {} }
    /// #     fn set_stopped(self) {}
    /// #     fn set_panic(self, _panic: Panic) {}
    /// # }
    /// use senders::SingleThreadContext;
    /// use senders::{schedulers::NoScheduler, scope::HopTo};
    /// // `Ignore` is a receiver that drops what it receives.
    /// assert!(NoScheduler.hop(Ignore).is_none(), "no scheduler: the caller completes inline");
    /// let ctx = SingleThreadContext::new();
    /// assert!(ctx.scheduler().hop(Ignore).is_some(), "an operation to start, which completes there");
    /// ```
    fn hop(&self, rcvr: R) -> Option<Self::Op>;
}

impl<R> HopTo<R> for NoScheduler {
    type Op = NoHop;
    fn hop(&self, _rcvr: R) -> Option<NoHop> {
        None
    }
}

impl<Sch: Scheduler, R: Receiver<(), Infallible>> HopTo<R> for Sch
where
    Sch::Sender: SenderTo<R>,
{
    type Op = <Sch::Sender as SenderTo<R>>::Operation;
    fn hop(&self, rcvr: R) -> Option<Self::Op> {
        Some(self.schedule().connect(rcvr))
    }
}

/// The hop of an environment without a scheduler: there is none.
#[derive(Debug)]
pub enum NoHop {}

impl OperationState for NoHop {
    unsafe fn start(self: Pin<&mut Self>) {
        match *self {}
    }
}
