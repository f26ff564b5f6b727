//! `spawn` (P3149R6): start work associated with a scope; and the heap block in which
//! every spawned operation lives, shared with [`spawn_future`](super::spawn_future)
//! and the future bridge.
//!
//! A spawned sender is connected into one heap block ([`SpawnBlock`]): a head that its
//! receiver reaches (at least the association with the scope), then the operation. For
//! `spawn` the block is freed when the operation completes, *before* the scope hears of
//! the completion (P3149's order: destroy the operation, free its storage, then
//! dissociate). How the operation is started is the domain's choice
//! ([`Domain::apply_spawn`](crate::Domain::apply_spawn)): the default starts it inline;
//! the pool's domain pushes it onto the current worker's deque. A sender without a
//! domain of its own (a [`Task`](crate::Task), `just(..).then(..)`) is started as the
//! pool's domain starts it: queued on the worker that spawns it, inline
//! on any other thread.

use std::any::TypeId;
use std::marker::PhantomPinned;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::pin::Pin;
use std::ptr::{self, NonNull};

use crate::domain::{Domain, EarlyDomain, NoDomain};
use crate::job::{JobRef, SpawnedOp};
use crate::panic::Panic;
use crate::pool::PoolDomain;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo};

use super::token::{Association, ScopeLifetime};

/// What a spawned operation's block holds in front of the operation: what its receiver
/// reaches, which cannot name the operation's type. It holds the association, which
/// ends (is dropped) only once the operation is gone.
pub(crate) trait SpawnHead {
    /// The association with the scope.
    type Assoc;
    /// The association, moved out when the block ends.
    fn assoc(&mut self) -> &mut ManuallyDrop<Self::Assoc>;
}

/// The heap block of a spawned operation: its head, then the operation. The head comes
/// first (`repr(C)`), so that the receiver finds it at the block's address.
#[repr(C)]
pub(crate) struct SpawnBlock<H, Op> {
    pub(crate) head: H,
    op: MaybeUninit<Op>,
    _pin: PhantomPinned,
}

impl<H: SpawnHead, Op: OperationState> SpawnBlock<H, Op> {
    /// Moves `head` into a fresh block and connects `sndr` there, to the receiver that
    /// `rcvr` makes from the head's address. The operation is not started.
    ///
    /// # Panics
    ///
    /// A panic in `connect` (user sender or scheduler code) unwinds out of this call
    /// after the block is gone: the association is taken out, the rest of the head is
    /// dropped, the block freed, and then the association ends, so the scope's count is
    /// balanced.
    #[inline]
    pub(crate) fn connect<S, R>(head: H, sndr: S, rcvr: impl FnOnce(*mut H) -> R) -> NonNull<Self>
    where
        S: SenderTo<R, Operation = Op>,
        R: Receiver<S::Value, S::Error>,
    {
        let block = crate::block::new(SpawnBlock { head, op: MaybeUninit::uninit(), _pin: PhantomPinned });
        // The head is the block's first field (`repr(C)`).
        let rcvr = rcvr(block.as_ptr().cast::<H>());
        match crate::panic::catch(|| sndr.connect(rcvr)) {
            Ok(op) => {
                // SAFETY: the block is fresh and never moves; the operation is written once.
                unsafe { (*block.as_ptr()).op.write(op) };
                block
            }
            Err(panic) => {
                // SAFETY: `block` came from `block::new` with this type and holds no
                // operation; the association is moved out once, the rest of the head is
                // dropped once, in place.
                let assoc = unsafe {
                    crate::block::free_after(block, || {
                        let head = &raw mut (*block.as_ptr()).head;
                        let assoc = ManuallyDrop::take((*head).assoc());
                        ptr::drop_in_place(head);
                        assoc
                    })
                };
                drop(assoc);
                panic.resume();
            }
        }
    }

