//! `AnySender`: a type-erased sender (stdexec/unifex `any_sender_of`).
//!
//! An [`AnySender<'a, V, E, Sch>`](AnySender) completes with a value `V`, an error `E`,
//! stopped, or a panic, whatever the sender inside. It is one heap block from the
//! per-thread recycler (`src/block.rs`), made when the sender is erased: the erased
//! receiver type ([`AnyReceiver`]) is fixed, so the inner operation's type is known then,
//! and the block holds the sender and later, in the same place, its operation. Connecting
//! allocates nothing; the block is freed when the `AnySender`, or its operation, is dropped.
//!
//! The inner sender is connected when the outer operation starts (only then is the address
//! of the real receiver, inside the pinned outer operation, fixed) to an [`AnyReceiver`]:
//! a pointer to the real receiver and a table of its completion and environment functions.
//!
//! What survives erasure is tabled on [`AnySender`].

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::mem::{ManuallyDrop, MaybeUninit};
use std::pin::Pin;
use std::ptr::NonNull;

use crate::env::Env;
use crate::panic::{Panic, catch};
use crate::receiver::Receiver;
use crate::scheduler::{MaybeScheduler, NoScheduler, Scheduler};
use crate::sender::{OperationState, SenderTo, sender};
use crate::stop::StopToken;

// ---------------------------------------------------------------------------------------
// The erased receiver

/// The real receiver's functions, for one receiver type.
pub(crate) struct RcvrVTable<V, E, Sch> {
    set_value: unsafe fn(*const (), V),
    set_error: unsafe fn(*const (), E),
    set_stopped: unsafe fn(*const ()),
    set_panic: unsafe fn(*const (), Panic),
    scheduler: unsafe fn(*const ()) -> Sch,
    stop_token: unsafe fn(*const ()) -> StopToken<'static>,
    prop: unsafe fn(*const (), TypeId) -> Option<*const (dyn Any + Send + Sync)>,
}

/// The receiver an erased sender is connected to: a pointer to the real receiver (inside
/// the outer, pinned operation) and its functions' table, a static one per receiver type
/// (two words, so that the operations holding it stay small). It is its own environment.
pub struct AnyReceiver<V, E, Sch> {
    rcvr: *const (),
    /// Points at the table built by a constant (never freed); a raw pointer, since the
    /// table's types need not be `'static`.
    vtable: *const RcvrVTable<V, E, Sch>,
}

impl<V, E, Sch> AnyReceiver<V, E, Sch> {
    fn vtable(&self) -> &RcvrVTable<V, E, Sch> {
        // SAFETY: the table lives in constant memory, for the whole program.
        unsafe { &*self.vtable }
    }
}

// SAFETY: the real receiver is `Send` and `Sync`, with a `Sync` environment (required by
// `AnySender`'s `SenderTo` impl), and outlives this handle (the outer operation lives until
// it completes); the values and errors that cross are `Send`.
unsafe impl<V: Send, E: Send, Sch> Send for AnyReceiver<V, E, Sch> {}
// SAFETY: a shared reference only reaches the environment, which is `Sync`.
unsafe impl<V, E, Sch> Sync for AnyReceiver<V, E, Sch> {}

impl<V, E, Sch: ErasedEnvScheduler> Env for AnyReceiver<V, E, Sch> {
    type Scheduler = Sch;
    type Domain = Sch::EnvDomain;
    fn scheduler(&self) -> Sch {
        // SAFETY: the real receiver is alive until a completion consumes this handle.
        unsafe { (self.vtable().scheduler)(self.rcvr) }
    }
    fn stop_token(&self) -> StopToken<'_> {
        // SAFETY: as above; the token borrows the real receiver's env, which outlives the
        // borrow of `self` it is tied to here.
        unsafe { (self.vtable().stop_token)(self.rcvr) }
    }
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        // SAFETY: as above.
        unsafe { (self.vtable().prop)(self.rcvr, key).map(|p| &*p) }
    }
}

