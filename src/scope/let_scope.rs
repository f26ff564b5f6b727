//! `let_async_scope` (P3296): a scope that is always joined, whose work may borrow.
//!
//! When the predecessor completes with a value, the operation keeps the value in its
//! own (pinned) state, acquires a scope core (the same sharded counter and stop source
//! as a [`CountingScope`](crate::CountingScope)), and calls the user's function with a
//! [`LetScopeToken`] and `&mut` the value. The sender the function returns is nested in
//! the scope and started; then the operation joins the scope. It completes only when
//! the count reaches zero, so every piece of work associated through the token (at any
//! depth, from any thread) has completed and been destroyed first.
//!
//! | event | what happens |
//! |---|---|
//! | predecessor: value | scope opened, function called, its sender nested and started, join started |
//! | predecessor: error, stopped, panic | forwarded; no scope is made |
//! | function panics (before or after spawning) | stop requested on the scope, join, then `set_panic` |
//! | spawned work or the returned sender: error | first error kept, stop requested; after the join, `set_error` |
//! | spawned work or the returned sender: panic | first panic kept, stop requested; after the join, `set_panic` |
//! | outer stop request | forwarded to the scope's stop source, which all nested work sees |
//! | count reaches zero | hop onto the outer scheduler (inline if there is none), then complete: panic, else error, else the returned sender's value or stop |
//!
//! Borrowing is sound because the token's lifetime `'s` is higher-ranked (the function
//! must work for every `'s`), invariant, and bounded by `'env` (what the
//! `let_async_scope` sender itself borrows). Work spawned through the token must live
//! for `'s`, so it may borrow the value and anything the function captured by
//! reference, but not the function's locals. The operation cannot complete, and so
//! cannot be dropped, before the join; and it is started only by a blocking root or by
//! an owner that itself waits (see `docs/DESIGN.md` §5.2).

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;
use std::ptr::NonNull;

use crate::adaptors::channels::WithError;
use crate::domain::NoDomain;
use crate::env::{EmptyEnv, Env};
use crate::factories::just::{Just, just};
use crate::job::JobRef;
use crate::outcome::Outcome;
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::scheduler::{MaybeScheduler, NoScheduler, Scheduler};
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::{ForwardStop, ForwardTarget, RawStopCallback, StopToken};
use crate::sync::{self, AtomicBool, Ordering};

use super::core::ScopeCore;
use super::counter::{Home, JoinStart};
use super::shard_index;
use super::token::{Association, ScopeLifetime, ScopeToken};

/// Makes a type invariant in `'a`.
type Invariant<'a> = fn(&'a ()) -> &'a ();

/// A cell for a value written once inside a pinned operation.
type OpCell<T> = UnsafeCell<Option<T>>;

/// What the function given to `let_async_scope` may return: a sender, or `()` (which
/// means `just(())`). The sender's error must convert into the scope's error `E`.
pub trait IntoScopeSender<E> {
    /// The sender.
    type Sender: Sender;
    /// Converts.
    fn into_sender(self) -> Self::Sender;
}

impl<E> IntoScopeSender<E> for () {
    type Sender = WithError<Just<()>, E>;
    fn into_sender(self) -> Self::Sender {
        WithError::new(just(()))
    }
}

impl<S: Sender, E> IntoScopeSender<E> for S {
    type Sender = S;
    fn into_sender(self) -> S {
        self
    }
}

/// The sender of [`let_async_scope`].
///
/// `'env` is the lifetime of what the sender borrows; `Sch` is the scheduler of the
/// environment it will be connected in (inferred); `S2` is what the function returns.
#[must_use = "senders do nothing unless connected and started"]
pub struct LetAsyncScope<'env, S, F, Sch, S2> {
    sndr: S,
    f: F,
    _env: PhantomData<Invariant<'env>>,
    _types: PhantomData<fn() -> (Sch, S2)>,
}

impl<S, F, Sch, S2> std::fmt::Debug for LetAsyncScope<'_, S, F, Sch, S2> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LetAsyncScope").finish_non_exhaustive()
    }
}

/// `let_async_scope(sndr, f)` (P3296): when `sndr` completes with a value, calls
/// `f(token, &mut value)` and completes with the sender `f` returns, but only after every
/// piece of work nested, spawned or `spawn_future`d through the token has completed.
///
/// - The value lives in the operation state, so spawned work may **borrow** it (and
///   anything `f` captures by reference), without `'static`.
/// - The scope's error type is `sndr`'s error type `E` (use
///   [`with_error`](crate::SenderExt::with_error) or
///   [`map_error`](crate::SenderExt::map_error) first to choose it). `spawn` through the
///   token accepts senders whose error converts into `E`; the first error, from
///   spawned work or from the returned sender, becomes the completion (the returned
///   value is discarded), and it requests stop on all other nested work.
/// - A panic in `f` or in spawned work requests stop, waits for the join, then
///   completes with that panic. So does a panic of the outer scheduler in the final
///   hop back to it (`schedule` or its sender's `connect`).
/// - A stop request from the receiver's environment reaches all nested work; nested work
///   may still spawn (for cleanup) after it.
/// - Spawned work sees the receiver's environment: its scheduler (so `read_env(GetScheduler)`
///   returns it), that scheduler's domain, user queries, and the scope's stop token.
/// - The operation completes on the receiver's scheduler (inline if the environment has
///   none, or if nothing was left running at the join).
/// - The value is dropped after the join, before the operation completes (a panic in its
///   `Drop` replaces a value, an error or a stop). To have it back after the join, keep it
///   in a [`let_value_ref`](crate::SenderExt::let_value_ref) around the scope: the
///   scope's work borrows it from there, and `let_value_ref` hands it on once the scope
///   has completed:
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, just, schedule, spawn, starts_on, sync_wait_value};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let sch = pool.scheduler();
/// let sch_ref = &sch;
/// let work = just(vec![0u64; 8]).let_value_ref(|v, _| {
///     let v: &mut Vec<u64> = v;
///     just(())
///         .let_async_scope(move |tk, ()| {
///             for (i, x) in v.iter_mut().enumerate() {
///                 spawn(schedule(sch_ref).then(move |()| *x = i as u64 * 10), tk);
///             }
///         })
///         .boxed()
/// });
/// let (v, ()) = sync_wait_value(starts_on(sch.clone(), work));
/// assert_eq!(v, [0, 10, 20, 30, 40, 50, 60, 70]);
/// ```
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, just, schedule, spawn, sync_wait};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// let pool = StaticThreadPool::new(2).unwrap();
/// let sch = pool.scheduler();
/// let hits = AtomicUsize::new(0); // on this stack: borrowed by spawned work
/// let hits = &hits;
/// let sum = sync_wait(just(vec![1, 2, 3]).let_async_scope(|token, data| {
///     let data: &Vec<i32> = data; // lives in the operation: borrowed too
///     for i in 0..data.len() {
///         spawn(schedule(&sch).then(move |()| { hits.fetch_add(data[i] as usize, Ordering::Relaxed); }), token);
///     }
///     just(data.len())
/// }));
/// assert_eq!(sum.unwrap(), Some(3));
/// assert_eq!(hits.load(Ordering::Relaxed), 6); // all spawned work ran before completion
/// ```
pub fn let_async_scope<'env, S, F, Sch, S2>(sndr: S, f: F) -> LetAsyncScope<'env, S, F, Sch, S2>
where
    S: Sender,
    F: for<'s> FnOnce(LetScopeToken<'s, 'env, Sch, S::Error>, &'s mut S::Value) -> S2,
    S2: IntoScopeSender<S::Error>,
    Sch: MaybeScheduler,
{
    LetAsyncScope { sndr, f, _env: PhantomData, _types: PhantomData }
}

