//! The scope's shared part, which tokens and associations point to, the token and the
//! association.

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::convert::Infallible;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::env::Env;
use crate::panic::Panic;
use crate::scheduler::MaybeScheduler;
use crate::stop::{ForwardTarget, StopToken};
use crate::sync::{self, AtomicBool, Ordering};

use crate::pool::shard_index;
use crate::scope::core::ScopeCore;
use crate::scope::counter::Home;
use crate::scope::token::{Association, ScopeLifetime, ScopeToken};

/// Makes a type invariant in `'a`.
pub(crate) type Invariant<'a> = fn(&'a ()) -> &'a ();

/// A cell for a value written once inside a pinned operation.
pub(crate) type OpCell<T> = UnsafeCell<Option<T>>;

/// The part of a `let_async_scope` operation that tokens and associations point to.
pub(crate) struct LetScopeShared<Sch, E> {
    pub(super) core: &'static ScopeCore,
    pub(super) generation: u64,
    pub(super) sched: Sch,
    /// The outer receiver's environment, for user queries. Lifetime-erased: it lives in
    /// the operation until the final completion, after the join.
    pub(super) props: *const (dyn Props + Sync),
    pub(super) error_claimed: AtomicBool,
    pub(super) error: sync::UnsafeCell<Option<E>>,
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
    pub(super) fn record_error(&self, error: E) {
        if !self.error_claimed.swap(true, Ordering::AcqRel) {
            // SAFETY: the swap makes this thread the only writer; the reader waits for
            // the join (see the `Sync` impl).
            self.error.with_mut(|slot| unsafe { *slot = Some(error) });
        }
        self.core.request_stop();
    }

    pub(super) fn record_panic(&self, panic: Panic) {
        self.core.record_panic(panic);
        self.core.request_stop();
    }

    #[inline(always)]
    pub(super) fn associate(&self) -> Option<LetAssociation<'_, Sch, E>> {
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
pub(crate) trait Props {
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)>;
}

impl<E: Env> Props for E {
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        Env::prop(self, key)
    }
}

/// The token of a [`let_async_scope`](super::let_async_scope): pass it to [`spawn`](crate::spawn()),
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
    pub(super) shared: &'s LetScopeShared<Sch, E>,
    pub(super) _lifetimes: PhantomData<(Invariant<'s>, &'s &'env ())>,
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
    pub(super) shared: NonNull<LetScopeShared<Sch, E>>,
    pub(super) home: Home,
    pub(super) _s: PhantomData<&'s ()>,
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
