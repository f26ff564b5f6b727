//! `SimpleCountingScope` and `CountingScope` (P3149R6), their tokens and their join.

use std::cell::UnsafeCell;
use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::domain::NoDomain;
use crate::env::{EmptyEnv, Env};
use crate::panic::{Panic, catch};
use crate::receiver::Receiver;
use crate::scheduler::{NoScheduler, Scheduler};
use crate::sender::{OperationState, SenderTo, sender};
use crate::stop::StopToken;

use super::core::ScopeCore;
use super::counter::{Home, JoinStart, ScopeState};
use super::token::{Association, ScopeLifetime, ScopeToken};
use crate::job::JobRef;
use crate::pool::shard_index;

/// How a scope counts its associations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CounterKind {
    /// One cache-padded shard per pool worker under a root word (the default). A worker
    /// counts on its own shard; other threads count on the root, in batches: one
    /// update of the root reserves several associations, which they then take from a
    /// word of their own.
    #[default]
    Sharded,
    /// One shared atomic word for everything, every association and every end of one
    /// updating it: the baseline.
    SingleAtomic,
}

/// The owner's handle shared by both scope types.
struct Owner {
    core: &'static ScopeCore,
    generation: u64,
}

impl Owner {
    fn new(kind: CounterKind) -> Self {
        let core = match kind {
            CounterKind::Sharded => ScopeCore::acquire_sharded(),
            CounterKind::SingleAtomic => ScopeCore::acquire(0),
        };
        Owner { core, generation: core.counter.generation() }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if !self.core.counter.droppable() {
            // Unwinding would free what running work still uses (P3149: terminate).
            eprintln!(
                "senders: a counting scope was dropped in the {:?} state; it must be joined \
                 (or never used) before it is dropped. Aborting: running work may still use \
                 what the scope protects.",
                self.core.counter.state()
            );
            std::process::abort();
        }
        self.core.release();
    }
}