    /// The spawned operation of a block from [`connect`](Self::connect): its job starts
    /// the operation in place, and `discard` (given the block's address) ends it if it
    /// is dropped unstarted.
    ///
    /// # Safety
    ///
    /// `block` came from `connect` and is handed out once; the operation (and whatever
    /// `discard` touches) may be started or discarded from any thread.
    #[inline]
    pub(crate) unsafe fn into_spawned(block: NonNull<Self>, discard: unsafe fn(*const ())) -> SpawnedOp {
        // SAFETY: the caller's contract; the block lives until the operation completes
        // (or `discard` ends it), and exactly one of the two runs, once.
        unsafe { SpawnedOp::new(JobRef::new(block.as_ptr(), Self::start), discard) }
    }

    /// Starts the operation of a block from [`connect`](Self::connect) on this thread.
    ///
    /// # Safety
    ///
    /// The operation is unstarted, and started once (the block is not also handed out by
    /// [`into_spawned`](Self::into_spawned)).
    pub(crate) unsafe fn start_in_place(block: NonNull<Self>) {
        // SAFETY: the caller's contract.
        unsafe { Self::start(block.as_ptr().cast(), ()) }
    }

    /// # Safety
    ///
    /// `block` is an unstarted `Self` from `connect`; called once.
    unsafe fn start(block: *const (), (): ()) {
        // SAFETY: the caller's contract: the block is alive until the operation
        // completes, and never moves.
        unsafe { Pin::new_unchecked((*block.cast_mut().cast::<Self>()).op.assume_init_mut()).start() }
    }

    /// Drops the operation in place.
    ///
    /// # Safety
    ///
    /// `head` is the head of a block from `connect` whose operation has completed or was
    /// never started, and will not be touched again; called once.
    pub(crate) unsafe fn drop_op(head: *mut H) {
        // SAFETY: the caller's contract; the head is the block's first field.
        unsafe { (*head.cast::<Self>()).op.assume_init_drop() }
    }
}

/// Starts a spawned operation of a sender `S` through its domain's
/// [`Domain::apply_spawn`]; for a sender without a domain of its own
/// ([`NoDomain`]: a [`Task`](crate::Task), a `just`, a `then` of one), through the
/// pool's, which adapts at run time: called on a pool worker it queues the work on that
/// worker's deque, where idle workers steal it; on any other thread it starts the work
/// inline, as the default domain does. So a spawn on a worker never runs the whole of
/// such work inline, in turn, on the spawning worker; a spawn elsewhere is unchanged.
///
/// The choice is made on the domain's type: it is a constant once the function is
/// compiled for `S`, so a sender with a domain pays nothing for it.
#[inline(always)]
pub(crate) fn apply_spawn<S: Sender>(op: SpawnedOp) {
    if TypeId::of::<S::Domain>() == TypeId::of::<NoDomain>() {
        PoolDomain.apply_spawn(op)
    } else {
        EarlyDomain::<S>::default().apply_spawn(op)
    }
}

/// The head of a `spawn`ed operation's block: only the association.
pub(crate) struct SpawnHeadOf<A>(ManuallyDrop<A>);

impl<A> SpawnHead for SpawnHeadOf<A> {
    type Assoc = A;
    fn assoc(&mut self) -> &mut ManuallyDrop<A> {
        &mut self.0
    }
}

/// The receiver of a spawned sender: destroys the operation, frees its block, then
/// dissociates. Its environment carries the scope's stop token.
pub struct SpawnReceiver<A: Association> {
    /// The head of the `SpawnBlock`, which holds the association.
    head: *mut SpawnHeadOf<A>,
    /// Ends the operation: `free_block` of the block's types.
    free: unsafe fn(*const ()),
}

// SAFETY: completes on any thread; it only frees the block (whose operation is `Send`)
// and uses the association, which is `Send`, from one thread at a time.
unsafe impl<A: Association> Send for SpawnReceiver<A> {}
// SAFETY: a shared reference only reaches `env()`, whose stop token is `Sync`.
unsafe impl<A: Association> Sync for SpawnReceiver<A> {}

impl<A: Association> SpawnReceiver<A> {
    fn assoc(&self) -> &A {
        // SAFETY: the association lives in the block's head until `finish` takes it out.
        unsafe { &(*self.head).0 }
    }

