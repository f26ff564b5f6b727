//! Awaiting a sender: the `Awaited` future, where its operation lives, its receiver.

use std::any::{Any, TypeId};
use std::cell::{Cell, UnsafeCell};
use std::future::Future;
use std::marker::{PhantomData, PhantomPinned};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::task::{Context, Poll};

use crate::env::Env;
use crate::panic::Panic;
use crate::pool::PoolDomain;
use crate::receiver::Receiver;
use crate::sender::{Awaitable, OperationState, Sender, SenderTo};
use crate::stop::StopToken;
use crate::sync::Ordering;

use super::scheduler::TaskScheduler;
use super::state::{AwaitNode, CURRENT, DROP_ONLY, HomeKey, TaskCtx};

/// A sender being awaited inside a [`Task`](crate::Task): what `.await` on a sender makes.
///
/// It resolves to `Ok(value)` or `Err(error)`; a stopped or panicking sender completes the
/// task instead (the future is not resumed). It must be polled by a
/// [`Task`](crate::Task): polled elsewhere it panics (use
/// [`into_awaitable`](crate::into_awaitable()) for other executors).
///
/// Its type asks only `S: Sender`, and its operation is stored without its type (the
/// typed code is in the functions `poll` and the task's start call): an `async` block
/// holding it across an `.await` is then `Send` by the sender's own `Send`, even when the
/// sender's `connect` needs a higher-ranked bound (a `let_async_scope` or
/// `let_value_ref` function), which the compiler cannot prove again for the lifetimes it
/// erases when it checks the block's `Send`.
#[must_use = "futures do nothing unless awaited"]
#[repr(C)]
pub struct Awaited<S: Sender> {
    node: AwaitNode,
    sndr: Option<S>,
    op: OpStorage,
    result: UnsafeCell<Option<Result<S::Value, S::Error>>>,
    _pin: PhantomPinned,
}

/// Words of room an [`Awaited`] keeps for its operation.
const OP_ROOM: usize = 5;

/// Where an awaited operation lives: in the `Awaited`'s own room when it fits (a `just`,
/// a pool `schedule()`: 40 bytes), otherwise in a recycled block (a `when_all` of
/// tasks holds both tasks' operations, 640 bytes). The `Awaited` is part of the task's
/// future, which `Task::new` copies whole into the frame whatever state it is in, so a
/// large operation inline would be copied, uninitialized, at every `Task::new` (and a
/// word more in the `Awaited` makes a task fib's frame too large to copy without a call
/// to `memcpy`). The operation's type is given to each typed method; what drops it is
/// found through `op`.
struct OpStorage {
    /// How to drop the connected operation: the head of its block, or a constant for one
    /// in the room that has drop glue; null when there is nothing to drop (not
    /// connected, or in the room without drop glue, as a `just`'s).
    op: *mut OpDrop,
    room: MaybeUninit<[usize; OP_ROOM]>,
}

/// Drops a connected operation, given its storage.
struct OpDrop {
    drop: unsafe fn(&mut OpStorage),
}

/// The block of an operation too large for the room: how to drop it, then the operation.
#[repr(C)]
struct OpBlock<Op> {
    head: OpDrop,
    op: Op,
}

/// The `OpDrop` of an operation in the room.
struct InlineDrop<Op>(PhantomData<Op>);

impl<Op> InlineDrop<Op> {
    const DROP: *const OpDrop = &OpDrop { drop: OpStorage::drop_inline::<Op> };
}

impl OpStorage {
    /// Whether an `Op` lives in the room.
    const fn inline<Op>() -> bool {
        size_of::<Op>() <= size_of::<[usize; OP_ROOM]>() && align_of::<Op>() <= align_of::<usize>()
    }

    /// Whether an `Op`, once connected, is to be dropped: in a block, or with drop glue.
    const fn kept<Op>() -> bool {
        !Self::inline::<Op>() || std::mem::needs_drop::<Op>()
    }

    fn new() -> Self {
        OpStorage { op: ptr::null_mut(), room: MaybeUninit::uninit() }
    }

