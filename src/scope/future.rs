//! `spawn_future` (P3149R6): start work in a scope now, consume its result later.
//!
//! The work and the returned [`SpawnFuture`] share one heap block: the work's operation,
//! its result, a stop source for the work, and a [`FutureCell`] that resolves the race
//! between the work completing and the future being started, dropped or stopped.
//!
//! `FutureCell` states (bits of one atomic word):
//!
//! | bits | meaning | who frees the block |
//! |---|---|---|
//! | none | work running, future not started | — |
//! | `DONE` | result stored, future not started | the future (when started or dropped) |
//! | `WAITING` | future started and waiting | — |
//! | `WAITING \| DONE` | the work notified the waiting future | the future, after completing |
//! | `ABANDONED` | future dropped or stopped before the work finished | the work, when done |
//! | `ABANDONED \| DONE` | both sides gone | whoever set the second bit |

use std::marker::PhantomPinned;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::pin::Pin;
use std::ptr::NonNull;

use crate::domain::{Domain, EarlyDomain, NoDomain};
use crate::env::Env;
use crate::outcome::Outcome;
use crate::panic::Panic;
use crate::receiver::Receiver;
use crate::scheduler::NoScheduler;
use crate::sender::{OperationState, Sender, SenderTo};
use crate::spawn::SpawnedOp;
use crate::stop::{InplaceStopSource, Invoke, RawStopCallback, StopToken};
use crate::sync::{AtomicUsize, Ordering, UnsafeCell};

use super::counter::Waiter;
use super::token::{Association, ScopeLifetime, ScopeToken};

const DONE: usize = 1;
const WAITING: usize = 2;
const ABANDONED: usize = 4;

/// The work side's next step after publishing its result.
#[derive(Debug)]
pub(crate) enum AfterComplete {
    /// The future waits: notify it (it takes the result and frees the block).
    Notify(Waiter),
    /// The future is gone: free the block.
    Free,
    /// The future has not started: it will take the result (or free it) later.
    Nothing,
}

/// The race between a spawned work's completion and its future (see the module docs).
pub(crate) struct FutureCell<T> {
    state: AtomicUsize,
    result: UnsafeCell<Option<T>>,
    waiter: UnsafeCell<Option<Waiter>>,
}

impl<T> FutureCell<T> {
    pub(crate) fn new() -> Self {
        FutureCell { state: AtomicUsize::new(0), result: UnsafeCell::new(None), waiter: UnsafeCell::new(None) }
    }

    /// The work side, once: stores the result and learns what to do next.
    pub(crate) fn complete(&self, value: T) -> AfterComplete {
        // SAFETY: until `DONE` is published only the work side touches the result.
        self.result.with_mut(|r| unsafe { *r = Some(value) });
        let old = self.state.fetch_or(DONE, Ordering::AcqRel);
        if old & ABANDONED != 0 {
            AfterComplete::Free
        } else if old & WAITING != 0 {
            // SAFETY: written before `WAITING` was published (acquired above), never again.
            AfterComplete::Notify(self.waiter.with_mut(|w| unsafe { (*w).take() }).expect("future waiter"))
        } else {
            AfterComplete::Nothing
        }
    }

