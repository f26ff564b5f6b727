//! Scope reductions: spawned work that returns its values through its scope.
//!
//! A reduction is owned by a scope ([`let_async_scope_reduce`](super::let_async_scope_reduce)
//! or a [`ReducingScope`]). It has one accumulator *slot* per pool worker, indexed by the
//! worker's shard index (the index of the scope counter's shards, unique among live
//! threads), and one *shared slot* under a lock for every other thread. Work spawned
//! through a [`ReduceToken`] completes with a value; its receiver folds that value into
//! the slot of the thread it completes on, before the work's association ends. The join
//! merges the slots once the count is zero: every fold happened before the dissociation
//! that followed it, and the counter's acquire-release chain orders every dissociation
//! before the join's completion, as it orders `let_async_scope`'s error slot.
//!
//! * *Only a slot's owner touches it while the scope is open.* A slot is written by the
//!   thread whose shard index it has; indices are unique among live threads, and a reused
//!   index's old owner has exited (the index table's lock orders its last fold before the
//!   new owner's first). Threads without an index, or with one beyond the slots (a pool
//!   started after the scope with more workers), fold into the shared slot under its lock.
//! * *A fold that re-enters itself* (user code in `fold` that completes more of the scope's
//!   work on the same thread, by running it inline or by blocking on it) finds its slot
//!   busy and folds into the shared slot instead; re-entering the shared slot's fold
//!   panics, and that panic goes to the scope like any panic of spawned work.
//! * *The merge takes the slots* only after the join has seen zero, when no association is
//!   alive and none can be made (the scope is joined), so no fold runs concurrently.
//!
//! A fold costs the spawned work one thread-local read (the shard index), a check that
//! the slot is free, and the user's `fold` on a line only this worker writes: no atomic
//! read-modify-write, no shared line, no allocation.

use std::cell::{Cell, RefCell, UnsafeCell};
use std::convert::Infallible;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crossbeam_utils::CachePadded;

use crate::domain::NoDomain;
use crate::panic::{Panic, catch, discard};
use crate::pool::shard_index;
use crate::receiver::Receiver;
use crate::sender::{Sender, SenderTo, adaptor_sender, sender};
use crate::sync::{AtomicBool, Ordering};

use super::counter::ScopeState;
use super::counting::{CountingScope, CountingToken, JoinSender};
use super::let_scope::{IntoScopeSender, Invariant, LetAsyncScope, LetScopeFn, LetScopeToken};
use super::spawn::{SpawnReceiver, Spawnable};
use super::token::{Association, ScopeLifetime};
use crate::scheduler::MaybeScheduler;

/// The first field of every [`Reduction`] (`repr(C)`): what a token reaches without
/// knowing the reduction's type.
struct Header {
    /// Reducing work completed stopped: its value is missing, so the merge is dropped and
    /// the scope completes stopped.
    stopped: AtomicBool,
}

/// One worker's accumulator.
struct Slot<A> {
    /// The slot's fold is running (a fold that re-enters goes to the shared slot).
    busy: Cell<bool>,
    acc: UnsafeCell<Option<A>>,
}

/// Clears a slot's `busy` mark, also when the user's `init` or `fold` unwinds.
struct Busy<'a>(&'a Cell<bool>);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.set(false);
    }
}

/// A scope's reduction: per-worker accumulators, the shared one, and the user's
/// functions.
#[repr(C)]
pub struct Reduction<A, I, F, M> {
    header: Header,
    slots: Box<[CachePadded<Slot<A>>]>,
    shared: parking_lot::ReentrantMutex<RefCell<Option<A>>>,
    init: I,
    fold: F,
    merge: M,
}

// SAFETY: a slot is touched only by the thread that owns its shard index while the scope
// is open, and by the merge after the join (module docs); the shared slot is under its
// lock; the functions are called from any thread through `&`, so they are `Sync`, and
// accumulators move between threads (folded on one, merged on another), so `A: Send`.
unsafe impl<A: Send, I: Sync, F: Sync, M: Sync> Sync for Reduction<A, I, F, M> {}
// SAFETY: sending the reduction sends its accumulators and functions.
unsafe impl<A: Send, I: Send, F: Send, M: Send> Send for Reduction<A, I, F, M> {}