macro_rules! scope_common {
    ($scope:ident, $token:ident, $stop:expr) => {
        impl $scope {
            /// A scope in the `unused` state, counting on per-worker shards.
            ///
            /// ```
            #[doc = concat!("use senders::{", stringify!($scope), ", SenderExt, StaticThreadPool, schedule, spawn, sync_wait, scope::ScopeState};")]
            #[doc = concat!("let scope = ", stringify!($scope), "::new();")]
            /// assert_eq!(scope.state(), ScopeState::Unused); // may be dropped unjoined
            /// ```
            pub fn new() -> Self {
                Self::with_counter(CounterKind::Sharded)
            }

            /// A scope in the `unused` state with the given counter.
            ///
            /// ```
            #[doc = concat!("use senders::{", stringify!($scope), ", spawn, just, sync_wait, scope::CounterKind};")]
            #[doc = concat!("let scope = ", stringify!($scope), "::with_counter(CounterKind::SingleAtomic);")]
            /// assert!(spawn(just(()), scope.token()));
            /// sync_wait(scope.join()).unwrap();
            /// ```
            pub fn with_counter(kind: CounterKind) -> Self {
                $scope { owner: Owner::new(kind) }
            }

            /// A token for nesting and spawning work in this scope. Tokens are `Copy` and
            /// `'static`; once the scope is dropped they fail to associate.
            ///
            /// ```
            #[doc = concat!("use senders::{", stringify!($scope), ", SenderExt, StaticThreadPool, schedule, spawn, sync_wait, scope::ScopeState};")]
            /// let pool = StaticThreadPool::new(2)?;
            /// let sch = pool.scheduler();
            #[doc = concat!("let scope = ", stringify!($scope), "::new();")]
            /// let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            /// for _ in 0..100 {
            ///     let done = done.clone();
            ///     spawn(schedule(&sch).then(move |()| { done.fetch_add(1, std::sync::atomic::Ordering::Relaxed); }), scope.token());
            /// }
            /// sync_wait(scope.join()).unwrap();
            /// assert_eq!(done.load(std::sync::atomic::Ordering::Relaxed), 100);
            /// # Ok::<(), senders::BuildError>(())
            /// ```
            pub fn token(&self) -> $token {
                $token { core: self.owner.core, generation: self.owner.generation }
            }

            /// Closes the scope: every later `try_associate` fails. Work already
            /// associated runs on.
            ///
            /// ```
            #[doc = concat!("use senders::{", stringify!($scope), ", SenderExt, StaticThreadPool, schedule, spawn, sync_wait, scope::ScopeState};")]
            #[doc = concat!("let scope = ", stringify!($scope), "::new();")]
            /// assert!(spawn(senders::just(()), scope.token()));
            /// scope.close();
            /// assert!(!spawn(senders::just(()), scope.token()), "a closed scope refuses work");
            /// sync_wait(scope.join()).unwrap();
            /// assert_eq!(scope.state(), ScopeState::Joined);
            /// ```
            pub fn close(&self) {
                self.owner.core.counter.close()
            }

            /// A sender that completes once every association has ended (P3149 `join`).
            /// Starting it moves the scope to a joining state; it completes inline if the
            /// count is already zero, otherwise on the scheduler of its receiver's
            /// environment. It resumes the first panic of spawned work, if any.
            ///
            /// Joining again, in sequence or at the same time, is allowed: every join
            /// completes once the count is zero, and the first panic of spawned work goes
            /// to exactly one of them.
            ///
            /// # Panics
            ///
            /// A panic in the hop back to the receiver's scheduler (its environment,
            /// `schedule()`, or `connect` of the scheduler's sender) completes the join
            /// with that panic (`set_panic`); the scope is joined all the same.
            ///
            /// # Deadlocks
            ///
            /// Work associated with the scope counts in the join it waits for. A join
            /// started from inside that work completes only after the work has ended, so
            /// the work must not block on it (`sync_wait(scope.join())` there never
            /// returns); started without blocking, it completes once the work ends.
            ///
            /// ```
            #[doc = concat!("use senders::{", stringify!($scope), ", SenderExt, StaticThreadPool, schedule, spawn, sync_wait, scope::ScopeState};")]
            /// let pool = StaticThreadPool::new(2)?;
            #[doc = concat!("let scope = ", stringify!($scope), "::new();")]
            /// spawn(schedule(&pool.scheduler()).then(|()| panic!("lost?")), scope.token());
            /// let joined = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sync_wait(scope.join())));
            /// assert!(joined.is_err(), "the join resumes the spawned work's panic");
            /// assert_eq!(scope.state(), ScopeState::Joined);
            /// # Ok::<(), senders::BuildError>(())
            /// ```
            pub fn join(&self) -> JoinSender<'_> {
                JoinSender { core: self.owner.core, _scope: PhantomData }
            }

            /// The current P3149 state.
            ///
            /// ```
            #[doc = concat!("use senders::{", stringify!($scope), ", SenderExt, StaticThreadPool, schedule, spawn, sync_wait, scope::ScopeState};")]
            #[doc = concat!("let scope = ", stringify!($scope), "::new();")]
            /// assert_eq!(scope.state(), ScopeState::Unused);
            /// spawn(senders::just(()), scope.token());
            /// assert_eq!(scope.state(), ScopeState::Open);
            /// sync_wait(scope.join()).unwrap();
            /// assert_eq!(scope.state(), ScopeState::Joined);
            /// ```
            pub fn state(&self) -> ScopeState {
                self.owner.core.counter.state()
            }
        }

        impl Default for $scope {
            fn default() -> Self {
                Self::new()
            }
        }

        impl std::fmt::Debug for $scope {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($scope)).field("state", &self.state()).finish_non_exhaustive()
            }
        }

        // SAFETY: a counting scope aborts if dropped before its join (see `Owner`'s drop),
        // and its tokens accept only `'static` work, which borrows nothing.
        unsafe impl ScopeLifetime<'static> for $token {}

        impl ScopeToken for $token {
            type Association = ScopeAssociation;

            #[inline]
            fn try_associate(&self) -> Option<ScopeAssociation> {
                let home = self.core.counter.try_associate(self.generation, shard_index::current())?;
                Some(ScopeAssociation { core: self.core, home, stop: $stop })
            }
        }
    };
}