impl<V, E, Sch: ErasedEnvScheduler> Receiver<V, E> for AnyReceiver<V, E, Sch> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: V) {
        // SAFETY: the one completion of the real receiver, which is alive.
        unsafe { (self.vtable().set_value)(self.rcvr, value) }
    }
    fn set_error(self, error: E) {
        // SAFETY: as above.
        unsafe { (self.vtable().set_error)(self.rcvr, error) }
    }
    fn set_stopped(self) {
        // SAFETY: as above.
        unsafe { (self.vtable().set_stopped)(self.rcvr) }
    }
    fn set_panic(self, panic: Panic) {
        // SAFETY: as above.
        unsafe { (self.vtable().set_panic)(self.rcvr, panic) }
    }
}

/// The domain the erased environment shows: the scheduler's, or without one the pool's
/// domain, which adapts at run time (it forks `when_all` and splits `bulk` only on a pool
/// worker, and is the default elsewhere), since the real environment's domain type is
/// erased.
pub trait ErasedEnvScheduler: MaybeScheduler {
    /// The domain.
    type EnvDomain: crate::domain::MaybeDomain;
}

impl ErasedEnvScheduler for NoScheduler {
    type EnvDomain = crate::pool::PoolDomain;
}

impl<S: Scheduler> ErasedEnvScheduler for S {
    type EnvDomain = S::Domain;
}

/// How a receiver's environment scheduler becomes the erased environment's `Sch`: any
/// scheduler (or none) is forgotten into [`NoScheduler`]; a scheduler type is kept as
/// itself.
pub trait IntoAnyScheduler<Sch>: MaybeScheduler {
    /// Converts.
    fn into_any(self) -> Sch;
}

impl<X: MaybeScheduler> IntoAnyScheduler<NoScheduler> for X {
    fn into_any(self) -> NoScheduler {
        NoScheduler
    }
}

impl<S: Scheduler> IntoAnyScheduler<S> for S {
    fn into_any(self) -> S {
        self
    }
}

// ---------------------------------------------------------------------------------------
// The block

/// Connects a block's sender in place to the receiver and starts the operation.
type StartFn<V, E, Sch> = unsafe fn(NonNull<Header<V, E, Sch>>, AnyReceiver<V, E, Sch>);

/// The erased part of the block.
#[repr(C)]
struct Header<V, E, Sch> {
    /// Connects the sender in place to the receiver and starts the operation.
    start: StartFn<V, E, Sch>,
    /// Drops what the block holds (the sender or the operation) and frees it.
    drop: unsafe fn(NonNull<Header<V, E, Sch>>),
}

/// What a block holds: the sender until the operation starts, then, in the same place,
/// the operation. `holds` says which.
union SenderOrOp<S, Op> {
    sender: ManuallyDrop<S>,
    op: ManuallyDrop<Op>,
}

/// `Block::holds`: the sender.
const SENDER: u8 = 0;
/// `Block::holds`: the operation.
const OP: u8 = 1;
/// `Block::holds`: nothing (the sender was taken and `connect` panicked).
const EMPTY: u8 = 2;

#[repr(C)]
struct Block<V, E, Sch, S, Op> {
    header: Header<V, E, Sch>,
    holds: u8,
    held: SenderOrOp<S, Op>,
}

impl<V, E, Sch, S, Op> Drop for Block<V, E, Sch, S, Op> {
    fn drop(&mut self) {
        // SAFETY: `holds` names the live member of `held`, if any.
        unsafe {
            match self.holds {
                SENDER => ManuallyDrop::drop(&mut self.held.sender),
                OP => ManuallyDrop::drop(&mut self.held.op),
                _ => {}
            }
        }
    }
}

type OpOf<S, V, E, Sch> = <S as SenderTo<AnyReceiver<V, E, Sch>>>::Operation;