sender!(['env, S, F, Sch, S2] LetAsyncScope<'env, S, F, Sch, S2> where [S: Sender,
    S2: IntoScopeSender<S::Error>] { value = <S2::Sender as Sender>::Value, error = S::Error, stopped = true, domain = NoDomain });

/// The part of a `let_async_scope` operation that tokens and associations point to.
pub(crate) struct LetScopeShared<Sch, E> {
    core: &'static ScopeCore,
    generation: u64,
    sched: Sch,
    /// The outer receiver's environment, for user queries. Lifetime-erased: it lives in
    /// the operation until the final completion, after the join.
    props: *const (dyn Props + Sync),
    error_claimed: AtomicBool,
    error: sync::UnsafeCell<Option<E>>,
}

// SAFETY: shared by every thread that runs nested work. The scheduler is `Sync`; the
// error slot is written once, by the thread that wins `error_claimed`, and read only by
// the final completion after the join, which the counter orders after every write; the
// outer environment is `Sync` (required by the `SenderTo` impl) and outlives the join.
unsafe impl<Sch: Sync, E: Send> Sync for LetScopeShared<Sch, E> {}
// SAFETY: as above; it is only moved while no token exists.
unsafe impl<Sch: Send, E: Send> Send for LetScopeShared<Sch, E> {}

impl<Sch, E> LetScopeShared<Sch, E> {
    /// Keeps `error` if it is the first one, and requests stop on the scope's work.
    fn record_error(&self, error: E) {
        if !self.error_claimed.swap(true, Ordering::AcqRel) {
            // SAFETY: the swap makes this thread the only writer; the reader waits for
            // the join (see the `Sync` impl).
            self.error.with_mut(|slot| unsafe { *slot = Some(error) });
        }
        self.core.request_stop();
    }

    fn record_panic(&self, panic: Panic) {
        self.core.record_panic(panic);
        self.core.request_stop();
    }

    #[inline(always)]
    fn associate(&self) -> Option<LetAssociation<'_, Sch, E>> {
        let home = self.core.counter.try_associate(self.generation, shard_index::current())?;
        Some(LetAssociation { shared: NonNull::from(self), home, _s: PhantomData })
    }
}

/// The outer receiver's stop request is forwarded to the scope's stop source under an
/// association: the request may complete the last nested work inline, and without the
/// association the join could then complete, and release the scope's core, inside the
/// core's own `request_stop`, which would go on using the released core. Once the scope
/// is joined it fails to associate and forwards nothing (nothing is left to stop).
// SAFETY: an association keeps the scope from being joined, so the operation (and with
// it this shared state) and the core's source stay alive until it is dissociated; the
// core itself is never freed.
unsafe impl<Sch, E> ForwardTarget for LetScopeShared<Sch, E> {
    type Hold = Home;
    fn hold(&self) -> Option<Home> {
        self.core.counter.try_associate(self.generation, shard_index::current())
    }
    fn request_stop(&self) {
        self.core.request_stop();
    }
    unsafe fn release(this: *const Self, home: Home) {
        // SAFETY: the caller's contract: alive until this dissociation; the core is
        // `'static`, read before it.
        let core = unsafe { (*this).core };
        core.counter.dissociate(home);
    }
}

/// Answers user queries of an environment behind a trait object.
trait Props {
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)>;
}

impl<E: Env> Props for E {
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        Env::prop(self, key)
    }
}