impl<A, I: Fn() -> A, F, M: Fn(A, A) -> A> Reduction<A, I, F, M> {
    fn new(init: I, fold: F, merge: M) -> Self {
        let slots = shard_index::high_water().max(num_cpus::get());
        Reduction {
            header: Header { stopped: AtomicBool::new(false) },
            slots: (0..slots)
                .map(|_| CachePadded::new(Slot { busy: Cell::new(false), acc: UnsafeCell::new(None) }))
                .collect(),
            shared: parking_lot::ReentrantMutex::new(RefCell::new(None)),
            init,
            fold,
            merge,
        }
    }

    /// Folds `value` into the calling thread's slot (the shared one if it has none, or if
    /// its slot's fold is running: a re-entrant fold).
    #[inline]
    fn fold<T>(&self, value: T)
    where
        F: Fn(&mut A, T),
    {
        if let Some(slot) = shard_index::current().and_then(|i| self.slots.get(i))
            && !slot.busy.replace(true)
        {
            let _busy = Busy(&slot.busy);
            // SAFETY: only this thread, the owner of the slot's shard index, touches
            // the slot while the scope is open (module docs), and `busy` keeps a
            // re-entrant fold on this thread out of it: this is the one reference.
            let acc = unsafe { &mut *slot.acc.get() };
            let acc = match acc {
                Some(acc) => acc,
                None => acc.insert((self.init)()),
            };
            (self.fold)(acc, value);
            return;
        }
        self.fold_shared(value)
    }

    #[cold]
    #[inline(never)]
    fn fold_shared<T>(&self, value: T)
    where
        F: Fn(&mut A, T),
    {
        let guard = self.shared.lock();
        let Ok(mut acc) = guard.try_borrow_mut() else {
            panic!("senders: a scope reduction's fold re-entered itself on its shared slot");
        };
        let acc = match &mut *acc {
            Some(acc) => acc,
            acc @ None => acc.insert((self.init)()),
        };
        (self.fold)(acc, value);
    }

    /// The merged value, or `None` if some reducing work completed stopped (the partial
    /// accumulators are then dropped). Takes every accumulator: a later call starts from
    /// `init` again.
    ///
    /// # Safety
    ///
    /// The scope is joined (no association is alive and none can be made, so no fold
    /// runs), and no other call of `finish` runs at the same time.
    unsafe fn finish(&self) -> Option<A> {
        let shared = self.shared.lock().borrow_mut().take();
        // SAFETY: the caller's contract: nothing else touches the slots now.
        let parts = self.slots.iter().filter_map(|s| unsafe { (*s.acc.get()).take() }).chain(shared);
        if self.header.stopped.load(Ordering::Relaxed) {
            parts.for_each(drop);
            return None;
        }
        let mut merged = None;
        for part in parts {
            merged = Some(match merged.take() {
                None => part,
                Some(acc) => (self.merge)(acc, part),
            });
        }
        Some(merged.unwrap_or_else(&self.init))
    }

    /// The type-erased handle tokens carry.
    fn handle<T>(&self) -> Handle<T>
    where
        F: Fn(&mut A, T),
        A: Send,
        I: Sync,
        F: Sync,
        M: Sync,
    {
        Handle { data: NonNull::from(self).cast(), fold: Self::fold_erased::<T> }
    }

    /// # Safety
    ///
    /// `data` is a live `Self`.
    unsafe fn fold_erased<T>(data: NonNull<()>, value: T)
    where
        F: Fn(&mut A, T),
    {
        // SAFETY: the caller's contract.
        unsafe { data.cast::<Self>().as_ref() }.fold(value)
    }
}

/// A reduction's address and its fold, for values of type `T`, without its type.
pub(crate) struct Handle<T> {
    data: NonNull<()>,
    fold: unsafe fn(NonNull<()>, T),
}

impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}

// SAFETY: a handle is made only from a `Reduction` that is `Sync` (see `handle`): folding
// into it and marking it stopped from any thread is what that `Sync` allows.
unsafe impl<T> Send for Handle<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Handle<T> {}

impl<T> Handle<T> {
    /// # Safety
    ///
    /// The reduction is alive: the caller holds an association with its scope.
    unsafe fn fold(self, value: T) {
        // SAFETY: the caller's contract.
        unsafe { (self.fold)(self.data, value) }
    }