    fn finish(self) {
        // SAFETY: the block is the live allocation this receiver's operation lives in;
        // the operation does not touch itself after calling its receiver, so it may be
        // destroyed now. `free` drops the association last (P3149's order: destroy the
        // operation, free its storage, dissociate).
        unsafe { (self.free)(self.head.cast_const().cast()) }
    }
}

/// The receiver of spawned work accepts any error its scope can hold (`X: Into<A::Error>`)
/// and hands it to the scope; its environment is the association's (the scope's stop
/// token, and for a `let_async_scope` the outer receiver's scheduler and queries).
impl<A: Association, X: Into<A::Error>> Receiver<(), X> for SpawnReceiver<A> {
    type Env = A::Env;
    #[inline]
    fn env(&self) -> &A::Env {
        self.assoc().env()
    }
    fn set_value(self, (): ()) {
        self.finish()
    }
    fn set_error(self, error: X) {
        self.assoc().report_error(error.into());
        self.finish()
    }
    fn set_stopped(self) {
        self.finish()
    }
    fn set_panic(self, panic: Panic) {
        self.assoc().report_panic(panic);
        self.finish()
    }
}

/// Destroys the operation, frees the block, then ends the association (P3149's order).
///
/// # Safety
///
/// `block` is a `SpawnBlock<SpawnHeadOf<A>, Op>` whose operation has completed (or was
/// never started); called once.
///
/// A panic in the operation's drop (a user `Drop` in the spawned work) is reported to the
/// scope like any panic of spawned work; the association still ends, the block is freed.
unsafe fn free_block<Op: OperationState, A: Association>(block: *const ()) {
    let block = block.cast_mut().cast::<SpawnBlock<SpawnHeadOf<A>, Op>>();
    let head = block.cast::<SpawnHeadOf<A>>();
    // SAFETY: the caller's contract. The operation was initialized by `spawn` and is
    // dropped exactly once (drop glue finishes dropping it when a part panics); the
    // association is moved out once; the block itself has no drop glue left and is
    // freed once.
    unsafe {
        if let Err(panic) = crate::panic::catch(|| SpawnBlock::<_, Op>::drop_op(head)) {
            report_drop_panic(&*(*head).0, panic);
        }
        let assoc = ManuallyDrop::take(&mut (*head).0);
        crate::block::free(NonNull::new_unchecked(block));
        drop(assoc);
    }
}

/// Hands the scope a panic from a spawned operation's drop: out of line, so that nothing
/// of it stays live across the free on the common path.
#[cold]
#[inline(never)]
fn report_drop_panic<A: Association>(assoc: &A, panic: Panic) {
    assoc.report_panic(panic);
}

/// A sender that [`spawn`] can start in the scope of a token of type `Tk`.
///
/// It is implemented for every sender that completes with `()`, whose error the scope
/// can hold (`Error: Into<` the association's error `>`: only
/// [`Infallible`](std::convert::Infallible) for the counting scopes), that lives as long as the scope (`'static`
/// for the counting scopes, the scope's lifetime for a
/// [`let_async_scope`](crate::SenderExt::let_async_scope)), and whose operation can be
/// sent to the thread that runs it. Use it as the return type of a function that makes
/// spawned work, so that the caller does not have to name the receiver it is connected
/// to:
///
/// ```
/// use senders::{CountingScope, CountingToken, SenderExt, Spawnable, just, spawn, sync_wait};
/// fn work(n: u32) -> impl Spawnable<CountingToken> {
///     just(n).then(|n| assert!(n < 10))
/// }
/// let scope = CountingScope::new();
/// spawn(work(3), scope.token());
/// sync_wait(scope.join()).unwrap();
/// ```
pub trait Spawnable<Tk>: Sender {
    /// Connects the sender into its heap block and starts it (or drops it if the scope
    /// refuses). Use [`spawn`].
    #[doc(hidden)]
    fn spawn_in(self, token: Tk) -> bool;
}