/// The token of a [`let_async_scope`]: pass it to [`spawn`](crate::spawn()),
/// [`spawn_future`](crate::spawn_future) and [`nest`](crate::nest).
///
/// `'s` is the scope's lifetime: work started through the token may borrow anything
/// that lives for `'s`, which includes the predecessor's value and everything the
/// function captured by reference (`'env: 's`). The token is `Copy`, but its lifetime is
/// invariant and only valid inside the function and the work it starts, so it cannot
/// be kept beyond the scope. `Sch` is the outer environment's scheduler, and `E` the
/// scope's error type.
///
/// A function that builds recursive work can take the token by its type:
///
/// ```
/// use senders::{LetScopeToken, PoolScheduler, SenderExt, Spawnable, StaticThreadPool, just, schedule, spawn,
///     starts_on, sync_wait};
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// struct Tree { children: Vec<Tree> }
/// type Token<'s, 'e> = LetScopeToken<'s, 'e, PoolScheduler>;
///
/// fn visit<'s, 'e>(tk: Token<'s, 'e>, sch: &'s PoolScheduler, t: &'s Tree, n: &'s AtomicUsize)
///     -> impl Spawnable<Token<'s, 'e>> {
///     schedule(sch).then(move |()| {
///         n.fetch_add(1, Ordering::Relaxed);
///         for c in &t.children {
///             spawn(visit(tk, sch, c, n), tk);
///         }
///     })
/// }
///
/// let pool = StaticThreadPool::new(2).unwrap();
/// let sch = pool.scheduler();
/// let tree = Tree { children: vec![Tree { children: vec![] }, Tree { children: vec![] }] };
/// let n = AtomicUsize::new(0);
/// let work = just(()).let_async_scope(|tk, ()| { spawn(visit(tk, &sch, &tree, &n), tk); });
/// sync_wait(starts_on(sch.clone(), work)).unwrap();
/// assert_eq!(n.load(Ordering::Relaxed), 3);
/// ```
pub struct LetScopeToken<'s, 'env, Sch, E = Infallible> {
    shared: &'s LetScopeShared<Sch, E>,
    _lifetimes: PhantomData<(Invariant<'s>, &'s &'env ())>,
}

impl<Sch, E> Clone for LetScopeToken<'_, '_, Sch, E> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Sch, E> Copy for LetScopeToken<'_, '_, Sch, E> {}

impl<Sch, E> std::fmt::Debug for LetScopeToken<'_, '_, Sch, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LetScopeToken").finish_non_exhaustive()
    }
}

impl<'s, Sch: MaybeScheduler, E: Send + 's> ScopeToken for LetScopeToken<'s, '_, Sch, E> {
    type Association = LetAssociation<'s, Sch, E>;

    #[inline(always)]
    fn try_associate(&self) -> Option<LetAssociation<'s, Sch, E>> {
        self.shared.associate()
    }
}

// SAFETY: the operation behind the token completes only after its join, which waits for
// every association; it is started only under a blocking root or by an owner that waits
// for it (`OperationState::start`'s contract); and the token, invariant in `'s`,
// implements this for its own `'s` only.
unsafe impl<'s, Sch: MaybeScheduler, E: Send + 's> ScopeLifetime<'s> for LetScopeToken<'s, '_, Sch, E> {}

/// An association with a `let_async_scope`; dropping it dissociates. It is also the
/// environment of the work it protects: the outer receiver's scheduler and user queries,
/// the scheduler's domain, and the scope's stop token.
pub struct LetAssociation<'s, Sch, E> {
    shared: NonNull<LetScopeShared<Sch, E>>,
    home: Home,
    _s: PhantomData<&'s ()>,
}

// SAFETY: an association is a counted reference to the shared state, which is `Sync`
// for `Sch: Sync, E: Send` and outlives it (the join waits for it).
unsafe impl<Sch: Sync, E: Send> Send for LetAssociation<'_, Sch, E> {}
// SAFETY: as above.
unsafe impl<Sch: Sync, E: Send> Sync for LetAssociation<'_, Sch, E> {}

impl<Sch, E> LetAssociation<'_, Sch, E> {
    #[inline]
    fn shared(&self) -> &LetScopeShared<Sch, E> {
        // SAFETY: the shared state outlives every association (the join waits for them).
        unsafe { self.shared.as_ref() }
    }
}

impl<Sch, E> Drop for LetAssociation<'_, Sch, E> {
    #[inline]
    fn drop(&mut self) {
        self.shared().core.counter.dissociate(self.home);
    }
}

impl<Sch, E> std::fmt::Debug for LetAssociation<'_, Sch, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LetAssociation").field("home", &self.home).finish_non_exhaustive()
    }
}

impl<Sch: MaybeScheduler, E: Send> Association for LetAssociation<'_, Sch, E> {
    type Error = E;
    type Env = Self;

    #[inline]
    fn env(&self) -> &Self {
        self
    }

    fn report_panic(&self, panic: Panic) {
        self.shared().record_panic(panic);
    }

    fn report_error(&self, error: E) {
        self.shared().record_error(error);
    }

    fn forwarding_token(&self) -> StopToken<'_> {
        self.shared().core.forwarding_token(self.home)
    }
}

impl<Sch: MaybeScheduler, E> Env for LetAssociation<'_, Sch, E> {
    type Scheduler = Sch;
    type Domain = Sch::Domain;
    fn scheduler(&self) -> Sch {
        self.shared().sched.clone()
    }
    #[inline]
    fn stop_token(&self) -> StopToken<'_> {
        self.shared().core.stop.token()
    }
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        // SAFETY: the outer environment outlives every association (see `props`).
        unsafe { (*self.shared().props).prop(key) }
    }
}

/// Completes the scope's operation on the outer scheduler, or inline without one.
pub trait HopTo<R>: MaybeScheduler {
    /// The operation of the hop.
    type Op: OperationState;
    /// `connect(schedule(self), rcvr)`, or `None` to complete inline.
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

/// What the final completion needs; the hop's receiver points here (it cannot name the
/// hop's own operation type).
pub(crate) struct LetTail<Sch, E, V2, R> {
    rcvr: UnsafeCell<Option<R>>,
    shared: UnsafeCell<Option<LetScopeShared<Sch, E>>>,
    /// The returned sender's completion: `Some(v)` for a value, `None` for stopped.
    result: sync::UnsafeCell<Option<Option<V2>>>,
    /// Forwards the outer stop request to the scope.
    stop_cb: UnsafeCell<Option<RawStopCallback<'static, ForwardStop>>>,
    /// Drops the scoped value (in the state that holds this tail), once the scope is
    /// joined: the state's address and a function that takes the value out and drops it,
    /// returning a panic of its `Drop`.
    drop_value: UnsafeCell<Option<(StateAddr, DropValue)>>,
}

/// The address of the state that holds a [`LetTail`], for its `drop_value`.
struct StateAddr(*const ());

// SAFETY: only the final completion uses it, on whichever thread that runs, to drop the
// scoped value that the same state holds: the state is `Send` only where that value is.
unsafe impl Send for StateAddr {}

/// What [`LetTail::drop_value`] calls: drops the scoped value of the state at the
/// address.
type DropValue = unsafe fn(*const ()) -> Result<(), Panic>;

impl<Sch, E, V2, R: Receiver<V2, E>> LetTail<Sch, E, V2, R> {
    fn shared(&self) -> &LetScopeShared<Sch, E> {
        // SAFETY: written once before any token exists, then only read until `finish`.
        unsafe { (*self.shared.get()).as_ref() }.expect("let_async_scope: scope")
    }