    /// # Safety
    ///
    /// As for [`fold`](Self::fold).
    unsafe fn mark_stopped(self) {
        // SAFETY: the caller's contract; the header is the reduction's first field.
        unsafe { self.data.cast::<Header>().as_ref() }.stopped.store(true, Ordering::Relaxed);
    }
}

/// A reduction owned through a raw pointer (tokens hold copies of its address, so it is
/// never reborrowed uniquely), freed when this is dropped.
pub(crate) struct Owned<R: ?Sized>(NonNull<R>);

// SAFETY: it owns its `R`.
unsafe impl<R: ?Sized + Send> Send for Owned<R> {}
// SAFETY: only shared references to the `R` are handed out.
unsafe impl<R: ?Sized + Sync> Sync for Owned<R> {}

impl<R> Owned<R> {
    fn new(red: R) -> Self {
        Owned(NonNull::from(Box::leak(Box::new(red))))
    }
}

impl<R: ?Sized> Owned<R> {
    fn get(&self) -> &R {
        // SAFETY: alive until `self` drops; only shared references are made.
        unsafe { self.0.as_ref() }
    }
}

impl<R: ?Sized> Drop for Owned<R> {
    fn drop(&mut self) {
        // SAFETY: made by `Box::leak` in `new`, freed once.
        drop(unsafe { Box::from_raw(self.0.as_ptr()) });
    }
}

/// A token of a scope with a reduction: [`spawn`](crate::spawn()) through it takes a sender
/// whose value is `T`, and folds that value into the scope's reduction.
///
/// `Tk` is the scope's plain token: [`token`](Self::token) returns it, for work that
/// returns nothing (`()`), for [`nest`](crate::nest) and [`spawn_future`](crate::spawn_future)
/// (their values are not folded). A `()`-valued sender spawned through a `ReduceToken`
/// whose `T` is not `()` does not compile.
///
/// The type names only the scope's token and the folded type, so recursive work can
/// name it: [`LetReduceToken`] for a
/// [`let_async_scope_reduce`](crate::SenderExt::let_async_scope_reduce), and
/// `ReduceToken<CountingToken, T>` for a [`ReducingScope`].
///
/// ```
/// use senders::{ReducingScope, StaticThreadPool, SenderExt, schedule, spawn, sync_wait};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let mut scope = ReducingScope::new(|| 0u64, |acc: &mut u64, v: u64| *acc += v, |a, b| a + b);
/// let tk = scope.token();
/// for i in 1..=10u64 {
///     spawn(schedule(&pool.scheduler()).then(move |()| i * i), tk);
/// }
/// spawn(schedule(&pool.scheduler()).then(|()| ()), tk.token()); // plain work, not folded
/// assert_eq!(sync_wait(scope.join()).unwrap(), Some(385));
/// ```
pub struct ReduceToken<Tk, T> {
    token: Tk,
    red: Handle<T>,
}

impl<Tk: Copy, T> Clone for ReduceToken<Tk, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<Tk: Copy, T> Copy for ReduceToken<Tk, T> {}

impl<Tk: std::fmt::Debug, T> std::fmt::Debug for ReduceToken<Tk, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReduceToken").field("token", &self.token).finish_non_exhaustive()
    }
}

impl<Tk: Copy, T> ReduceToken<Tk, T> {
    /// The scope's plain token: work spawned or nested through it is counted by the same
    /// join, and its value (if any) is not folded.
    ///
    /// ```
    /// use senders::{ReducingScope, just, nest, spawn, sync_wait};
    /// let mut scope = ReducingScope::new(|| 0, |acc: &mut i32, v: i32| *acc += v, |a, b| a + b);
    /// spawn(just(()), scope.token().token());
    /// assert_eq!(sync_wait(nest(just(5), scope.token().token())).unwrap(), Some(5));
    /// assert_eq!(sync_wait(scope.join()).unwrap(), Some(0), "nothing was folded");
    /// ```
    pub fn token(&self) -> Tk {
        self.token
    }
}

