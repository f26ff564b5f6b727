//! `let_value`, `let_error`, `let_stopped`: continue with a sender made from a
//! completion.
//!
//! The operation state holds the predecessor's operation and, once the function has
//! run, the second sender's operation, side by side: the first one is not destroyed
//! inside its own completion. Both are pinned in place; the predecessor is connected
//! when the operation starts, the second sender when the predecessor completes.
//!
//! The second sender is connected to a receiver whose environment shows the
//! predecessor's domain and (for `let_value`) completion scheduler as current, so that
//! late customization of the second sender uses them (P2999 §2.4 item 10).

use std::cell::UnsafeCell;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::domain::{CommonDomain, MaybeDomain};
use crate::env::Env;
use crate::inplace::InPlace;
use crate::panic::{Panic, catch};
use crate::receiver::Receiver;
use crate::scheduler::{MaybeScheduler, NoScheduler};
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::StopToken;

/// Marker: the value channel starts the second sender.
pub enum OnValue {}
/// Marker: the error channel starts the second sender.
pub enum OnError {}
/// Marker: the stopped channel starts the second sender.
pub enum OnStopped {}

/// The sender of [`let_value`](crate::SenderExt::let_value),
/// [`let_error`](crate::SenderExt::let_error) or
/// [`let_stopped`](crate::SenderExt::let_stopped) (chosen by `K`).
#[must_use = "senders do nothing unless connected and started"]
pub struct Let<K, S, F> {
    sndr: S,
    f: F,
    _k: PhantomData<fn() -> K>,
}

impl<K, S, F> Let<K, S, F> {
    pub(crate) fn new(sndr: S, f: F) -> Self {
        Let { sndr, f, _k: PhantomData }
    }
}

/// How each `let_*` flavour reshapes completions.
pub trait LetKind<S: Sender, F>: Sized {
    /// The second sender.
    type Second: Sender<Value = Self::Value, Error = Self::Error>;
    /// The value of the whole `let_*` sender.
    type Value;
    /// The error of the whole `let_*` sender.
    type Error;
    /// Whether the whole sender may complete stopped.
    const SENDS_STOPPED: bool;
    /// The scheduler shown to the second sender (the predecessor's, for `let_value`).
    type Sched: MaybeScheduler;
    /// Reads it from the predecessor.
    ///
    /// ```
    /// use senders::adaptors::{LetKind, OnValue};
    /// use senders::factories::Just;
    /// use senders::{SingleThreadContext, schedule};
    /// let ctx = SingleThreadContext::new();
    /// let sch = ctx.scheduler();
    /// // `let_value` shows its second sender the scheduler its predecessor completes on.
    /// let shown = <OnValue as LetKind<_, fn(()) -> Just<i32>>>::sched(&schedule(&sch));
    /// assert!(shown == sch);
    /// ```
    fn sched(sndr: &S) -> Self::Sched;
}

impl<S: Sender, F: FnOnce(S::Value) -> S2, S2: Sender<Error = S::Error>> LetKind<S, F> for OnValue {
    type Second = S2;
    type Value = S2::Value;
    type Error = S::Error;
    const SENDS_STOPPED: bool = S::SENDS_STOPPED || S2::SENDS_STOPPED;
    type Sched = S::CompletionScheduler;
    fn sched(sndr: &S) -> S::CompletionScheduler {
        sndr.completion_scheduler()
    }
}

impl<S: Sender, F: FnOnce(S::Error) -> S2, S2: Sender<Value = S::Value>> LetKind<S, F> for OnError {
    type Second = S2;
    type Value = S::Value;
    type Error = S2::Error;
    const SENDS_STOPPED: bool = S::SENDS_STOPPED || S2::SENDS_STOPPED;
    type Sched = NoScheduler;
    fn sched(_: &S) -> NoScheduler {
        NoScheduler
    }
}

impl<S: Sender, F: FnOnce() -> S2, S2: Sender<Value = S::Value, Error = S::Error>> LetKind<S, F> for OnStopped {
    type Second = S2;
    type Value = S::Value;
    type Error = S::Error;
    const SENDS_STOPPED: bool = S2::SENDS_STOPPED;
    type Sched = NoScheduler;
    fn sched(_: &S) -> NoScheduler {
        NoScheduler
    }
}