/// The operation of a spawned sender `W` in a scope whose association is `A`.
type SpawnOp<W, A> = <W as SenderTo<SpawnReceiver<A>>>::Operation;

impl<'scope, S, Tk> Spawnable<Tk> for S
where
    S: Sender<Value = ()> + 'scope,
    S::Error: Into<<Tk::Association as Association>::Error>,
    Tk: ScopeLifetime<'scope>,
    S: SenderTo<SpawnReceiver<Tk::Association>> + Send + 'scope,
    SpawnOp<S, Tk::Association>: Send,
{
    #[inline]
    fn spawn_in(self, token: Tk) -> bool {
        type Op<S, A> = SpawnOp<S, A>;
        let Some(assoc) = token.try_associate() else {
            return false;
        };
        let block =
            SpawnBlock::<_, Op<S, Tk::Association>>::connect(SpawnHeadOf(ManuallyDrop::new(assoc)), self, |head| {
                SpawnReceiver { head, free: free_block::<Op<S, Tk::Association>, Tk::Association> }
            });
        // SAFETY: the block is handed out once; its operation and association are `Send`
        // (this impl's bounds), and discarding it is `free_block`, as for a completion.
        let op = unsafe { SpawnBlock::into_spawned(block, free_block::<Op<S, Tk::Association>, Tk::Association>) };
        apply_spawn::<S>(op);
        true
    }
}

/// Starts `sndr` as work associated with `token`'s scope (P3149R6 `spawn`), or drops it
/// if the scope refuses (closed or joined). Returns whether it was started.
///
/// # Panics
///
/// A panic in `connect` (user sender or scheduler code) unwinds out of `spawn`, as the
/// exception does in C++, after the association has ended: the scope's count is
/// balanced and its join is not held up.
///
/// The sender must complete with `()`, and its error must be one the scope can hold,
/// checked at compile time (see [`Spawnable`]): the counting scopes take only senders
/// that cannot fail (`Error = Infallible`); a
/// [`let_async_scope`](crate::SenderExt::let_async_scope) takes its own error type (or
/// one that converts into it) and completes with the first such error. A stop is always
/// allowed. A panic in the work is handed to the scope, whose join resumes it. The
/// sender must live as long as the scope: `'static` for the counting scopes, whose work
/// may outlive every stack frame.
///
/// One allocation per spawn holds the operation and its association. On completion the
/// operation is destroyed, the block is freed, and only then does the association end
/// (P3149's order). How the operation starts is the sender's domain's choice (P2999
/// `apply_sender`): inline by default; on a [`StaticThreadPool`](crate::StaticThreadPool)
/// worker, it is pushed on that worker's deque and counted on that worker's shard. A
/// sender with no domain of its own, such as a [`Task`](crate::Task), is started as the
/// pool's domain starts it: queued on the spawning worker's deque when
/// `spawn` is called on a pool worker, inline on any other thread.
///
/// The counting scopes' work must be `'static` (it may outlive every stack frame): a
/// sender that borrows a local does not compile here, whatever `+ 's` the compiler
/// suggests. To spawn work that borrows, use
/// [`let_async_scope`](crate::SenderExt::let_async_scope), whose scope is joined before
/// it completes, so its token takes work that borrows the caller's frame and the
/// scope's value.
///
/// ```
/// use senders::{SimpleCountingScope, just, spawn, sync_wait, SenderExt};
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// let scope = SimpleCountingScope::new();
/// let hits = Arc::new(AtomicUsize::new(0));
/// let h = hits.clone();
/// assert!(spawn(just(()).then(move |()| { h.fetch_add(1, Ordering::SeqCst); }), scope.token()));
/// scope.close();
/// assert!(!spawn(just(()), scope.token())); // refused: never runs
/// sync_wait(scope.join()).unwrap();
/// assert_eq!(hits.load(Ordering::SeqCst), 1);
/// ```
#[inline]
pub fn spawn<S: Spawnable<Tk>, Tk>(sndr: S, token: Tk) -> bool {
    sndr.spawn_in(token)
}