/// Work spawned through a [`ReduceToken`] is the sender wrapped so that its value is
/// folded into the scope's reduction on the thread that completes it, before its
/// association ends; its errors, stops and panics go to the scope as a plain spawn's do
/// (a stop also marks the reduction incomplete: the scope then completes stopped).
impl<'scope, S, Tk, T> Spawnable<ReduceToken<Tk, T>> for S
where
    S: Sender<Value = T> + Send + 'scope,
    T: 'scope,
    S::Error: Into<<Tk::Association as Association>::Error>,
    Tk: ScopeLifetime<'scope>,
    S: SenderTo<FoldReceiver<SpawnReceiver<Tk::Association>, T>>,
    <S as SenderTo<FoldReceiver<SpawnReceiver<Tk::Association>, T>>>::Operation: Send,
{
    #[inline]
    fn spawn_in(self, token: ReduceToken<Tk, T>) -> bool {
        <FoldSender<S, T> as Spawnable<Tk>>::spawn_in(FoldSender { sndr: self, red: token.red }, token.token)
    }
}

/// The sender spawned through a [`ReduceToken`]: `S`, whose value is folded into the
/// scope's reduction; it completes with `()`.
#[must_use = "senders do nothing unless connected and started"]
pub struct FoldSender<S, T> {
    sndr: S,
    red: Handle<T>,
}

impl<S, T> std::fmt::Debug for FoldSender<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FoldSender").finish_non_exhaustive()
    }
}

adaptor_sender!([S: Sender, T] FoldSender<S, T> where [S: Sender<Value = T>] {
    value = (), error = S::Error, stopped = S::SENDS_STOPPED
});

impl<S, T, R> SenderTo<R> for FoldSender<S, T>
where
    S: SenderTo<FoldReceiver<R, T>, Value = T>,
    R: Receiver<(), S::Error>,
{
    type Operation = S::Operation;
    #[inline]
    fn connect(self, rcvr: R) -> S::Operation {
        self.sndr.connect(FoldReceiver { rcvr, red: self.red })
    }
}

/// The receiver of work spawned through a [`ReduceToken`]: folds the value, then
/// completes its spawn receiver with `()`.
pub struct FoldReceiver<R, T> {
    rcvr: R,
    red: Handle<T>,
}

impl<R, T> std::fmt::Debug for FoldReceiver<R, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FoldReceiver").finish_non_exhaustive()
    }
}

impl<T, E, R: Receiver<(), E>> Receiver<T, E> for FoldReceiver<R, T> {
    type Env = R::Env;
    #[inline]
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    #[inline]
    fn set_value(self, value: T) {
        let red = self.red;
        // SAFETY: the work's association (held by the spawn receiver `rcvr`, which ends it
        // only when completed) keeps the scope, and so its reduction, alive.
        match catch(move || unsafe { red.fold(value) }) {
            Ok(()) => self.rcvr.set_value(()),
            Err(panic) => self.rcvr.set_panic(panic),
        }
    }
    fn set_error(self, error: E) {
        self.rcvr.set_error(error)
    }
    fn set_stopped(self) {
        // SAFETY: as in `set_value`.
        unsafe { self.red.mark_stopped() };
        self.rcvr.set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.rcvr.set_panic(panic)
    }
}

/// The reduction, once its scope is joined, as the completion of `rcvr`: the merged value,
/// or stopped if some reducing work stopped; a panic of `merge` or of a drop is
/// delivered. The reduction (its functions, and accumulators left over) is dropped
/// before the completion.
fn deliver<A, E, I, F, M, R>(red: Owned<Reduction<A, I, F, M>>, rcvr: R)
where
    I: Fn() -> A,
    M: Fn(A, A) -> A,
    R: Receiver<A, E>,
{
    // SAFETY: the caller's contract: the scope is joined, and `red` is owned here.
    let merged = catch(|| unsafe { red.get().finish() });
    match (merged, discard(red)) {
        (Ok(Some(value)), Ok(())) => rcvr.set_value(value),
        (Ok(None), Ok(())) => rcvr.set_stopped(),
        (Err(panic), dropped) => {
            drop(dropped);
            rcvr.set_panic(panic)
        }
        (Ok(value), Err(panic)) => {
            let _ = discard(value);
            rcvr.set_panic(panic)
        }
    }
}