// The domain of a `let_*` sender is the one its predecessor and second sender share
// (P2999 §2.4 item 14): two different known domains do not compile.
sender!([K: LetKind<S, F>, S: Sender, F] Let<K, S, F> where [S::Domain: CommonDomain<<K::Second as Sender>::Domain>] { value = K::Value, error = K::Error, stopped = K::SENDS_STOPPED, domain = <S::Domain as CommonDomain<<K::Second as Sender>::Domain>>::Out });

/// What the second sender's receiver needs: the final receiver and the predecessor's
/// scheduler.
pub(crate) struct LetShared<R, Sch> {
    rcvr: UnsafeCell<Option<R>>,
    sched: Sch,
}

/// The receiver of the second sender. It is also its environment: the parent's, with
/// the predecessor's domain `D` and scheduler `Sch` as current when they are known.
pub struct LetSecondReceiver<R, Sch, D> {
    shared: *const LetShared<R, Sch>,
    _d: PhantomData<fn() -> D>,
}

// SAFETY: the second sender may complete on another thread and run the final receiver
// there; the environment behind it (the predecessor's scheduler, the parent env) is read
// concurrently, hence `Sync`.
unsafe impl<R: Send + Sync, Sch: Send + Sync, D> Send for LetSecondReceiver<R, Sch, D> {}
// SAFETY: a shared reference only reaches the environment, which calls `R::env(&R)`
// (`R: Sync`); see `LetSecondEnv`.
unsafe impl<R: Sync, Sch: Sync, D> Sync for LetSecondReceiver<R, Sch, D> {}

impl<R, Sch, D> LetSecondReceiver<R, Sch, D> {
    fn shared(&self) -> &LetShared<R, Sch> {
        // SAFETY: the shared state lives in the pinned operation until the final
        // completion, which consumes this receiver.
        unsafe { &*self.shared }
    }
    fn take(self) -> R {
        // SAFETY: as above; only the second receiver takes the final receiver, once.
        unsafe { (*(*self.shared).rcvr.get()).take() }.expect("let: completes once")
    }
    fn parent_env<V, E>(&self) -> &R::Env
    where
        R: Receiver<V, E>,
    {
        // SAFETY: the final receiver is present until taken by the completion.
        unsafe { (*self.shared().rcvr.get()).as_ref() }.expect("let: env after completion").env()
    }
}

impl<V, E, R: Receiver<V, E>, Sch: MaybeScheduler, D: MaybeDomain> Receiver<V, E> for LetSecondReceiver<R, Sch, D> {
    type Env = LetSecondEnv<R, Sch, D, V, E>;
    fn env(&self) -> &Self::Env {
        // SAFETY: `LetSecondEnv` is a transparent wrapper of this receiver.
        unsafe { &*(self as *const Self).cast::<LetSecondEnv<R, Sch, D, V, E>>() }
    }
    fn set_value(self, value: V) {
        self.take().set_value(value)
    }
    fn set_error(self, error: E) {
        self.take().set_error(error)
    }
    fn set_stopped(self) {
        self.take().set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.take().set_panic(panic)
    }
}

/// The environment of a `let_*` second sender.
#[repr(transparent)]
pub struct LetSecondEnv<R, Sch, D, V, E>(LetSecondReceiver<R, Sch, D>, PhantomData<fn() -> (V, E)>);

// SAFETY: a shared env only reads the predecessor's scheduler (`Sync`) and the parent's
// env (`Sync`), never the final receiver itself.
unsafe impl<R: Receiver<V, E> + Sync, Sch: Sync, D, V, E> Sync for LetSecondEnv<R, Sch, D, V, E> where R::Env: Sync {}

impl<V, E, R: Receiver<V, E>, Sch: MaybeScheduler, D: MaybeDomain> Env for LetSecondEnv<R, Sch, D, V, E> {
    type Scheduler = Sch::Or<<R::Env as Env>::Scheduler>;
    type Domain = D::Or<<R::Env as Env>::Domain>;
    fn scheduler(&self) -> Self::Scheduler {
        let parent = self.0.parent_env::<V, E>();
        self.0.shared().sched.clone().or_else(|| parent.scheduler())
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.0.parent_env::<V, E>().stop_token()
    }
    fn prop(&self, key: std::any::TypeId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.0.parent_env::<V, E>().prop(key)
    }
}

/// The second sender's operation state.
type SecondOp<K, S, F, R> = <<K as LetKind<S, F>>::Second as SenderTo<
    LetSecondReceiver<R, <K as LetKind<S, F>>::Sched, <S as Sender>::Domain>,
