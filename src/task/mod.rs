//! `Task` (P3552): a lazy sender written as an `async` block, which awaits senders.
//!
//! A [`Task`] is one heap block (its *frame*, recycled per thread like spawn blocks)
//! holding a Rust future. Connecting and starting it polls the future on the thread that
//! starts it. Inside, `.await` on a sender of this crate (or on
//! [`awaited(sndr)`](crate::SenderExt::awaited) for any sender) returns `Ok(value)` or
//! `Err(error)`; a stopped sender completes the task stopped without resuming it, and a
//! panic completes it with the panic.
//!
//! The protocol in full (the deferred start, where an awaited operation lives, the state
//! word, wakers, the environment of awaited senders) and why it is sound are in
//! `README.md` beside this file.
//!
//! # The deferred start
//!
//! Awaiting a sender does not start it. The first poll of an [`Awaited`] connects the
//! sender inside itself (pinned in the frame) and registers it with the running task.
//! When the poll of the task's future returns `Pending`, the task starts every registered
//! operation, and it polls the future again only once **all** of them have completed.
//! So no awaited operation ever runs while the future runs: an awaited sender may
//! borrow the future's locals, and leaking an [`Awaited`] mid-await (`mem::forget`)
//! cannot let its operation outlive what it borrows, since the future is not resumed,
//! and so cannot return and drop its locals, until that operation has completed. Several
//! senders awaited together (e.g. by a `join!` of futures) run concurrently.
//!
//! # States
//!
//! One atomic word: the number of started awaited operations not yet completed, a
//! `RUNNING` bit (someone is polling, or starting the registered operations, or about
//! to), and a `WOKEN` bit (a waker fired while `RUNNING`).
//!
//! | event | transition | then |
//! |---|---|---|
//! | the runner polls: `Ready` | — | completes (the count is 0) |
//! | the runner polls: `Pending` | count += one per registered operation, each started | — |
//! | then, count 0 and (something started, or `WOKEN`) | stays `RUNNING`, clears `WOKEN` | polls again (a loop: inline completions cannot grow the stack) |
//! | then, otherwise | clears `RUNNING` | returns |
//! | an awaited operation completes | count −= 1; at 0 without `RUNNING`, sets `RUNNING` | resumes the task |
//! | a waker fires | with `RUNNING` or a count: sets `WOKEN`; otherwise sets `RUNNING` | resumes the task |
//!
//! *Resuming* runs the poll loop inline if the calling thread is on the task's scheduler
//! (or the environment has none, or it is the inline scheduler), and otherwise
//! `schedule()`s it there (P3552 scheduler affinity, without the needless reschedule of
//! stdexec #1634).
//!
//! # Environment
//!
//! Awaited senders see an environment with the task's scheduler, erased as a
//! [`TaskScheduler`]; the pool's domain (which customizes `when_all` and `bulk` only
//! when it runs on a pool worker, and is the default elsewhere, so that `when_all` of
//! tasks forks on the pool); the receiver's user queries; and the receiver's stop token
//! itself (the token types match, so nothing needs linking).

mod affinity;
mod awaiting;
mod frame;
mod op;
mod scheduler;
mod state;

pub use affinity::{ChangeScheduler, TaskHome, TaskHop, change_scheduler};
pub use awaiting::{AwaitRcvr, Awaited, awaited};
pub use op::TaskOp;
pub use scheduler::{ErasedScheduleReceiver, TaskScheduleOp, TaskScheduleSender, TaskScheduler};
pub use state::TaskCtx;

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::sender::sender;

use frame::{Frame, Header};