/// # Safety
///
/// `h` heads a live `Block` for `S` holding the sender; the block stays in place until
/// its `drop`.
unsafe fn start_block<V, E, Sch, S>(h: NonNull<Header<V, E, Sch>>, rcvr: AnyReceiver<V, E, Sch>)
where
    Sch: ErasedEnvScheduler,
    S: SenderTo<AnyReceiver<V, E, Sch>, Value = V, Error = E>,
{
    let block = h.cast::<Block<V, E, Sch, S, OpOf<S, V, E, Sch>>>().as_ptr();
    // SAFETY: the caller's contract: the block is ours and does not move.
    unsafe {
        assert!((*block).holds == SENDER, "AnySender: started once");
        (*block).holds = EMPTY;
        let sndr = ManuallyDrop::take(&mut (*block).held.sender);
        let op: *mut OpOf<S, V, E, Sch> = (&raw mut (*block).held.op).cast();
        let set_panic = rcvr.vtable().set_panic;
        let real = rcvr.rcvr;
        // `connect` returns straight into the block (no copy of a large operation), and a
        // panic in it (or in a domain hook it runs) completes the real receiver.
        match catch(move || op.write(sndr.connect(rcvr))) {
            Ok(()) => {
                (*block).holds = OP;
                // The operation is pinned in the block, which never moves; started once.
                Pin::new_unchecked(&mut *op).start()
            }
            // The real receiver is alive and was not completed (the erased receiver went
            // down with the unwind).
            Err(p) => (set_panic)(real, p),
        }
    }
}

/// # Safety
///
/// `h` heads a live `Block` for `S` whose operation (if any) has completed or never
/// started; called once.
unsafe fn drop_block<V, E, Sch, S, Op>(h: NonNull<Header<V, E, Sch>>) {
    let block = h.cast::<Block<V, E, Sch, S, Op>>();
    // SAFETY: the caller's contract.
    unsafe { crate::block::drop_and_free(block) }
}

// ---------------------------------------------------------------------------------------
// A ready value

/// The room an [`AnySender`] has for a ready value of its own, instead of a block: one
/// word, so that an `AnySender` is two (a tag and the room or the block) and is passed
/// and returned in registers.
type Room = MaybeUninit<usize>;

/// A `V` kept in one word: built only where `V` fits it ([`Ready::FITS`]).
struct Ready<V> {
    room: Room,
    _v: PhantomData<V>,
}

impl<V> Ready<V> {
    /// Whether a `V` fits the room, in size and alignment.
    const FITS: bool = size_of::<V>() <= size_of::<Room>() && align_of::<V>() <= align_of::<Room>();

    fn new(value: V) -> Self {
        assert!(Self::FITS, "AnySender: a ready value that does not fit");
        let mut room = Room::uninit();
        // SAFETY: the room has the size and alignment for a `V` (asserted).
        unsafe { room.as_mut_ptr().cast::<V>().write(value) };
        Ready { room, _v: PhantomData }
    }

    fn take(self) -> V {
        let this = ManuallyDrop::new(self);
        // SAFETY: the room holds a `V` (`new`), read once: `this` is not dropped.
        unsafe { this.room.as_ptr().cast::<V>().read() }
    }
}

// Never pinned in place: it is moved out and handed over by value, so an `AnySender`
// stays `Unpin` whatever `V`, as it was with a block alone.
impl<V> Unpin for Ready<V> {}

impl<V> Drop for Ready<V> {
    fn drop(&mut self) {
        // SAFETY: the room holds a `V` (`new`; `take` forgets `self`).
        unsafe { std::ptr::drop_in_place(self.room.as_mut_ptr().cast::<V>()) }
    }
}

/// What an [`AnySender`] holds: a block, or a ready value (the sender was a `just`).
enum Repr<V, E, Sch> {
    Block(NonNull<Header<V, E, Sch>>),
    Ready(Ready<V>),
}

// ---------------------------------------------------------------------------------------
// The sender

