//! `schedule_from` / `continues_on` and `starts_on`: moving work between schedulers.
//!
//! Each receiver points at state whose type does not mention the operation that
//! receiver is connected to; otherwise "this receiver is a receiver" would depend on
//! "that sender connects to this receiver", a cycle the trait solver cannot close.
//!
//! Connecting the second stage happens inside a completion. A panic there (a user
//! `connect` or a domain hook) is caught and delivered as `set_panic`.

use std::cell::UnsafeCell;
use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::env::Env;
use crate::outcome::{Outcome, outcome_completions};
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::StopToken;

/// The final receiver and, once the predecessor is done, its outcome.
pub(crate) struct ContinuesOnCore<V, E, R> {
    rcvr: UnsafeCell<Option<R>>,
    outcome: UnsafeCell<Option<Outcome<V, E>>>,
}

impl<V, E, R: Receiver<V, E>> ContinuesOnCore<V, E, R> {
    fn env(&self) -> &R::Env {
        // SAFETY: the final receiver stays in place until the hop's completion takes it.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("schedule_from: env after completion").env()
    }
    fn take_rcvr(&self) -> R {
        // SAFETY: only one completion takes the final receiver, once.
        unsafe { (*self.rcvr.get()).take() }.expect("schedule_from: completes once")
    }
}

/// The sender of [`schedule_from(sch, sndr)`](schedule_from) (also
/// [`continues_on(sndr, sch)`](crate::SenderExt::continues_on)): runs
/// `sndr`, then completes with its result on `sch`.
///
/// Its domain is `sch`'s (P2999 §2.4 item 11), and so is its completion scheduler.
#[must_use = "senders do nothing unless connected and started"]
pub struct ScheduleFrom<Sch, S> {
    sch: Sch,
    sndr: S,
}

/// `schedule_from(sch, sndr)`: runs `sndr`, then completes with its result on `sch`.
///
/// ```
/// use senders::{just, schedule_from, sync_wait, SingleThreadContext, SenderExt};
/// let ctx = SingleThreadContext::with_name("there");
/// let name = sync_wait(schedule_from(ctx.scheduler(), just(1)).then(|x| {
///     (x, std::thread::current().name().map(str::to_owned))
/// }));
/// assert_eq!(name.unwrap(), Some((1, Some("there".to_owned()))));
/// ```
pub fn schedule_from<Sch: Scheduler, S: Sender>(sch: Sch, sndr: S) -> ScheduleFrom<Sch, S> {
    ScheduleFrom { sch, sndr }
}

sender!(impl [Sch: Scheduler, S: Sender] ScheduleFrom<Sch, S> {
    type Value = S::Value;
    type Error = S::Error;
    const SENDS_STOPPED: bool = true;
    type Domain = Sch::Domain;
    type CompletionScheduler = Sch;
    fn completion_scheduler(&self) -> Sch {
        self.sch.clone()
    }
});

/// The hop's operation state for `schedule_from` on `Sch` delivering `V`/`E` to `R`.
type HopOp<Sch, V, E, R> = <<Sch as Scheduler>::Sender as SenderTo<ContinuesOnHopReceiver<V, E, R>>>::Operation;

/// What the predecessor's receiver works on: the core, the scheduler, the hop's slot.
pub(crate) struct ContinuesOnState<Sch: Scheduler, V, E, R: Receiver<V, E>>
where
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<V, E, R>>,
{
    core: ContinuesOnCore<V, E, R>,
    sch: Sch,
    hop: UnsafeCell<Option<HopOp<Sch, V, E, R>>>,
}

/// The receiver of the predecessor: stores the outcome, then hops to the scheduler.
pub struct ContinuesOnReceiver<Sch: Scheduler, V, E, R: Receiver<V, E>>
where
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<V, E, R>>,
{
    state: *const ContinuesOnState<Sch, V, E, R>,
}

// SAFETY: the predecessor may complete on another thread: the outcome moves there and
// then to the scheduler's thread, the hop's operation is built there and dropped with
// the parent, and the env is read from both sides.
unsafe impl<Sch: Scheduler, V: Send, E: Send, R: Receiver<V, E> + Send + Sync> Send
    for ContinuesOnReceiver<Sch, V, E, R>