>>::Operation;

/// The state the predecessor's receiver works on.
pub(crate) struct LetState<K: LetKind<S, F>, S: Sender, F, R>
where
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    R: Receiver<K::Value, K::Error>,
{
    f: Option<F>,
    second: InPlace<SecondOp<K, S, F, R>>,
    shared: LetShared<R, K::Sched>,
}

/// The receiver of the predecessor.
pub struct LetFirstReceiver<K: LetKind<S, F>, S: Sender, F, R>
where
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    R: Receiver<K::Value, K::Error>,
{
    state: *mut LetState<K, S, F, R>,
}

// SAFETY: the predecessor may complete on another thread, where this receiver runs `f`,
// builds the second sender's operation (dropped later with the parent, hence `Send`),
// starts it, or forwards to the final receiver; the env is shared, hence `Sync`.
unsafe impl<K: LetKind<S, F>, S: Sender, F: Send, R: Send + Sync> Send for LetFirstReceiver<K, S, F, R>
where
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    <K::Second as SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>>::Operation: Send,
    R: Receiver<K::Value, K::Error>,
    R::Env: Sync,
    S::Value: Send,
    S::Error: Send,
    K::Sched: Send + Sync,
{
}
// SAFETY: a shared reference only reaches the parent env (`Sync`).
unsafe impl<K: LetKind<S, F>, S: Sender, F, R: Sync> Sync for LetFirstReceiver<K, S, F, R>
where
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    R: Receiver<K::Value, K::Error>,
    R::Env: Sync,
{
}

impl<K: LetKind<S, F>, S: Sender, F, R> LetFirstReceiver<K, S, F, R>
where
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    R: Receiver<K::Value, K::Error>,
{
    fn final_rcvr(&self) -> R {
        // SAFETY: the state lives in the pinned operation; the first receiver's
        // completion is the only place that may take the final receiver here.
        unsafe { (*(*self.state).shared.rcvr.get()).take() }.expect("let: completes once")
    }

    fn final_env(&self) -> &R::Env {
        // SAFETY: the final receiver stays in place until a completion takes it.
        unsafe { (*(*self.state).shared.rcvr.get()).as_ref() }.expect("let: env after completion").env()
    }

    /// Runs `f`, then connects and starts the second sender.
    fn run_second(self, make: impl FnOnce(F) -> K::Second) {
        let state = self.state;
        // SAFETY: `f` is taken once, by the one completion of the predecessor.
        let f = unsafe { (*state).f.take() }.expect("let: function runs once");
        // SAFETY: the state is pinned inside the operation, which outlives the second
        // operation; this only computes a field address.
        let shared = unsafe { &raw const (*state).shared };
        // A panic in `f`, in the second sender's `connect`, or in a domain hook it runs,
        // is delivered as `set_panic`.
        // SAFETY: the state is alive and pinned; only this completion of the first
        // operation touches `second`, once.
        let second = unsafe { &mut (*state).second };
        match second.emplace(move || make(f).connect(LetSecondReceiver { shared, _d: PhantomData })) {
            // SAFETY: pinned in place inside the pinned operation; started once.
            Ok(op) => unsafe { Pin::new_unchecked(op).start() },
            Err(p) => self.final_rcvr().set_panic(p),
        }
    }
}

impl<K: LetKind<S, F>, S: Sender, F, R> Env for LetFirstReceiver<K, S, F, R>
where
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    R: Receiver<K::Value, K::Error>,
{
    type Scheduler = <R::Env as Env>::Scheduler;
    type Domain = <R::Env as Env>::Domain;
    fn scheduler(&self) -> Self::Scheduler {
        self.final_env().scheduler()
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.final_env().stop_token()
    }
    fn prop(&self, key: std::any::TypeId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.final_env().prop(key)
    }
}

impl<S: Sender, F, R> Receiver<S::Value, S::Error> for LetFirstReceiver<OnValue, S, F, R>
where
    OnValue: LetKind<S, F, Error = S::Error>,
    F: FnOnce(S::Value) -> <OnValue as LetKind<S, F>>::Second,
    <OnValue as LetKind<S, F>>::Second: SenderTo<LetSecondReceiver<R, <OnValue as LetKind<S, F>>::Sched, S::Domain>>,
    R: Receiver<<OnValue as LetKind<S, F>>::Value, S::Error>,
{
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: S::Value) {
        self.run_second(move |f| f(value))
    }
    fn set_error(self, error: S::Error) {
        self.final_rcvr().set_error(error)
    }
    fn set_stopped(self) {
        self.final_rcvr().set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.final_rcvr().set_panic(panic)
    }
}