/// A type-erased sender of `V` (or the error `E`, stopped, or a panic): any sender with
/// those completions, behind one recycled heap block. Use it for recursion (a function
/// returning senders of its own type) and for collections of different senders.
///
/// A sender that only completes with a value at once (`just(v)`, see
/// [`Sender::into_ready_value`](crate::Sender::into_ready_value)) is kept without a block when the value fits in one
/// word: the leaves of a recursion cost no allocation.
///
/// `'a` is what the erased sender borrows; `Sch` is the scheduler its environment shows.
///
/// # What survives erasure
///
/// | | with `Sch = NoScheduler` (the default) | with `Sch` a scheduler type |
/// |---|---|---|
/// | connects to | any receiver | receivers whose environment's scheduler is an `Sch` |
/// | the inner sender's env: scheduler | none | the receiver's (`read_env(GetScheduler)` works) |
/// | its env: domain (late customization of the inner sender) | the pool's, which adapts at run time | `Sch`'s |
/// | its env: stop token, user queries | the receiver's | the receiver's |
/// | the `AnySender`'s domain (early customization of what is built on it) | none | `Sch`'s |
///
/// So a recursion of `when_all`s of `AnySender`s forks on the pool whenever it runs on a
/// pool worker: the erased environment's domain is the pool's, whose `when_all` forks on
/// a worker and is sequential elsewhere (the real environment's domain type is erased).
/// With `Sch = PoolScheduler` the pool's domain is also the `AnySender`'s own. What does
/// not survive: the inner sender's own domain and completion scheduler are hidden from
/// what is built on the `AnySender`, and the real environment's domain, if it is neither
/// the pool's nor `Sch`'s.
///
/// ```
/// use senders::{AnySender, SenderExt, StaticThreadPool, just, starts_on, sync_wait, when_all};
///
/// fn fib(n: u32) -> AnySender<'static, u64> {
///     if n < 2 {
///         return just(u64::from(n)).boxed();
///     }
///     // `let_value` builds the children only when this node runs.
///     just(()).let_value(move |()| when_all((fib(n - 1), fib(n - 2))).then(|(a, b)| a + b)).boxed()
/// }
///
/// let pool = StaticThreadPool::new(2).unwrap();
/// // On the pool's workers, the erased environment's domain (the pool's) forks `when_all`.
/// assert_eq!(sync_wait(starts_on(pool.scheduler(), fib(20))).unwrap(), Some(6765));
///
/// let mixed: Vec<AnySender<'static, i32>> = vec![just(1).boxed(), just(20).then(|x| x + 1).boxed()];
/// let sum: i32 = mixed.into_iter().map(|s| sync_wait(s).unwrap().unwrap()).sum();
/// assert_eq!(sum, 22);
/// ```
#[must_use = "senders do nothing unless connected and started"]
pub struct AnySender<'a, V, E = Infallible, Sch = NoScheduler> {
    repr: ManuallyDrop<Repr<V, E, Sch>>,
    _borrow: PhantomData<&'a ()>,
}

// SAFETY: built only from `Send` senders whose operations are `Send` (`new`); a ready
// value comes out of such a sender.
unsafe impl<V, E, Sch> Send for AnySender<'_, V, E, Sch> {}

impl<V, E, Sch> std::fmt::Debug for AnySender<'_, V, E, Sch> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnySender").finish_non_exhaustive()
    }
}

