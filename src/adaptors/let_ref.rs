//! `let_value_ref` and `let_value_ref_with`: `let_value` by reference (P2300
//! [exec.let]).
//!
//! P2300's `let_value` keeps the predecessor's value in its operation state and calls the
//! function with a reference to it; the sender the function returns may use that
//! reference until it completes. Here the value is kept in the (pinned) operation state,
//! the function gets `&'a mut V` for a loan `'a` it cannot name outside (the bound is
//! higher-ranked), and the sender it returns may borrow the value for `'a`, and what the
//! function captures by reference (`'env`, which [`LendScope`] says outlives `'a`). When
//! that sender completes with `u`, its operation is destroyed first (nothing borrows the
//! value any more), and the whole sender completes with `(value, u)`: the value is
//! handed on, by move, to what follows.
//!
//! The table of completions and the argument for soundness are on [`LetValueRef`].
//!
//! Two forms:
//!
//! - [`let_value_ref`](crate::SenderExt::let_value_ref): `f` returns an
//!   [`AnySender<'a, U, E, Sch>`](crate::AnySender) (a closure's signature is inferred
//!   from it, and recursion needs the erased type anyway);
//! - [`let_value_ref_with`](crate::SenderExt::let_value_ref_with): `f` returns any sender
//!   whose type may depend on `'a` ([`LendFn`]); no heap block, but only a function item
//!   (a `fn` with a named lifetime) has such a signature, since a closure's return type
//!   cannot depend on the lifetime of its argument.

use std::cell::UnsafeCell;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::any::{AnyOp, AnySender, ErasedEnvScheduler, IntoAnyScheduler};
use crate::domain::{CommonDomain, MaybeDomain};
use crate::env::Env;
use crate::inplace::InPlace;
use crate::outcome::Outcome;
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::scheduler::MaybeScheduler;
use crate::sender::seal::Seal;
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::StopToken;

/// The sender of [`let_value_ref`](crate::SenderExt::let_value_ref) and
/// [`let_value_ref_with`](crate::SenderExt::let_value_ref_with): `L` is the function,
/// as [`LendAny`] or [`LendTyped`]. The value is kept in the operation and lent to the
/// function; the sender the function returns (the *lent sender*) may borrow it until it
/// completes, and then this sender completes with `(value, u)`.
///
/// | event | what happens |
/// |---|---|
/// | predecessor: value `v` | `v` stored in the operation, `f(&mut v, _)` called, the lent sender connected in place and started |
/// | predecessor: error, stopped, panic | forwarded; `f` never runs |
/// | `f` or the lent sender's `connect` panics | the value is dropped, then `set_panic` |
/// | the lent sender: value `u` | its operation dropped, then `set_value((v, u))` |
/// | the lent sender: error, stopped, panic | its operation dropped, the value dropped, then the same completion |
/// | a drop above panics | `set_panic` with that panic (a panic already being delivered wins) |
/// | stop request | seen by the lent sender through its environment (the receiver's token) |
///
/// Why this is sound without a blocking owner of its own: the value lives inside the
/// operation state, which is pinned and is not dropped (or its memory reused) before it
/// completes, by [`OperationState::start`]'s contract; a leaked operation state leaks
/// the value in place, still valid. The borrow `'a` is higher-ranked and the completion
/// type `U` is named outside it, so nothing that borrows the value can leave through the
/// completion; the sender that borrows it is connected into the same operation state
/// and destroyed before the value moves or drops.
///
/// The value and the lent sender are `Send` where the work crosses threads: the lent
/// sender's operation is dropped by the thread that completes it, so it must be `Send`
/// (an [`AnySender`]'s operation always is). The lent sender sees the predecessor's
/// domain and completion scheduler as current, as `let_value`'s second sender does.
#[must_use = "senders do nothing unless connected and started"]
pub struct LetValueRef<S, L> {
    sndr: S,
    lend: L,
}

impl<S, L> LetValueRef<S, L> {
    pub(crate) fn new(sndr: S, lend: L) -> Self {
        LetValueRef { sndr, lend }
    }
}