/// The final receiver of a [`let_async_scope_reduce`](crate::SenderExt::let_async_scope_reduce):
/// the scope's `()` completion becomes the merged value.
pub struct MergeReceiver<R, Red> {
    rcvr: R,
    red: Owned<Red>,
}

impl<R, Red> std::fmt::Debug for MergeReceiver<R, Red> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MergeReceiver").finish_non_exhaustive()
    }
}

impl<A, E, I, F, M, R> Receiver<(), E> for MergeReceiver<R, Reduction<A, I, F, M>>
where
    I: Fn() -> A,
    M: Fn(A, A) -> A,
    R: Receiver<A, E>,
{
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, (): ()) {
        // The scope completes only after its join.
        deliver(self.red, self.rcvr)
    }
    fn set_error(self, error: E) {
        match discard(self.red) {
            Ok(()) => self.rcvr.set_error(error),
            Err(panic) => {
                let _ = discard(error);
                self.rcvr.set_panic(panic)
            }
        }
    }
    fn set_stopped(self) {
        match discard(self.red) {
            Ok(()) => self.rcvr.set_stopped(),
            Err(panic) => self.rcvr.set_panic(panic),
        }
    }
    fn set_panic(self, panic: Panic) {
        let _ = discard(self.red);
        self.rcvr.set_panic(panic)
    }
}

/// The final receiver of a `let_async_scope_reduce` and its reduction's handle.
type MergeParts<R, A, I, F, M, T> = (MergeReceiver<R, Reduction<A, I, F, M>>, Handle<T>);

/// Makes the final receiver of a `let_async_scope_reduce` and the handle its body's
/// token carries.
pub(crate) fn merge_receiver<A, T, I, F, M, R>(init: I, fold: F, merge: M, rcvr: R) -> MergeParts<R, A, I, F, M, T>
where
    A: Send,
    I: Fn() -> A + Sync,
    F: Fn(&mut A, T) + Sync,
    M: Fn(A, A) -> A + Sync,
{
    let red = Owned::new(Reduction::new(init, fold, merge));
    let handle = red.get().handle();
    (MergeReceiver { rcvr, red }, handle)
}

/// A [`CountingScope`] with a reduction: work spawned through its [`ReduceToken`]
/// completes with a value of type `T`; each worker folds the values of the work it
/// completes into an accumulator of its own (`fold`, starting from `init()`), and
/// [`join`](Self::join) merges the accumulators (`merge`) and completes with the result.
///
/// `fold` and `merge` should make the result independent of how the values were split
/// between the accumulators (associative and commutative, as a sum, a count, a maximum
/// or a multiset): which worker completes which work, and in what order, is the pool's
/// choice. The accumulator need not be `Copy`, `Clone` or `Default`.
///
/// A value completed on a thread that is no pool worker (work that runs inline on
/// `main`, or completes on a timer's thread) is folded into one shared accumulator under
/// a lock.
///
/// Everything is `'static`, as for a [`CountingScope`]: the work may outlive every stack
/// frame. To fold values of work that borrows, use
/// [`let_async_scope_reduce`](crate::SenderExt::let_async_scope_reduce).
///
/// ```
/// use senders::{ReduceToken, CountingToken, ReducingScope, SenderExt, Spawnable, StaticThreadPool, PoolScheduler,
///     schedule, spawn, sync_wait};
///
/// // Counts the nodes of a binary tree of depth `d`, each node returning 1.
/// type Tk = ReduceToken<CountingToken, u64>;
/// fn node(tk: Tk, sch: PoolScheduler, d: u32) -> impl Spawnable<Tk> {
///     schedule(&sch.clone()).then(move |()| {
///         if d > 1 {
///             spawn(node(tk, sch.clone(), d - 1), tk);
///             spawn(node(tk, sch, d - 1), tk);
///         }
///         1u64
///     })
/// }
/// let pool = StaticThreadPool::new(2).unwrap();
/// let mut scope = ReducingScope::new(|| 0u64, |n: &mut u64, v: u64| *n += v, |a, b| a + b);
/// spawn(node(scope.token(), pool.scheduler(), 10), scope.token());
/// assert_eq!(sync_wait(scope.join()).unwrap(), Some(1023));
/// ```
pub struct ReducingScope<T, A> {
    // DROP ORDER: the scope first (it aborts if work is still associated), then the
    // reduction that work folds into.
    scope: CountingScope,
    red: Owned<dyn Finish<T, A>>,
}

