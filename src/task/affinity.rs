//! Scheduler affinity: the scheduler a task resumes on (`TaskHome`), the hop onto it
//! (`TaskHop`), and `change_scheduler`.

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use crate::panic::Panic;
use crate::receiver::Receiver;
use crate::scheduler::{MaybeScheduler, NoScheduler, Scheduler};
use crate::sender::SenderTo;

use super::scheduler::{self, ErasedScheduleReceiver, Scheduled, TaskScheduler};
use super::state::{CURRENT, TaskCtx};

/// Moves the running task onto `sch` (P3552 `change_coroutine_scheduler`): the task
/// resumes there, now and after every later await. Resolves to the previous scheduler.
/// Must be awaited inside a [`Task`](crate::Task).
///
/// ```
/// use senders::{SingleThreadContext, Task, change_scheduler, sync_wait};
/// use std::convert::Infallible;
/// let ctx = SingleThreadContext::with_name("moved-here");
/// let task = Task::<_, Infallible>::new(async {
///     let _previous = change_scheduler(ctx.scheduler()).await;
///     Ok(std::thread::current().name().map(str::to_owned))
/// });
/// assert_eq!(sync_wait(task).unwrap(), Some(Some("moved-here".to_owned())));
/// ```
pub fn change_scheduler<S: Scheduler>(sch: S) -> ChangeScheduler
where
    S::Sender: SenderTo<ErasedScheduleReceiver>,
{
    ChangeScheduler { to: Some(TaskScheduler::new(sch)), previous: None }
}

/// The future of [`change_scheduler`].
#[must_use = "futures do nothing unless awaited"]
#[derive(Debug)]
pub struct ChangeScheduler {
    to: Option<TaskScheduler>,
    previous: Option<TaskScheduler>,
}

impl Future for ChangeScheduler {
    type Output = TaskScheduler;
    fn poll(mut self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<TaskScheduler> {
        let ctx = CURRENT.with(Cell::get);
        assert!(!ctx.is_null(), "senders: change_scheduler awaited outside a Task");
        let Some(to) = self.to.take() else {
            return Poll::Ready(self.previous.take().expect("change_scheduler: polled after completion"));
        };
        // SAFETY: the runner thread owns `moved_to` and `hop_requested` during its poll.
        unsafe {
            let previous = ((*ctx).vtable.scheduler)(ctx);
            *(*ctx).moved_to.get() = Some(to);
            self.previous = Some(previous);
            (*ctx).hop_requested.set(true);
        }
        Poll::Pending
    }
}

/// Where a task resumes: its receiver's scheduler, or inline without one.
pub trait TaskHome: MaybeScheduler {
    /// The scheduler, erased.
    ///
    /// ```
    /// use senders::task::{TaskHome, TaskScheduler};
    /// use senders::{InlineScheduler, SingleThreadContext, schedulers::NoScheduler};
    /// let ctx = SingleThreadContext::new();
    /// assert!(ctx.scheduler().erase() == TaskScheduler::new(ctx.scheduler()));
    /// assert!(NoScheduler.erase() == TaskScheduler::new(InlineScheduler), "no scheduler: inline");
    /// ```
    fn erase(&self) -> TaskScheduler;
    /// Whether the calling thread runs on it (always, for no scheduler).
    ///
    /// ```
    /// use senders::task::TaskHome;
    /// use senders::{SingleThreadContext, schedulers::NoScheduler};
    /// assert!(NoScheduler.here());
    /// assert!(!SingleThreadContext::new().scheduler().here());
    /// ```
    fn here(&self) -> bool;
    /// Runs `then` on it (inline, for no scheduler), through one heap block.
    #[doc(hidden)]
    fn schedule_boxed(&self, then: scheduler::Then);
}

impl TaskHome for NoScheduler {
    fn erase(&self) -> TaskScheduler {
        TaskScheduler::inline()
    }
    fn here(&self) -> bool {
        true
    }
    fn schedule_boxed(&self, then: scheduler::Then) {
        then(Scheduled::Value)
    }
}

impl<S: Scheduler> TaskHome for S
where
    S::Sender: SenderTo<ErasedScheduleReceiver>,
{
    fn erase(&self) -> TaskScheduler {
        TaskScheduler::new(self.clone())
    }
    fn here(&self) -> bool {
        self.is_current()
    }
    fn schedule_boxed(&self, then: scheduler::Then) {
        scheduler::schedule_then(self, then)
    }
}

/// The receiver of the hop onto the task's scheduler: resumes the task there.
pub struct TaskHop {
    pub(super) ctx: *const TaskCtx,
}

// SAFETY: the task is `Send` (its receiver and frame are); the hop resumes it elsewhere.
unsafe impl Send for TaskHop {}
// SAFETY: a shared reference only reaches `env()`, a constant.
unsafe impl Sync for TaskHop {}

impl Receiver<(), Infallible> for TaskHop {
    type Env = crate::env::EmptyEnv;
    fn env(&self) -> &crate::env::EmptyEnv {
        &crate::env::EmptyEnv
    }
    fn set_value(self, (): ()) {
        // SAFETY: the hop was started by the holder of `RUNNING`, handed over to it.
        unsafe { ((*self.ctx).vtable.run)(self.ctx) }
    }
    fn set_error(self, error: Infallible) {
        match error {}
    }
    fn set_stopped(self) {
        // The scheduler refused (shutting down): run here rather than lose the task.
        // SAFETY: as above.
        unsafe { ((*self.ctx).vtable.run)(self.ctx) }
    }
    fn set_panic(self, panic: Panic) {
        // SAFETY: as above; the panic completes the task.
        unsafe {
            (*self.ctx).record_panic(panic);
            ((*self.ctx).vtable.run)(self.ctx)
        }
    }
}
