//! `spawn_future` (P3149R6): start work in a scope now, consume its result later; and the
//! two-sided block it shares with [`into_awaitable`](crate::into_awaitable).
//!
//! The work and its consumer (the [`SpawnFuture`] sender, or the Rust future of
//! `into_awaitable`) share one heap block, a [`SpawnBlock`] whose head holds the work's
//! result, a stop source for the work, the association with the scope, and a
//! [`FutureCell`] that resolves the race between the work completing and the consumer
//! starting to wait, giving up, or going away. A count of references (the work's, the
//! consumer's, and one per stop request in progress) decides who frees the block.
//!
//! `FutureCell` states (bits of one atomic word):
//!
//! | bits | meaning |
//! |---|---|
//! | none | work running, consumer not waiting |
//! | `DONE` | result stored, consumer not waiting: it takes the result when it looks |
//! | `WAITING` | consumer waiting: its waiter (a job, or a `Waker`) is stored |
//! | `WAITING \| DONE` | the work took the waiter to notify it; the result is the consumer's |
//! | `ABANDONED` | consumer dropped or stopped before the work finished: the work's result is dropped with the block |
//! | `ABANDONED \| DONE` | both sides gone |
//!
//! A Rust future may be polled again with another waker: it takes its waiter back
//! (`WAITING` → none) and waits anew, unless `DONE` came first.

use std::marker::PhantomPinned;
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::Waker;

use crate::domain::NoDomain;
use crate::env::{EmptyEnv, Env};
use crate::job::JobRef;
use crate::outcome::{Outcome, outcome_completions};
use crate::panic::{Panic, discard};
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::{ForwardStop, ForwardTarget, InplaceStopSource, Invoke, RawStopCallback, StopToken};
use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

use super::spawn::{SpawnBlock, SpawnHead, apply_spawn};
use super::token::{Association, ScopeLifetime, ScopeToken};

const DONE: usize = 1;
const WAITING: usize = 2;
const ABANDONED: usize = 4;

/// How the consuming side waits for the work.
#[derive(Debug)]
pub(crate) enum Waiter {
    /// A job that completes the waiting operation (a [`SpawnFuture`]'s).
    Job(JobRef),
    /// The waker of the last poll of a Rust future.
    Waker(Waker),
}

impl Waiter {
    pub(crate) fn notify(self) {
        match self {
            Waiter::Job(job) => job.execute(),
            Waiter::Waker(waker) => waker.wake(),
        }
    }
}

/// The race between a spawned work's completion and its consumer (see the module docs).
pub(crate) struct FutureCell<T> {
    state: AtomicUsize,
    result: UnsafeCell<Option<T>>,
    waiter: UnsafeCell<Option<Waiter>>,
}

impl<T> FutureCell<T> {
    pub(crate) fn new() -> Self {
        FutureCell { state: AtomicUsize::new(0), result: UnsafeCell::new(None), waiter: UnsafeCell::new(None) }
    }

    /// The work side, once: stores the result. `Ok` with the waiter to notify if the
    /// consumer waits; `Err` with the result back if the consumer has gone (abandoned
    /// or stopped): the work side drops it, so that it dies before the work ends.
    pub(crate) fn complete(&self, value: T) -> Result<Option<Waiter>, T> {
        // SAFETY: until `DONE` is published only the work side touches the result.
        self.result.with_mut(|r| unsafe { *r = Some(value) });
        let old = self.state.fetch_or(DONE, Ordering::AcqRel);
        if old & ABANDONED != 0 {
            // SAFETY: the consumer gave up before `DONE` (acquired above), so it never
            // takes the result: the work side takes it back.
            Err(self.result.with_mut(|r| unsafe { (*r).take() }).expect("future result"))
        } else if old & WAITING != 0 {
            // SAFETY: written before `WAITING` was published (acquired above); the
            // consumer does not touch it again (it can no longer take it back).
            Ok(self.waiter.with_mut(|w| unsafe { (*w).take() }))
        } else {
            Ok(None)
        }
    }