/// What the join of a [`ReducingScope`] calls on its reduction.
trait Finish<T, A>: Send + Sync {
    fn handle(&self) -> Handle<T>;
    /// # Safety
    ///
    /// As for [`Reduction::finish`].
    unsafe fn finish(&self) -> Option<A>;
}

impl<T, A, I, F, M> Finish<T, A> for Reduction<A, I, F, M>
where
    A: Send,
    I: Fn() -> A + Send + Sync,
    F: Fn(&mut A, T) + Send + Sync,
    M: Fn(A, A) -> A + Send + Sync,
{
    fn handle(&self) -> Handle<T> {
        Reduction::handle(self)
    }
    unsafe fn finish(&self) -> Option<A> {
        // SAFETY: the caller's contract.
        unsafe { Reduction::finish(self) }
    }
}

impl<T, A> ReducingScope<T, A> {
    /// A scope in the `unused` state whose reduction starts each accumulator from
    /// `init()`, folds a value into one with `fold`, and merges two with `merge`.
    ///
    /// ```
    /// use senders::{ReducingScope, just, spawn, sync_wait};
    /// // The accumulator is a `Vec`: not `Copy`, and `init` allocates only for the
    /// // accumulators that are used.
    /// let mut scope = ReducingScope::new(Vec::new, |v: &mut Vec<u32>, x: u32| v.push(x), |mut a, b| { a.extend(b); a });
    /// for x in 0..4 {
    ///     spawn(just(x), scope.token()); // completes inline on `main`: the shared slot
    /// }
    /// let mut all = sync_wait(scope.join()).unwrap().unwrap();
    /// all.sort();
    /// assert_eq!(all, [0, 1, 2, 3]);
    /// ```
    pub fn new<I, F, M>(init: I, fold: F, merge: M) -> Self
    where
        T: 'static,
        A: Send + 'static,
        I: Fn() -> A + Send + Sync + 'static,
        F: Fn(&mut A, T) + Send + Sync + 'static,
        M: Fn(A, A) -> A + Send + Sync + 'static,
    {
        let red = Box::new(Reduction::new(init, fold, merge)) as Box<dyn Finish<T, A>>;
        ReducingScope { scope: CountingScope::new(), red: Owned(NonNull::from(Box::leak(red))) }
    }

    /// The token: [`spawn`](crate::spawn()) through it takes work whose value is `T`;
    /// [`ReduceToken::token`] gives the plain [`CountingToken`].
    pub fn token(&self) -> ReduceToken<CountingToken, T> {
        ReduceToken { token: self.scope.token(), red: self.red.get().handle() }
    }

    /// Closes the scope: every later spawn is refused.
    pub fn close(&self) {
        self.scope.close()
    }

    /// Requests stop on every operation nested in the scope, now or later. Reducing work
    /// that completes stopped makes the join complete stopped.
    ///
    /// ```
    /// use senders::{ReducingScope, SenderExt, StaticThreadPool, schedule, spawn, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let mut scope = ReducingScope::new(|| 0u32, |n: &mut u32, v: u32| *n += v, |a, b| a + b);
    /// scope.request_stop();
    /// spawn(schedule(&pool.scheduler()).then(|()| 1u32), scope.token()); // completes stopped
    /// assert_eq!(sync_wait(scope.join()).unwrap(), None, "a value is missing: stopped");
    /// ```
    pub fn request_stop(&self) {
        self.scope.request_stop()
    }

    /// The current P3149 state of the scope.
    pub fn state(&self) -> ScopeState {
        self.scope.state()
    }