    /// The final completion, after the join: the first panic, else the first error,
    /// else the returned sender's completion.
    ///
    /// # Safety
    ///
    /// Called once, after the scope is joined and released (no association is alive and
    /// the counter no longer touches the core).
    unsafe fn finish(&self) {
        // SAFETY: the caller's contract: nothing else touches these cells any more. The
        // stop callback goes first (it may be running on another thread: its drop waits).
        // The shared state stays in place: the scope's core is released, so a token used
        // from now on (none can be: see `LetScopeToken`) would fail to associate.
        let (result, rcvr) = unsafe {
            *self.stop_cb.get() = None;
            (self.result.with_mut(|r| (*r).take()), (*self.rcvr.get()).take().expect("let_async_scope: completes once"))
        };
        let shared = self.shared();
        let panic = shared.core.take_panic();
        // DROP ORDER: the scoped value goes before the completion (nothing borrows it
        // any more: the scope is joined); a panic in its `Drop` loses to a panic and
        // replaces an error, a value or a stop.
        // SAFETY: the caller's contract: the scope is joined, and the state that holds
        // the value is the one that holds this tail, alive.
        let value_dropped = unsafe { (*self.drop_value.get()).take().map_or(Ok(()), |(state, f)| f(state.0)) };
        let panic = match (panic, value_dropped) {
            (Some(p), dropped) => {
                drop(dropped);
                Some(p)
            }
            (None, dropped) => dropped.err(),
        };
        // SAFETY: the join ordered every write of the slot before this read.
        let error = shared.error.with_mut(|e| unsafe { (*e).take() });
        shared.core.release();
        // DROP ORDER: what the completion does not deliver (the result after a panic or
        // an error, the error after a panic) is discarded in this `let`, before it; a
        // panic in a discarded value's drop loses to a panic and replaces an error.
        let outcome = match (panic, error, result) {
            (Some(p), error, result) => {
                let _ = discard((error, result));
                Outcome::Panic(p)
            }
            (None, Some(e), result) => match discard(result) {
                Ok(()) => Outcome::Error(e),
                Err(p) => {
                    let _ = discard(e);
                    Outcome::Panic(p)
                }
            },
            (None, None, Some(Some(v))) => Outcome::Value(v),
            (None, None, _) => Outcome::Stopped,
        };
        outcome.deliver(rcvr)
    }
}

/// The receiver of the hop onto the outer scheduler.
pub struct LetHop<Sch, E, V2, R> {
    tail: *const LetTail<Sch, E, V2, R>,
}

// SAFETY: the hop runs the final completion on the scheduler's thread; the receiver
// and the results it delivers are `Send` (required by the `SenderTo` impl).
unsafe impl<Sch, E: Send, V2: Send, R: Send> Send for LetHop<Sch, E, V2, R> {}
// SAFETY: a shared reference only reaches `env()`, a constant.
unsafe impl<Sch, E, V2, R> Sync for LetHop<Sch, E, V2, R> {}

impl<Sch, E, V2, R: Receiver<V2, E>> Receiver<(), Infallible> for LetHop<Sch, E, V2, R> {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, (): ()) {
        // SAFETY: the operation lives until this completion; the scope is joined.
        unsafe { (*self.tail).finish() }
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        // The scheduler refused (e.g. a pool shutting down): complete here rather than
        // lose the outcome. SAFETY: as above.
        unsafe { (*self.tail).finish() }
    }
    fn set_panic(self, panic: Panic) {
        // SAFETY: as above; the panic of the hop joins the scope's panics.
        unsafe {
            (*self.tail).shared().core.record_panic(panic);
            (*self.tail).finish()
        }
    }
}

/// The receiver of the sender the function returned; its association keeps the join
/// waiting until it completes.
pub struct LetResult<Sch, E, V2, R> {
    tail: *const LetTail<Sch, E, V2, R>,
    assoc: LetAssociation<'static, Sch, E>,
}

// SAFETY: it completes on any thread: it writes the result (`V2: Send`) or the error
// (`E: Send`) into the operation, which the final completion reads after the join.
unsafe impl<Sch: Send + Sync, E: Send, V2: Send, R> Send for LetResult<Sch, E, V2, R> {}
// SAFETY: a shared reference only reaches the environment (the association, `Sync`).
unsafe impl<Sch: Sync, E: Send, V2, R> Sync for LetResult<Sch, E, V2, R> {}

impl<Sch, E, V2, R> LetResult<Sch, E, V2, R> {
    fn store(self, result: Option<V2>) {
        // SAFETY: only this receiver writes the result, once; the final completion reads
        // it after the join, which waits for the association dropped right after.
        unsafe { (*self.tail).result.with_mut(|r| *r = Some(result)) };
    }
}

impl<Sch: MaybeScheduler, E: Send, V2, R, X: Into<E>> Receiver<V2, X> for LetResult<Sch, E, V2, R> {
    type Env = LetAssociation<'static, Sch, E>;
    fn env(&self) -> &Self::Env {
        &self.assoc
    }
    // DROP ORDER: each method stores or reports first; dropping `self` at its end ends the
    // association, the arrival that may let the join complete.
    fn set_value(self, value: V2) {
        self.store(Some(value))
    }
    fn set_error(self, error: X) {
        self.assoc.report_error(error.into())
    }
    fn set_stopped(self) {
        self.store(None)
    }
    fn set_panic(self, panic: Panic) {
        self.assoc.report_panic(panic)
    }
}

