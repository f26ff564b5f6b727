//! The operation of a task: connect, the poll loop, resumption and completion.

use std::any::{Any, TypeId};
use std::cell::{Cell, UnsafeCell};
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::task::{Context, Poll, RawWaker, Waker};

use crate::env::Env;
use crate::panic::{Panic, catch};
use crate::receiver::Receiver;
use crate::scheduler::HopTo;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, SenderTo};
use crate::stop::StopToken;
use crate::sync::{Ordering, lock};

use super::affinity::{TaskHome, TaskHop};
use super::frame::{Header, Task};
use super::scheduler::{Scheduled, TaskScheduler};
use super::state::{CURRENT, CtxVTable, DROP_ONLY, HomeInfo, HomeKey, RAW_VTABLE, TaskCtx};

type HomeOf<R, T, E> = <<R as Receiver<T, E>>::Env as Env>::Scheduler;
type HopOp<R, T, E> = <HomeOf<R, T, E> as HopTo<TaskHop>>::Op;

/// The operation state of a [`Task`].
#[repr(C)]
pub struct TaskOp<'a, T, E, R>
where
    R: Receiver<T, E>,
    HomeOf<R, T, E>: TaskHome + HopTo<TaskHop>,
{
    /// Must stay first: the context's functions cast it back to the operation.
    ctx: TaskCtx,
    frame: Cell<Option<NonNull<Header<T, E>>>>,
    rcvr: UnsafeCell<Option<R>>,
    hop: UnsafeCell<Option<HopOp<R, T, E>>>,
    /// The receiver's scheduler, when this task does not inherit a home (read at start).
    sched: UnsafeCell<Option<HomeOf<R, T, E>>>,
    _p: PhantomData<&'a ()>,
    _pin: PhantomPinned,
}

// SAFETY: the frame's future is `Send` (`Task::new`), the receiver and the hop's
// operation are `Send`; the shared context is `Sync`.
unsafe impl<T, E, R> Send for TaskOp<'_, T, E, R>
where
    R: Receiver<T, E> + Send,
    HomeOf<R, T, E>: TaskHome + HopTo<TaskHop>,
    HopOp<R, T, E>: Send,
{
}

impl<'a, T, E, R> SenderTo<R> for Task<'a, T, E>
where
    R: Receiver<T, E> + Send,
    R::Env: Sync,
    HomeOf<R, T, E>: TaskHome + HopTo<TaskHop>,
{
    type Operation = TaskOp<'a, T, E, R>;
    fn connect(self, receiver: R) -> TaskOp<'a, T, E, R> {
        TaskOp {
            ctx: TaskCtx::new(&TaskOp::<'a, T, E, R>::VTABLE),
            frame: Cell::new(Some(self.into_frame())),
            rcvr: UnsafeCell::new(Some(receiver)),
            hop: UnsafeCell::new(None),
            sched: UnsafeCell::new(None),
            _p: PhantomData,
            _pin: PhantomPinned,
        }
    }
}

impl<T, E, R> Drop for TaskOp<'_, T, E, R>
where
    R: Receiver<T, E>,
    HomeOf<R, T, E>: TaskHome + HopTo<TaskHop>,
{
    fn drop(&mut self) {
        if let Some(frame) = self.frame.take() {
            // SAFETY: never started (or completed, which took the frame): ours to drop.
            unsafe { Header::drop(frame) }
        }
    }
}

/// How the task ends.
enum End<T, E> {
    Done(Result<T, E>),
    Stopped,
    Panic(Panic),
}