impl<'a, V, E, Sch: ErasedEnvScheduler> AnySender<'a, V, E, Sch> {
    /// Erases `sndr`: one block from the per-thread recycler.
    pub fn new<S>(sndr: S) -> Self
    where
        S: SenderTo<AnyReceiver<V, E, Sch>, Value = V, Error = E> + Send + 'a,
        OpOf<S, V, E, Sch>: Send,
    {
        let sndr = if Ready::<V>::FITS {
            match sndr.into_ready_value() {
                Ok(value) => return AnySender::with(Repr::Ready(Ready::new(value))),
                Err(sndr) => sndr,
            }
        } else {
            sndr
        };
        let block = crate::block::uninit::<Block<V, E, Sch, S, OpOf<S, V, E, Sch>>>();
        let b = block.as_ptr();
        // SAFETY: a fresh block for this type; the fields are written one by one, so
        // that only the sender, not the whole union (sized for the operation), is copied.
        unsafe {
            (&raw mut (*b).header).write(Header {
                start: start_block::<V, E, Sch, S>,
                drop: drop_block::<V, E, Sch, S, OpOf<S, V, E, Sch>>,
            });
            (&raw mut (*b).holds).write(SENDER);
            (&raw mut (*b).held.sender).write(ManuallyDrop::new(sndr));
        }
        AnySender::with(Repr::Block(block.cast()))
    }
}

impl<V, E, Sch> AnySender<'_, V, E, Sch> {
    fn with(repr: Repr<V, E, Sch>) -> Self {
        AnySender { repr: ManuallyDrop::new(repr), _borrow: PhantomData }
    }

    fn into_repr(self) -> Repr<V, E, Sch> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: taken once; `this` is not dropped, so the repr is not dropped twice.
        unsafe { ManuallyDrop::take(&mut this.repr) }
    }
}

impl<V, E, Sch> Drop for AnySender<'_, V, E, Sch> {
    fn drop(&mut self) {
        // SAFETY: dropped once, here; nothing touches `repr` after.
        match unsafe { ManuallyDrop::take(&mut self.repr) } {
            // SAFETY: an unconnected `AnySender` owns its block, which holds the sender.
            Repr::Block(block) => unsafe { (block.as_ref().drop)(block) },
            Repr::Ready(value) => drop(value),
        }
    }
}

sender!(['a, V, E, Sch: MaybeScheduler] AnySender<'a, V, E, Sch> { value = V, error = E, stopped = true, domain = Sch::Domain });

impl<'a, V, E, Sch, R> SenderTo<R> for AnySender<'a, V, E, Sch>
where
    Sch: ErasedEnvScheduler,
    R: Receiver<V, E> + Send + Sync,
    R::Env: Sync,
    <R::Env as Env>::Scheduler: IntoAnyScheduler<Sch>,
{
    type Operation = AnyOp<'a, V, E, Sch, R>;
    fn connect(self, receiver: R) -> AnyOp<'a, V, E, Sch, R> {
        AnyOp {
            repr: UnsafeCell::new(Some(self.into_repr())),
            rcvr: UnsafeCell::new(Some(receiver)),
            _borrow: PhantomData,
            _pin: PhantomPinned,
        }
    }
}

/// The operation state of an [`AnySender`]: what the sender held (its block, or its ready
/// value until started) and the real receiver. The block (with the inner operation) is
/// freed as soon as the inner operation completes, before the real receiver is called, so
/// a finished subtree of a recursion holds no memory.
pub struct AnyOp<'a, V, E, Sch, R> {
    /// The block while it lives (taken by the completion, or by the drop of an operation
    /// that never started), or the ready value until started.
    repr: UnsafeCell<Option<Repr<V, E, Sch>>>,
    rcvr: UnsafeCell<Option<R>>,
    _borrow: PhantomData<&'a ()>,
    _pin: PhantomPinned,
}

// SAFETY: the block's sender and operation, and a ready value, are `Send`
// (`AnySender::new`); the receiver is `Send` (the `SenderTo` impl).
unsafe impl<V, E, Sch, R: Send> Send for AnyOp<'_, V, E, Sch, R> {}

impl<V, E, Sch, R> Drop for AnyOp<'_, V, E, Sch, R> {
    fn drop(&mut self) {
        if let Some(Repr::Block(block)) = self.repr.get_mut().take() {
            // SAFETY: the operation has completed (or never started): the block is ours.
            unsafe { (block.as_ref().drop)(block) }
        }
    }
}