where
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<V, E, R>>,
    R::Env: Sync,
    HopOp<Sch, V, E, R>: Send,
{
}

// SAFETY: a shared reference only reaches the environment (`env`), which is the final
// receiver's, `Sync` by these bounds; completing takes the receiver by value.
unsafe impl<Sch: Scheduler, V, E, R: Receiver<V, E> + Sync> Sync for ContinuesOnReceiver<Sch, V, E, R>
where
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<V, E, R>>,
    R::Env: Sync,
{
}

impl<Sch: Scheduler, V, E, R: Receiver<V, E>> ContinuesOnReceiver<Sch, V, E, R>
where
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<V, E, R>>,
{
    fn hop(self, outcome: Outcome<V, E>) {
        let state = self.state;
        // SAFETY: the state is pinned in the operation, which outlives the hop; the
        // outcome and hop slots are written once, by this one completion.
        let core = unsafe { &(*state).core };
        // SAFETY: as above.
        unsafe { *core.outcome.get() = Some(outcome) };
        let connected = catch(|| {
            let rcvr = ContinuesOnHopReceiver { core, _t: PhantomData };
            // SAFETY: `state` is alive (see above).
            unsafe { (*state).sch.schedule().connect(rcvr) }
        });
        match connected {
            // SAFETY: the slot is in the pinned state and is written once; the operation
            // is pinned there and started once.
            Ok(op) => unsafe { Pin::new_unchecked((*(*state).hop.get()).insert(op)).start() },
            Err(p) => core.take_rcvr().set_panic(p),
        }
    }
}

impl<Sch: Scheduler, V, E, R: Receiver<V, E>> Receiver<V, E> for ContinuesOnReceiver<Sch, V, E, R>
where
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<V, E, R>>,
{
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        // SAFETY: the state outlives this receiver.
        unsafe { (*self.state).core.env() }
    }
    outcome_completions!(hop);
}

/// The receiver of the hop: delivers the stored outcome on the scheduler's context.
pub struct ContinuesOnHopReceiver<V, E, R> {
    core: *const ContinuesOnCore<V, E, R>,
    _t: PhantomData<fn() -> (V, E)>,
}

// SAFETY: the hop completes on the scheduler's thread, where it moves the stored
// outcome and runs the final receiver; the env is shared, hence `Sync`.
unsafe impl<V: Send, E: Send, R: Receiver<V, E> + Send + Sync> Send for ContinuesOnHopReceiver<V, E, R> where
    R::Env: Sync
{
}

impl<V, E, R: Receiver<V, E>> ContinuesOnHopReceiver<V, E, R> {
    fn core(&self) -> &ContinuesOnCore<V, E, R> {
        // SAFETY: the core lives in the pinned operation until the final completion,
        // which this receiver makes.
        unsafe { &*self.core }
    }
}

impl<V, E, R: Receiver<V, E>> Receiver<(), Infallible> for ContinuesOnHopReceiver<V, E, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.core().env()
    }
    fn set_value(self, (): ()) {
        let core = self.core();
        let rcvr = core.take_rcvr();
        // SAFETY: written by the predecessor's completion before the hop started.
        let outcome = unsafe { (*core.outcome.get()).take() };
        outcome.expect("schedule_from: outcome stored before the hop").deliver(rcvr)
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        let core = self.core();
        let rcvr = core.take_rcvr();
        // SAFETY: as in `set_value`.
        let outcome = unsafe { (*core.outcome.get()).take() };
        // DROP ORDER: `into_panic` consumes the stored outcome, so a value or error
        // the stop discards is dropped here, before the completion releases the waiter.
        // A pending panic is not lost to a stop, nor a panic of that `Drop`.
        match outcome.and_then(Outcome::into_panic) {
            Some(p) => rcvr.set_panic(p),
            None => rcvr.set_stopped(),
        }
    }
    fn set_panic(self, panic: Panic) {
        let core = self.core();
        let rcvr = core.take_rcvr();
        // SAFETY: as in `set_value`. DROP ORDER: the stored outcome, which this panic
        // replaces, is dropped before the completion.
        drop(unsafe { (*core.outcome.get()).take() });
        rcvr.set_panic(panic)
    }
}