    /// The consumer, when it starts to wait: `true` if the result is ready now (the
    /// caller takes it); otherwise `waiter` will be notified, unless the consumer takes it
    /// back first ([`cancel`](Self::cancel), [`unwait`](Self::unwait)).
    pub(crate) fn wait(&self, waiter: Waiter) -> bool {
        // SAFETY: the work side reads the waiter only after seeing `WAITING`, below.
        self.waiter.with_mut(|w| unsafe { *w = Some(waiter) });
        match self.state.compare_exchange(0, WAITING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => false,
            Err(old) => {
                debug_assert_eq!(old, DONE);
                // SAFETY: the work side will never look at the waiter (no `WAITING`).
                self.waiter.with_mut(|w| unsafe { *w = None });
                true
            }
        }
    }

    /// The consumer, after `wait` returned `false`, to wait with another waiter: takes
    /// the stored one back and returns `true`, or returns `false` if the work completed
    /// first (the result is ready; the old waiter is notified).
    pub(crate) fn unwait(&self) -> bool {
        if self.state.compare_exchange(WAITING, 0, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return false;
        }
        // SAFETY: without `WAITING` the work side will not read the waiter.
        self.waiter.with_mut(|w| unsafe { *w = None });
        true
    }

    /// The consumer, instead of waiting: it is dropped. Returns the work's result if
    /// it is already there (the consumer drops it); otherwise the work side drops it
    /// when it comes ([`complete`](Self::complete)).
    pub(crate) fn abandon(&self) -> Option<T> {
        if self.state.fetch_or(ABANDONED, Ordering::AcqRel) & DONE == 0 {
            return None;
        }
        // SAFETY: `DONE` was acquired: the work side no longer touches the result, and
        // the consumer has not taken it (it is abandoning instead).
        self.result.with_mut(|r| unsafe { (*r).take() })
    }