/// The function of [`let_value_ref`](crate::SenderExt::let_value_ref):
/// `for<'a> FnOnce(&'a mut V, LendScope<'a, 'env>) -> AnySender<'a, U, E, Sch>`.
pub struct LendAny<'env, F, U, Sch> {
    f: F,
    _out: PhantomData<fn() -> (U, Sch)>,
    _env: PhantomData<&'env ()>,
}

impl<F, U, Sch> LendAny<'_, F, U, Sch> {
    pub(crate) fn new(f: F) -> Self {
        LendAny { f, _out: PhantomData, _env: PhantomData }
    }
}

/// The second argument of a [`let_value_ref`](crate::SenderExt::let_value_ref)
/// function, beside `&'a mut V`: it says that `'env`, what the function may borrow
/// besides the value (what it captures by reference), outlives the loan `'a`, so the
/// sender the function returns may borrow both. It carries nothing else (ignore it with
/// `_`), as [`std::thread::Scope`]'s `'env` carries what a scoped thread may borrow.
#[derive(Clone, Copy)]
pub struct LendScope<'a, 'env: 'a> {
    _loan: PhantomData<&'a &'env ()>,
}

impl std::fmt::Debug for LendScope<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LendScope").finish_non_exhaustive()
    }
}

/// The function of [`let_value_ref_with`](crate::SenderExt::let_value_ref_with): any
/// `for<'a> LendFn<'a, V, U, E>`. `'v` is a lifetime the value outlives: it names the
/// type of the stored operation, whose real borrow cannot be named.
pub struct LendTyped<'v, F, U> {
    f: F,
    _out: PhantomData<fn() -> U>,
    _v: PhantomData<&'v ()>,
}

impl<F, U> LendTyped<'_, F, U> {
    pub(crate) fn new(f: F) -> Self {
        LendTyped { f, _out: PhantomData, _v: PhantomData }
    }
}