/// P3149's `simple_counting_scope`: counts associated work, refuses new work once
/// closed, and joins when the count reaches zero.
///
/// States (P3149R6 §`simple_counting_scope`; [`state`](Self::state) reports them):
///
/// | state | count | `try_associate` | must join before drop | arrows out |
/// |---|---|---|---|---|
/// | `Unused` | 0 | succeeds | no | `try_associate` → `Open`; `close` → `UnusedAndClosed`; join started → `OpenAndJoining` (→ `Joined` at once, the count being 0) |
/// | `Open` | ≥ 0 | succeeds | yes | `close` → `Closed`; join started → `OpenAndJoining` |
/// | `Closed` | ≥ 0 | fails | yes | join started → `ClosedAndJoining` |
/// | `OpenAndJoining` | ≥ 0 | succeeds | join running | `close` → `ClosedAndJoining`; count reaches 0 → `Joined` |
/// | `ClosedAndJoining` | ≥ 0 | fails | join running | count reaches 0 → `Joined` |
/// | `UnusedAndClosed` | 0 | fails | no | join started → `ClosedAndJoining` (→ `Joined` at once) |
/// | `Joined` | 0 | fails | no | — |
///
/// Dropping a scope in `Open`, `Closed` or a joining state aborts the process with a
/// message: associated work may still use what the scope protects, and unwinding would
/// free it (P3149 calls `std::terminate`).
///
/// Work spawned here must be `'static` (it may outlive every stack frame, so it holds
/// `Arc`s, as below). Work that borrows the caller's data does not compile, whatever
/// `+ 's` bound the compiler suggests: spawn it into a
/// [`let_async_scope`](crate::SenderExt::let_async_scope) instead, whose scope is
/// joined before it completes, so its token takes borrowing work.
///
/// ```
/// use senders::{SimpleCountingScope, StaticThreadPool, SenderExt, schedule, spawn, sync_wait};
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let scope = SimpleCountingScope::new();
/// let hits = Arc::new(AtomicUsize::new(0));
/// for _ in 0..100 {
///     let hits = hits.clone();
///     spawn(schedule(&pool.scheduler()).then(move |()| { hits.fetch_add(1, Ordering::Relaxed); }), scope.token());
/// }
/// sync_wait(scope.join()).unwrap();
/// assert_eq!(hits.load(Ordering::Relaxed), 100);
/// ```
pub struct SimpleCountingScope {
    owner: Owner,
}

/// The token of a [`SimpleCountingScope`].
///
/// ```
/// use senders::{SimpleCountingScope, SimpleCountingToken, just, spawn, sync_wait};
/// let scope = SimpleCountingScope::new();
/// let token: SimpleCountingToken = scope.token();
/// spawn(just(()), token);
/// sync_wait(scope.join()).unwrap();
/// ```
#[derive(Clone, Copy)]
pub struct SimpleCountingToken {
    core: &'static ScopeCore,
    generation: u64,
}

scope_common!(SimpleCountingScope, SimpleCountingToken, false);

/// P3149's `counting_scope`: a [`SimpleCountingScope`] plus
/// [`request_stop`](Self::request_stop), which reaches every outstanding and future
/// nested operation: their stop token is merged with the scope's stop source.
///
/// Its work must be `'static`, sender and operation: the scope is an object any code may
/// keep, so nothing proves that a borrow outlives the work. A sender that borrows a local
/// fails to compile ("closure may outlive the current function", "borrowed value does
/// not live long enough", "requires … to outlive `'static`"), and the `+ 'a` the
/// compiler suggests for an `impl Spawnable` return type ends in the same error. For work that borrows, use
/// [`let_async_scope`](crate::SenderExt::let_async_scope) (or
/// [`let_async_scope_reduce`](crate::SenderExt::let_async_scope_reduce) for work that
/// returns values), whose scope is an operation joined before it completes. Work that
/// returns values into a `'static` scope goes into a [`ReducingScope`](crate::ReducingScope).
///
/// ```
/// use senders::{CountingScope, SenderExt, just, spawn_future, sync_wait};
/// let scope = CountingScope::new();
/// scope.request_stop();
/// // Work nested after the request still sees it: `bulk` checks its stop token.
/// let fut = spawn_future(just(()).bulk(10_000, |_, _| ()), scope.token());
/// assert_eq!(sync_wait(fut).unwrap(), None); // completed stopped
/// sync_wait(scope.join()).unwrap();
/// ```
pub struct CountingScope {
    owner: Owner,
}

/// The token of a [`CountingScope`].
///
/// ```
/// use senders::{CountingScope, CountingToken, just, spawn, sync_wait};
/// let scope = CountingScope::new();
/// let token: CountingToken = scope.token();
/// spawn(just(()), token);
/// sync_wait(scope.join()).unwrap();
/// ```
#[derive(Clone, Copy)]
pub struct CountingToken {
    core: &'static ScopeCore,
    generation: u64,
}

scope_common!(CountingScope, CountingToken, true);