/// The operation state of `schedule_from`.
pub struct ScheduleFromOp<Sch: Scheduler, S, R>
where
    S: Sender + SenderTo<ContinuesOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<S::Value, S::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    state: ContinuesOnState<Sch, S::Value, S::Error, R>,
    sndr: Option<S>,
    first: Option<S::Operation>,
    _pin: PhantomPinned,
}

impl<Sch: Scheduler, S, R> SenderTo<R> for ScheduleFrom<Sch, S>
where
    S: Sender + SenderTo<ContinuesOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<S::Value, S::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = ScheduleFromOp<Sch, S, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        ScheduleFromOp {
            state: ContinuesOnState {
                core: ContinuesOnCore { rcvr: UnsafeCell::new(Some(receiver)), outcome: UnsafeCell::new(None) },
                sch: self.sch,
                hop: UnsafeCell::new(None),
            },
            sndr: Some(self.sndr),
            first: None,
            _pin: PhantomPinned,
        }
    }
}

impl<Sch: Scheduler, S, R> OperationState for ScheduleFromOp<Sch, S, R>
where
    S: Sender + SenderTo<ContinuesOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    Sch::Sender: SenderTo<ContinuesOnHopReceiver<S::Value, S::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `state` and `first` are only addressed, never moved; `sndr` is not
        // structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(sndr) = this.sndr.take() else { return };
        let state: *const _ = &this.state;
        match catch(move || sndr.connect(ContinuesOnReceiver { state })) {
            Ok(first) => {
                let first = this.first.insert(first);
                // SAFETY: pinned in place, started once.
                unsafe { Pin::new_unchecked(first).start() };
            }
            // A panic in the predecessor's `connect` is the predecessor's completion: it
            // is delivered after the hop, as a panic of the predecessor would be.
            Err(p) => ContinuesOnReceiver { state }.set_panic(p),
        }
    }
}

/// The sender of [`starts_on(sch, sndr)`](starts_on): starts `sndr` on `sch`, with `sch` as the
/// current scheduler (and its domain as the current domain) in `sndr`'s environment
/// (P2999 §2.4 item 8).
#[must_use = "senders do nothing unless connected and started"]
pub struct StartsOn<Sch, S> {
    sch: Sch,
    sndr: S,
}

/// `starts_on(sch, sndr)`: starts `sndr` on `sch`'s execution resource; `sndr` sees
/// `sch` as its current scheduler, so late customization uses `sch`'s domain. The
/// sender's own domain is `sch`'s too, so that `apply_sender` (`sync_wait`) and early
/// customization of what follows it see it.
///
/// ```
/// use senders::{just, starts_on, sync_wait, SingleThreadContext, SenderExt};
/// let ctx = SingleThreadContext::with_name("pool-ish");
/// let name = sync_wait(starts_on(ctx.scheduler(), just(()).then(|()| {
///     std::thread::current().name().map(str::to_owned)
/// })));
/// assert_eq!(name.unwrap(), Some(Some("pool-ish".to_owned())));
/// ```
pub fn starts_on<Sch: Scheduler, S: Sender>(sch: Sch, sndr: S) -> StartsOn<Sch, S> {
    StartsOn { sch, sndr }
}

// Its domain is `sch`'s, as the reference's is (the child starts, and if it does not hop,
// completes, where `sch` runs it): a domain that customizes `sync_wait` sees
// `sync_wait(starts_on(sch, ..))`. Its completion scheduler is the child's.
sender!(impl [Sch: Scheduler, S: Sender] StartsOn<Sch, S> {
    type Value = S::Value;
    type Error = S::Error;
    const SENDS_STOPPED: bool = true;
    type Domain = Sch::Domain;
    type CompletionScheduler = S::CompletionScheduler;
    fn completion_scheduler(&self) -> Self::CompletionScheduler {
        self.sndr.completion_scheduler()
    }
});