    /// The consumer, after `wait` returned `false`: gives up waiting (a stop request).
    /// `true` if it won (the work side drops its result when it comes); `false` if
    /// the work completed first and its notification is coming.
    pub(crate) fn cancel(&self) -> bool {
        self.state.compare_exchange(WAITING, WAITING | ABANDONED, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Takes the result, after `wait` returned `true`, `unwait` returned `false`, or the
    /// notification arrived.
    pub(crate) fn take(&self) -> T {
        // SAFETY: `DONE` was observed with acquire ordering by this side; the work side
        // no longer touches the result.
        self.result.with_mut(|r| unsafe { (*r).take() }).expect("future result")
    }
}

/// The part of the block the consumer sees: it does not know the operation's type.
#[repr(C)]
pub(crate) struct Header<V, E> {
    pub(crate) cell: FutureCell<Outcome<V, E>>,
    /// The work's stop source: the consumer's drop or stop, and the scope's stop, request
    /// stop here.
    stop: InplaceStopSource,
    /// The consumer's and the work's references to the block, plus one for each stop
    /// request in progress on `stop`; whoever drops the last frees the block.
    refs: AtomicUsize,
    /// Frees the whole block (the work's operation is already destroyed).
    free: unsafe fn(*const Header<V, E>),
}

impl<V, E> Header<V, E> {
    /// Drops one reference; the last one frees the block.
    ///
    /// # Safety
    ///
    /// The caller owns one reference, which it does not use again.
    pub(crate) unsafe fn release(this: *const Self) {
        // SAFETY: the caller's reference keeps the block alive until the decrement.
        if unsafe { (*this).refs.fetch_sub(1, Ordering::AcqRel) } == 1 {
            // SAFETY: no reference is left.
            unsafe { ((*this).free)(this) }
        }
    }

    /// The consumer gives up: requests stop on the work, marks the cell abandoned and
    /// gives up its reference. The consumer is dropped, so nobody waits: a panic of
    /// the work's stop callbacks, or of the result's drop, resumes here, after the
    /// reference is given up (and is dropped if this thread is already unwinding).
    ///
    /// # Safety
    ///
    /// The caller is the consumer, holds its reference, and does not use it again.
    pub(crate) unsafe fn abandon(this: *const Self) {
        // SAFETY: the consumer's reference keeps the block alive, through the stop
        // request, until the release.
        let panic = unsafe {
            let stopped = (*this).stop.request_stop_catching();
            let dropped = discard((*this).cell.abandon());
            Self::release(this);
            stopped.err().or(dropped.err())
        };
        if let Some(p) = panic
            && !std::thread::panicking()
        {
            p.resume();
        }
    }
}

/// A stop request on the work may complete the work, and then its consumer, inline,
/// and their references go with them, while the request still walks the block's stop
/// source: so it holds a reference of its own. A panic of the work's stop callbacks
/// goes to the scope, as a panic of the work would: the forwarder runs before the work
/// side deregisters it, so the association is still there.
// SAFETY: a reference keeps the block, and its stop source, alive until released.
unsafe impl<V, E, A: Association> ForwardTarget for Head<V, E, A> {
    type Hold = ();
    fn hold(&self) -> Option<()> {
        self.header.refs.fetch_add(1, Ordering::Relaxed);
        Some(())
    }
    fn request_stop(&self) {
        if let Err(p) = self.header.stop.request_stop_catching() {
            // The work side drops this callback (waiting for it) before it takes the
            // association out.
            self.assoc.report_panic(p);
        }
    }
    unsafe fn release(this: *const Self, (): ()) {
        // SAFETY: forwarded; the header heads the head.
        unsafe { Header::release(&raw const (*this).header) }
    }
}

/// The head of the block: what the work's receiver reaches, whatever the operation's type.
#[repr(C)]
pub(crate) struct Head<V, E, A> {
    pub(crate) header: Header<V, E>,
    /// Forwards the scope's stop to the work: registered on the association's stop token
    /// once the block is in place, and dropped before the association ends.
    scope_stop: Option<RawStopCallback<'static, ForwardStop>>,
    assoc: ManuallyDrop<A>,
    /// Drops the work's operation, in place.
    drop_op: unsafe fn(*mut Head<V, E, A>),
    _pin: PhantomPinned,
}

impl<V, E, A> SpawnHead for Head<V, E, A> {
    type Assoc = A;
    fn assoc(&mut self) -> &mut ManuallyDrop<A> {
        &mut self.assoc
    }
}

/// The block of a `spawn_future`: its head, then the work's operation.
type Block<V, E, A, Op> = SpawnBlock<Head<V, E, A>, Op>;

/// The operation of work `S` whose result goes to the two-sided block, in a scope whose
/// association is `A`.
pub(crate) type FutureWork<S, A> =
    <S as SenderTo<FutureReceiver<<S as Sender>::Value, <S as Sender>::Error, A>>>::Operation;

/// The two-sided block of work `S` in a scope whose association is `A`.
pub(crate) type WorkBlock<S, A> = Block<<S as Sender>::Value, <S as Sender>::Error, A, FutureWork<S, A>>;

/// Connects `sndr` in a fresh two-sided block with `assoc`, and forwards the scope's stop
/// requests to it. The work is not started; the block holds two references, the work's
/// and the consumer's.
///
/// # Panics
///
/// A panic in `connect` unwinds out of this call after the block is gone and the
/// association has ended (see [`SpawnBlock::connect`]).
pub(crate) fn connect_work<S, A>(sndr: S, assoc: A) -> NonNull<WorkBlock<S, A>>
where
    S: Sender + SenderTo<FutureReceiver<<S as Sender>::Value, <S as Sender>::Error, A>>,
    A: Association,
{
    type V<S> = <S as Sender>::Value;
    type E<S> = <S as Sender>::Error;
    let head = Head {
        header: Header {
            cell: FutureCell::new(),
            stop: InplaceStopSource::new(),
            refs: AtomicUsize::new(2),
            free: free_block::<V<S>, E<S>, A, FutureWork<S, A>>,
        },
        scope_stop: None,
        assoc: ManuallyDrop::new(assoc),
        drop_op: SpawnBlock::<Head<V<S>, E<S>, A>, FutureWork<S, A>>::drop_op,
        _pin: PhantomPinned,
    };
    let block = Block::connect(head, sndr, |head| FutureReceiver { head });
    let head = block.as_ptr().cast::<Head<V<S>, E<S>, A>>();
    // SAFETY: the block is a fresh, never-moving allocation. The scope's token borrows
    // the association, which stays in the block until the work side drops the callback
    // and then takes the association out; the forwarder's target, the header, outlives
    // the callback (`ForwardTarget` for `Header`), and the block's contents are `Send`.
    unsafe {
        let scope_token = std::mem::transmute::<StopToken<'_>, StopToken<'static>>((*head).assoc.forwarding_token());
        let forward = ForwardStop::new(head.cast_const());
        let cb = (*head).scope_stop.insert(RawStopCallback::new(scope_token, forward));
        Pin::new_unchecked(cb).register();
    }
    block
}

/// # Safety
///
/// `header` is the header of a live `Block<V, E, A, Op>` from `connect_work` whose
/// operation, stop callback and association are already gone; called once.
unsafe fn free_block<V, E, A, Op>(header: *const Header<V, E>) {
    let block = header.cast_mut().cast::<Block<V, E, A, Op>>();
    // SAFETY: the caller's contract; what is left of the head drops normally (the
    // operation is `MaybeUninit` and already dropped), then the block (from
    // `block::new`) is freed once.
    unsafe { crate::block::drop_and_free(NonNull::new_unchecked(block)) }
}

/// Ends the work side: destroys the operation, deregisters the scope's stop callback,
/// publishes `outcome` (or drops it, if the consumer has gone), dissociates, and then
/// notifies a waiting consumer.
///
/// # Safety
///
/// `head` is a live block's head whose operation is done or was never started; called
/// once.
unsafe fn finish_work<V, E, A: Association>(head: *mut Head<V, E, A>, outcome: Outcome<V, E>) {
    // SAFETY: the operation does not touch itself after calling its receiver, so it may
    // be destroyed; then the scope's stop callback is deregistered and the association
    // taken out, in that order, each exactly once.
    let assoc = unsafe {
        ((*head).drop_op)(head);
        (*head).scope_stop = None;
        ManuallyDrop::take(&mut (*head).assoc)
    };
    // SAFETY: the work's reference keeps the header alive until the release below.
    let header = unsafe { &raw const (*head).header };
    // DROP ORDER: a result nobody will consume may borrow what the scope protects (a
    // `let_async_scope`'s data, its caller's stack), so it is dropped before the
    // dissociation lets the scope's join complete. A result the consumer takes is
    // published first, and the consumer's notification comes after the dissociation:
    // its continuation is not scope work and may run long (or even join this very
    // scope).
    // SAFETY: as above.
    // A panic in the orphan's drop goes to the scope: nobody else waits for it.
    let waiter = match unsafe { (*header).cell.complete(outcome) } {
        Ok(waiter) => waiter,
        Err(orphan) => {
            if let Err(p) = discard(orphan) {
                assoc.report_panic(p);
            }
            None
        }
    };
    drop(assoc);
    if let Some(waiter) = waiter {
        waiter.notify();
    }
    // SAFETY: the work's reference, given up once.
    unsafe { Header::release(header) }
}

/// The receiver of the spawned work: publishes its completion in the block.
pub struct FutureReceiver<V, E, A> {
    head: *mut Head<V, E, A>,
}

// SAFETY: completes on any thread; the block's contents are `Send` (required by
// `spawn_future`), and the env is `Sync` (a stop source).
unsafe impl<V: Send, E: Send, A: Send> Send for FutureReceiver<V, E, A> {}
// SAFETY: a shared reference only reaches the env (the stop source, `Sync`).
unsafe impl<V, E, A> Sync for FutureReceiver<V, E, A> {}

impl<V, E, A: Association> FutureReceiver<V, E, A> {
    fn assoc_env(&self) -> &A::Env {
        // SAFETY: the association stays in the block until the work side finishes, which
        // consumes this receiver.
        unsafe { (*self.head).assoc.env() }
    }

    fn finish(self, outcome: Outcome<V, E>) {
        // SAFETY: the operation has completed (it called this receiver).
        unsafe { finish_work(self.head, outcome) }
    }
}

/// The environment of `spawn_future`d work: the scope's (for a `let_async_scope`, the
/// outer receiver's scheduler and queries), with the work's own stop token, which the
/// scope's stop and the consumer's drop or stop both reach.
impl<V, E, A: Association> Env for FutureReceiver<V, E, A> {
    type Scheduler = <A::Env as Env>::Scheduler;
    type Domain = <A::Env as Env>::Domain;
    fn scheduler(&self) -> Self::Scheduler {
        self.assoc_env().scheduler()
    }
    fn stop_token(&self) -> StopToken<'_> {
        // SAFETY: the block outlives the operation and hence this receiver.
        unsafe { (*self.head).header.stop.token() }
    }
    fn prop(&self, key: std::any::TypeId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.assoc_env().prop(key)
    }
}

impl<V, E, A: Association> Receiver<V, E> for FutureReceiver<V, E, A> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    outcome_completions!(finish);
}