/// A lazy sender written as an `async` block (P3552's `task`/`lazy`).
///
/// The block returns `Result<T, E>`: `Ok(v)` completes with the value `v`, `Err(e)` with
/// the error `e`. Inside it, `.await` on a sender returns `Result<Value, Error>` (so `?`
/// works); a sender that completes stopped completes the task stopped without resuming it
/// (`just_stopped::<(), E>().await` cancels); a panic, in the block or in an awaited
/// sender, completes the task with that panic. Nothing runs until the task is started.
///
/// The task resumes on the scheduler of its receiver's environment (scheduler affinity),
/// without rescheduling when an awaited sender completes there already; without a
/// scheduler, or with [`InlineScheduler`](crate::InlineScheduler), it resumes inline.
/// [`change_scheduler`] moves it. A loop of awaits that complete inline runs in constant
/// stack. If that scheduler panics while the task resumes (in `is_current`, `schedule`
/// or its sender's `connect`), the task completes with the panic instead of resuming.
/// A task is awaited (or started) by value, so it runs at most once: a second `.await`
/// does not compile.
///
/// One allocation per task: its frame, recycled per thread.
///
/// A task may borrow from its creator (`'a`): like every sender, it is started only by
/// [`sync_wait`](crate::sync_wait), which blocks until it completes, or by an owner that
/// outlives it (a scope's `spawn` requires the scope's lifetime).
///
/// A task has no domain of its own. [`spawn`](crate::spawn()) and
/// [`spawn_future`](crate::spawn_future) called on a pool worker queue it on that
/// worker's deque, where idle workers steal it; called on any other thread they start it
/// inline, as they start every sender without a domain. Inside the body, a
/// `let_async_scope` or a [`let_value_ref`](crate::SenderExt::let_value_ref) is written
/// and awaited in place, like any sender. A task that cannot fail is made with
/// [`Task::infallible`], whose block returns the value itself.
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, Task, just, schedule, starts_on, sync_wait, when_all};
/// use std::convert::Infallible;
///
/// fn fib(n: u32) -> Task<'static, u64> {
///     Task::new(async move {
///         if n < 2 {
///             return Ok(n as u64);
///         }
///         // The pool's when_all forks the two children onto its workers.
///         let (a, b) = when_all((fib(n - 1), fib(n - 2))).await?;
///         Ok(a + b)
///     })
/// }
///
/// let pool = StaticThreadPool::new(2).unwrap();
/// assert_eq!(sync_wait(starts_on(pool.scheduler(), fib(20))).unwrap(), Some(6765));
///
/// let hello = Task::<_, Infallible>::new(async {
///     let x = just(20).then(|x| x * 2).await?;
///     Ok(x + 2)
/// });
/// assert_eq!(sync_wait(hello).unwrap(), Some(42));
/// ```
#[must_use = "senders do nothing unless connected and started"]
pub struct Task<'a, T, E = Infallible> {
    frame: NonNull<Header<T, E>>,
    _borrow: PhantomData<&'a ()>,
    _out: PhantomData<fn() -> (T, E)>,
}

// SAFETY: the frame holds a `Send` future (required by `new`) and nothing else.
unsafe impl<T, E> Send for Task<'_, T, E> {}

impl<T, E> std::fmt::Debug for Task<'_, T, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task").finish_non_exhaustive()
    }
}

impl<'a, T, E> Task<'a, T, E> {
    /// A task running `fut` when started.
    ///
    /// ```
    /// use senders::{StaticThreadPool, Task, just, starts_on, sync_wait, when_all};
    /// let data = vec![1, 2, 3];
    /// // The task borrows `data`; it does nothing until started.
    /// let sum: Task<'_, i32, String> = Task::new(async {
    ///     let Ok((a, b)) = when_all((just(data[0]), just(data[1] + data[2]))).await; // infallible
    ///     if a + b > 100 {
    ///         return Err("too big".to_string());
    ///     }
    ///     Ok(a + b)
    /// });
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// assert_eq!(sync_wait(starts_on(pool.scheduler(), sum)), Ok(Some(6)));
    /// ```
    pub fn new<F>(fut: F) -> Self
    where
        F: Future<Output = Result<T, E>> + Send + 'a,
    {
        let frame = crate::block::new(Frame { header: Header { fns: Frame::<T, E, F>::FNS }, fut });
        Task { frame: frame.cast(), _borrow: PhantomData, _out: PhantomData }
    }

    fn into_frame(self) -> NonNull<Header<T, E>> {
        let this = std::mem::ManuallyDrop::new(self);
        this.frame
    }
}

impl<'a, T> Task<'a, T, Infallible> {
    /// A task that cannot fail, running `fut` when started: the block returns the value
    /// itself, not `Ok(value)`, so that no error type needs naming (with [`Task::new`], a
    /// block whose only `Err` is never written leaves the error type unknown: E0282).
    ///
    /// Awaiting a sender that cannot fail gives `Result<V, Infallible>`, whose value is
    /// taken with `let Ok(v) = sndr.await;` (the `Err` case is empty). A stopped awaited
    /// sender still completes the task stopped, and a panic completes it with the panic.
    ///
    /// ```
    /// use senders::{SenderExt, Task, just, sync_wait_value};
    /// let task = Task::infallible(async {
    ///     let Ok(x) = just(20).then(|x| x * 2).await;
    ///     x + 2
    /// });
    /// assert_eq!(sync_wait_value(task), 42);
    /// ```
    pub fn infallible<F>(fut: F) -> Self
    where
        F: Future<Output = T> + Send + 'a,
    {
        Task::new(async move { Ok(fut.await) })
    }
}

impl<T, E> Drop for Task<'_, T, E> {
    fn drop(&mut self) {
        // SAFETY: an unstarted task owns its frame and drops it once.
        unsafe { Header::drop(self.frame) }
    }
}

sender!(['a, T, E] Task<'a, T, E> { value = T, error = E, stopped = true, domain = crate::domain::NoDomain });
