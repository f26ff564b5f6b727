//! `Task` and its frame: one heap block holding the task's future behind a one-word
//! header.

use std::convert::Infallible;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

use crate::sender::sender;

/// Polls the future behind a frame header.
pub(super) type PollFn<T, E> = unsafe fn(NonNull<Header<T, E>>, &mut Context<'_>) -> Poll<Result<T, E>>;

/// How to poll and drop the future of one frame type.
pub(super) struct FrameFns<T, E> {
    poll: PollFn<T, E>,
    drop: unsafe fn(NonNull<Header<T, E>>),
}

/// The type-erased part of a frame: a pointer to its functions, built by a constant
/// (one word, so that a small future's whole frame is copied without a call to `memcpy`).
#[repr(C)]
pub(super) struct Header<T, E> {
    pub(super) fns: *const FrameFns<T, E>,
}

impl<T, E> Header<T, E> {
    /// Polls the future.
    ///
    /// # Safety
    ///
    /// As `poll_frame`: `h` heads a live, pinned frame.
    pub(super) unsafe fn poll(h: NonNull<Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
        // SAFETY: the caller's contract; the table lives in constant memory.
        unsafe { ((*h.as_ref().fns).poll)(h, cx) }
    }

    /// Drops the future and frees the frame.
    ///
    /// # Safety
    ///
    /// As `drop_frame`: `h` heads a live frame, dropped once.
    pub(super) unsafe fn drop(h: NonNull<Self>) {
        // SAFETY: as above.
        unsafe { ((*h.as_ref().fns).drop)(h) }
    }
}

#[repr(C)]
pub(super) struct Frame<T, E, F> {
    pub(super) header: Header<T, E>,
    pub(super) fut: F,
}

impl<T, E, F: Future<Output = Result<T, E>>> Frame<T, E, F> {
    pub(super) const FNS: *const FrameFns<T, E> =
        &FrameFns { poll: poll_frame::<T, E, F>, drop: drop_frame::<T, E, F> };
}

/// # Safety
///
/// `h` heads a live, pinned `Frame<T, E, F>`.
unsafe fn poll_frame<T, E, F: Future<Output = Result<T, E>>>(
    h: NonNull<Header<T, E>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, E>> {
    // SAFETY: the caller's contract; the frame never moves (it is a heap block).
    unsafe { Pin::new_unchecked(&mut (*h.cast::<Frame<T, E, F>>().as_ptr()).fut) }.poll(cx)
}

/// # Safety
///
/// `h` heads a live `Frame<T, E, F>` from `Task::new`; called once.
unsafe fn drop_frame<T, E, F>(h: NonNull<Header<T, E>>) {
    let frame = h.cast::<Frame<T, E, F>>();
    // SAFETY: the caller's contract.
    unsafe { crate::block::drop_and_free(frame) }
}

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
/// [`change_scheduler`](crate::change_scheduler) moves it. A loop of awaits that complete
/// inline runs in constant stack. If that scheduler panics while the task resumes (in `is_current`, `schedule`
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

    pub(super) fn into_frame(self) -> NonNull<Header<T, E>> {
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