/// What the child's receiver needs: the final receiver and the scheduler.
pub(crate) struct StartsOnShared<Sch, R> {
    rcvr: UnsafeCell<Option<R>>,
    sch: Sch,
}

impl<Sch, R> StartsOnShared<Sch, R> {
    fn rcvr<V, E>(&self) -> &R
    where
        R: Receiver<V, E>,
    {
        // SAFETY: present until a completion takes it.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("starts_on: env after completion")
    }
    fn take_rcvr(&self) -> R {
        // SAFETY: taken once, by the completion that ends the operation.
        unsafe { (*self.rcvr.get()).take() }.expect("starts_on: completes once")
    }
}

/// The child's operation state in `starts_on(Sch, S)` completing to `R`.
type ChildOp<Sch, S, R> =
    <S as SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>>::Operation;

/// What the hop's receiver works on: the shared part, the child, the child's slot.
pub(crate) struct StartsOnState<Sch: Scheduler, S, R>
where
    S: Sender + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    shared: StartsOnShared<Sch, R>,
    sndr: UnsafeCell<Option<S>>,
    child: UnsafeCell<Option<ChildOp<Sch, S, R>>>,
}

/// The receiver of the hop onto the scheduler; it then connects and starts the child.
pub struct StartsOnHopReceiver<Sch: Scheduler, S, R>
where
    S: Sender + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    state: *const StartsOnState<Sch, S, R>,
}

// SAFETY: the hop completes on the scheduler's thread: the child sender moves there, its
// operation is built there (and dropped with the parent), and the final receiver may
// complete there; the env is shared, hence `Sync`.
unsafe impl<Sch: Scheduler, S, R> Send for StartsOnHopReceiver<Sch, S, R>
where
    S: Sender + Send + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error> + Send + Sync,
    R::Env: Sync,
    ChildOp<Sch, S, R>: Send,
{
}

// SAFETY: a shared reference only reaches the final receiver's environment (`Sync`); the
// child sender and operation are reached only through the receiver taken by value.
unsafe impl<Sch: Scheduler, S, R> Sync for StartsOnHopReceiver<Sch, S, R>
where
    S: Sender + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error> + Sync,
    R::Env: Sync,
{
}

impl<Sch: Scheduler, S, R> StartsOnHopReceiver<Sch, S, R>
where
    S: Sender + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    fn state(&self) -> &StartsOnState<Sch, S, R> {
        // SAFETY: the state is pinned in the operation, which outlives the hop.
        unsafe { &*self.state }
    }
}

impl<Sch: Scheduler, S, R> Receiver<(), Infallible> for StartsOnHopReceiver<Sch, S, R>
where
    S: Sender + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
{
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.state().shared.rcvr().env()
    }
    fn set_value(self, (): ()) {
        let state = self.state();
        // SAFETY: the child sender is taken once, here.
        let sndr = unsafe { (*state.sndr.get()).take() }.expect("starts_on: child starts once");
        let shared: *const StartsOnShared<Sch, R> = &state.shared;
        let connected = catch(|| sndr.connect(StartsOnReceiver { shared, _t: PhantomData }));
        match connected {
            // SAFETY: the slot is in the pinned state, written once; the operation is
            // pinned there and started once.
            Ok(op) => unsafe { Pin::new_unchecked((*state.child.get()).insert(op)).start() },
            Err(p) => state.shared.take_rcvr().set_panic(p),
        }
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        self.state().shared.take_rcvr().set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.state().shared.take_rcvr().set_panic(panic)
    }
}

/// The child's receiver, and its environment: the scheduler (and its domain) current.
pub struct StartsOnReceiver<Sch, V, E, R> {
    shared: *const StartsOnShared<Sch, R>,
    _t: PhantomData<fn() -> (V, E)>,
}