    /// Puts the operation `connect` makes in place: in the room, or in a block.
    ///
    /// # Safety
    ///
    /// The storage is pinned (it never moves again) and holds no operation.
    #[inline]
    unsafe fn connect<Op>(&mut self, connect: impl FnOnce() -> Op) {
        if Self::inline::<Op>() {
            // SAFETY: the room fits an `Op`; it is written straight there and never
            // moves again (the caller's pin).
            unsafe { self.room.as_mut_ptr().cast::<Op>().write(connect()) };
            if std::mem::needs_drop::<Op>() {
                self.op = InlineDrop::<Op>::DROP.cast_mut();
            }
            return;
        }
        let block = crate::block::uninit::<OpBlock<Op>>().as_ptr();
        // A panic in `connect` unwinds through the task's poll: the block is given back
        // first.
        struct FreeOnUnwind<Op>(*mut OpBlock<Op>);
        impl<Op> Drop for FreeOnUnwind<Op> {
            fn drop(&mut self) {
                // SAFETY: the block came from `block::uninit` and holds nothing.
                unsafe { crate::block::free(NonNull::new_unchecked(self.0)) }
            }
        }
        let guard = FreeOnUnwind(block);
        // SAFETY: a fresh block for an `OpBlock<Op>`; the operation is written straight
        // there and never moves again.
        unsafe {
            (&raw mut (*block).op).write(connect());
            (&raw mut (*block).head).write(OpDrop { drop: Self::drop_block::<Op> });
        }
        std::mem::forget(guard);
        self.op = block.cast();
    }

    /// The connected operation.
    ///
    /// # Safety
    ///
    /// Connected with an `Op`; the result stays pinned.
    unsafe fn get<Op>(&mut self) -> Pin<&mut Op> {
        let at = if Self::inline::<Op>() {
            self.room.as_mut_ptr().cast::<Op>()
        } else {
            // SAFETY: the caller's contract: `op` heads the operation's block.
            unsafe { &raw mut (*self.op.cast::<OpBlock<Op>>()).op }
        };
        // SAFETY: the caller's contract.
        unsafe { Pin::new_unchecked(&mut *at) }
    }

    /// # Safety
    ///
    /// `this` holds a connected `Op` in its room, completed or never started; called once.
    unsafe fn drop_inline<Op>(this: &mut OpStorage) {
        this.op = ptr::null_mut();
        // SAFETY: the caller's contract.
        unsafe { ptr::drop_in_place(this.room.as_mut_ptr().cast::<Op>()) }
    }

    /// # Safety
    ///
    /// `this` holds a connected `Op` in a block, completed or never started; called once.
    unsafe fn drop_block<Op>(this: &mut OpStorage) {
        let block = std::mem::replace(&mut this.op, ptr::null_mut()).cast::<OpBlock<Op>>();
        // SAFETY: the caller's contract; the block came from `block::uninit`.
        unsafe { crate::block::drop_and_free(NonNull::new_unchecked(block)) }
    }

    /// Drops the connected `Op`, through its type.
    ///
    /// # Safety
    ///
    /// Connected with an `Op` that is to be dropped ([`kept`](Self::kept)), completed or
    /// never started; called once.
    unsafe fn drop_typed<Op>(&mut self) {
        // SAFETY: the caller's contract.
        unsafe { if Self::inline::<Op>() { Self::drop_inline::<Op>(self) } else { Self::drop_block::<Op>(self) } }
    }

    /// Drops the connected operation, if it is to be dropped.
    ///
    /// # Safety
    ///
    /// Any operation connected has completed or was never started.
    unsafe fn drop_op(&mut self) {
        if !self.op.is_null() {
            // SAFETY: `op` is the `OpDrop` that `connect` stored for this operation.
            unsafe { ((*self.op).drop)(self) }
        }
    }
}

// SAFETY: moved between threads only before it is polled (then it is pinned in a frame
// that a task moves as a whole): the sender and results are `Send`, and so is the
// operation: `awaited`, the only way to make one, requires it.
unsafe impl<S: Sender + Send> Send for Awaited<S>
where
    S::Value: Send,
    S::Error: Send,
{
}

