//! `TaskScheduler`: the type-erased scheduler a [`Task`](crate::Task) shows the senders
//! it awaits (P3552's `any_scheduler`), and onto which `change_scheduler` moves a task.

use std::any::Any;
use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;

use crate::domain::NoDomain;
use crate::env::EmptyEnv;
use crate::job::JobRef;
use crate::panic::{Panic, catch};
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::schedulers::inline::InlineScheduler;
use crate::sender::{OperationState, SenderTo, sender};

/// What an erased schedule reports to its callback.
pub enum Scheduled {
    /// Running on the scheduler now.
    Value,
    /// The scheduler refused (it is shutting down).
    Stopped,
    /// The scheduler's sender panicked.
    Panic(Panic),
}

/// A callback run once where an erased `schedule()` completes.
pub type Then = Box<dyn FnOnce(Scheduled) + Send>;

trait DynScheduler: Send + Sync + 'static {
    fn is_current(&self) -> bool;
    fn as_any(&self) -> &dyn Any;
    fn same(&self, other: &dyn DynScheduler) -> bool;
    /// Starts `schedule()` on the real scheduler in a heap block freed on completion,
    /// and runs `then` there.
    fn schedule_then(&self, then: Then);
}

/// The heap block of an erased `schedule()`: the callback, and the real operation.
struct ScheduleBlock<Op> {
    then: Option<Then>,
    op: MaybeUninit<Op>,
}

/// Takes the callback out of a finished erased schedule's block, drops the operation
/// (reporting a panic in its drop) and frees the block.
type FinishFn = unsafe fn(NonNull<()>) -> (Then, Result<(), Panic>);

/// The receiver an erased `schedule()` connects the real scheduler's sender to: it
/// takes the callback out of the block that holds the operation, frees the block, then
/// runs the callback.
pub struct ErasedScheduleReceiver {
    block: NonNull<()>,
    finish: FinishFn,
}

// SAFETY: the callback is `Send`; the block is only freed, once, by the completion.
unsafe impl Send for ErasedScheduleReceiver {}
// SAFETY: a shared reference only reaches `env()`, a constant.
unsafe impl Sync for ErasedScheduleReceiver {}

impl ErasedScheduleReceiver {
    fn finish(self, how: Scheduled) {
        // SAFETY: the operation in the block called this receiver, and does not touch
        // itself afterwards; the block is finished once, here.
        let (then, dropped) = unsafe { (self.finish)(self.block) };
        // A panic in the operation's drop is not lost: it becomes the outcome (the
        // scheduler's own panic, if any, comes first). DROP ORDER: a second panic is
        // dropped at the end of this `let`, before `then` resumes whoever waits.
        let how = match (how, dropped) {
            (Scheduled::Panic(p), _) | (_, Err(p)) => Scheduled::Panic(p),
            (how, Ok(())) => how,
        };
        then(how)
    }
}

impl Receiver<(), Infallible> for ErasedScheduleReceiver {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, (): ()) {
        self.finish(Scheduled::Value)
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        self.finish(Scheduled::Stopped)
    }
    fn set_panic(self, panic: Panic) {
        self.finish(Scheduled::Panic(panic))
    }
}

/// Takes the callback out of the block, drops the operation and frees the block.
///
/// # Safety
///
/// `block` is a `ScheduleBlock<Op>` from `crate::block::new` whose operation was
/// written and has completed; called once.
unsafe fn finish_op<Op>(block: NonNull<()>) -> (Then, Result<(), Panic>) {
    let block = block.cast::<ScheduleBlock<Op>>();
    // SAFETY: the caller's contract; the callback is moved out first, so nothing is left
    // to drop when the block is freed, even if the operation's drop panics.
    unsafe {
        let then = (*block.as_ptr()).then.take().expect("erased schedule: completes once");
        let dropped = catch(|| crate::block::free_after(block, || (*block.as_ptr()).op.assume_init_drop()));
        (then, dropped)
    }
}

/// Runs `then` on `sch` through one heap block holding the real `schedule()` operation.
pub(crate) fn schedule_then<S: Scheduler>(sch: &S, then: Then)
where
    S::Sender: SenderTo<ErasedScheduleReceiver>,
{
    DynScheduler::schedule_then(sch, then)
}