// SAFETY: the child may complete on any thread and run the final receiver there; the
// env (the scheduler, the parent env) is shared, hence `Sync`.
unsafe impl<Sch: Sync, V: Send, E: Send, R: Receiver<V, E> + Send + Sync> Send for StartsOnReceiver<Sch, V, E, R> where
    R::Env: Sync
{
}

// SAFETY: a shared reference only reaches the environment: the scheduler (`Sync`) and
// the parent env (`Sync`), never the final receiver's completion.
unsafe impl<Sch: Sync, V, E, R: Receiver<V, E> + Sync> Sync for StartsOnReceiver<Sch, V, E, R> where R::Env: Sync {}

impl<Sch, V, E, R: Receiver<V, E>> StartsOnReceiver<Sch, V, E, R> {
    fn shared(&self) -> &StartsOnShared<Sch, R> {
        // SAFETY: the shared part lives in the pinned operation until the final
        // completion, which this receiver makes.
        unsafe { &*self.shared }
    }
}

impl<Sch: Scheduler, V, E, R: Receiver<V, E>> Env for StartsOnReceiver<Sch, V, E, R> {
    type Scheduler = Sch;
    type Domain = Sch::Domain;
    fn scheduler(&self) -> Sch {
        self.shared().sch.clone()
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.shared().rcvr().env().stop_token()
    }
    fn prop(&self, key: std::any::TypeId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.shared().rcvr().env().prop(key)
    }
}

impl<Sch: Scheduler, V, E, R: Receiver<V, E>> Receiver<V, E> for StartsOnReceiver<Sch, V, E, R> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: V) {
        self.shared().take_rcvr().set_value(value)
    }
    fn set_error(self, error: E) {
        self.shared().take_rcvr().set_error(error)
    }
    fn set_stopped(self) {
        self.shared().take_rcvr().set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.shared().take_rcvr().set_panic(panic)
    }
}

/// The operation state of `starts_on`.
pub struct StartsOnOp<Sch: Scheduler, S, R>
where
    S: Sender + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
    Sch::Sender: SenderTo<StartsOnHopReceiver<Sch, S, R>>,
{
    state: StartsOnState<Sch, S, R>,
    hop: Option<<Sch::Sender as SenderTo<StartsOnHopReceiver<Sch, S, R>>>::Operation>,
    _pin: PhantomPinned,
}

impl<Sch: Scheduler, S, R> SenderTo<R> for StartsOn<Sch, S>
where
    S: Sender + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
    Sch::Sender: SenderTo<StartsOnHopReceiver<Sch, S, R>>,
{
    type Operation = StartsOnOp<Sch, S, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        StartsOnOp {
            state: StartsOnState {
                shared: StartsOnShared { rcvr: UnsafeCell::new(Some(receiver)), sch: self.sch },
                sndr: UnsafeCell::new(Some(self.sndr)),
                child: UnsafeCell::new(None),
            },
            hop: None,
            _pin: PhantomPinned,
        }
    }
}

impl<Sch: Scheduler, S, R> OperationState for StartsOnOp<Sch, S, R>
where
    S: Sender + SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<S::Value, S::Error>,
    Sch::Sender: SenderTo<StartsOnHopReceiver<Sch, S, R>>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: fields are only addressed in place, never moved.
        let this = unsafe { self.get_unchecked_mut() };
        if this.hop.is_some() {
            return;
        }
        let rcvr = StartsOnHopReceiver { state: &this.state };
        // A panic in the user scheduler's `schedule` or in its sender's `connect` is
        // the completion: the child never runs.
        match catch(|| this.state.shared.sch.schedule().connect(rcvr)) {
            Ok(op) => {
                let hop = this.hop.insert(op);
                // SAFETY: pinned in place, started once.
                unsafe { Pin::new_unchecked(hop).start() };
            }
            Err(p) => {
                // The child never runs: it is dropped before the completion (a panic in
                // its drop loses to the first panic).
                // SAFETY: nothing else touches the slot: the child was not connected.
                let _ = discard(unsafe { (*this.state.sndr.get()).take() });
                this.state.shared.take_rcvr().set_panic(p)
            }
        }
    }
}