/// Awaits `sndr` inside a [`Task`](crate::Task). `.await` on the crate's senders does
/// this; use it for senders of other crates (or call
/// [`SenderExt::awaited`](crate::SenderExt::awaited)).
///
/// ```
/// use senders::{Task, awaited, just, sync_wait};
/// let task: Task<'_, i32> = Task::new(async { Ok(awaited(just(41)).await? + 1) });
/// assert_eq!(sync_wait(task).unwrap(), Some(42));
/// ```
pub fn awaited<S>(sndr: S) -> Awaited<S>
where
    S: SenderTo<AwaitRcvr<<S as Sender>::Value, <S as Sender>::Error>>,
    S::Operation: Send,
{
    Awaited {
        node: AwaitNode { next: ptr::null_mut(), start: start_node::<S>, ctx: ptr::null() },
        sndr: Some(sndr),
        op: OpStorage::new(),
        result: UnsafeCell::new(None),
        _pin: PhantomPinned,
    }
}

/// # Safety
///
/// `node` heads a pinned `Awaited<S>` whose operation is connected and not started; the
/// caller holds the task's `RUNNING` and has counted the operation.
unsafe fn start_node<S>(node: *mut AwaitNode)
where
    S: SenderTo<AwaitRcvr<<S as Sender>::Value, <S as Sender>::Error>>,
{
    let this = node.cast::<Awaited<S>>();
    // SAFETY: the caller's contract; the operation is pinned in the `Awaited`.
    unsafe {
        (*this).node.ctx = if OpStorage::kept::<S::Operation>() { DROP_ONLY } else { ptr::null() };
        (*this).op.get::<S::Operation>().start();
    }
}

impl<S> Future for Awaited<S>
where
    S: SenderTo<AwaitRcvr<<S as Sender>::Value, <S as Sender>::Error>>,
    S::Operation: Send,
{
    type Output = Result<S::Value, S::Error>;

    #[inline]
    fn poll(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Self::Output> {
        // SAFETY: the operation stays pinned in place; only `Option`s are taken.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(sndr) = this.sndr.take() {
            let ctx = CURRENT.with(Cell::get);
            assert!(
                !ctx.is_null(),
                "senders: a sender was awaited outside a Task; use `into_awaitable()` to await it from another executor"
            );
            let rcvr = AwaitRcvr { result: this.result.get(), ctx, node: &this.node };
            // A panic in `connect` unwinds through this poll into the task's catch.
            // SAFETY: the `Awaited` is pinned, and this is its one connect.
            unsafe { this.op.connect(move || sndr.connect(rcvr)) };
            this.node.ctx = ctx;
            // SAFETY: the runner thread owns the pending list during its poll.
            unsafe {
                this.node.next = (*ctx).pending.get();
                (*ctx).pending.set(&mut this.node);
            }
            return Poll::Pending;
        }
        // SAFETY: the task polls only once every started operation has completed, so the
        // result was written before this poll (acquire: the count's last decrement).
        match unsafe { (*this.result.get()).take() } {
            Some(r) => {
                if OpStorage::kept::<S::Operation>() {
                    // The operation has completed: dropped here, where its type is known,
                    // not by the drop of the `Awaited` through `OpDrop`.
                    this.node.ctx = ptr::null();
                    // SAFETY: connected with this type and completed; dropped once (the
                    // node is marked as having nothing left to drop).
                    unsafe { this.op.drop_typed::<S::Operation>() };
                }
                Poll::Ready(r)
            }
            None => Poll::Pending,
        }
    }
}

impl<S: Sender> Drop for Awaited<S> {
    fn drop(&mut self) {
        let ctx = self.node.ctx;
        if ctx.is_null() {
            // Never connected, or started with nothing to drop.
            return;
        }
        if ctx != DROP_ONLY {
            // Registered, never started: dropped during the poll that registered it, on
            // the runner thread. Unlink it first, so the task does not start it even if
            // the operation's drop below panics.
            let me: *mut AwaitNode = &mut self.node;
            // SAFETY: the runner thread owns the pending list; every node in it is alive
            // (dropped nodes unlink themselves here).
            unsafe {
                let mut link: *mut *mut AwaitNode = (*ctx).pending.as_ptr();
                while !(*link).is_null() {
                    if *link == me {
                        *link = (*me).next;
                        break;
                    }
                    link = &raw mut (**link).next;
                }
            }
        }
        // SAFETY: the operation completed, or was never started (unlinked above, or
        // discarded by the task's end).
        unsafe { self.op.drop_op() };
    }
}

