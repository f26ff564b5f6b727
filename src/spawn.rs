//! Spawning detached work into a scope: the `spawn` hook of domains, and a minimal
//! scope interface that the async-scope issue (P3149) will build the counting scopes on.
//!
//! A spawned sender is connected into one heap allocation, which is freed when the
//! operation completes, *before* the scope hears of the completion (P3149's order:
//! destroy the operation, free its storage, then dissociate). How the operation is
//! started is the domain's choice ([`Domain::apply_spawn`](crate::Domain::apply_spawn)):
//! the default starts it inline; the pool's domain pushes it onto the current worker's
//! deque.

use std::convert::Infallible;
use std::mem::MaybeUninit;
use std::pin::Pin;

use crate::domain::{Domain, EarlyDomain};
use crate::env::EmptyEnv;
use crate::panic::Panic;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo};

/// What a spawned operation reports to when it ends. The async-scope issue implements
/// this with the P3149 counting scopes; until then it is the minimal interface the
/// `spawn` hook needs.
pub trait SpawnScope: Send + Sync + 'static {
    /// The spawned operation has completed and its storage is freed. `panic` is the
    /// panic of its user code, if any; it is never dropped silently by the crate.
    fn completed(&self, panic: Option<Panic>);
}

/// A spawned operation, connected and heap-allocated, not started yet: what
/// [`Domain::apply_spawn`](crate::Domain::apply_spawn) decides how to start.
///
/// Dropping it without starting it frees the operation and reports the scope as
/// completed, so a domain cannot lose a spawned operation's accounting.
pub struct SpawnedOp {
    ptr: *mut (),
    start: unsafe fn(*const ()),
    discard: unsafe fn(*mut ()),
}

// SAFETY: only created by `spawn`, which requires the sender (hence its operation and
// the scope handle in the receiver) to be `Send`.
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
        // SAFETY: never started; `discard` frees the box and reports to the scope.
        unsafe { (self.discard)(self.ptr) }
    }
}

/// The heap block of one spawned operation.
struct SpawnBox<Op, Sc> {
    op: MaybeUninit<Op>,
    scope: Option<std::sync::Arc<Sc>>,
}

/// The receiver of a spawned sender: frees the operation, then tells the scope.
pub struct SpawnReceiver<Sc: SpawnScope> {
    block: *mut (),
    free: unsafe fn(*mut ()) -> std::sync::Arc<Sc>,
}

// SAFETY: completes on any thread; it only frees the block (whose operation is `Send`)
// and calls the `Sync` scope.
unsafe impl<Sc: SpawnScope> Send for SpawnReceiver<Sc> {}
// SAFETY: a shared reference only reaches `env()`, which returns a constant.
unsafe impl<Sc: SpawnScope> Sync for SpawnReceiver<Sc> {}

impl<Sc: SpawnScope> SpawnReceiver<Sc> {
    fn finish(self, panic: Option<Panic>) {
        // SAFETY: the block is the live allocation this receiver's operation lives in;
        // the operation does not touch itself after calling its receiver, so it may be
        // destroyed now, before the scope is told (P3149's order).
        let scope = unsafe { (self.free)(self.block) };
        scope.completed(panic);
    }
}

impl<Sc: SpawnScope> Receiver<(), Infallible> for SpawnReceiver<Sc> {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, (): ()) {
        self.finish(None)
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        self.finish(None)
    }
    fn set_panic(self, panic: Panic) {
        self.finish(Some(panic))
    }
}

/// # Safety
///
/// `block` is a `Box<SpawnBox<Op, Sc>>` whose operation was written and has completed
/// (or was never started); called once.
unsafe fn free_block<Op, Sc: SpawnScope>(block: *mut ()) -> std::sync::Arc<Sc> {
    // SAFETY: the caller's contract.
    let mut boxed = unsafe { Box::from_raw(block.cast::<SpawnBox<Op, Sc>>()) };
    // SAFETY: the operation was initialized by `spawn`; it is dropped exactly once.
    unsafe { boxed.op.assume_init_drop() };
    boxed.scope.take().expect("spawn: scope present")
}

/// # Safety
///
/// `block` is an unstarted `Box<SpawnBox<Op, Sc>>` from `spawn`; called once.
unsafe fn start_block<Op: OperationState, Sc>(block: *const ()) {
    // SAFETY: the box is alive until the operation completes, and never moves.
    unsafe {
        let op = (*block.cast_mut().cast::<SpawnBox<Op, Sc>>()).op.assume_init_mut();
        Pin::new_unchecked(op).start();
    }
}

/// # Safety
///
/// As for `start_block`, for an operation that will never be started.
unsafe fn discard_block<Op, Sc: SpawnScope>(block: *mut ()) {
    // SAFETY: forwarded.
    let scope = unsafe { free_block::<Op, Sc>(block) };
    scope.completed(None);
}

/// Spawns `sndr` as detached work reported to `scope`, starting it as the sender's
/// domain decides (P2999 `apply_sender`): inline by default, on the current worker's
/// deque on a [`StaticThreadPool`](crate::StaticThreadPool).
///
/// The sender must complete with `()` and cannot fail (`Error = Infallible`); a stop is
/// allowed, and a panic is reported to the scope. It must be `'static`: detached work
/// may outlive every stack frame.
///
/// ```
/// use senders::{Panic, SpawnScope, just, spawn, SenderExt};
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// struct Count(AtomicUsize);
/// impl SpawnScope for Count {
///     fn completed(&self, _: Option<Panic>) { self.0.fetch_add(1, Ordering::SeqCst); }
/// }
/// let scope = Arc::new(Count(AtomicUsize::new(0)));
/// spawn(just(()).then(|()| ()), scope.clone());
/// assert_eq!(scope.0.load(Ordering::SeqCst), 1);
/// ```
pub fn spawn<S, Sc>(sndr: S, scope: std::sync::Arc<Sc>)
where
    S: Sender<Value = (), Error = Infallible> + SenderTo<SpawnReceiver<Sc>> + Send + 'static,
    S::Operation: Send,
    Sc: SpawnScope,
{
    let block = Box::into_raw(Box::new(SpawnBox::<S::Operation, Sc> { op: MaybeUninit::uninit(), scope: Some(scope) }));
    let rcvr = SpawnReceiver { block: block.cast(), free: free_block::<S::Operation, Sc> };
    // SAFETY: `block` is a fresh allocation; the operation is written once and stays
    // in place until `free_block`.
    unsafe { (*block).op.write(sndr.connect(rcvr)) };
    let op = SpawnedOp {
        ptr: block.cast(),
        start: start_block::<S::Operation, Sc>,
        discard: discard_block::<S::Operation, Sc>,
    };
    EarlyDomain::<S>::default().apply_spawn(op);
}