type Second<S, E> = <S as IntoScopeSender<E>>::Sender;
type V2<S, E> = <Second<S, E> as Sender>::Value;
type SecondOp<S2, Sch, E, R> = <Second<S2, E> as SenderTo<LetResult<Sch, E, V2<S2, E>, R>>>::Operation;
type HopOp<S2, Sch, E, R> = <Sch as HopTo<LetHop<Sch, E, V2<S2, E>, R>>>::Op;

/// The state the predecessor's receiver works on.
pub(crate) struct LetScopeState<S: Sender, F, Sch, S2, R>
where
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
{
    tail: LetTail<Sch, S::Error, V2<S2, S::Error>, R>,
    f: UnsafeCell<Option<F>>,
    args: UnsafeCell<Option<S::Value>>,
    second: OpCell<SecondOp<S2, Sch, S::Error, R>>,
    hop: OpCell<HopOp<S2, Sch, S::Error, R>>,
}

/// The receiver of the predecessor.
pub struct LetScopeFirst<'env, S: Sender, F, Sch, S2, R>
where
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
{
    state: *const LetScopeState<S, F, Sch, S2, R>,
    _env: PhantomData<Invariant<'env>>,
}

// SAFETY: the predecessor may complete on another thread, where this receiver stores
// the value, runs `f`, starts the nested work (whose operations are `Send`) and may
// complete the final receiver; the outer environment is shared, hence `Sync`.
unsafe impl<'env, S: Sender, F: Send, Sch: Send + Sync, S2, R: Send + Sync> Send
    for LetScopeFirst<'env, S, F, Sch, S2, R>
where
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    SecondOp<S2, Sch, S::Error, R>: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
    HopOp<S2, Sch, S::Error, R>: Send,
    S::Value: Send,
    S::Error: Send,
    V2<S2, S::Error>: Send,
{
}
// SAFETY: a shared reference only reaches the outer environment (`Sync`).
unsafe impl<'env, S: Sender, F, Sch, S2, R: Sync> Sync for LetScopeFirst<'env, S, F, Sch, S2, R>
where
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
{
}

impl<'env, S, F, Sch, S2, R> LetScopeFirst<'env, S, F, Sch, S2, R>
where
    S: Sender,
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
    R: Receiver<V2<S2, S::Error>, S::Error>,
{
    fn state(&self) -> &LetScopeState<S, F, Sch, S2, R> {
        // SAFETY: the state lives in the pinned operation until the final completion.
        unsafe { &*self.state }
    }

    fn outer(&self) -> &R {
        // SAFETY: the final receiver is present until the final completion takes it.
        unsafe { (*self.state().tail.rcvr.get()).as_ref() }.expect("let_async_scope: receiver")
    }

    fn final_rcvr(self) -> R {
        // SAFETY: without a scope, the predecessor's completion is the final one.
        unsafe { (*self.state().tail.rcvr.get()).take() }.expect("let_async_scope: completes once")
    }

    /// The count reached zero under the join.
    ///
    /// # Safety
    ///
    /// `data` is the started, pinned state; called once, after the scope is released.
    /// Drops the scoped value of the state at `state`.
    ///
    /// # Safety
    ///
    /// `state` is a live `LetScopeState` of this type whose scope is joined: nothing
    /// borrows the value any more.
    unsafe fn drop_value(state: *const ()) -> Result<(), Panic> {
        // SAFETY: the caller's contract.
        let value = unsafe { (*(*state.cast::<LetScopeState<S, F, Sch, S2, R>>()).args.get()).take() };
        discard(value)
    }

    unsafe fn joined(data: *const (), (): ()) {
        // SAFETY: the caller's contract.
        let state = unsafe { &*data.cast::<LetScopeState<S, F, Sch, S2, R>>() };
        let tail: *const LetTail<_, _, _, _> = &state.tail;
        // The outer scheduler's `schedule` and its sender's `connect` are user code: a
        // panic there joins the scope's panics and the completion happens here.
        match catch(|| state.tail.shared().sched.hop(LetHop { tail })) {
            // SAFETY: the slot is written once, here; the hop's operation is pinned in
            // the state, which lives until the hop completes the final receiver.
            Ok(Some(op)) => unsafe { Pin::new_unchecked((*state.hop.get()).insert(op)).start() },
            // SAFETY: the scope is joined and released; this is the one completion.
            Ok(None) => unsafe { state.tail.finish() },
            Err(panic) => {
                state.tail.shared().core.record_panic(panic);
                // SAFETY: as above.
                unsafe { state.tail.finish() }
            }
        }
    }
}