/// The association of work that no scope tracks: the work of
/// [`into_awaitable`](crate::into_awaitable), which its future owns. Its environment is
/// empty (the work's stop token is the block's own), and it has no error or panic to
/// report (the future receives them).
#[derive(Debug)]
pub struct Detached(());

impl Detached {
    pub(crate) fn new() -> Self {
        Detached(())
    }
}

impl Association for Detached {
    type Error = std::convert::Infallible;
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn report_panic(&self, panic: Panic) {
        // The work's own panics go to the future. This one came after the future was
        // dropped (the drop of a result nobody takes): nobody waits, and std's panic
        // hook has already reported it where it was raised.
        drop(panic);
    }
    fn report_error(&self, error: Self::Error) {
        match error {}
    }
}

/// The sender returned by [`spawn_future`]: completes with the spawned work's result.
///
/// Dropping it (or dropping its operation before starting it) requests stop on the
/// work. A stop request on its receiver is forwarded to the work, and the future then
/// completes stopped at once (unless the work's result arrived first).
#[must_use = "dropping a SpawnFuture requests stop on its work"]
pub struct SpawnFuture<V, E> {
    header: Option<*const Header<V, E>>,
}

// SAFETY: the future only moves the result (`V`, `E`: `Send`) out of the block and uses
// the `Sync` cell and stop source.
unsafe impl<V: Send, E: Send> Send for SpawnFuture<V, E> {}
// SAFETY: `&SpawnFuture` gives access to nothing.
unsafe impl<V, E> Sync for SpawnFuture<V, E> {}