    /// The future side, once, when started: `true` if the result is ready now (the
    /// caller takes it and frees the block); otherwise `waiter` will be notified, unless
    /// a [`cancel`](Self::cancel) wins first.
    pub(crate) fn start(&self, waiter: Waiter) -> bool {
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

    /// The future side, instead of `start`: it is dropped. `true` if the work is done and
    /// the caller must free the block.
    pub(crate) fn abandon(&self) -> bool {
        self.state.fetch_or(ABANDONED, Ordering::AcqRel) & DONE != 0
    }

    /// The future side, after `start` returned `false`: gives up waiting (a stop
    /// request). `true` if it won (the work side frees the block later); `false` if the
    /// work completed first and its notification is coming.
    pub(crate) fn cancel(&self) -> bool {
        self.state.compare_exchange(WAITING, WAITING | ABANDONED, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Takes the result, after `start` returned `true` or the notification arrived.
    pub(crate) fn take(&self) -> T {
        // SAFETY: `DONE` was observed with acquire ordering by this side; the work side
        // no longer touches the result.
        self.result.with_mut(|r| unsafe { (*r).take() }).expect("future result")
    }
}

/// The part of the block the future sees: it does not know the operation's type.
#[repr(C)]
struct Header<V, E> {
    cell: FutureCell<Outcome<V, E>>,
    /// The work's stop source: the future's drop or stop, and the scope's stop, request
    /// stop here.
    stop: InplaceStopSource,
    /// The future's and the work's references to the block, plus one for each stop
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
    unsafe fn release(this: *const Self) {
        // SAFETY: the caller's reference keeps the block alive until the decrement.
        if unsafe { (*this).refs.fetch_sub(1, Ordering::AcqRel) } == 1 {
            // SAFETY: no reference is left.
            unsafe { ((*this).free)(this) }
        }
    }

    /// Requests stop on the work, holding a reference across the request: it may
    /// complete the work, and then the future, inline, and their references go with
    /// them, while the request still walks the block's stop source.
    ///
    /// # Safety
    ///
    /// The block is alive (the caller holds a reference, or a stop callback on it that
    /// the work drops before giving up its own).
    unsafe fn stop_work(this: *const Self) {
        // SAFETY: the caller's contract.
        unsafe {
            (*this).refs.fetch_add(1, Ordering::Relaxed);
            (*this).stop.request_stop();
            Self::release(this);
        }
    }
}

/// Forwards the scope's stop request to the work (the scope's stop callback).
struct ForwardToWork {
    header: *const (),
    stop: unsafe fn(*const ()),
}

// SAFETY: the block's contents are `Send` (required by `spawn_future`); the work drops
// this callback (waiting for it if it runs) before it gives up its reference.
unsafe impl Send for ForwardToWork {}

impl Invoke for ForwardToWork {
    fn invoke(self) {
        // SAFETY: as above.
        unsafe { (self.stop)(self.header) }
    }
}

/// # Safety
///
/// `header` is a live `Header<V, E>` (see `ForwardToWork`).
unsafe fn forward_to_work<V, E>(header: *const ()) {
    // SAFETY: the caller's contract.
    unsafe { Header::stop_work(header.cast::<Header<V, E>>()) }
}

/// The work side's part of the block, whatever the operation's type.
#[repr(C)]
struct Head<V, E, A> {
    header: Header<V, E>,
    /// Registered on the association's stop token; dropped before the association.
    scope_stop: ManuallyDrop<RawStopCallback<'static, ForwardToWork>>,
    assoc: ManuallyDrop<A>,
}

#[repr(C)]
struct Block<V, E, A, Op> {
    head: Head<V, E, A>,
    op: MaybeUninit<Op>,
    _pin: PhantomPinned,
}

/// # Safety
///
/// `header` is the header of a live `Block<V, E, A, Op>` from `spawn_future` whose
/// operation, stop callback and association are already gone; called once.
unsafe fn free_block<V, E, A, Op>(header: *const Header<V, E>) {
    let block = header.cast_mut().cast::<Block<V, E, A, Op>>();
    // SAFETY: the caller's contract; the remaining fields drop normally, then the block
    // (from `block::new`) is freed once.
    unsafe { crate::block::drop_and_free(NonNull::new_unchecked(block)) }
}

/// # Safety
///
/// `head` is the head of a `Block<V, E, A, Op>` whose operation is initialized and will
/// not be touched again; called once.
unsafe fn drop_op<V, E, A, Op>(head: *mut Head<V, E, A>) {
    // SAFETY: the caller's contract.
    unsafe { (*head.cast::<Block<V, E, A, Op>>()).op.assume_init_drop() }
}

/// Ends the work side: destroys the operation, deregisters the scope's stop callback,
/// dissociates, then publishes `outcome`.
///
/// # Safety
///
/// `head` is a live block's head whose operation (to be destroyed by `drop_op`) is done
/// or was never started; called once.
unsafe fn finish_work<V, E, A: Association>(
    head: *mut Head<V, E, A>,
    drop_op: unsafe fn(*mut Head<V, E, A>),
    outcome: Outcome<V, E>,
) {
    // SAFETY: the operation does not touch itself after calling its receiver, so it may
    // be destroyed; then the scope's stop callback is deregistered and the association
    // taken out, in that order, each exactly once.
    let assoc = unsafe {
        drop_op(head);
        ManuallyDrop::drop(&mut (*head).scope_stop);
        ManuallyDrop::take(&mut (*head).assoc)
    };
    // Dissociate before publishing: the future's continuation is not scope work and may
    // run long (or even join this very scope).
    drop(assoc);
    // SAFETY: the work's reference keeps the header alive until the release below.
    let header = unsafe { &raw const (*head).header };
    // SAFETY: as above.
    if let AfterComplete::Notify(waiter) = unsafe { (*header).cell.complete(outcome) } {
        waiter.notify();
    }
    // SAFETY: the work's reference, given up once.
    unsafe { Header::release(header) }
}

/// The receiver of the spawned work.
pub struct FutureReceiver<V, E, A> {
    head: *mut Head<V, E, A>,
    drop_op: unsafe fn(*mut Head<V, E, A>),
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
        unsafe { finish_work(self.head, self.drop_op, outcome) }
    }
}

/// The environment of `spawn_future`d work: the scope's (for a `let_async_scope`, the
/// outer receiver's scheduler and queries), with the work's own stop token, which the
/// scope's stop and the future's drop or stop both reach.
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
    fn set_value(self, value: V) {
        self.finish(Outcome::Value(value))
    }
    fn set_error(self, error: E) {
        self.finish(Outcome::Error(error))
    }
    fn set_stopped(self) {
        self.finish(Outcome::Stopped)
    }
    fn set_panic(self, panic: Panic) {
        self.finish(Outcome::Panic(panic))
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

/// Abandons the work behind `header`: requests stop, and frees the block if the work is
/// already done.
///
/// # Safety
///
/// `header` is a live block's header, and the caller is the future side, abandoning once.
unsafe fn abandon<V, E>(header: *const Header<V, E>) {
    // SAFETY: the future's reference keeps the block alive until the release; the work
    // frees nothing while it is held.
    unsafe {
        (*header).stop.request_stop();
        (*header).cell.abandon();
        Header::release(header);
    }
}

impl<V, E> Drop for SpawnFuture<V, E> {
    fn drop(&mut self) {
        if let Some(header) = self.header.take() {
            // SAFETY: the future owns its side of the block and abandons it once.
            unsafe { abandon(header) };
        }
    }
}

impl<V, E> Sender for SpawnFuture<V, E> {
    type Value = V;
    type Error = E;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

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
    unsafe fn notified(data: *const ()) {
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
        // This side won: it completes the operation stopped. First it asks the work to
        // stop, under the future's reference (the work may complete inline inside the
        // request); then it gives the reference up. The callback drops its own
        // registration, which is allowed from inside it.
        // SAFETY: as above; nothing touches the operation after its receiver is called.
        unsafe {
            (*header).stop.request_stop();
            let this = this.cast_mut();
            (*this).header = None;
            (*this).stop_cb = None;
            Header::release(header);
            (*this).rcvr.take().expect("future receiver").set_stopped();
        }
    }
}

impl<V, E, R: Receiver<V, E> + Send> Drop for FutureOp<V, E, R> {
    fn drop(&mut self) {
        if !self.started
            && let Some(header) = self.header.take()
        {
            // SAFETY: never started: this side abandons its block once.
            unsafe { abandon(header) };
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
        // SAFETY: as above.
        let waiter = unsafe { Waiter::new(this.cast_const().cast(), Self::notified) };
        // SAFETY: the block is alive; this side has not finished.
        if unsafe { (*header).cell.start(waiter) } {
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
    <S as SenderTo<FutureReceiver<<S as Sender>::Value, <S as Sender>::Error, Tk::Association>>>::Operation: Send,
{
    type Op<S, Tk> = <S as SenderTo<
        FutureReceiver<<S as Sender>::Value, <S as Sender>::Error, <Tk as ScopeToken>::Association>,
    >>::Operation;
    type V<S> = <S as Sender>::Value;
    type E<S> = <S as Sender>::Error;
    type A<Tk> = <Tk as ScopeToken>::Association;

    let Some(assoc) = token.try_associate() else {
        return SpawnFuture { header: None };
    };
    let block: *mut Block<V<S>, E<S>, A<Tk>, Op<S, Tk>> = crate::block::new(Block {
        head: Head {
            header: Header {
                cell: FutureCell::new(),
                stop: InplaceStopSource::new(),
                refs: AtomicUsize::new(2),
                free: free_block::<V<S>, E<S>, A<Tk>, Op<S, Tk>>,
            },
            scope_stop: ManuallyDrop::new(RawStopCallback::new(
                StopToken::never(),
                ForwardToWork { header: std::ptr::null(), stop: forward_to_work::<V<S>, E<S>> },
            )),
            assoc: ManuallyDrop::new(assoc),
        },
        op: MaybeUninit::uninit(),
        _pin: PhantomPinned,
    })
    .as_ptr();
    let head = block.cast::<Head<V<S>, E<S>, A<Tk>>>();
    let rcvr = FutureReceiver { head, drop_op: drop_op::<V<S>, E<S>, A<Tk>, Op<S, Tk>> };
    let op = match crate::panic::catch(|| sndr.connect(rcvr)) {
        Ok(op) => op,
        Err(panic) => {
            // Nothing is registered or written yet: take the association back out, drop
            // the rest of the block and free it, end the association, and let the
            // caller see the panic (as `spawn` does).
            // SAFETY: `block` came from `block::new` with this type; the association is
            // moved out once; the stop callback was never registered and owns nothing;
            // the other fields are dropped once, in place.
            let assoc = unsafe {
                crate::block::free_after(NonNull::new_unchecked(block), || {
                    let assoc = ManuallyDrop::take(&mut (*head).assoc);
                    std::ptr::drop_in_place(block);
                    assoc
                })
            };
            drop(assoc);
            panic.resume();
        }
    };
    // SAFETY: the block is a fresh, never-moving allocation. The scope's token borrows
    // the association, which stays in the block until the work side drops the callback
    // and then takes the association out.
    unsafe {
        let scope_token = std::mem::transmute::<StopToken<'_>, StopToken<'static>>((*head).assoc.env().stop_token());
        let header = (&raw const (*head).header).cast::<()>();
        *(*head).scope_stop =
            RawStopCallback::new(scope_token, ForwardToWork { header, stop: forward_to_work::<V<S>, E<S>> });
        Pin::new_unchecked(&mut *(*head).scope_stop).register();
        (*block).op.write(op);
    }
    let op = SpawnedOp {
        ptr: block.cast(),
        start: start_block::<V<S>, E<S>, A<Tk>, Op<S, Tk>>,
        discard: discard_block::<V<S>, E<S>, A<Tk>, Op<S, Tk>>,
    };
    EarlyDomain::<S>::default().apply_spawn(op);
    SpawnFuture { header: Some(head.cast_const().cast()) }
}

/// # Safety
///
/// `block` is an unstarted `Block<V, E, A, Op>` from `spawn_future`; called once.
unsafe fn start_block<V, E, A, Op: OperationState>(block: *const ()) {
    // SAFETY: the block is alive until both sides are done, and never moves.
    unsafe { Pin::new_unchecked((*block.cast_mut().cast::<Block<V, E, A, Op>>()).op.assume_init_mut()).start() }
}

/// # Safety
///
/// As `start_block`, for work that will never be started: it ends stopped.
unsafe fn discard_block<V, E, A: Association, Op>(block: *mut ()) {
    // SAFETY: forwarded; the operation was never started.
    unsafe { finish_work(block.cast::<Head<V, E, A>>(), drop_op::<V, E, A, Op>, Outcome::Stopped) }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The `spawn_future` race under loom: the work completing against the future
    //! starting, being dropped, or being stopped. Exactly one side frees the block, and
    //! the result is delivered at most once, exactly when the future did not give up.
    use super::*;
    use crate::sync::{Arc, thread};
    use loom::sync::atomic::AtomicUsize as Count;

    /// What the model's `Waiter` reports to.
    struct Model {
        cell: FutureCell<u32>,
        frees: Count,
        delivered: Count,
    }

    unsafe fn notified(data: *const ()) {
        // SAFETY: `data` is the model, alive until the end.
        let m = unsafe { &*data.cast::<Model>() };
        assert_eq!(m.cell.take(), 7);
        m.delivered.fetch_add(1, Ordering::AcqRel);
        m.frees.fetch_add(1, Ordering::AcqRel);
    }

    fn model() -> Arc<Model> {
        Arc::new(Model { cell: FutureCell::new(), frees: Count::new(0), delivered: Count::new(0) })
    }

    fn work(m: &Arc<Model>) -> thread::JoinHandle<()> {
        let m = m.clone();
        thread::spawn(move || match m.cell.complete(7) {
            AfterComplete::Notify(w) => w.notify(),
            AfterComplete::Free => {
                m.frees.fetch_add(1, Ordering::AcqRel);
            }
            AfterComplete::Nothing => {}
        })
    }

    fn waiter(m: &Arc<Model>) -> Waiter {
        // SAFETY: the model outlives every thread.
        unsafe { Waiter::new(Arc::as_ptr(m).cast(), notified) }
    }

    #[test]
    fn completion_racing_start() {
        loom::model(|| {
            let m = model();
            let w = work(&m);
            if m.cell.start(waiter(&m)) {
                assert_eq!(m.cell.take(), 7);
                m.delivered.fetch_add(1, Ordering::AcqRel);
                m.frees.fetch_add(1, Ordering::AcqRel);
            }
            w.join().unwrap();
            assert_eq!(m.delivered.load(Ordering::Acquire), 1);
            assert_eq!(m.frees.load(Ordering::Acquire), 1);
        });
    }

    #[test]
    fn completion_racing_drop() {
        loom::model(|| {
            let m = model();
            let w = work(&m);
            if m.cell.abandon() {
                m.frees.fetch_add(1, Ordering::AcqRel);
            }
            w.join().unwrap();
            assert_eq!(m.delivered.load(Ordering::Acquire), 0);
            assert_eq!(m.frees.load(Ordering::Acquire), 1);
        });
    }

    #[test]
    fn completion_racing_a_stop_request_after_start() {
        loom::model(|| {
            let m = model();
            let w = work(&m);
            let mut stopped = false;
            if m.cell.start(waiter(&m)) {
                assert_eq!(m.cell.take(), 7);
                m.delivered.fetch_add(1, Ordering::AcqRel);
                m.frees.fetch_add(1, Ordering::AcqRel);
            } else {
                // The receiver's stop request arrives while waiting.
                stopped = m.cell.cancel();
            }
            w.join().unwrap();
            // Either the future completed stopped (and the work freed the block) or it got
            // the result; never both, never neither.
            assert_eq!(m.delivered.load(Ordering::Acquire) + usize::from(stopped), 1);
            assert_eq!(m.frees.load(Ordering::Acquire), 1);
        });
    }
}
