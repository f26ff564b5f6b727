//! `AnySender`: a type-erased sender (stdexec/unifex `any_sender_of`).
//!
//! An [`AnySender<'a, V, E, Sch>`](AnySender) completes with a value `V`, an error `E`,
//! stopped, or a panic, whatever the sender inside. It is one heap block from the
//! per-thread recycler (`src/block/`), made when the sender is erased: the erased
//! receiver type ([`AnyReceiver`]) is fixed, so the inner operation's type is known then,
//! and the block holds the sender and later, in the same place, its operation. Connecting
//! allocates nothing; the block is freed when the `AnySender`, or its operation, is dropped.
//!
//! The inner sender is connected when the outer operation starts (only then is the address
//! of the real receiver, inside the pinned outer operation, fixed) to an [`AnyReceiver`]:
//! a pointer to the real receiver and a table of its completion and environment functions.
//!
//! What survives erasure is tabled on [`AnySender`].
//!
//! **The erased receiver** is two words, a pointer to the outer operation and a pointer
//! to the table (one constant per receiver type), so it travels in registers through
//! the connects and completions it crosses (the table inline, eight words, would be
//! copied through memory at every one). The block is freed as soon as the inner
//! operation completes, before the real receiver is called (the inner operation no
//! longer touches itself): otherwise a recursion would keep every finished subtree's
//! operations alive until the root completed.
//!
//! **Ready values.** `Sender::into_ready_value` (a provided method that returns the
//! sender unchanged; `Just` returns its value) lets `AnySender::new` keep the value of
//! a `just(v).boxed()` leaf in the `AnySender` itself when it fits one word (size and
//! alignment), and its operation completes the real receiver with it when started, as
//! `just`'s would (`just` observes neither stop token nor environment, so nothing is
//! lost). A larger value takes a block, so an `AnySender` stays small in collections.
//!
//! **Leaves that compute.** A leaf `just(x).then(f).boxed()` is kept without a block,
//! too, when `x` and what `f` captures fit one word together and need no drop: as a
//! `ReadyFn`, a function pointer that makes the value from the state in the room. Three
//! things make that exact:
//!
//! - *The domain.* `then` is customizable late, by the domain found at `connect`, which
//!   for an `AnySender` is the erased environment's (`Sch`'s, or the pool's). Only a
//!   domain whose `Domain::THEN_IS_DEFAULT` is true (one whose `default_transforms!`
//!   writes `then`'s default, and the pool's domain) has the `then` run as a plain
//!   call. `tests/domains.rs`
//!   checks that a domain customizing `then` still sees an erased `just(2).then(..)` at
//!   connect.
//! - *`Send`.* The hooks, `Sender::into_ready_fn` and `Sender::into_held_value`, take a
//!   token that no type outside the crate can name, so only `Then` and `Just` answer
//!   them: the state is the function and the value the `just` held, parts of a sender
//!   that `AnySender::new` requires to be `Send`. (`into_ready_value`, public, is
//!   answered by user senders too.)
//! - *The semantics.* The function runs when the operation starts, on the starting
//!   thread, once, never if the sender is dropped unstarted; a panic completes with
//!   `set_panic`; a stop request does not stop it, as it does not stop `then` of a
//!   `just` (`tests/any_sender.rs`).
//!
//! **Two words.** An `AnySender`'s first word says what the second holds (a block's
//! pointer, a ready value, nothing, or else it is the `ReadyFn`'s function, whose
//! address is never one of the three small tags), so it is passed and returned in
//! registers; an enum of the three kinds would take three words, passed through memory.
//! The `ReadyFn`'s start is out of line, so that the starts of blocks and ready values
//! keep their small frame.
//!
//! **Where it may sit.** The receivers an erased sender may be connected to are `Send +
//! Sync` with a `Sync` environment. The internal receivers that point into their
//! operation (`ContinuesOnReceiver`, `StartsOnHopReceiver`, `PoolBulkReceiver`, ...)
//! are `Sync` because a shared reference reaches only the environment, the final
//! receiver's; completing takes the receiver by value.

use std::any::{Any, TypeId};
use std::cell::UnsafeCell;
use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::mem::ManuallyDrop;
use std::pin::Pin;
use std::ptr::NonNull;