/// The receiver of an awaited sender: stores the result in its [`Awaited`] and tells the
/// task. It is its own environment (see the module docs).
pub struct AwaitRcvr<V, E> {
    result: *mut Option<Result<V, E>>,
    ctx: *const TaskCtx,
    /// The node of its `Awaited`: its identity for `op_done`.
    node: *const AwaitNode,
}

// SAFETY: completes on any thread: the result (`V`, `E`: `Send`) is read by the task only
// after the count's last decrement (acquire-release); the context is `Sync`.
unsafe impl<V: Send, E: Send> Send for AwaitRcvr<V, E> {}
// SAFETY: a shared reference only reaches the environment, backed by the `Sync` context
// and the receiver's `Sync` environment.
unsafe impl<V, E> Sync for AwaitRcvr<V, E> {}

impl<V, E> AwaitRcvr<V, E> {
    fn ctx(&self) -> &TaskCtx {
        // SAFETY: the task waits for this operation before it completes.
        unsafe { &*self.ctx }
    }
}

impl<V, E> Env for AwaitRcvr<V, E> {
    type Scheduler = TaskScheduler;
    type Domain = PoolDomain;
    fn scheduler(&self) -> TaskScheduler {
        // SAFETY: the task (and its receiver's env) outlives its awaited operations.
        unsafe { (self.ctx().vtable.scheduler)(self.ctx) }
    }
    fn stop_token(&self) -> StopToken<'_> {
        // The receiver's own token: the stop token types match, so nothing needs linking
        // (P3552 §4.7); it borrows the receiver's env, which outlives this operation.
        // SAFETY: the task (and its receiver) outlives its awaited operations.
        unsafe { (self.ctx().vtable.stop_token)(self.ctx) }
    }
    // `#[inline]` gives each codegen unit its own copy, so a child task's `start` sees
    // the `HomeInfo` vtable and the checked downcast folds (see `TaskOp::start`).
    #[inline]
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        if key == TypeId::of::<HomeKey>() {
            // SAFETY: written at the task's start, before any await; read only since.
            return unsafe { (*self.ctx().home.as_ptr()).as_ref() }.map(|h| h as &(dyn Any + Send + Sync));
        }
        // SAFETY: as above; the answer borrows the receiver's env, which outlives `self`.
        unsafe { (self.ctx().vtable.prop)(self.ctx, key).map(|p| &*p) }
    }
}

impl<V, E> Receiver<V, E> for AwaitRcvr<V, E> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: V) {
        // SAFETY: the `Awaited` is alive and pinned (the task waits for this operation)
        // and nothing reads the slot until the decrement below.
        unsafe { *self.result = Some(Ok(value)) };
        self.ctx().op_done(self.node)
    }
    fn set_error(self, error: E) {
        // SAFETY: as above.
        unsafe { *self.result = Some(Err(error)) };
        self.ctx().op_done(self.node)
    }
    fn set_stopped(self) {
        self.ctx().stopped.store(true, Ordering::Release);
        self.ctx().op_done(self.node)
    }
    fn set_panic(self, panic: Panic) {
        self.ctx().record_panic(panic);
        self.ctx().op_done(self.node)
    }
}

// ---------------------------------------------------------------------------------------
// `.await` on senders

/// Every sender that connects to an awaited sender's receiver can be awaited in a task;
/// the crate's senders are `.await`able through this (see [`Awaitable`]).
impl<S> Awaitable for S
where
    S: SenderTo<AwaitRcvr<<S as Sender>::Value, <S as Sender>::Error>>,
    S::Operation: Send,
{
    type Awaited = Awaited<S>;
    fn into_awaited(self) -> Awaited<S> {
        awaited(self)
    }
}