impl<'a, V, E, Sch, R> AnyOp<'a, V, E, Sch, R>
where
    Sch: ErasedEnvScheduler,
    R: Receiver<V, E>,
    <R::Env as Env>::Scheduler: IntoAnyScheduler<Sch>,
{
    const VTABLE: *const RcvrVTable<V, E, Sch> = &RcvrVTable {
        set_value: Self::set_value,
        set_error: Self::set_error,
        set_stopped: Self::set_stopped,
        set_panic: Self::set_panic,
        scheduler: Self::scheduler,
        stop_token: Self::stop_token,
        prop: Self::prop,
    };

    /// # Safety
    ///
    /// `p` is a live, started `Self`, not yet completed.
    unsafe fn rcvr<'x>(p: *const ()) -> &'x R {
        // SAFETY: the caller's contract.
        unsafe { (*(*p.cast::<Self>()).rcvr.get()).as_ref() }.expect("AnySender: receiver")
    }

    /// The completion: frees the block (the inner operation called its receiver and does
    /// not touch itself again), then hands over the real receiver.
    ///
    /// # Safety
    ///
    /// As for `rcvr`; the one completion.
    unsafe fn take(p: *const ()) -> R {
        let this = p.cast::<Self>();
        // SAFETY: the caller's contract; the completion owns the block now.
        unsafe {
            if let Some(Repr::Block(block)) = (*(*this).repr.get()).take() {
                (block.as_ref().drop)(block);
            }
            (*(*this).rcvr.get()).take().expect("AnySender: completes once")
        }
    }

    unsafe fn set_value(p: *const (), v: V) {
        // SAFETY: forwarded.
        unsafe { Self::take(p) }.set_value(v)
    }
    unsafe fn set_error(p: *const (), e: E) {
        // SAFETY: forwarded.
        unsafe { Self::take(p) }.set_error(e)
    }
    unsafe fn set_stopped(p: *const ()) {
        // SAFETY: forwarded.
        unsafe { Self::take(p) }.set_stopped()
    }
    unsafe fn set_panic(p: *const (), panic: Panic) {
        // SAFETY: forwarded.
        unsafe { Self::take(p) }.set_panic(panic)
    }
    unsafe fn scheduler(p: *const ()) -> Sch {
        // SAFETY: forwarded.
        unsafe { Self::rcvr(p) }.env().scheduler().into_any()
    }
    unsafe fn stop_token(p: *const ()) -> StopToken<'static> {
        // SAFETY: forwarded; the erased receiver ties the token back to its own borrow.
        unsafe { std::mem::transmute::<StopToken<'_>, StopToken<'static>>(Self::rcvr(p).env().stop_token()) }
    }
    unsafe fn prop(p: *const (), key: TypeId) -> Option<*const (dyn Any + Send + Sync)> {
        // SAFETY: forwarded.
        unsafe { Self::rcvr(p) }.env().prop(key).map(|a| a as *const _)
    }
}

impl<V, E, Sch, R> OperationState for AnyOp<'_, V, E, Sch, R>
where
    Sch: ErasedEnvScheduler,
    R: Receiver<V, E>,
    <R::Env as Env>::Scheduler: IntoAnyScheduler<Sch>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: the operation is pinned and lives until it completes; the receiver cell
        // stays in place, so the erased receiver may point at it.
        let this = unsafe { self.get_unchecked_mut() };
        let block = match this.repr.get_mut() {
            Some(Repr::Block(block)) => *block,
            ready => {
                // A ready value completes at once, as the `just` it was would have.
                let Some(Repr::Ready(value)) = ready.take() else { panic!("AnySender: started once") };
                let rcvr = this.rcvr.get_mut().take().expect("AnySender: completes once");
                return rcvr.set_value(value.take());
            }
        };
        let rcvr = AnyReceiver { rcvr: std::ptr::from_ref(this).cast(), vtable: Self::VTABLE };
        // SAFETY: the block holds the unstarted sender; it stays in place until dropped
        // with this operation, after the completion.
        unsafe { (block.as_ref().start)(block, rcvr) }
    }
}