impl<V, E> std::fmt::Debug for SpawnFuture<V, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnFuture").field("associated", &self.header.is_some()).finish()
    }
}

impl<V, E> Drop for SpawnFuture<V, E> {
    fn drop(&mut self) {
        if let Some(header) = self.header.take() {
            // SAFETY: the future owns its side of the block and abandons it once.
            unsafe { Header::abandon(header) };
        }
    }
}

sender!([V, E] SpawnFuture<V, E> { value = V, error = E, stopped = true, domain = NoDomain });

impl<V, E, R: Receiver<V, E> + Send> SenderTo<R> for SpawnFuture<V, E> {
    type Operation = FutureOp<V, E, R>;
    fn connect(mut self, receiver: R) -> FutureOp<V, E, R> {
        FutureOp {
            header: self.header.take(),
            rcvr: Some(receiver),
            stop_cb: None,
            started: false,
            _pin: PhantomPinned,
        }
    }
}

/// Cancels a waiting future when its receiver's stop is requested.
struct CancelFuture<V, E, R: Receiver<V, E> + Send>(*const FutureOp<V, E, R>);

// SAFETY: the callback only runs `FutureOp::on_stop`, which is sound from any thread
// for a `Send` receiver.
unsafe impl<V, E, R: Receiver<V, E> + Send> Send for CancelFuture<V, E, R> {}

impl<V, E, R: Receiver<V, E> + Send> Invoke for CancelFuture<V, E, R> {
    fn invoke(self) {
        // SAFETY: the operation is alive while its callback is registered.
        unsafe { FutureOp::on_stop(self.0) }
    }
}

/// The operation state of a [`SpawnFuture`].
pub struct FutureOp<V, E, R: Receiver<V, E> + Send> {
    header: Option<*const Header<V, E>>,
    rcvr: Option<R>,
    stop_cb: Option<RawStopCallback<'static, CancelFuture<V, E, R>>>,
    started: bool,
    _pin: PhantomPinned,
}

// SAFETY: the receiver and the result types are `Send`; the block is shared through its
// synchronized cell.
unsafe impl<V: Send, E: Send, R: Receiver<V, E> + Send> Send for FutureOp<V, E, R> {}