impl CountingScope {
    /// Requests stop on every operation nested in the scope, now or later.
    ///
    /// A panic in a stop callback that this request runs is not resumed here: the
    /// scope keeps it, as it keeps a panic of spawned work, and its join resumes it.
    ///
    /// ```
    /// use senders::{CountingScope, SenderExt, StaticThreadPool, nest, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2)?;
    /// let scope = CountingScope::new();
    /// scope.request_stop();
    /// // Work nested after the request sees it: the pool's schedule() completes stopped.
    /// let outcome = sync_wait(nest(schedule(&pool.scheduler()).then(|()| 1), scope.token()));
    /// assert_eq!(outcome.unwrap(), None);
    /// sync_wait(scope.join()).unwrap();
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn request_stop(&self) {
        self.owner.core.request_stop();
    }
}

impl std::fmt::Debug for SimpleCountingToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimpleCountingToken").finish_non_exhaustive()
    }
}

impl std::fmt::Debug for CountingToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingToken").finish_non_exhaustive()
    }
}

/// An association with a counting scope; dropping it dissociates.
pub struct ScopeAssociation {
    core: &'static ScopeCore,
    home: Home,
    stop: bool,
}

impl Association for ScopeAssociation {
    type Error = Infallible;
    type Env = Self;

    #[inline]
    fn env(&self) -> &Self {
        self
    }

    fn report_panic(&self, panic: Panic) {
        self.core.record_panic(panic);
    }

    fn report_error(&self, error: Infallible) {
        match error {}
    }

    fn forwarding_token(&self) -> StopToken<'_> {
        if self.stop { self.core.forwarding_token(self.home) } else { StopToken::never() }
    }
}

/// The environment of work spawned into a counting scope: the scope's stop token (for
/// a [`CountingScope`]), no scheduler, no domain.
impl Env for ScopeAssociation {
    type Scheduler = NoScheduler;
    type Domain = NoDomain;
    fn scheduler(&self) -> NoScheduler {
        NoScheduler
    }
    #[inline]
    fn stop_token(&self) -> StopToken<'_> {
        if self.stop { self.core.stop.token() } else { StopToken::never() }
    }
}

impl Drop for ScopeAssociation {
    #[inline]
    fn drop(&mut self) {
        self.core.counter.dissociate(self.home);
    }
}

impl std::fmt::Debug for ScopeAssociation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScopeAssociation").field("home", &self.home).finish_non_exhaustive()
    }
}

/// The sender of [`SimpleCountingScope::join`] and [`CountingScope::join`].
#[must_use = "senders do nothing unless connected and started"]
pub struct JoinSender<'s> {
    core: &'static ScopeCore,
    _scope: PhantomData<&'s ()>,
}

impl std::fmt::Debug for JoinSender<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinSender").finish_non_exhaustive()
    }
}

sender!(['a] JoinSender<'a> { value = (), error = Infallible, stopped = true, domain = NoDomain });

/// The scheduler a join completes on: the one in its receiver's environment.
type JoinSched<R> = <<R as Receiver<(), Infallible>>::Env as Env>::Scheduler;
/// The operation of the join's hop onto that scheduler.
type HopOp<R> = <<JoinSched<R> as Scheduler>::Sender as SenderTo<JoinHop<R>>>::Operation;

impl<'s, R> SenderTo<R> for JoinSender<'s>
where
    R: Receiver<(), Infallible> + Send,
    JoinSched<R>: Scheduler,
    <JoinSched<R> as Scheduler>::Sender: SenderTo<JoinHop<R>>,
{
    type Operation = JoinOp<'s, R>;
    fn connect(self, receiver: R) -> JoinOp<'s, R> {
        JoinOp {
            shared: JoinShared { core: self.core, rcvr: UnsafeCell::new(Some(receiver)) },
            hop: UnsafeCell::new(None),
            _scope: PhantomData,
            _pin: PhantomPinned,
        }
    }
}

/// The part of a join operation its hop receiver completes (it does not name the hop's
/// operation type, which would make the receiver's trait bounds cyclic).
pub(crate) struct JoinShared<R> {
    core: &'static ScopeCore,
    rcvr: UnsafeCell<Option<R>>,
}

impl<R: Receiver<(), Infallible>> JoinShared<R> {
    /// Completes the receiver: with the first panic of spawned work, else with `()`.
    fn complete(&self, stopped: bool) {
        // SAFETY: the join completes once; the receiver is taken exactly here.
        let rcvr = unsafe { (*self.rcvr.get()).take() }.expect("join completes once");
        match self.core.take_panic() {
            Some(panic) => rcvr.set_panic(panic),
            None if stopped => rcvr.set_stopped(),
            None => rcvr.set_value(()),
        }
    }