/// A function that lends: called with `&'a mut V`, it returns a sender that may borrow
/// the value for `'a` and completes with `U` or fails with `E` (types that do not depend
/// on `'a`). Implemented for every `FnOnce(&'a mut V) -> S` with such an `S`; written as
/// `F: for<'a> LendFn<'a, V, U, E>`, it names a function whose sender's type depends on
/// the borrow, as a function item's `impl Sender + 'a` return type does.
///
/// The last parameter is never written: its default, `&'a V`, makes `V: 'a` implied
/// wherever `for<'a> LendFn<'a, V, U, E>` is.
pub trait LendFn<'a, V: ?Sized, U, E, Borrow = &'a V> {
    /// The sender the function returns.
    type Sender: Sender<Value = U, Error = E>;
    /// Calls the function.
    ///
    /// ```
    /// use senders::adaptors::LendFn;
    /// use senders::{just, sync_wait};
    /// let mut v = vec![1, 2, 3];
    /// let sndr = LendFn::lend(|v: &mut Vec<i32>| { v.push(4); just(v.len()) }, &mut v);
    /// assert_eq!(sync_wait(sndr).unwrap(), Some(4));
    /// ```
    fn lend(self, value: &'a mut V) -> Self::Sender;
}

impl<'a, V: ?Sized, U, E, F, S> LendFn<'a, V, U, E> for F
where
    F: FnOnce(&'a mut V) -> S,
    S: Sender<Value = U, Error = E>,
{
    type Sender = S;
    fn lend(self, value: &'a mut V) -> S {
        self(value)
    }
}

/// What a `let_value_ref` function's sender completes with, as seen from outside the
/// borrow: its value, whether it may complete stopped, and its domain.
pub trait Lender<V, E> {
    /// The value of the function's sender.
    type Value;
    /// Whether the function's sender may complete stopped.
    const SENDS_STOPPED: bool;
    /// The domain of the function's sender.
    type Domain: MaybeDomain;
}

/// Where a `let_value_ref` operation keeps its function's operation (only the crate
/// makes one).
pub struct LendSlot<Op>(InPlace<Op>);

/// How a `let_value_ref` function's sender is made, connected to `R` and started, at the
/// lifetime of the borrow.
pub trait LenderTo<V, E, R>: Lender<V, E> {
    /// The sender's operation state, as stored (its borrow's lifetime is erased).
    type Op: OperationState;

    /// Calls the function with `&mut *value`, connects its sender to `rcvr` in `slot`
    /// and starts it. A panic in the function or in `connect` is returned; then nothing
    /// is left in `slot` and nothing borrows the value.
    ///
    /// # Safety
    ///
    /// `value` and `slot` are pinned in a started operation state, and stay in place
    /// until the operation in `slot` has completed and been dropped; the value is not
    /// touched by anyone else until then. After the operation is started, the caller
    /// touches neither again before its receiver's completion.
    unsafe fn lend(self, value: *mut V, rcvr: R, slot: *mut LendSlot<Self::Op>) -> Result<(), Panic>;
}

// No bound on `F` here (the method that makes a `LendAny` checks it): the completions
// are known without it, so a `Task` that holds the sender across an `.await` is `Send`
// without the compiler proving the higher-ranked bound again for the lifetimes it erases.
impl<V, E, F, U, Sch: MaybeScheduler> Lender<V, E> for LendAny<'_, F, U, Sch> {
    type Value = U;
    const SENDS_STOPPED: bool = true;
    type Domain = Sch::Domain;
}

impl<'env, V, E, F, U, Sch, R> LenderTo<V, E, R> for LendAny<'env, F, U, Sch>
where
    F: for<'a> FnOnce(&'a mut V, LendScope<'a, 'env>) -> AnySender<'a, U, E, Sch>,
    Sch: ErasedEnvScheduler,
    R: Receiver<U, E> + Send + Sync,
    R::Env: Sync,
    <R::Env as Env>::Scheduler: IntoAnyScheduler<Sch>,
{
    type Op = AnyOp<'static, U, E, Sch, R>;

    unsafe fn lend(self, value: *mut V, rcvr: R, slot: *mut LendSlot<Self::Op>) -> Result<(), Panic> {
        let f = self.f;
        // SAFETY: the caller's contract: the value stays in place, untouched by others,
        // until the operation made from this sender is gone.
        let sndr = catch(move || f(unsafe { &mut *value }, LendScope { _loan: PhantomData }))?;
        // SAFETY: only the lifetime changes (the same type otherwise). The `AnySender`
        // erased its sender with that sender's own lifetime bounds (`AnySender::new`),
        // and its connect and operation do not depend on `'a`; the operation is dropped
        // before the value it borrows moves or drops (the caller's contract).
        let sndr = unsafe { std::mem::transmute::<AnySender<'_, U, E, Sch>, AnySender<'static, U, E, Sch>>(sndr) };
        // SAFETY: the slot is pinned in the operation state (the caller's contract).
        let op = unsafe { (*slot).0.emplace(move || sndr.connect(rcvr)) }?;
        // SAFETY: pinned in place; started once. Nothing is touched after it.
        unsafe { Pin::new_unchecked(op).start() };
        Ok(())
    }
}

/// A [`LendFn`] whose sender connects to `R`: how [`LendTyped`] makes, connects and
/// starts it at the borrow `'a`. Implemented for every such function; the last
/// parameter is never written (as for `LendFn`, it makes `V: 'a` implied under
/// `for<'a>`). Sealed: only the crate calls it or implements it.
pub trait LendConnect<'a, V: ?Sized, U, E, R, Borrow = &'a V> {
    /// The sender's operation state.
    type Op: OperationState;