impl<'a, T, E, R> TaskOp<'a, T, E, R>
where
    R: Receiver<T, E> + Send,
    R::Env: Sync,
    HomeOf<R, T, E>: TaskHome + HopTo<TaskHop>,
{
    const VTABLE: CtxVTable = CtxVTable {
        run: Self::run,
        resume: Self::resume,
        stop_token: Self::env_stop_token,
        prop: Self::env_prop,
        scheduler: Self::env_scheduler,
    };

    /// # Safety
    ///
    /// `ctx` is the context of a live `Self`.
    unsafe fn op<'x>(ctx: *const TaskCtx) -> &'x Self {
        // SAFETY: the context is the first field of the `#[repr(C)]` operation.
        unsafe { &*ctx.cast::<Self>() }
    }

    fn rcvr(&self) -> &R {
        // SAFETY: present until the completion takes it.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("task: receiver")
    }

    /// # Safety
    ///
    /// `ctx` is the context of a live `Self`, before its completion.
    unsafe fn env_stop_token(ctx: *const TaskCtx) -> StopToken<'static> {
        // SAFETY: the token borrows the receiver's env, which lives in the pinned
        // operation until the completion, after every use of the token (see `finish`).
        unsafe { std::mem::transmute::<StopToken<'_>, StopToken<'static>>(Self::op(ctx).rcvr().env().stop_token()) }
    }

    /// # Safety
    ///
    /// As for `env_stop_token`.
    unsafe fn env_prop(ctx: *const TaskCtx, key: TypeId) -> Option<*const (dyn Any + Send + Sync)> {
        // SAFETY: the caller's contract.
        unsafe { Self::op(ctx) }.rcvr().env().prop(key).map(|p| p as *const _)
    }

    /// # Safety
    ///
    /// As for `env_stop_token`.
    unsafe fn env_scheduler(ctx: *const TaskCtx) -> TaskScheduler {
        // SAFETY: the caller's contract.
        let op = unsafe { Self::op(ctx) };
        // SAFETY: `moved_to` is written only by the runner, and read here by awaited
        // operations started after that write (or by the runner itself).
        match unsafe { (*op.ctx.moved_to.get()).as_ref() } {
            Some(s) => s.clone(),
            None => op.rcvr().env().scheduler().erase(),
        }
    }

    /// Resumes the task: inline if the calling thread is on its scheduler, else scheduled.
    ///
    /// # Safety
    ///
    /// The caller holds `RUNNING` of a live, started operation.
    unsafe fn resume(ctx: *const TaskCtx) {
        // SAFETY: the caller's contract.
        let op = unsafe { Self::op(ctx) };
        // SAFETY: `moved_to` is the runner's, and the caller holds `RUNNING`.
        if let Some(moved) = unsafe { (*op.ctx.moved_to.get()).as_ref() } {
            match catch(|| moved.is_current()) {
                // SAFETY: forwarded.
                Ok(true) => return unsafe { Self::run(ctx) },
                Ok(false) => {}
                // SAFETY: forwarded; the panic completes the task.
                Err(p) => return unsafe { Self::run_after_panic(ctx, p) },
            }
            let ctx = SendPtr(ctx);
            return moved.schedule_then(Box::new(move |how| {
                let ctx = ctx;
                // SAFETY: `RUNNING` travels with the hop; a refused or panicking hop
                // still resumes (a panic completes the task).
                unsafe {
                    if let Scheduled::Panic(p) = how {
                        (*ctx.0).record_panic(p);
                    }
                    Self::run(ctx.0)
                }
            }));
        }
        let home = op.ctx.home.get().expect("task: started");
        // SAFETY: the home's root outlives this task (see `HomeInfo`).
        match catch(|| unsafe { (home.here)(home.data) }) {
            // SAFETY: forwarded.
            Ok(true) => return unsafe { Self::run(ctx) },
            Ok(false) => {}
            // SAFETY: forwarded; the panic completes the task.
            Err(p) => return unsafe { Self::run_after_panic(ctx, p) },
        }
        if home.data != ptr::from_ref(op).cast() {
            // An inherited home: the root schedules this task's resumption.
            // SAFETY: as above; `RUNNING` travels with the hop.
            return unsafe { (home.hop)(home.data, ctx) };
        }
        // SAFETY: the scheduler was read at start and is not written again.
        let sched = unsafe { (*op.sched.get()).as_ref() }.expect("task: own home");
        match catch(|| sched.hop(TaskHop { ctx })) {
            // SAFETY: the slot is the runner's; the previous hop has completed (it ran
            // the poll that led here). The operation is pinned in place and started once.
            Ok(Some(hop)) => unsafe { Pin::new_unchecked((*op.hop.get()).insert(hop)).start() },
            // SAFETY: forwarded.
            Ok(None) => unsafe { Self::run(ctx) },
            // SAFETY: forwarded; the panic completes the task.
            Err(p) => unsafe { Self::run_after_panic(ctx, p) },
        }
    }

    /// The scheduler panicked while the task was being resumed (in `is_current`,
    /// `schedule` or its sender's `connect`): the task completes with that panic here.
    ///
    /// # Safety
    ///
    /// As for `resume`.
    unsafe fn run_after_panic(ctx: *const TaskCtx, panic: Panic) {
        // SAFETY: the caller's contract.
        unsafe {
            (*ctx).record_panic(panic);
            Self::run(ctx)
        }
    }

    /// Whether the calling thread runs on this (root) task's scheduler.
    ///
    /// # Safety
    ///
    /// `data` is a live `Self` whose scheduler was read at start.
    unsafe fn home_here(data: *const ()) -> bool {
        // SAFETY: the caller's contract.
        unsafe { (*(*data.cast::<Self>()).sched.get()).as_ref() }.is_some_and(TaskHome::here)
    }

    /// Resumes `ctx`, a task inheriting this task's home, on this task's scheduler.
    ///
    /// # Safety
    ///
    /// As for `home_here`; the caller holds `ctx`'s `RUNNING`, which travels with the hop.
    unsafe fn home_hop(data: *const (), ctx: *const TaskCtx) {
        // SAFETY: the caller's contract.
        let sched = unsafe { (*(*data.cast::<Self>()).sched.get()).as_ref() }.expect("task: own home");
        let ctx = SendPtr(ctx);
        sched.schedule_boxed(Box::new(move |how| {
            let ctx = ctx;
            // SAFETY: `RUNNING` came with the hop; a refused or panicking hop still
            // resumes (a panic completes the task).
            unsafe {
                if let Scheduled::Panic(p) = how {
                    (*ctx.0).record_panic(p);
                }
                ((*ctx.0).vtable.run)(ctx.0)
            }
        }));
    }

    /// The poll loop.
    ///
    /// # Safety
    ///
    /// The caller holds `RUNNING` of a live, started operation.
    unsafe fn run(ctx: *const TaskCtx) {
        // SAFETY: the caller's contract.
        let op = unsafe { Self::op(ctx) };
        let c = &op.ctx;
        loop {
            // An awaited sender stopped or panicked: never resume the future. The guard
            // is dropped before `finish`, whose completion may free this operation (an
            // `if let` would keep it alive, and unlock freed memory, after `finish`).
            let panic = if c.panicked.load(Ordering::Acquire) { lock(&c.panic).take() } else { None };
            if let Some(p) = panic {
                // SAFETY: `RUNNING`, and no awaited operation is running.
                return unsafe { Self::finish(ctx, End::Panic(p)) };
            }
            if c.stopped.load(Ordering::Acquire) {
                // SAFETY: as above.
                return unsafe { Self::finish(ctx, End::Stopped) };
            }
            let frame = op.frame.get().expect("task: frame");
            let raw = RawWaker::new(ctx.cast(), &RAW_VTABLE);
            // DROP ORDER: it outlives `finish` below, and its drop (`raw_drop`) does nothing.
            // SAFETY: the vtable's functions uphold the `RawWaker` contract (see them).
            let waker = unsafe { Waker::from_raw(raw) };
            let mut cx = Context::from_waker(&waker);
            let outer = CURRENT.with(|cur| cur.replace(ctx));
            // SAFETY: `RUNNING` makes this thread the only one touching the frame.
            let polled = catch(|| unsafe { Header::poll(frame, &mut cx) });
            CURRENT.with(|cur| cur.set(outer));
            match polled {
                // SAFETY: `RUNNING`; awaits registered in this last poll are discarded.
                Ok(Poll::Ready(r)) => return unsafe { Self::finish(ctx, End::Done(r)) },
                // SAFETY: as above.
                Err(p) => return unsafe { Self::finish(ctx, End::Panic(p)) },
                Ok(Poll::Pending) => {}
            }
            // SAFETY: `RUNNING`; the poll just registered these.
            let started = unsafe { c.start_registered() };
            if c.release(started) {
                return;
            }
            if c.hop_requested.replace(false) {
                // `change_scheduler`: continue on the new scheduler.
                // SAFETY: `RUNNING` is handed to the resumption.
                return unsafe { Self::resume(ctx) };
            }
        }
    }

    /// Completes the task: drops the frame (discarding awaits registered in its last
    /// poll), retires the wakers, then calls the receiver.
    ///
    /// # Safety
    ///
    /// The caller holds `RUNNING`, no awaited operation is running; called once.
    unsafe fn finish(ctx: *const TaskCtx, end: End<T, E>) {
        // SAFETY: the caller's contract.
        let op = unsafe { Self::op(ctx) };
        let c = &op.ctx;
        let mut node = c.pending.replace(ptr::null_mut());
        while !node.is_null() {
            // SAFETY: registered nodes are alive; marking them discarded keeps their drop
            // (with the frame, just below) from walking the list.
            unsafe {
                (*node).ctx = DROP_ONLY;
                node = (*node).next;
            }
        }
        let mut end = end;
        if let Some(frame) = op.frame.take() {
            // A panic in the future's drop glue is the task's panic.
            // SAFETY: the frame is ours; nothing else touches it.
            if let Err(p) = catch(|| unsafe { Header::drop(frame) }) {
                end = End::Panic(p);
            }
        }
        // SAFETY: the runner owns the handle slot.
        if let Some(handle) = unsafe { (*c.wake_handle.get()).take() } {
            *lock(&handle.task) = None;
        }
        // SAFETY: the completion takes the receiver once.
        let rcvr = unsafe { (*op.rcvr.get()).take() }.expect("task: completes once");
        match end {
            End::Done(Ok(v)) => rcvr.set_value(v),
            End::Done(Err(e)) => rcvr.set_error(e),
            End::Stopped => rcvr.set_stopped(),
            End::Panic(p) => rcvr.set_panic(p),
        }
    }
}