impl<S: Scheduler> DynScheduler for S
where
    S::Sender: SenderTo<ErasedScheduleReceiver>,
{
    fn is_current(&self) -> bool {
        Scheduler::is_current(self)
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn same(&self, other: &dyn DynScheduler) -> bool {
        other.as_any().downcast_ref::<S>() == Some(self)
    }
    fn schedule_then(&self, then: Then) {
        type Op<S> = <<S as Scheduler>::Sender as SenderTo<ErasedScheduleReceiver>>::Operation;
        let block = crate::block::new(ScheduleBlock::<Op<S>> { then: Some(then), op: MaybeUninit::uninit() });
        let rcvr = ErasedScheduleReceiver { block: block.cast(), finish: finish_op::<Op<S>> };
        // The user scheduler's `schedule` and its sender's `connect` may panic: the
        // callback still runs, with the panic.
        match catch(|| self.schedule().connect(rcvr)) {
            // SAFETY: the block is fresh and never moves; the operation is written once
            // and started once in place; its completion frees the block.
            Ok(op) => unsafe { Pin::new_unchecked((*block.as_ptr()).op.write(op)).start() },
            Err(panic) => {
                // SAFETY: no operation was written: the block holds only the callback,
                // which is moved out; the block is freed once, here.
                let then = unsafe { crate::block::free_after(block, || (*block.as_ptr()).then.take()) };
                then.expect("erased schedule: the callback is in the block")(Scheduled::Panic(panic));
            }
        }
    }
}

/// A type-erased [`Scheduler`]: what `read_env(GetScheduler)` returns inside a
/// [`Task`](crate::Task), and what [`change_scheduler`](crate::change_scheduler) returns.
///
/// It is a reference-counted handle to the real scheduler. Each `schedule()` through it
/// allocates one block for the real operation. Two handles are equal when their real
/// schedulers are of the same type and equal.
///
/// ```
/// use senders::task::TaskScheduler;
/// use senders::{InlineScheduler, Scheduler};
/// let a = TaskScheduler::new(InlineScheduler);
/// assert!(a == TaskScheduler::new(InlineScheduler));
/// assert!(a.is_current()); // the inline scheduler runs everywhere
/// ```
#[derive(Clone)]
pub struct TaskScheduler(Arc<dyn DynScheduler>);

impl TaskScheduler {
    /// Erases `sch` (a `TaskScheduler` is returned as it is, not wrapped again).
    ///
    /// ```
    /// use senders::task::TaskScheduler;
    /// use senders::{InlineScheduler, SingleThreadContext};
    /// let ctx = SingleThreadContext::new();
    /// let erased = TaskScheduler::new(ctx.scheduler());
    /// assert!(TaskScheduler::new(erased.clone()) == erased, "not wrapped again");
    /// assert!(erased != TaskScheduler::new(InlineScheduler));
    /// ```
    pub fn new<S: Scheduler>(sch: S) -> Self
    where
        S::Sender: SenderTo<ErasedScheduleReceiver>,
    {
        match (&sch as &dyn Any).downcast_ref::<TaskScheduler>() {
            Some(already) => already.clone(),
            None => TaskScheduler(Arc::new(sch)),
        }
    }

    /// The real scheduler, if it is an `S`.
    ///
    /// ```
    /// use senders::task::TaskScheduler;
    /// use senders::{InlineScheduler, StaticThreadPool, PoolScheduler};
    /// let pool = StaticThreadPool::new(1)?;
    /// let erased = TaskScheduler::new(pool.scheduler());
    /// assert!(erased.downcast_ref::<PoolScheduler>() == Some(&pool.scheduler()));
    /// assert!(erased.downcast_ref::<InlineScheduler>().is_none());
    /// # Ok::<(), senders::BuildError>(())
    /// ```
    pub fn downcast_ref<S: Scheduler>(&self) -> Option<&S> {
        self.0.as_any().downcast_ref()
    }

    /// Runs `then` on the scheduler (inline if the scheduler is the inline one).
    pub(crate) fn schedule_then(&self, then: Then) {
        self.0.schedule_then(then)
    }

    /// The scheduler of environments without one: everything runs inline.
    pub(crate) fn inline() -> Self {
        TaskScheduler::new(InlineScheduler)
    }
}

impl PartialEq for TaskScheduler {
    fn eq(&self, other: &Self) -> bool {
        self.0.same(&*other.0)
    }
}

impl std::fmt::Debug for TaskScheduler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskScheduler").finish_non_exhaustive()
    }
}

impl Scheduler for TaskScheduler {
    type Domain = NoDomain;
    type Sender = TaskScheduleSender;
    fn schedule(&self) -> TaskScheduleSender {
        TaskScheduleSender { sch: self.clone() }
    }
    fn is_current(&self) -> bool {
        self.0.is_current()
    }
}

/// The sender of [`TaskScheduler::schedule`].
#[must_use = "senders do nothing unless connected and started"]
#[derive(Debug)]
pub struct TaskScheduleSender {
    sch: TaskScheduler,
}

sender!(impl [] TaskScheduleSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = TaskScheduler;
    fn completion_scheduler(&self) -> TaskScheduler {
        self.sch.clone()
    }
});

impl<R: Receiver<(), Infallible> + Send> SenderTo<R> for TaskScheduleSender {
    type Operation = TaskScheduleOp<R>;
    fn connect(self, receiver: R) -> TaskScheduleOp<R> {
        TaskScheduleOp { sch: self.sch, rcvr: Some(receiver), _pin: PhantomPinned }
    }
}

/// The operation state of [`TaskScheduleSender`].
pub struct TaskScheduleOp<R> {
    sch: TaskScheduler,
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible> + Send> TaskScheduleOp<R> {
    /// # Safety
    ///
    /// `op` is a started `Self` that has not completed; called once.
    unsafe fn complete(op: *const (), how: Scheduled) {
        // SAFETY: the caller's contract.
        let rcvr = unsafe { (*op.cast_mut().cast::<Self>()).rcvr.take() }.expect("TaskScheduleOp: completes once");
        match how {
            Scheduled::Value => rcvr.set_value(()),
            Scheduled::Stopped => rcvr.set_stopped(),
            Scheduled::Panic(p) => rcvr.set_panic(p),
        }
    }
}

impl<R: Receiver<(), Infallible> + Send> OperationState for TaskScheduleOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: nothing is moved out of the pinned operation.
        let this: *mut Self = unsafe { self.get_unchecked_mut() };
        // SAFETY: the operation lives until the callback completes it (`start`'s
        // contract), the callback runs once, and the receiver is `Send` (required by
        // `connect`).
        let (job, sch) = unsafe { (JobRef::new(this.cast_const(), Self::complete), &(*this).sch) };
        sch.schedule_then(Box::new(move |how| job.run(how)));
    }
}