impl<V, E, R: Receiver<V, E> + Send> FutureOp<V, E, R> {
    /// Completes with the result and frees the block.
    ///
    /// # Safety
    ///
    /// `this` is a started operation whose cell yielded the result to this side; called
    /// once, not from inside its own stop callback.
    unsafe fn deliver(this: *mut Self) {
        // SAFETY: the caller's contract; the stop callback is dropped first (waiting for
        // it if it runs on another thread), so nothing else touches the operation.
        let (header, rcvr) = unsafe {
            (*this).stop_cb = None;
            ((*this).header.take().expect("future header"), (*this).rcvr.take().expect("future receiver"))
        };
        // SAFETY: the result is this side's now; then the future's reference goes.
        let outcome = unsafe {
            let outcome = (*header).cell.take();
            Header::release(header);
            outcome
        };
        outcome.deliver(rcvr)
    }

    /// The work's notification.
    ///
    /// # Safety
    ///
    /// As `deliver`; `data` is the operation.
    unsafe fn notified(data: *const (), (): ()) {
        // SAFETY: forwarded.
        unsafe { Self::deliver(data.cast_mut().cast::<Self>()) }
    }

    /// The receiver's stop request: forward it to the work, and complete stopped if the
    /// work has not completed yet.
    ///
    /// # Safety
    ///
    /// `this` is a started operation whose stop callback is running this.
    unsafe fn on_stop(this: *const Self) {
        // SAFETY: the future's reference keeps the block alive while this side has not
        // finished.
        let header = unsafe { (*this).header }.expect("future header");
        // SAFETY: as above.
        if !unsafe { (*header).cell.cancel() } {
            // The work completed first: its notification delivers the result (it waits
            // for this callback before touching the operation).
            return;
        }
        // This side won: it completes the operation stopped (or with the panic of one
        // of the work's stop callbacks). First it asks the work to stop, under the
        // future's reference (the work may complete inline inside the request); then it
        // gives the reference up. The callback drops its own registration, which is
        // allowed from inside it.
        // SAFETY: as above; nothing touches the operation after its receiver is called.
        unsafe {
            let stopped = (*header).stop.request_stop_catching();
            let this = this.cast_mut();
            (*this).header = None;
            (*this).stop_cb = None;
            Header::release(header);
            let rcvr = (*this).rcvr.take().expect("future receiver");
            match stopped {
                Ok(_) => rcvr.set_stopped(),
                Err(p) => rcvr.set_panic(p),
            }
        }
    }
}

impl<V, E, R: Receiver<V, E> + Send> Drop for FutureOp<V, E, R> {
    fn drop(&mut self) {
        if !self.started
            && let Some(header) = self.header.take()
        {
            // SAFETY: never started: this side abandons its block once.
            unsafe { Header::abandon(header) };
        }
    }
}

impl<V, E, R: Receiver<V, E> + Send> OperationState for FutureOp<V, E, R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: the operation stays pinned until completion (start's contract).
        let this: *mut Self = unsafe { self.get_unchecked_mut() };
        // SAFETY: exclusive access until the waiter is published.
        unsafe { (*this).started = true };
        // SAFETY: as above.
        let Some(header) = (unsafe { (*this).header }) else {
            // Unassociated: the scope refused the work.
            // SAFETY: as above.
            return unsafe { (*this).rcvr.take() }.expect("future receiver").set_stopped();
        };
        // SAFETY: as above; the token borrows the receiver's env, which lives in this
        // pinned operation and outlives the callback (dropped in `deliver`/`on_stop`, or
        // by the operation's drop, before the receiver).
        unsafe {
            let token = (*this).rcvr.as_ref().expect("future receiver").env().stop_token();
            let token = std::mem::transmute::<StopToken<'_>, StopToken<'static>>(token);
            let cb = (*this).stop_cb.insert(RawStopCallback::new(token, CancelFuture(this)));
            // Registering may run the callback inline (stop already requested): it cannot
            // cancel yet (not waiting), but it forwards the stop to the work.
            Pin::new_unchecked(cb).register();
        }
        // SAFETY: the operation stays alive until the notification completes it, on any
        // thread (the receiver is `Send`).
        let waiter = unsafe { JobRef::new(this.cast_const(), Self::notified) };
        // SAFETY: the block is alive; this side has not finished.
        if unsafe { (*header).cell.wait(Waiter::Job(waiter)) } {
            // SAFETY: the result is ours.
            unsafe { Self::deliver(this) };
        }
    }
}