use crate::env::Env;
use crate::panic::{Panic, catch};
pub use crate::ready::ReadyFn;
use crate::ready::{Lazy, Room, fits_room};
use crate::receiver::Receiver;
use crate::scheduler::{MaybeScheduler, NoScheduler, Scheduler};
use crate::sender::seal::Seal;
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
    ///
    /// ```
    /// use senders::InlineScheduler;
    /// use senders::{any::IntoAnyScheduler, schedulers::NoScheduler};
    /// let sch = InlineScheduler;
    /// assert_eq!(IntoAnyScheduler::<InlineScheduler>::into_any(sch.clone()), sch, "kept");
    /// assert_eq!(IntoAnyScheduler::<NoScheduler>::into_any(sch), NoScheduler, "forgotten");
    /// ```
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
    #[inline]
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

/// A `V` kept in one word: built only where `V` fits it ([`Ready::FITS`]).
struct Ready<V> {
    room: Room,
    _v: PhantomData<V>,
}

impl<V> Ready<V> {
    /// Whether a `V` fits the room, in size and alignment.
    const FITS: bool = fits_room::<V>();

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

/// What an [`AnySender`] holds, in two words so that it is passed and returned in
/// registers: a block, a ready value (the sender was a `just`), or a value to make by a
/// plain call (the sender was `then` of a `just`, [`ReadyFn`]). `kind` says which: `BLOCK`
/// (the room holds the block's address), `READY` (the room holds the value), `TAKEN`
/// (nothing), or else the address of the call that makes the value from the state in
/// the room. No function is at those three addresses, which are in the first page.
struct Repr<V, E, Sch> {
    kind: *const (),
    room: Room,
    _holds: PhantomData<(HeaderPtr<V, E, Sch>, V)>,
}

/// A block, by its header.
type HeaderPtr<V, E, Sch> = NonNull<Header<V, E, Sch>>;

/// `Repr::kind`: the room holds a block's address.
const BLOCK: *const () = std::ptr::without_provenance(0);
/// `Repr::kind`: the room holds a ready value.
const READY: *const () = std::ptr::without_provenance(1);
/// `Repr::kind`: the room holds nothing.
const TAKEN: *const () = std::ptr::without_provenance(2);

/// A [`Repr`] taken apart.
enum Held<V, E, Sch> {
    Block(NonNull<Header<V, E, Sch>>),
    Ready(Ready<V>),
    Lazy(Lazy<V>),
    Taken,
}

impl<V, E, Sch> Repr<V, E, Sch> {
    #[inline]
    fn new(held: Held<V, E, Sch>) -> Self {
        let (kind, room) = match held {
            Held::Block(block) => {
                let mut room = Room::uninit();
                // SAFETY: a pointer fits the room (a word), which keeps its provenance.
                unsafe { room.as_mut_ptr().cast::<NonNull<Header<V, E, Sch>>>().write(block) };
                (BLOCK, room)
            }
            Held::Ready(ready) => (READY, ManuallyDrop::new(ready).room),
            Held::Lazy(lazy) => (lazy.call as *const (), lazy.room),
            Held::Taken => (TAKEN, Room::uninit()),
        };
        Repr { kind, room, _holds: PhantomData }
    }

    /// What it holds; it holds nothing after.
    #[inline]
    fn take(&mut self) -> Held<V, E, Sch> {
        let kind = std::mem::replace(&mut self.kind, TAKEN);
        let room = self.room;
        if kind == BLOCK {
            // SAFETY: the room holds the block's pointer (`new`).
            Held::Block(unsafe { room.as_ptr().cast::<NonNull<Header<V, E, Sch>>>().read() })
        } else if kind == READY {
            Held::Ready(Ready { room, _v: PhantomData })
        } else if kind == TAKEN {
            Held::Taken
        } else {
            // SAFETY: any other kind is a `Lazy`'s call, stored as its address (`new`).
            let call = unsafe { std::mem::transmute::<*const (), unsafe fn(Room) -> V>(kind) };
            Held::Lazy(Lazy { call, room })
        }
    }