impl<S: Sender, F, R> Receiver<S::Value, S::Error> for LetFirstReceiver<OnError, S, F, R>
where
    OnError: LetKind<S, F, Value = S::Value>,
    F: FnOnce(S::Error) -> <OnError as LetKind<S, F>>::Second,
    <OnError as LetKind<S, F>>::Second: SenderTo<LetSecondReceiver<R, <OnError as LetKind<S, F>>::Sched, S::Domain>>,
    R: Receiver<S::Value, <OnError as LetKind<S, F>>::Error>,
{
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: S::Value) {
        self.final_rcvr().set_value(value)
    }
    fn set_error(self, error: S::Error) {
        self.run_second(move |f| f(error))
    }
    fn set_stopped(self) {
        self.final_rcvr().set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.final_rcvr().set_panic(panic)
    }
}

impl<S: Sender, F, R> Receiver<S::Value, S::Error> for LetFirstReceiver<OnStopped, S, F, R>
where
    OnStopped: LetKind<S, F, Value = S::Value, Error = S::Error>,
    F: FnOnce() -> <OnStopped as LetKind<S, F>>::Second,
    <OnStopped as LetKind<S, F>>::Second:
        SenderTo<LetSecondReceiver<R, <OnStopped as LetKind<S, F>>::Sched, S::Domain>>,
    R: Receiver<S::Value, S::Error>,
{
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: S::Value) {
        self.final_rcvr().set_value(value)
    }
    fn set_error(self, error: S::Error) {
        self.final_rcvr().set_error(error)
    }
    fn set_stopped(self) {
        self.run_second(|f| f())
    }
    fn set_panic(self, panic: Panic) {
        self.final_rcvr().set_panic(panic)
    }
}

/// The operation state of the `let_*` adaptors.
pub struct LetOp<K: LetKind<S, F>, S: SenderTo<LetFirstReceiver<K, S, F, R>>, F, R>
where
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    R: Receiver<K::Value, K::Error>,
    LetFirstReceiver<K, S, F, R>: Receiver<S::Value, S::Error>,
{
    state: LetState<K, S, F, R>,
    sndr: Option<S>,
    first: Option<S::Operation>,
    _pin: PhantomPinned,
}

impl<K, S, F, R> SenderTo<R> for Let<K, S, F>
where
    K: LetKind<S, F>,
    S::Domain: CommonDomain<<K::Second as Sender>::Domain>,
    S: SenderTo<LetFirstReceiver<K, S, F, R>>,
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    R: Receiver<K::Value, K::Error>,
    LetFirstReceiver<K, S, F, R>: Receiver<S::Value, S::Error>,
    R: Receiver<K::Value, K::Error>,
{
    type Operation = LetOp<K, S, F, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        let sched = K::sched(&self.sndr);
        LetOp {
            state: LetState {
                f: Some(self.f),
                second: InPlace::empty(),
                shared: LetShared { rcvr: UnsafeCell::new(Some(receiver)), sched },
            },
            sndr: Some(self.sndr),
            first: None,
            _pin: PhantomPinned,
        }
    }
}

impl<K, S, F, R> OperationState for LetOp<K, S, F, R>
where
    K: LetKind<S, F>,
    S: SenderTo<LetFirstReceiver<K, S, F, R>>,
    K::Second: SenderTo<LetSecondReceiver<R, K::Sched, S::Domain>>,
    R: Receiver<K::Value, K::Error>,
    LetFirstReceiver<K, S, F, R>: Receiver<S::Value, S::Error>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `state` and `first` stay in place (only addressed); `sndr` is moved out
        // and is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(sndr) = this.sndr.take() else { return };
        let state: *mut LetState<K, S, F, R> = &mut this.state;
        match catch(move || sndr.connect(LetFirstReceiver { state })) {
            Ok(first) => {
                let first = this.first.insert(first);
                // SAFETY: pinned in place inside the pinned operation; started once.
                unsafe { Pin::new_unchecked(first).start() };
            }
            // A panic in the predecessor's `connect` is the predecessor's completion: its
            // receiver delivers it downstream (`f` never runs).
            Err(p) => LetFirstReceiver { state }.set_panic(p),
        }
    }
}
