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
//! an owner that itself waits (`README.md` beside this module gives the argument).

use std::cell::UnsafeCell;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::adaptors::channels::WithError;
use crate::domain::NoDomain;
use crate::env::Env;
use crate::factories::just::{Just, just};
use crate::job::JobRef;
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::scheduler::{HopTo, MaybeScheduler};
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::{ForwardStop, RawStopCallback, StopToken};
use crate::sync::{self, AtomicBool};

use super::core::ScopeCore;
use super::counter::JoinStart;

mod association;
mod completion;
#[cfg(all(test, loom))]
mod loom_tests;

pub(crate) use association::{Invariant, LetScopeShared, OpCell, Props};
pub use association::{LetAssociation, LetScopeToken};
pub(crate) use completion::LetTail;
use completion::StateAddr;
pub use completion::{LetHop, LetResult};

/// What the function given to `let_async_scope` may return: a sender, or `()` (which
/// means `just(())`). The sender's error must convert into the scope's error `E`.
pub trait IntoScopeSender<E> {
    /// The sender.
    type Sender: Sender;
    /// Converts.
    ///
    /// ```
    /// use senders::scope::IntoScopeSender;
    /// use senders::{just, sync_wait};
    /// // `()` stands for `just(())`, with the scope's error type.
    /// let unit = IntoScopeSender::<&str>::into_sender(());
    /// assert_eq!(sync_wait(unit), Ok(Some(())));
    /// let sender = IntoScopeSender::<&str>::into_sender(just(3));
    /// assert_eq!(sync_wait(sender).unwrap(), Some(3));
    /// ```
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

/// The function of a `let_async_scope`: implemented for every
/// `for<'s> FnOnce(LetScopeToken<'s, 'env, Sch, E>, &'s mut V) -> S2`, and by the body
/// of a [`let_async_scope_reduce`](crate::SenderExt::let_async_scope_reduce), which
/// hands its function a [`ReduceToken`](crate::ReduceToken) instead.
pub trait LetScopeFn<'env, Sch, E, V> {
    /// What the function returns.
    type Output;
    /// Calls the function.
    #[doc(hidden)]
    fn call<'s>(self, token: LetScopeToken<'s, 'env, Sch, E>, value: &'s mut V) -> Self::Output;
}

impl<'env, Sch, E, V, F, S2> LetScopeFn<'env, Sch, E, V> for F
where
    F: for<'s> FnOnce(LetScopeToken<'s, 'env, Sch, E>, &'s mut V) -> S2,
{
    type Output = S2;
    #[inline]
    fn call<'s>(self, token: LetScopeToken<'s, 'env, Sch, E>, value: &'s mut V) -> S2 {
        self(token, value)
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

impl<'env, S, F, Sch, S2> LetAsyncScope<'env, S, F, Sch, S2> {
    /// A `let_async_scope` of `sndr` whose function is `f`.
    pub(crate) fn with_fn(sndr: S, f: F) -> Self
    where
        S: Sender,
        F: LetScopeFn<'env, Sch, S::Error, S::Value, Output = S2>,
    {
        LetAsyncScope { sndr, f, _env: PhantomData, _types: PhantomData }
    }
}

sender!(['env, S, F, Sch, S2] LetAsyncScope<'env, S, F, Sch, S2> where [S: Sender,
    S2: IntoScopeSender<S::Error>] { value = <S2::Sender as Sender>::Value, error = S::Error, stopped = true, domain = NoDomain });

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

    /// The count reached zero under the join.
    ///
    /// # Safety
    ///
    /// `data` is the started, pinned state; called once, after the scope is released.
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
    F: LetScopeFn<'env, Sch, S::Error, S::Value, Output = S2>,
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
            let made = catch(move || f.call(token, args).into_sender().connect(LetResult { tail, assoc }));
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
    F: LetScopeFn<'env, Sch, S::Error, S::Value, Output = S2>,
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
    F: LetScopeFn<'env, Sch, S::Error, S::Value, Output = S2>,
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
    F: LetScopeFn<'env, Sch, S::Error, S::Value, Output = S2>,
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