    /// Completes the receiver with a panic of the hop back to its scheduler. A panic of
    /// spawned work stays stored for the next join.
    fn fail(&self, panic: Panic) {
        // SAFETY: as in `complete`.
        let rcvr = unsafe { (*self.rcvr.get()).take() }.expect("join completes once");
        rcvr.set_panic(panic)
    }
}

/// The operation state of a join.
pub struct JoinOp<'s, R>
where
    R: Receiver<(), Infallible>,
    JoinSched<R>: Scheduler,
    <JoinSched<R> as Scheduler>::Sender: SenderTo<JoinHop<R>>,
{
    shared: JoinShared<R>,
    hop: UnsafeCell<Option<HopOp<R>>>,
    _scope: PhantomData<&'s ()>,
    _pin: PhantomPinned,
}

// SAFETY: the receiver (and the hop's operation) is `Send`; the join is notified from the
// thread that ends the last association and touches the operation from there only.
unsafe impl<'s, R> Send for JoinOp<'s, R>
where
    R: Receiver<(), Infallible> + Send,
    JoinSched<R>: Scheduler,
    <JoinSched<R> as Scheduler>::Sender: SenderTo<JoinHop<R>>,
    <<JoinSched<R> as Scheduler>::Sender as SenderTo<JoinHop<R>>>::Operation: Send,
{
}

impl<R> JoinOp<'_, R>
where
    R: Receiver<(), Infallible>,
    JoinSched<R>: Scheduler,
    <JoinSched<R> as Scheduler>::Sender: SenderTo<JoinHop<R>>,
{
    /// The count reached zero: hop onto the receiver's scheduler.
    ///
    /// # Safety
    ///
    /// `data` points to a started, pinned `JoinOp` that has not completed; called once.
    unsafe fn notify(data: *const (), (): ()) {
        // SAFETY: the caller's contract.
        let this = unsafe { &*data.cast::<Self>() };
        let hop = JoinHop { shared: &this.shared };
        // The receiver's env, the scheduler's `schedule` and its sender's `connect` are
        // user code: a panic there completes the join with that panic.
        let connected = catch(|| {
            // SAFETY: the receiver is present until `complete`, which has not run.
            let rcvr = unsafe { (*this.shared.rcvr.get()).as_ref() }.expect("join receiver");
            rcvr.env().scheduler().schedule().connect(hop)
        });
        match connected {
            // SAFETY: nothing else touches the slot; the op is pinned and alive until the
            // hop completes it, and the hop's operation is started once, in place.
            Ok(op) => unsafe { Pin::new_unchecked((*this.hop.get()).insert(op)).start() },
            Err(panic) => this.shared.fail(panic),
        }
    }
}

impl<R> OperationState for JoinOp<'_, R>
where
    R: Receiver<(), Infallible>,
    JoinSched<R>: Scheduler,
    <JoinSched<R> as Scheduler>::Sender: SenderTo<JoinHop<R>>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: the op is pinned and, per `start`'s contract, stays alive until it
        // completes, which only the notification (run once, on any thread: the op is
        // `Send`) leads to.
        let waiter = unsafe { JobRef::new(&*self as *const Self, Self::notify) };
        if self.shared.core.counter.start_join(waiter) == JoinStart::Done {
            self.shared.complete(false);
        }
    }
}

/// The receiver of the hop from the last dissociation onto the join's scheduler.
pub struct JoinHop<R> {
    shared: *const JoinShared<R>,
}

// SAFETY: the hop completes the join's receiver, which is `Send`.
unsafe impl<R: Send> Send for JoinHop<R> {}
// SAFETY: a shared reference only reaches `env()`, a constant.
unsafe impl<R> Sync for JoinHop<R> {}

impl<R> JoinHop<R> {
    fn shared(&self) -> &JoinShared<R> {
        // SAFETY: the join operation is alive until this hop completes it.
        unsafe { &*self.shared }
    }
}

impl<R: Receiver<(), Infallible>> Receiver<(), Infallible> for JoinHop<R> {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, (): ()) {
        self.shared().complete(false)
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        self.shared().complete(true)
    }
    fn set_panic(self, panic: Panic) {
        self.shared().fail(panic)
    }
}