    /// The block, if it holds one.
    #[inline]
    fn block(&self) -> Option<NonNull<Header<V, E, Sch>>> {
        // SAFETY: with `BLOCK`, the room holds the block's pointer (`new`).
        (self.kind == BLOCK).then(|| unsafe { self.room.as_ptr().cast::<NonNull<Header<V, E, Sch>>>().read() })
    }

    /// Drops what it holds (a block is freed, with what it holds); it holds nothing after.
    #[inline]
    fn clear(&mut self) {
        match self.take() {
            // SAFETY: the holder's block: unstarted, or its operation has completed (the
            // holders clear it only then).
            Held::Block(block) => unsafe { (block.as_ref().drop)(block) },
            // A ready value is dropped with `Ready`; a `Lazy`'s state needs no drop.
            Held::Ready(_) | Held::Lazy(_) | Held::Taken => {}
        }
    }
}

impl<V, E, Sch> Drop for Repr<V, E, Sch> {
    fn drop(&mut self) {
        self.clear();
    }
}

// ---------------------------------------------------------------------------------------
// The sender

/// A type-erased sender of `V` (or the error `E`, stopped, or a panic): any sender with
/// those completions, behind one recycled heap block. Use it for recursion (a function
/// returning senders of its own type) and for collections of different senders.
///
/// A sender that only completes with a value at once (`just(v)`, see
/// [`Sender::into_ready_value`](crate::Sender::into_ready_value)) is kept without a block when the value fits in one
/// word: the leaves of a recursion cost no allocation. So is `just(x).then(f)` when `x`
/// and what `f` captures fit one word together and need no drop, and the erased
/// environment's domain leaves `then` as it is ([`Domain::THEN_IS_DEFAULT`](crate::Domain::THEN_IS_DEFAULT), true for the
/// pool's): `f` is then called when the operation starts, on the thread that starts it,
/// as `then` would, with a panic delivered as `then` delivers it.
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
    repr: Repr<V, E, Sch>,
    _borrow: PhantomData<&'a ()>,
}

// SAFETY: built only from `Send` senders whose operations are `Send` (`new`); a ready
// value, and a `ReadyFn`'s state (a `then`'s function and the value its `just` held, by
// the sealed hooks), come out of such a sender.
unsafe impl<V, E, Sch> Send for AnySender<'_, V, E, Sch> {}

impl<V, E, Sch> std::fmt::Debug for AnySender<'_, V, E, Sch> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnySender").finish_non_exhaustive()
    }
}

impl<'a, V, E, Sch: ErasedEnvScheduler> AnySender<'a, V, E, Sch> {
    /// Erases `sndr`: one block from the per-thread recycler. The erased sender may
    /// borrow for `'a`, as `sndr` does.
    ///
    /// ```
    /// use senders::{AnySender, SenderExt, just, sync_wait};
    /// let v = vec![1, 2, 3];
    /// let sum: AnySender<'_, i32> = AnySender::new(just(&v).then(|v: &Vec<i32>| v.iter().sum()));
    /// assert_eq!(sync_wait(sum).unwrap(), Some(6));
    /// ```
    pub fn new<S>(sndr: S) -> Self
    where
        S: SenderTo<AnyReceiver<V, E, Sch>, Value = V, Error = E> + Send + 'a,
        OpOf<S, V, E, Sch>: Send,
    {
        let sndr = if Ready::<V>::FITS {
            match sndr.into_ready_value() {
                Ok(value) => return AnySender::with(Held::Ready(Ready::new(value))),
                Err(sndr) => sndr,
            }
        } else {
            sndr
        };
        let sndr = match sndr.into_ready_fn::<'a, AnyReceiver<V, E, Sch>>(Seal(())) {
            // The state's borrows are bounded by `'a`, as the `AnySender`'s are.
            Ok(ready) => return AnySender::with(Held::Lazy(ready.lazy)),
            Err(sndr) => sndr,
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
        AnySender::with(Held::Block(block.cast()))
    }
}