    /// A sender that completes once every association has ended, with the merged value
    /// of every accumulator (`init()` if nothing was folded); stopped if some reducing
    /// work completed stopped (the partial accumulators are then dropped); with the first
    /// panic of spawned work, of `init`, `fold` or `merge`, if any. The accumulators are
    /// taken: a later join starts from `init()` again.
    ///
    /// It borrows the scope uniquely, so two joins never merge at the same time; tokens
    /// taken before keep working (the scope's own work may spawn while it joins).
    ///
    /// ```
    /// use std::panic::{AssertUnwindSafe, catch_unwind};
    /// use senders::{ReducingScope, SenderExt, StaticThreadPool, schedule, spawn, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let mut scope = ReducingScope::new(|| 0u32, |n: &mut u32, v: u32| *n += v, |a, b| a + b);
    /// spawn(schedule(&pool.scheduler()).then(|()| -> u32 { panic!("lost?") }), scope.token());
    /// spawn(schedule(&pool.scheduler()).then(|()| 2u32), scope.token());
    /// let joined = catch_unwind(AssertUnwindSafe(|| sync_wait(scope.join())));
    /// assert!(joined.is_err(), "the join resumes the spawned work's panic");
    /// ```
    pub fn join(&mut self) -> ReduceJoin<'_, T, A> {
        ReduceJoin { join: self.scope.join(), red: self.red.get() }
    }
}

impl<T, A> std::fmt::Debug for ReducingScope<T, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReducingScope").field("state", &self.state()).finish_non_exhaustive()
    }
}

/// The sender of [`ReducingScope::join`].
#[must_use = "senders do nothing unless connected and started"]
pub struct ReduceJoin<'a, T, A> {
    join: JoinSender<'a>,
    red: &'a dyn Finish<T, A>,
}

impl<T, A> std::fmt::Debug for ReduceJoin<'_, T, A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReduceJoin").finish_non_exhaustive()
    }
}

sender!(['a, T, A] ReduceJoin<'a, T, A> { value = A, error = Infallible, stopped = true, domain = NoDomain });

impl<'a, T, A, R> SenderTo<R> for ReduceJoin<'a, T, A>
where
    R: Receiver<A, Infallible>,
    JoinSender<'a>: Sender<Value = (), Error = Infallible> + SenderTo<ReduceJoinReceiver<'a, T, A, R>>,
{
    type Operation = <JoinSender<'a> as SenderTo<ReduceJoinReceiver<'a, T, A, R>>>::Operation;
    fn connect(self, rcvr: R) -> Self::Operation {
        self.join.connect(ReduceJoinReceiver { rcvr, red: self.red, _t: PhantomData })
    }
}

/// The receiver of a [`ReducingScope`]'s inner join: merges, then completes.
pub struct ReduceJoinReceiver<'a, T, A, R> {
    rcvr: R,
    red: &'a dyn Finish<T, A>,
    _t: PhantomData<fn(T) -> A>,
}

impl<T, A, R> std::fmt::Debug for ReduceJoinReceiver<'_, T, A, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReduceJoinReceiver").finish_non_exhaustive()
    }
}

impl<T, A, R: Receiver<A, Infallible>> Receiver<(), Infallible> for ReduceJoinReceiver<'_, T, A, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, (): ()) {
        // SAFETY: the join completes with a value only once the count is zero under it
        // (the scope is joined), and the scope's unique borrow keeps other joins out.
        match catch(|| unsafe { self.red.finish() }) {
            Ok(Some(value)) => self.rcvr.set_value(value),
            Ok(None) => self.rcvr.set_stopped(),
            Err(panic) => self.rcvr.set_panic(panic),
        }
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        self.rcvr.set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.rcvr.set_panic(panic)
    }
}

/// The token of a [`let_async_scope_reduce`](crate::SenderExt::let_async_scope_reduce)
/// whose work returns values of type `T`: a [`ReduceToken`] over the
/// [`LetScopeToken`]. Work spawned through it may borrow for `'s`, as through the plain
/// token.
pub type LetReduceToken<'s, 'env, Sch, T, E = Infallible> = ReduceToken<LetScopeToken<'s, 'env, Sch, E>, T>;

/// The function of a `let_async_scope_reduce`, as the `let_async_scope` under it calls
/// it: it hands the user's function a [`LetReduceToken`].
pub struct ReduceBody<F, T> {
    f: F,
    red: Handle<T>,
}

impl<F, T> std::fmt::Debug for ReduceBody<F, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReduceBody").finish_non_exhaustive()
    }
}