/// Starts `sndr` now, associated with `token`'s scope, and returns a sender of its result
/// (P3149R6 `spawn_future`). Any value and error types are allowed.
///
/// If the scope refuses (closed or joined), `sndr` is dropped and the future completes
/// stopped. The work's stop token fires when the future is dropped (or its operation is
/// dropped unstarted), when the future's receiver requests stop, or when a
/// [`CountingScope`](crate::CountingScope) requests stop. A panic in the work reaches
/// the future's receiver.
///
/// # Panics
///
/// A panic in `connect` (user sender or scheduler code) unwinds out of `spawn_future`
/// after the association has ended, as for [`spawn`](crate::spawn()).
///
/// ```
/// use senders::{CountingScope, StaticThreadPool, schedule, spawn_future, sync_wait, SenderExt};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let scope = CountingScope::new();
/// let fut = spawn_future(schedule(&pool.scheduler()).then(|()| 6 * 7), scope.token());
/// assert_eq!(sync_wait(fut).unwrap(), Some(42));
/// sync_wait(scope.join()).unwrap();
/// ```
pub fn spawn_future<'scope, S, Tk>(sndr: S, token: Tk) -> SpawnFuture<S::Value, S::Error>
where
    S: Sender + 'scope,
    S::Value: Send + 'scope,
    S::Error: Send + 'scope,
    Tk: ScopeLifetime<'scope>,
    S: SenderTo<FutureReceiver<<S as Sender>::Value, <S as Sender>::Error, Tk::Association>> + Send,
    FutureWork<S, Tk::Association>: Send,
{
    type Work<S, Tk> = FutureWork<S, <Tk as ScopeToken>::Association>;
    type H<S, Tk> = Head<<S as Sender>::Value, <S as Sender>::Error, <Tk as ScopeToken>::Association>;

    let Some(assoc) = token.try_associate() else {
        return SpawnFuture { header: None };
    };
    let block = connect_work(sndr, assoc);
    // The header is the head's first field, the head the block's (`repr(C)`).
    let header = block.as_ptr().cast_const().cast::<Header<S::Value, S::Error>>();
    // SAFETY: the block is handed out once; its operation and association are `Send`
    // (this function's bounds), and discarding it ends the work stopped.
    let op = unsafe {
        SpawnBlock::<H<S, Tk>, Work<S, Tk>>::into_spawned(block, discard_work::<S::Value, S::Error, Tk::Association>)
    };
    apply_spawn::<S>(op);
    SpawnFuture { header: Some(header) }
}