impl<V, E, Sch> AnySender<'_, V, E, Sch> {
    fn with(held: Held<V, E, Sch>) -> Self {
        AnySender { repr: Repr::new(held), _borrow: PhantomData }
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
            repr: UnsafeCell::new(self.repr),
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
    repr: UnsafeCell<Repr<V, E, Sch>>,
    rcvr: UnsafeCell<Option<R>>,
    _borrow: PhantomData<&'a ()>,
    _pin: PhantomPinned,
}

// SAFETY: the block's sender and operation, and a ready value, are `Send`
// (`AnySender::new`); the receiver is `Send` (the `SenderTo` impl).
unsafe impl<V, E, Sch, R: Send> Send for AnyOp<'_, V, E, Sch, R> {}

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
            (*(*this).repr.get()).clear();
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

/// Completes `rcvr` with the value `lazy` makes, as `then` of a `just` would have: a panic
/// in it completes with `set_panic`. Out of line, so that the start of a block or a ready
/// value keeps its small frame.
#[inline(never)]
fn start_lazy<V, E, R: Receiver<V, E>>(lazy: Lazy<V>, rcvr: R) {
    match catch(move || lazy.call()) {
        Ok(value) => rcvr.set_value(value),
        Err(p) => rcvr.set_panic(p),
    }
}

impl<V, E, Sch, R> OperationState for AnyOp<'_, V, E, Sch, R>
where
    Sch: ErasedEnvScheduler,
    R: Receiver<V, E>,
    <R::Env as Env>::Scheduler: IntoAnyScheduler<Sch>,
{
    #[inline]
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: the operation is pinned and lives until it completes; the receiver cell
        // stays in place, so the erased receiver may point at it.
        let this = unsafe { self.get_unchecked_mut() };
        let repr = this.repr.get_mut();
        let Some(block) = repr.block() else {
            let held = repr.take();
            let rcvr = this.rcvr.get_mut().take().expect("AnySender: completes once");
            return match held {
                // A ready value completes at once, as the `just` it was would have.
                Held::Ready(value) => rcvr.set_value(value.take()),
                Held::Lazy(lazy) => start_lazy(lazy, rcvr),
                Held::Block(_) | Held::Taken => panic!("AnySender: started once"),
            };
        };
        let rcvr = AnyReceiver { rcvr: std::ptr::from_ref(this).cast(), vtable: Self::VTABLE };
        // SAFETY: the block holds the unstarted sender; it stays in place until dropped
        // with this operation, after the completion.
        unsafe { (block.as_ref().start)(block, rcvr) }
    }

    /// A ready value does: it is handed to the receiver. (A `ReadyFn` runs user code.)
    #[inline]
    unsafe fn completes_at_once(&self) -> bool {
        // SAFETY: not started (the caller's contract), so nothing else reads or writes
        // the repr.
        unsafe { (*self.repr.get()).kind == READY }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::adaptors::then::then;
    use crate::factories::just;

    fn kind<V>(s: &AnySender<'_, V>) -> *const () {
        s.repr.kind
    }

    /// What an `AnySender` keeps: a ready value, a plain call for `then` of a `just` whose
    /// state fits a word and needs no drop, and a block for everything else.
    #[test]
    fn then_of_a_just_is_kept_as_a_plain_call_only_when_its_state_fits_and_needs_no_drop() {
        assert_eq!(kind(&AnySender::new(just(7u64))), READY);
        let one_word = 5u32;
        let lazy = AnySender::new(then(just(2u32), move |x| x + one_word));
        assert!(![BLOCK, READY, TAKEN].contains(&kind(&lazy)), "a plain call, no block");
        assert_eq!(crate::sync_wait(lazy).unwrap(), Some(7));
        let (a, b) = (1u64, 2u64);
        assert_eq!(kind(&AnySender::new(then(just(()), move |()| a + b))), BLOCK, "two words of state");
        let owned = String::from("drop me");
        assert_eq!(kind(&AnySender::new(then(just(()), move |()| owned.len()))), BLOCK, "a state with a drop");
        let then_of_then = then(then(just(()), |()| 1), |x| x + 1);
        assert_eq!(kind(&AnySender::new(then_of_then)), BLOCK, "`then` of a `then`");
        assert_eq!(size_of::<AnySender<'_, u64>>(), 2 * size_of::<usize>(), "two words, in registers");
    }
}
