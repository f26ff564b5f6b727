//! `spawn` (P3149R6): start work associated with a scope, and the `spawn` hook of
//! domains.
//!
//! A spawned sender is connected into one heap allocation, which is freed when the
//! operation completes, *before* the scope hears of the completion (P3149's order:
//! destroy the operation, free its storage, then dissociate). How the operation is
//! started is the domain's choice ([`Domain::apply_spawn`](crate::Domain::apply_spawn)):
//! the default starts it inline; the pool's domain pushes it onto the current worker's
//! deque.

use std::mem::{ManuallyDrop, MaybeUninit};
use std::pin::Pin;
use std::ptr::NonNull;

use crate::domain::{Domain, EarlyDomain};

use crate::panic::Panic;
use crate::receiver::Receiver;

use crate::scope::{Association, ScopeLifetime};
use crate::sender::{OperationState, Sender, SenderTo};

/// A spawned operation, connected and heap-allocated, not started yet: what
/// [`Domain::apply_spawn`](crate::Domain::apply_spawn) decides how to start.
///
/// Dropping it without starting it frees the operation and ends its association, so a
/// domain cannot lose a spawned operation's accounting.
pub struct SpawnedOp {
    pub(crate) ptr: *mut (),
    pub(crate) start: unsafe fn(*const ()),
    pub(crate) discard: unsafe fn(*mut ()),
}

// SAFETY: only created by `spawn` and `spawn_future`, which require the operation and
// the association to be `Send`.
unsafe impl Send for SpawnedOp {}

impl SpawnedOp {
    /// Starts the operation on the calling thread.
    pub fn start(self) {
        let this = std::mem::ManuallyDrop::new(self);
        // SAFETY: `ptr` is the unstarted boxed operation and `start` its starter; the
        // `ManuallyDrop` keeps `Drop` from discarding it as well.
        unsafe { (this.start)(this.ptr) }
    }

    /// The operation as a type-erased pointer and its start function, for a scheduler
    /// that queues it (the pool's job type). The callee must call `start(ptr)` exactly
    /// once.
    pub(crate) fn into_raw(self) -> (*const (), unsafe fn(*const ())) {
        let this = std::mem::ManuallyDrop::new(self);
        (this.ptr, this.start)
    }
}

impl Drop for SpawnedOp {
    fn drop(&mut self) {
        // SAFETY: never started; `discard` frees the box and dissociates.
        unsafe { (self.discard)(self.ptr) }
    }
}

/// The heap block of one spawned operation: its association, then the operation. The
/// association comes first (`repr(C)`), so that the receiver, which cannot name the
/// operation's type, finds it at the block's address.
#[repr(C)]
struct SpawnBox<Op, A> {
    assoc: ManuallyDrop<A>,
    op: MaybeUninit<Op>,
}

/// The receiver of a spawned sender: destroys the operation, frees its block, then
/// dissociates. Its environment carries the scope's stop token.
pub struct SpawnReceiver<A: Association> {
    /// The `SpawnBox`, whose first field is the association.
    block: *mut A,
    /// Ends the operation: `free_block` of the box's types.
    free: unsafe fn(*mut ()),
}

// SAFETY: completes on any thread; it only frees the block (whose operation is `Send`)
// and uses the association, which is `Send`, from one thread at a time.
unsafe impl<A: Association> Send for SpawnReceiver<A> {}
// SAFETY: a shared reference only reaches `env()`, whose stop token is `Sync`.
unsafe impl<A: Association> Sync for SpawnReceiver<A> {}

impl<A: Association> SpawnReceiver<A> {
    fn assoc(&self) -> &A {
        // SAFETY: the association lives at the start of the block (`SpawnBox` is
        // `repr(C)`) until `finish` takes it out.
        unsafe { &*self.block }
    }

    fn finish(self) {
        // SAFETY: the block is the live allocation this receiver's operation lives in;
        // the operation does not touch itself after calling its receiver, so it may be
        // destroyed now. `free` drops the association last (P3149's order: destroy the
        // operation, free its storage, dissociate).
        unsafe { (self.free)(self.block.cast()) }
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
/// `block` is a `Box<SpawnBox<Op, A>>` whose operation was written and has completed
/// (or was never started); called once.
///
/// A panic in the operation's drop (a user `Drop` in the spawned work) is reported to the
/// scope like any panic of spawned work; the association still ends, the block is freed.
unsafe fn free_block<Op, A: Association>(block: *mut ()) {
    let block = block.cast::<SpawnBox<Op, A>>();
    // SAFETY: the caller's contract. The operation was initialized by `spawn` and is
    // dropped exactly once (drop glue finishes dropping it when a part panics); the
    // association is moved out once; the block itself has no drop glue left and is
    // freed once.
    unsafe {
        if let Err(panic) = crate::panic::catch(|| (*block).op.assume_init_drop()) {
            report_drop_panic(&*(*block).assoc, panic);
        }
        let assoc = ManuallyDrop::take(&mut (*block).assoc);
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

/// # Safety
///
/// `block` is an unstarted `Box<SpawnBox<Op, A>>` from `spawn`; called once.
unsafe fn start_block<Op: OperationState, A>(block: *const ()) {
    // SAFETY: the box is alive until the operation completes, and never moves.
    unsafe {
        let op = (*block.cast_mut().cast::<SpawnBox<Op, A>>()).op.assume_init_mut();
        Pin::new_unchecked(op).start();
    }
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
        let Some(assoc) = token.try_associate() else {
            return false;
        };
        let sndr = self;
        let block = crate::block::new(SpawnBox::<SpawnOp<S, Tk::Association>, Tk::Association> {
            assoc: ManuallyDrop::new(assoc),
            op: MaybeUninit::uninit(),
        })
        .as_ptr();
        // The association stays at the block's address until `free_block` moves it out.
        let rcvr = SpawnReceiver {
            block: block.cast::<Tk::Association>(),
            free: free_block::<SpawnOp<S, Tk::Association>, Tk::Association>,
        };
        let op = match crate::panic::catch(|| sndr.connect(rcvr)) {
            Ok(op) => op,
            Err(panic) => {
                // Nothing was written: take the association back out, free the block,
                // end the association, and let the caller see the panic.
                // SAFETY: `block` came from `block::new` with this type; the association
                // is moved out once and nothing else in the block needs dropping.
                let assoc = unsafe {
                    crate::block::free_after(NonNull::new_unchecked(block), || ManuallyDrop::take(&mut (*block).assoc))
                };
                drop(assoc);
                panic.resume();
            }
        };
        // SAFETY: the operation is written once and stays in place until `free_block`.
        unsafe { (*block).op.write(op) };
        let op = SpawnedOp {
            ptr: block.cast(),
            start: start_block::<SpawnOp<S, Tk::Association>, Tk::Association>,
            discard: free_block::<SpawnOp<S, Tk::Association>, Tk::Association>,
        };
        EarlyDomain::<S>::default().apply_spawn(op);
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
/// worker, it is pushed on that worker's deque and counted on that worker's shard.
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