impl<'env, Sch, E, V, F, T, S2> LetScopeFn<'env, Sch, E, V> for ReduceBody<F, T>
where
    F: for<'s> FnOnce(LetReduceToken<'s, 'env, Sch, T, E>, &'s mut V) -> S2,
{
    type Output = S2;
    fn call<'s>(self, token: LetScopeToken<'s, 'env, Sch, E>, value: &'s mut V) -> S2 {
        (self.f)(ReduceToken { token, red: self.red }, value)
    }
}

/// The variance and types a [`LetAsyncScopeReduce`] carries without values.
type ReduceMarker<'env, T, A, Sch, S2> = PhantomData<(Invariant<'env>, fn(T) -> A, fn() -> (Sch, S2))>;

/// The sender of [`let_async_scope_reduce`].
#[must_use = "senders do nothing unless connected and started"]
pub struct LetAsyncScopeReduce<'env, S, T, A, I, Fo, M, F, Sch, S2> {
    sndr: S,
    init: I,
    fold: Fo,
    merge: M,
    f: F,
    _p: ReduceMarker<'env, T, A, Sch, S2>,
}

impl<S, T, A, I, Fo, M, F, Sch, S2> std::fmt::Debug for LetAsyncScopeReduce<'_, S, T, A, I, Fo, M, F, Sch, S2> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LetAsyncScopeReduce").finish_non_exhaustive()
    }
}

/// `let_async_scope_reduce(sndr, init, fold, merge, f)`: a
/// [`let_async_scope`](crate::let_async_scope()) whose spawned work returns values, folded
/// into per-worker accumulators and merged when the scope is joined; the merged value is
/// its completion. See
/// [`SenderExt::let_async_scope_reduce`](crate::SenderExt::let_async_scope_reduce).
pub fn let_async_scope_reduce<'env, S, T, A, I, Fo, M, F, Sch, S2>(
    sndr: S,
    init: I,
    fold: Fo,
    merge: M,
    f: F,
) -> LetAsyncScopeReduce<'env, S, T, A, I, Fo, M, F, Sch, S2>
where
    S: Sender,
    A: Send,
    I: Fn() -> A + Send + Sync,
    Fo: Fn(&mut A, T) + Send + Sync,
    M: Fn(A, A) -> A + Send + Sync,
    F: for<'s> FnOnce(LetReduceToken<'s, 'env, Sch, T, S::Error>, &'s mut S::Value) -> S2,
    S2: IntoScopeSender<S::Error>,
    S2::Sender: Sender<Value = ()>,
    Sch: MaybeScheduler,
{
    LetAsyncScopeReduce { sndr, init, fold, merge, f, _p: PhantomData }
}

sender!(['env, S, T, A, I, Fo, M, F, Sch, S2] LetAsyncScopeReduce<'env, S, T, A, I, Fo, M, F, Sch, S2>
    where [S: Sender] { value = A, error = S::Error, stopped = true, domain = NoDomain });

impl<'env, S, T, A, I, Fo, M, F, Sch, S2, R> SenderTo<R> for LetAsyncScopeReduce<'env, S, T, A, I, Fo, M, F, Sch, S2>
where
    S: Sender,
    A: Send,
    I: Fn() -> A + Send + Sync,
    Fo: Fn(&mut A, T) + Send + Sync,
    M: Fn(A, A) -> A + Send + Sync,
    R: Receiver<A, S::Error>,
    S2: IntoScopeSender<S::Error>,
    S2::Sender: Sender<Value = ()>,
    ReduceBody<F, T>: LetScopeFn<'env, Sch, S::Error, S::Value, Output = S2>,
    LetAsyncScope<'env, S, ReduceBody<F, T>, Sch, S2>:
        Sender<Value = (), Error = S::Error> + SenderTo<MergeReceiver<R, Reduction<A, I, Fo, M>>>,
{
    type Operation = <LetAsyncScope<'env, S, ReduceBody<F, T>, Sch, S2> as SenderTo<
        MergeReceiver<R, Reduction<A, I, Fo, M>>,
    >>::Operation;
    fn connect(self, rcvr: R) -> Self::Operation {
        let (rcvr, red) = merge_receiver(self.init, self.fold, self.merge, rcvr);
        LetAsyncScope::with_fn(self.sndr, ReduceBody { f: self.f, red }).connect(rcvr)
    }
}