    /// Calls the function, connects its sender to `rcvr` in `slot` and starts it; a
    /// panic in the function or in `connect` is returned, leaving nothing in `slot`.
    ///
    /// # Safety
    ///
    /// As for [`LenderTo::lend`], with the value behind `value`.
    #[doc(hidden)]
    unsafe fn lend_start(self, value: &'a mut V, rcvr: R, slot: *mut LendSlot<Self::Op>, _: Seal) -> Result<(), Panic>;
}

impl<'a, V: ?Sized, U, E, R, F> LendConnect<'a, V, U, E, R> for F
where
    F: LendFn<'a, V, U, E>,
    R: Receiver<U, E>,
    F::Sender: SenderTo<R>,
{
    type Op = <F::Sender as SenderTo<R>>::Operation;

    unsafe fn lend_start(self, value: &'a mut V, rcvr: R, slot: *mut LendSlot<Self::Op>, _: Seal) -> Result<(), Panic> {
        let sndr = catch(move || self.lend(value))?;
        // SAFETY: the slot is pinned in the operation state (the caller's contract).
        let op = unsafe { (*slot).0.emplace(move || sndr.connect(rcvr)) }?;
        // SAFETY: pinned in place; started once. Nothing is touched after it.
        unsafe { Pin::new_unchecked(op).start() };
        Ok(())
    }
}

impl<'v, V: 'v, E, F, U> Lender<V, E> for LendTyped<'v, F, U>
where
    F: LendFn<'v, V, U, E>,
{
    type Value = U;
    const SENDS_STOPPED: bool = <<F as LendFn<'v, V, U, E>>::Sender as Sender>::SENDS_STOPPED;
    type Domain = <<F as LendFn<'v, V, U, E>>::Sender as Sender>::Domain;
}

impl<'v, V: 'v, E, F, U, R> LenderTo<V, E, R> for LendTyped<'v, F, U>
where
    F: for<'a> LendFn<'a, V, U, E> + for<'a> LendConnect<'a, V, U, E, R>,
{
    /// Named at `'v`, a lifetime the value outlives: the real borrow cannot be named.
    /// The type at the borrow differs only in lifetimes, so it has the same layout, and
    /// its drop glue (which cannot depend on lifetimes) is the same.
    type Op = <F as LendConnect<'v, V, U, E, R>>::Op;

    unsafe fn lend(self, value: *mut V, rcvr: R, slot: *mut LendSlot<Self::Op>) -> Result<(), Panic> {
        // SAFETY: the caller's contract. The sender is made, connected and started
        // through its impls at the real borrow, never at `'v`, so an impl that asks more
        // of `'v` is not used.
        unsafe { self.f.lend_start(&mut *value, rcvr, slot.cast(), Seal(())) }
    }
}

// The domain is the one the predecessor and the function's sender share, as for
// `let_value`.
sender!([S: Sender, L: Lender<S::Value, S::Error>] LetValueRef<S, L> where [S::Domain: CommonDomain<L::Domain>] {
    value = (S::Value, L::Value),
    error = S::Error,
    stopped = S::SENDS_STOPPED || L::SENDS_STOPPED,
    domain = <S::Domain as CommonDomain<L::Domain>>::Out,
});

/// What the function's sender's receiver reaches: the stored value, the final receiver,
/// the predecessor's scheduler, and how to drop the function's operation. First in the
/// operation's state (`repr(C)`), so that its address is the state's.
#[repr(C)]
pub(crate) struct LetRefTail<V, R, Sch> {
    /// Drops the function's operation in place, given this tail's address.
    clear: unsafe fn(*const ()),
    value: UnsafeCell<Option<V>>,
    rcvr: UnsafeCell<Option<R>>,
    sched: Sch,
}

/// The receiver of the function's sender. It is also its environment: the parent's, with
/// the predecessor's domain `D` and completion scheduler `Sch` as current when known.
pub struct LetRefReceiver<V, R, Sch, D> {
    tail: *const LetRefTail<V, R, Sch>,
    _d: PhantomData<fn() -> D>,
}

// SAFETY: the function's sender may complete on another thread: there this receiver drops
// that sender's operation (`Send`: required at `connect`), takes the value (`V: Send`)
// and completes the final receiver (`Send`), whose environment is read concurrently
// (`Sync`), as is the predecessor's scheduler.
unsafe impl<V: Send, R: Send + Sync, Sch: Send + Sync, D> Send for LetRefReceiver<V, R, Sch, D> {}
// SAFETY: a shared reference only reaches the environment, which calls `R::env(&R)`
// (`R: Sync`) and clones the scheduler (`Sync`).
unsafe impl<V, R: Sync, Sch: Sync, D> Sync for LetRefReceiver<V, R, Sch, D> {}

impl<V, R, Sch, D> LetRefReceiver<V, R, Sch, D> {
    fn tail(&self) -> &LetRefTail<V, R, Sch> {
        // SAFETY: the tail lives in the pinned operation until the final completion,
        // which consumes this receiver.
        unsafe { &*self.tail }
    }