/// Ends unstarted work: it completes stopped.
///
/// # Safety
///
/// `block` is an unstarted block from `connect_work` with this head type; called once.
unsafe fn discard_work<V, E, A: Association>(block: *const ()) {
    // SAFETY: forwarded; the operation was never started.
    unsafe { finish_work(block.cast_mut().cast::<Head<V, E, A>>(), Outcome::Stopped) }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The `FutureCell` race under loom: the work completing against its consumer
    //! waiting, giving up, being stopped, or waiting again with another waker. The
    //! result is delivered at most once, exactly when the consumer did not give up, and
    //! a consumer that waits is never left without a notification.
    use super::*;
    use crate::sync::{Arc, thread};
    use loom::sync::atomic::AtomicUsize as Count;

    /// What the model's waiters report to.
    struct Model {
        cell: FutureCell<u32>,
        delivered: Count,
    }

    /// A job waiter: takes the result and delivers it, as `FutureOp::notified` does.
    unsafe fn notified(data: *const (), (): ()) {
        // SAFETY: `data` is the model, alive until the end.
        let m = unsafe { &*data.cast::<Model>() };
        assert_eq!(m.cell.take(), 7);
        m.delivered.fetch_add(1, Ordering::AcqRel);
    }

    fn model() -> Arc<Model> {
        Arc::new(Model { cell: FutureCell::new(), delivered: Count::new(0) })
    }

    /// The work side; its thread returns `true` if the result came back to it (the
    /// consumer had gone), to be dropped there.
    fn work(m: &Arc<Model>) -> thread::JoinHandle<bool> {
        let m = m.clone();
        thread::spawn(move || match m.cell.complete(7) {
            Ok(waiter) => {
                waiter.map(Waiter::notify);
                false
            }
            Err(orphan) => {
                assert_eq!(orphan, 7);
                true
            }
        })
    }

    fn job_waiter(m: &Arc<Model>) -> Waiter {
        // SAFETY: the model outlives every thread.
        Waiter::Job(unsafe { JobRef::new(Arc::as_ptr(m), notified) })
    }

    /// A waker that counts its wakes, as an executor's would schedule a poll.
    struct CountWakes(Count);
    impl std::task::Wake for CountWakes {
        fn wake(self: std::sync::Arc<Self>) {
            self.0.fetch_add(1, Ordering::AcqRel);
        }
    }

    fn waker() -> (std::sync::Arc<CountWakes>, Waiter) {
        let wakes = std::sync::Arc::new(CountWakes(Count::new(0)));
        (wakes.clone(), Waiter::Waker(Waker::from(wakes)))
    }

    #[test]
    fn completion_racing_wait() {
        loom::model(|| {
            let m = model();
            let w = work(&m);
            if m.cell.wait(job_waiter(&m)) {
                assert_eq!(m.cell.take(), 7);
                m.delivered.fetch_add(1, Ordering::AcqRel);
            }
            w.join().unwrap();
            assert_eq!(m.delivered.load(Ordering::Acquire), 1);
        });
    }

    #[test]
    fn completion_racing_abandon() {
        loom::model(|| {
            let m = model();
            let w = work(&m);
            let consumer_drops = m.cell.abandon().is_some();
            let work_drops = w.join().unwrap();
            assert_eq!(m.delivered.load(Ordering::Acquire), 0);
            // Exactly one side holds the orphaned result and drops it; nothing is left
            // in the cell to be dropped with the block.
            assert!(consumer_drops != work_drops, "the orphaned result has no single owner");
            // SAFETY: both sides are done with the cell.
            assert!(m.cell.result.with_mut(|r| unsafe { (*r).is_none() }));
        });
    }

    #[test]
    fn completion_racing_a_stop_request_after_wait() {
        loom::model(|| {
            let m = model();
            let w = work(&m);
            let mut stopped = false;
            if m.cell.wait(job_waiter(&m)) {
                assert_eq!(m.cell.take(), 7);
                m.delivered.fetch_add(1, Ordering::AcqRel);
            } else {
                // The receiver's stop request arrives while waiting.
                stopped = m.cell.cancel();
            }
            let work_drops = w.join().unwrap();
            // Either the future completed stopped or it got the result; never both, never
            // neither. A stopped future's result comes back to the work side.
            assert_eq!(m.delivered.load(Ordering::Acquire) + usize::from(stopped), 1);
            assert_eq!(stopped, work_drops);
        });
    }

    /// A Rust future polled twice, with a new waker the second time, while the work
    /// completes: the result is taken once, and if the second poll left it waiting, the
    /// second waker was woken.
    #[test]
    fn completion_racing_a_second_poll_with_another_waker() {
        loom::model(|| {
            let m = model();
            let w = work(&m);
            let (_first, waiter) = waker();
            let mut taken = m.cell.wait(waiter);
            let mut second = None;
            if !taken {
                // The second poll: take the first waker back and wait with another.
                taken = if m.cell.unwait() {
                    let (wakes, waiter) = waker();
                    second = Some(wakes);
                    m.cell.wait(waiter)
                } else {
                    true
                };
            }
            w.join().unwrap();
            if !taken {
                let woken = second.as_ref().map_or(0, |wakes| wakes.0.load(Ordering::Acquire));
                assert_eq!(woken, 1, "the waker the future waits with was not woken");
            }
            // The poll that follows (or this one) takes the result, once.
            assert_eq!(m.cell.take(), 7);
        });
    }
}