/// A pointer moved into an erased scheduler's callback.
struct SendPtr(*const TaskCtx);
// SAFETY: the task is `Send`; the pointer carries `RUNNING` to the callback's thread.
unsafe impl Send for SendPtr {}

impl<'a, T, E, R> OperationState for TaskOp<'a, T, E, R>
where
    R: Receiver<T, E> + Send,
    R::Env: Sync,
    HomeOf<R, T, E>: TaskHome + HopTo<TaskHop>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        let env = self.rcvr().env();
        // The parent's answer is inlined here only if every `prop` on the way (the
        // task's `AwaitRcvr`, forwarding adaptors) is `#[inline]`: a copy in this codegen
        // unit carries the `HomeInfo` vtable, whose `type_id` call then folds. Otherwise
        // it is a call into another unit that thin LTO does not inline.
        let inherited = env.prop(TypeId::of::<HomeKey>()).and_then(|h| h.downcast_ref::<HomeInfo>()).copied();
        let home = inherited.unwrap_or_else(|| {
            // SAFETY: nothing else touches the operation before its first poll.
            unsafe { *self.sched.get() = Some(env.scheduler()) };
            HomeInfo { data: ptr::from_ref(&*self).cast(), here: Self::home_here, hop: Self::home_hop }
        });
        self.ctx.home.set(Some(home));
        // The context starts in `RUNNING`: the first poll runs here, on the starting
        // thread. SAFETY: the operation is pinned and lives until it completes.
        unsafe { Self::run(&self.ctx) }
    }
}