    fn parent_env<U, E>(&self) -> &R::Env
    where
        R: Receiver<(V, U), E>,
    {
        // SAFETY: the final receiver is present until the completion takes it.
        unsafe { (*self.tail().rcvr.get()).as_ref() }.expect("let_value_ref: env after completion").env()
    }

    /// The completion: drops the function's operation, settles what is handed on, then
    /// completes the final receiver.
    fn finish<U, E>(self, outcome: Outcome<U, E>)
    where
        R: Receiver<(V, U), E>,
    {
        let tail = self.tail;
        // SAFETY: the function's operation called this receiver and does not touch itself
        // again, so it may be dropped here; then nothing borrows the value, which is taken
        // once, as is the final receiver (this is the one completion).
        let (cleared, value, rcvr) = unsafe {
            let cleared = catch(|| ((*tail).clear)(tail.cast()));
            let value = (*(*tail).value.get()).take().expect("let_value_ref: the value is stored");
            let rcvr = (*(*tail).rcvr.get()).take().expect("let_value_ref: completes once");
            (cleared, value, rcvr)
        };
        // DROP ORDER: what is not handed on is dropped in `settle`, before the completion.
        let outcome = settle(cleared, value, outcome);
        outcome.deliver(rcvr)
    }
}

/// What the final receiver gets, given whether dropping the function's operation
/// panicked: `(value, u)` for a value; otherwise the value is dropped here and the
/// completion passes on, a panic of a drop replacing it unless it is itself a panic.
fn settle<V, U, E>(cleared: Result<(), Panic>, value: V, outcome: Outcome<U, E>) -> Outcome<(V, U), E> {
    let (outcome, value) = match (cleared, outcome) {
        (Ok(()), Outcome::Value(u)) => return Outcome::Value((value, u)),
        (Ok(()), Outcome::Error(e)) => (Outcome::Error(e), value),
        (Ok(()), Outcome::Stopped) => (Outcome::Stopped, value),
        (Ok(()), Outcome::Panic(p)) | (Err(_), Outcome::Panic(p)) => (Outcome::Panic(p), value),
        (Err(p), lost) => {
            let _ = discard(lost);
            (Outcome::Panic(p), value)
        }
    };
    match (discard(value), outcome) {
        (Err(p), Outcome::Error(e)) => {
            let _ = discard(e);
            Outcome::Panic(p)
        }
        (Err(p), Outcome::Stopped) => Outcome::Panic(p),
        (_, outcome) => outcome,
    }
}

impl<U, E, V, R, Sch, D> Receiver<U, E> for LetRefReceiver<V, R, Sch, D>
where
    R: Receiver<(V, U), E>,
    Sch: MaybeScheduler,
    D: MaybeDomain,
{
    type Env = LetRefEnv<V, R, Sch, D, U, E>;
    fn env(&self) -> &Self::Env {
        // SAFETY: `LetRefEnv` is a transparent wrapper of this receiver.
        unsafe { &*(self as *const Self).cast::<LetRefEnv<V, R, Sch, D, U, E>>() }
    }
    fn set_value(self, value: U) {
        self.finish(Outcome::Value(value))
    }
    fn set_error(self, error: E) {
        self.finish(Outcome::Error(error))
    }
    fn set_stopped(self) {
        self.finish(Outcome::<U, E>::Stopped)
    }
    fn set_panic(self, panic: Panic) {
        self.finish(Outcome::<U, E>::Panic(panic))
    }
}

/// The environment of a `let_value_ref` function's sender.
#[repr(transparent)]
pub struct LetRefEnv<V, R, Sch, D, U, E>(LetRefReceiver<V, R, Sch, D>, PhantomData<fn() -> (U, E)>);

// SAFETY: a shared env only reads the predecessor's scheduler (`Sync`) and the parent's
// env (`Sync`), never the final receiver itself.
unsafe impl<V, R: Receiver<(V, U), E> + Sync, Sch: Sync, D, U, E> Sync for LetRefEnv<V, R, Sch, D, U, E> where
    R::Env: Sync
{
}

impl<V, R: Receiver<(V, U), E>, Sch: MaybeScheduler, D: MaybeDomain, U, E> Env for LetRefEnv<V, R, Sch, D, U, E> {
    type Scheduler = Sch::Or<<R::Env as Env>::Scheduler>;
    type Domain = D::Or<<R::Env as Env>::Domain>;
    fn scheduler(&self) -> Self::Scheduler {
        let parent = self.0.parent_env::<U, E>();
        self.0.tail().sched.clone().or_else(|| parent.scheduler())
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.0.parent_env::<U, E>().stop_token()
    }
    fn prop(&self, key: std::any::TypeId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.0.parent_env::<U, E>().prop(key)
    }
}

/// The receiver the function's sender is connected to, for a predecessor `S` and a final
/// receiver `R`.
pub type LentReceiver<S, R> =
    LetRefReceiver<<S as Sender>::Value, R, <S as Sender>::CompletionScheduler, <S as Sender>::Domain>;

/// The state the predecessor's receiver works on; its tail comes first (`repr(C)`).
#[repr(C)]
pub(crate) struct LetRefState<S: Sender, L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>, R> {
    tail: LetRefTail<S::Value, R, S::CompletionScheduler>,
    lend: Option<L>,
    second: LendSlot<L::Op>,
}

impl<S: Sender, L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>, R> LetRefState<S, L, R> {
    /// `LetRefTail::clear` for this state.
    ///
    /// # Safety
    ///
    /// `tail` is the tail of a live `Self` whose function's operation, if any, has
    /// completed; nothing else touches `second` meanwhile.
    unsafe fn clear(tail: *const ()) {
        // SAFETY: the tail is the state's first field; the caller's contract.
        unsafe { (*tail.cast_mut().cast::<Self>()).second.0.clear() }
    }
}

/// The receiver of the predecessor.
pub struct LetRefFirst<S: Sender, L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>, R> {
    state: *mut LetRefState<S, L, R>,
}

// SAFETY: the predecessor may complete on another thread, where this receiver stores the
// value (`Send`), runs the function (`Send`), builds and starts its sender's operation
// (`Send`, dropped on the thread that completes it), or forwards to the final receiver
// (`Send`); the environment is shared (`Sync`).
unsafe impl<S: Sender, L, R: Send + Sync> Send for LetRefFirst<S, L, R>
where
    L: LenderTo<S::Value, S::Error, LentReceiver<S, R>> + Send,
    L::Op: Send,
    R: Receiver<(S::Value, L::Value), S::Error>,
    R::Env: Sync,
    S::Value: Send,
    S::Error: Send,
    S::CompletionScheduler: Send + Sync,
{
}
// SAFETY: a shared reference only reaches the parent env (`Sync`).
unsafe impl<S: Sender, L, R: Sync> Sync for LetRefFirst<S, L, R>
where
    L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>,
    R: Receiver<(S::Value, L::Value), S::Error>,
    R::Env: Sync,
{
}

impl<S: Sender, L, R> LetRefFirst<S, L, R>
where
    L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>,
    R: Receiver<(S::Value, L::Value), S::Error>,
{
    fn final_rcvr(&self) -> R {
        // SAFETY: the state lives in the pinned operation; without the function's sender,
        // the predecessor's completion is the final one and takes the receiver once.
        unsafe { (*(*self.state).tail.rcvr.get()).take() }.expect("let_value_ref: completes once")
    }

    fn final_env(&self) -> &R::Env {
        // SAFETY: the final receiver stays in place until a completion takes it.
        unsafe { (*(*self.state).tail.rcvr.get()).as_ref() }.expect("let_value_ref: env after completion").env()
    }
}

impl<S: Sender, L, R> Env for LetRefFirst<S, L, R>
where
    L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>,
    R: Receiver<(S::Value, L::Value), S::Error>,
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

impl<S: Sender, L, R> Receiver<S::Value, S::Error> for LetRefFirst<S, L, R>
where
    L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>,
    R: Receiver<(S::Value, L::Value), S::Error>,
{
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }

    fn set_value(self, value: S::Value) {
        let state = self.state;
        // SAFETY: the predecessor completes once; the state is pinned in the started
        // operation, which cannot be dropped before the final completion, so the value,
        // stored in it, stays in place until the function's operation is gone (the
        // second receiver drops that operation before it takes the value).
        unsafe {
            let value: *mut S::Value = (*(*state).tail.value.get()).insert(value);
            let lend = (*state).lend.take().expect("let_value_ref: the function runs once");
            let rcvr = LetRefReceiver { tail: &raw const (*state).tail, _d: PhantomData };
            if let Err(panic) = lend.lend(value, rcvr, &raw mut (*state).second) {
                // Nothing borrows the value: the function's sender went down with the
                // unwind, and nothing was started.
                // DROP ORDER: the value is dropped before the completion; a panic in its
                // drop loses to the panic being delivered.
                let _ = discard((*(*state).tail.value.get()).take());
                self.final_rcvr().set_panic(panic);
            }
        }
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

/// The operation state of `let_value_ref`.
pub struct LetValueRefOp<S, L, R>
where
    S: SenderTo<LetRefFirst<S, L, R>>,
    L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>,
    R: Receiver<(S::Value, L::Value), S::Error>,
{
    state: LetRefState<S, L, R>,
    sndr: Option<S>,
    first: Option<S::Operation>,
    _pin: PhantomPinned,
}

impl<S, L, R> SenderTo<R> for LetValueRef<S, L>
where
    S::Domain: CommonDomain<L::Domain>,
    S: SenderTo<LetRefFirst<S, L, R>>,
    L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>,
    L::Op: Send,
    R: Receiver<(S::Value, L::Value), S::Error>,
{
    type Operation = LetValueRefOp<S, L, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        let sched = self.sndr.completion_scheduler();
        LetValueRefOp {
            state: LetRefState {
                tail: LetRefTail {
                    clear: LetRefState::<S, L, R>::clear,
                    value: UnsafeCell::new(None),
                    rcvr: UnsafeCell::new(Some(receiver)),
                    sched,
                },
                lend: Some(self.lend),
                second: LendSlot(InPlace::empty()),
            },
            sndr: Some(self.sndr),
            first: None,
            _pin: PhantomPinned,
        }
    }
}

impl<S, L, R> OperationState for LetValueRefOp<S, L, R>
where
    S: SenderTo<LetRefFirst<S, L, R>>,
    L: LenderTo<S::Value, S::Error, LentReceiver<S, R>>,
    R: Receiver<(S::Value, L::Value), S::Error>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `state` and `first` stay in place (only addressed); `sndr` is moved out
        // and is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(sndr) = this.sndr.take() else { return };
        let state: *mut LetRefState<S, L, R> = &mut this.state;
        match catch(move || sndr.connect(LetRefFirst { state })) {
            Ok(first) => {
                let first = this.first.insert(first);
                // SAFETY: pinned in place inside the pinned operation; started once.
                unsafe { Pin::new_unchecked(first).start() };
            }
            // A panic in the predecessor's `connect` is the predecessor's completion: the
            // function never runs.
            Err(p) => LetRefFirst { state }.set_panic(p),
        }
    }
}