impl<'env, S, F, Sch, S2, R> Receiver<S::Value, S::Error> for LetScopeFirst<'env, S, F, Sch, S2, R>
where
    S: Sender,
    S::Error: Send,
    F: for<'s> FnOnce(LetScopeToken<'s, 'env, Sch, S::Error>, &'s mut S::Value) -> S2,
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
    R: Receiver<V2<S2, S::Error>, S::Error>,
    R::Env: Env<Scheduler = Sch> + Sync,
{
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.outer().env()
    }

    fn set_value(self, value: S::Value) {
        let state = self.state;
        // SAFETY: the predecessor completes once; until the scope exists nobody else
        // touches the state, and its cells are written here before any token exists.
        unsafe {
            let state = &*state;
            let env = self.outer().env();
            let props: *const (dyn Props + Sync + '_) = env;
            // The environment lives in the pinned operation until the final completion.
            let props = std::mem::transmute::<*const (dyn Props + Sync + '_), *const (dyn Props + Sync)>(props);
            let core = ScopeCore::acquire_sharded();
            let shared = (*state.tail.shared.get()).insert(LetScopeShared {
                core,
                generation: core.counter.generation(),
                sched: env.scheduler(),
                props,
                error_claimed: AtomicBool::new(false),
                error: sync::UnsafeCell::new(None),
            });
            // Forward the outer stop request to the scope's source. The token borrows the
            // outer environment, which outlives the callback (dropped by `finish` first,
            // before the shared state goes), and the shared state is `Sync`.
            let outer = std::mem::transmute::<StopToken<'_>, StopToken<'static>>(env.stop_token());
            let cb = (*state.tail.stop_cb.get()).insert(RawStopCallback::new(outer, ForwardStop::new(shared)));
            Pin::new_unchecked(cb).register();

            let args = (*state.args.get()).insert(value);
            *state.tail.drop_value.get() = Some((StateAddr(std::ptr::from_ref(state).cast()), Self::drop_value));
            let f = (*state.f.get()).take().expect("let_async_scope: function runs once");
            // The result sender's association is taken before the join starts, so the
            // join cannot finish before that sender completes.
            let assoc = shared.associate().expect("let_async_scope: a new scope is open");
            let assoc =
                std::mem::transmute::<LetAssociation<'_, Sch, S::Error>, LetAssociation<'static, Sch, S::Error>>(assoc);
            let token = LetScopeToken { shared: &*shared, _lifetimes: PhantomData };
            let tail: *const LetTail<_, _, _, _> = &state.tail;
            let made = catch(move || f(token, args).into_sender().connect(LetResult { tail, assoc }));
            let second = match made {
                Ok(op) => Some((*state.second.get()).insert(op)),
                Err(panic) => {
                    // The association went down with the unwind; the join still waits for
                    // everything `f` spawned before it panicked.
                    shared.record_panic(panic);
                    None
                }
            };
            let waiter = JobRef::new(state as *const LetScopeState<S, F, Sch, S2, R>, Self::joined);
            let done = core.counter.start_join(waiter) == JoinStart::Done;
            match second {
                // Pending: the returned sender holds an association, so the join is not done.
                Some(op) => Pin::new_unchecked(op).start(),
                None if done => state.tail.finish(),
                None => {}
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

/// The operation state of [`let_async_scope`].
pub struct LetScopeOp<'env, S, F, Sch, S2, R>
where
    F: for<'s> FnOnce(LetScopeToken<'s, 'env, Sch, S::Error>, &'s mut S::Value) -> S2,
    R: Receiver<V2<S2, S::Error>, S::Error>,
    R::Env: Env<Scheduler = Sch> + Sync,
    S: SenderTo<LetScopeFirst<'env, S, F, Sch, S2, R>>,
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
{
    state: LetScopeState<S, F, Sch, S2, R>,
    sndr: Option<S>,
    first: Option<S::Operation>,
    _p: PhantomData<Invariant<'env>>,
    _pin: PhantomPinned,
}

impl<'env, S, F, Sch, S2, R> SenderTo<R> for LetAsyncScope<'env, S, F, Sch, S2>
where
    S: SenderTo<LetScopeFirst<'env, S, F, Sch, S2, R>>,
    S::Error: Send,
    F: for<'s> FnOnce(LetScopeToken<'s, 'env, Sch, S::Error>, &'s mut S::Value) -> S2,
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
    R: Receiver<V2<S2, S::Error>, S::Error>,
    R::Env: Env<Scheduler = Sch> + Sync,
{
    type Operation = LetScopeOp<'env, S, F, Sch, S2, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        LetScopeOp {
            state: LetScopeState {
                tail: LetTail {
                    rcvr: UnsafeCell::new(Some(receiver)),
                    shared: UnsafeCell::new(None),
                    result: sync::UnsafeCell::new(None),
                    stop_cb: UnsafeCell::new(None),
                    drop_value: UnsafeCell::new(None),
                },
                f: UnsafeCell::new(Some(self.f)),
                args: UnsafeCell::new(None),
                second: UnsafeCell::new(None),
                hop: UnsafeCell::new(None),
            },
            sndr: Some(self.sndr),
            first: None,
            _p: PhantomData,
            _pin: PhantomPinned,
        }
    }
}

impl<'env, S, F, Sch, S2, R> OperationState for LetScopeOp<'env, S, F, Sch, S2, R>
where
    F: for<'s> FnOnce(LetScopeToken<'s, 'env, Sch, S::Error>, &'s mut S::Value) -> S2,
    R: Receiver<V2<S2, S::Error>, S::Error>,
    R::Env: Env<Scheduler = Sch> + Sync,
    S: SenderTo<LetScopeFirst<'env, S, F, Sch, S2, R>>,
    S2: IntoScopeSender<S::Error>,
    Second<S2, S::Error>: SenderTo<LetResult<Sch, S::Error, V2<S2, S::Error>, R>>,
    <Second<S2, S::Error> as Sender>::Error: Into<S::Error>,
    S::Error: Send,
    Sch: HopTo<LetHop<Sch, S::Error, V2<S2, S::Error>, R>>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `state` and `first` stay in place (only addressed); `sndr` is moved out
        // and is not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(sndr) = this.sndr.take() else { return };
        let first = this.first.insert(sndr.connect(LetScopeFirst { state: &this.state, _env: PhantomData }));
        // SAFETY: pinned in place inside the pinned operation; started once.
        unsafe { Pin::new_unchecked(first).start() };
    }
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The `let_async_scope` protocols under loom, on the module's real pieces: the
    //! first-error slot (`LetScopeShared::record_error`), `record_panic`, `associate` and
    //! the association's drop (the dissociation), the scope core's counter (`start_join`
    //! and its waiting job), its stop source, and the outer stop request forwarded by a
    //! `RawStopCallback<ForwardStop>`.
    //!
    //! `LetScopeFirst::set_value` and `LetTail::finish` are re-enacted step by step, in
    //! their order: they need a whole operation, and `finish` hands the core to the
    //! process-wide free list, which must not keep loom objects from one execution to the
    //! next. The core's first panic sits behind a `parking_lot` mutex, which loom does not
    //! see (it is never held across a loom operation, so it cannot deadlock a model).
    use super::*;
    use crate::stop::{InplaceStopSource, Invoke};
    use crate::sync::thread;
    use loom::sync::atomic::AtomicUsize as Count;

    /// One scope, the outer receiver's stop source, and what the models observe. Leaked
    /// while a model runs (associations and the join's waiter point to it, from any
    /// thread) and freed by [`free`] at its end.
    struct Model {
        shared: LetScopeShared<NoScheduler, u32>,
        /// The outer receiver's stop source.
        outer: InplaceStopSource,
        /// Set once `outer.request_stop()` has returned.
        outer_stopped: AtomicBool,
        /// `LetTail::stop_cb`: forwards the outer stop request to the scope's source.
        stop_cb: UnsafeCell<Option<RawStopCallback<'static, ForwardStop>>>,
        /// The stop callback of spawned work that waits for the scope's stop request.
        work_cb: UnsafeCell<Option<RawStopCallback<'static, CompleteWork>>>,
        /// Associations alive, as the model counts them: up after each `associate`, down
        /// just before each drop.
        live: Count,
        /// How many times the join completed (notified, or inline in `start_join`).
        joins: Count,
        /// The error the join's completion read from the slot (0: none).
        kept: Count,
        /// How many panics the join's completion found.
        panics: Count,
        /// Whether stop was requested on the scope when the join completed.
        stopped: Count,
    }

    // SAFETY: the shared state is `Sync` (its own impl); `stop_cb` is written before any
    // association exists, and taken once by the join's completion, which the counter
    // orders after every association (as `LetTail::stop_cb`); `work_cb` is written before
    // the threads that may run it start, and dropped by its own callback.
    unsafe impl Sync for Model {}

    /// Spawned work that completes when the scope's stop is requested, inside the stop
    /// callback (as a timer or an I/O wait would): its completion destroys its operation,
    /// and with it the callback's own registration, then dissociates (`SpawnReceiver`).
    struct CompleteWork {
        m: &'static Model,
        work: LetAssociation<'static, NoScheduler, u32>,
    }

    impl Invoke for CompleteWork {
        fn invoke(self) {
            // SAFETY: the callback runs once; dropping its own registration from inside it
            // is allowed, and nothing else touches the cell.
            unsafe { *self.m.work_cb.get() = None };
            dissociate(self.m, self.work);
        }
    }

    fn open() -> &'static Model {
        let core: &'static ScopeCore = Box::leak(Box::new(ScopeCore::new_for_model(2, 0)));
        let props: *const (dyn Props + Sync) = &EmptyEnv;
        Box::leak(Box::new(Model {
            shared: LetScopeShared {
                core,
                generation: core.counter.generation(),
                sched: NoScheduler,
                props,
                error_claimed: AtomicBool::new(false),
                error: sync::UnsafeCell::new(None),
            },
            outer: InplaceStopSource::new(),
            outer_stopped: AtomicBool::new(false),
            stop_cb: UnsafeCell::new(None),
            work_cb: UnsafeCell::new(None),
            live: Count::new(0),
            joins: Count::new(0),
            kept: Count::new(0),
            panics: Count::new(0),
            stopped: Count::new(0),
        }))
    }

    /// Frees the model and its core.
    ///
    /// # Safety
    ///
    /// Every thread of the model has ended, and nothing refers to `m` any more.
    unsafe fn free(m: &'static Model) {
        let core = m.shared.core;
        // SAFETY: both come from `Box::leak` in `open`, and the caller's contract.
        unsafe {
            drop(Box::from_raw(std::ptr::from_ref(m).cast_mut()));
            drop(Box::from_raw(std::ptr::from_ref(core).cast_mut()));
        }
    }

    /// An association, as `spawn` (or `set_value`, for the returned sender) takes one.
    fn associate(m: &'static Model) -> LetAssociation<'static, NoScheduler, u32> {
        let a = m.shared.associate().expect("the scope is open");
        m.live.fetch_add(1, Ordering::AcqRel);
        a
    }

    /// Ends an association, as a spawned operation's completion does.
    fn dissociate(m: &Model, a: LetAssociation<'_, NoScheduler, u32>) {
        m.live.fetch_sub(1, Ordering::AcqRel);
        drop(a);
    }

    /// The join's completion: `LetScopeFirst::joined` without a scheduler, that is
    /// `LetTail::finish`, then `ScopeCore::release` without the free list.
    ///
    /// # Safety
    ///
    /// `data` is a model from `open`; called once, when the count reached zero under the
    /// join.
    unsafe fn joined(data: *const (), (): ()) {
        if std::thread::panicking() {
            // The model already failed; its unwinding dropped the last association.
            return;
        }
        // SAFETY: the caller's contract; the model lives until `free`.
        let m = unsafe { &*data.cast::<Model>() };
        let core = m.shared.core;
        assert_eq!(m.live.load(Ordering::Acquire), 0, "the join completed with a live association");
        assert!(core.counter.droppable(), "the join completed before the counter released the core");
        if core.stop.stop_requested() {
            m.stopped.fetch_add(1, Ordering::AcqRel);
        }
        // `finish`: the stop callback first (its drop waits for it if it runs on another
        // thread), then the panic and the error slot.
        // SAFETY: the join is complete: nothing else touches the cell (`LetTail::finish`).
        // The callback is dropped in place: it is pinned there while registered.
        unsafe { *m.stop_cb.get() = None };
        if core.take_panic().is_some() {
            m.panics.fetch_add(1, Ordering::AcqRel);
        }
        // SAFETY: the join ordered every write of the slot before this read.
        let error = m.shared.error.with_mut(|e| unsafe { (*e).take() });
        m.kept.store(error.map_or(0, |e| e as usize), Ordering::Release);
        // `release`: the next generation, and a clean stop source.
        core.counter.recycle();
        // SAFETY: the scope is joined and its stop callback is gone: no callback is
        // registered on the sources and no other thread uses them (`release`'s argument).
        unsafe { core.reset_stop() };
        m.joins.fetch_add(1, Ordering::AcqRel);
    }

    /// `set_value`'s first step: forward the outer stop request to the scope's source
    /// (inline, if it was already requested).
    fn forward_outer_stop(m: &'static Model) {
        // SAFETY: written before any association exists; the model does not move until
        // `free`, and the join's completion drops the callback before the scope's source
        // is reset.
        unsafe {
            let forward = ForwardStop::new(&m.shared);
            let cb = (*m.stop_cb.get()).insert(RawStopCallback::new(m.outer.token(), forward));
            Pin::new_unchecked(cb).register();
        }
    }

    /// Starts the join as `set_value` does: queue the waiter, or complete inline.
    fn start_join(m: &'static Model) {
        // SAFETY: the model outlives every thread that may notify the waiter.
        let waiter = unsafe { JobRef::new(std::ptr::from_ref(m), joined) };
        if m.shared.core.counter.start_join(waiter) == JoinStart::Done {
            // SAFETY: the count was zero: this is the one completion.
            unsafe { joined(std::ptr::from_ref(m).cast(), ()) };
        }
    }

    #[test]
    fn the_first_error_is_kept_against_a_second_error_and_the_join() {
        loom::model(|| {
            let m = open();
            // The function spawned two pieces of work; each fails, on its own worker.
            let workers: Vec<_> = [1u32, 2]
                .into_iter()
                .map(|error| {
                    let a = associate(m);
                    thread::spawn(move || {
                        // `SpawnReceiver::set_error`: report the error, then dissociate.
                        a.report_error(error);
                        dissociate(m, a);
                    })
                })
                .collect();
            // The function's own sender is done: the join starts.
            start_join(m);
            for w in workers {
                w.join().unwrap();
            }
            assert_eq!(m.joins.load(Ordering::Acquire), 1, "the join completes exactly once");
            let kept = m.kept.load(Ordering::Acquire);
            assert!(kept == 1 || kept == 2, "one of the two errors is kept (got {kept})");
            assert_eq!(m.stopped.load(Ordering::Acquire), 1, "the error requested stop before the join");
            assert_eq!(m.panics.load(Ordering::Acquire), 0);
            // SAFETY: every thread has ended.
            unsafe { free(m) };
        });
    }

    #[test]
    fn a_panicking_function_joins_the_work_it_spawned_before_the_panic_completes() {
        loom::model(|| {
            let m = open();
            let function = thread::spawn(move || {
                // `set_value`: the returned sender's association is taken before `f` runs.
                let result = associate(m);
                // `f` spawns work, which completes on another worker...
                let work = associate(m);
                let worker = thread::spawn(move || dissociate(m, work));
                // ...then panics: the unwind drops the returned sender's association, and
                // `set_value` records the panic, then starts the join.
                dissociate(m, result);
                m.shared.record_panic(Panic::new(Box::new("f panicked")));
                start_join(m);
                worker
            });
            function.join().unwrap().join().unwrap();
            assert_eq!(m.joins.load(Ordering::Acquire), 1, "the join completes exactly once");
            assert_eq!(m.panics.load(Ordering::Acquire), 1, "the join's completion finds the panic");
            assert_eq!(m.stopped.load(Ordering::Acquire), 1, "the panic requested stop before the join");
            assert_eq!(m.kept.load(Ordering::Acquire), 0);
            // SAFETY: every thread has ended.
            unsafe { free(m) };
        });
    }

    #[test]
    fn an_outer_stop_request_racing_a_spawn_reaches_it_and_is_gone_after_the_join() {
        loom::model(|| {
            let m = open();
            // The outer receiver's stop request may come at any time.
            let stopper = thread::spawn(move || {
                m.outer.request_stop();
                m.outer_stopped.store(true, Ordering::Release);
            });
            // `set_value`: forward the outer stop request to the scope's source...
            forward_outer_stop(m);
            // ...take the returned sender's association, and run `f`, which spawns work
            // onto another worker.
            let result = associate(m);
            let work = associate(m);
            let worker = thread::spawn(move || {
                // The spawned work spawns more work.
                let after = m.outer_stopped.load(Ordering::Acquire);
                let nested = associate(m);
                let stopped = nested.env().stop_token().stop_requested();
                assert!(!after || stopped, "work spawned after the outer stop request returned did not see it");
                dissociate(m, nested);
                dissociate(m, work);
            });
            start_join(m);
            // The returned sender completes.
            dissociate(m, result);
            worker.join().unwrap();
            stopper.join().unwrap();
            assert_eq!(m.joins.load(Ordering::Acquire), 1, "the join completes exactly once");
            // The forwarding callback was deregistered before the core was reset, so an
            // outer request that came later never reached the reset source.
            assert!(!m.shared.core.stop.stop_requested(), "a stop callback outlived the join");
            // SAFETY: the join's completion took it; every thread has ended.
            assert!(unsafe { (*m.stop_cb.get()).is_none() });
            // SAFETY: every thread has ended.
            unsafe { free(m) };
        });
    }

    /// The outer stop request, forwarded into the scope, completes the last spawned work
    /// inside the scope's own `request_stop`, so the join completes (and, without a
    /// scheduler, `finish` releases the core) while that `request_stop` is still running
    /// on this thread: when it returns into its loop it relocks the released source and
    /// leaves it "stop requested", and a recycled core would start its next scope
    /// stopped (or, if another thread took the core meanwhile, run that scope's
    /// callbacks).
    #[test]
    fn a_join_completing_inside_the_forwarded_stop_request_leaves_the_core_clean() {
        loom::model(|| {
            let m = open();
            let stopper = thread::spawn(move || {
                m.outer.request_stop();
            });
            forward_outer_stop(m);
            let result = associate(m);
            let work = associate(m);
            // SAFETY: the token's source is the scope's core, which outlives the model; the
            // callback is dropped (by itself) before the association it holds.
            unsafe {
                let token = work.env().stop_token().detach();
                let cb = (*m.work_cb.get()).insert(RawStopCallback::new(token, CompleteWork { m, work }));
                Pin::new_unchecked(cb).register();
            }
            start_join(m);
            dissociate(m, result);
            stopper.join().unwrap();
            assert_eq!(m.joins.load(Ordering::Acquire), 1, "the join completes exactly once");
            assert!(!m.shared.core.stop.stop_requested(), "the released core was left stopped");
            // SAFETY: every thread has ended.
            unsafe { free(m) };
        });
    }
}
