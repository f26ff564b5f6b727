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

mod scheduler;

pub use scheduler::{ErasedScheduleReceiver, TaskScheduleOp, TaskScheduleSender, TaskScheduler};

use std::any::{Any, TypeId};
use std::cell::{Cell, UnsafeCell};
use std::convert::Infallible;
use std::future::Future;
use std::marker::{PhantomData, PhantomPinned};
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::ptr::{self, NonNull};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};

use crate::env::Env;
use crate::panic::{Panic, catch};
use crate::pool::PoolDomain;
use crate::receiver::Receiver;
use crate::scheduler::HopTo;
use crate::scheduler::{MaybeScheduler, NoScheduler, Scheduler};
use crate::sender::{Awaitable, OperationState, Sender, SenderTo, sender};
use crate::stop::StopToken;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, lock};

use scheduler::Scheduled;

// ---------------------------------------------------------------------------------------
// The frame

/// Polls the future behind a frame header.
type PollFn<T, E> = unsafe fn(NonNull<Header<T, E>>, &mut Context<'_>) -> Poll<Result<T, E>>;

/// How to poll and drop the future of one frame type.
struct FrameFns<T, E> {
    poll: PollFn<T, E>,
    drop: unsafe fn(NonNull<Header<T, E>>),
}

/// The type-erased part of a frame: a pointer to its functions, built by a constant
/// (one word, so that a small future's whole frame is copied without a call to `memcpy`).
#[repr(C)]
struct Header<T, E> {
    fns: *const FrameFns<T, E>,
}

impl<T, E> Header<T, E> {
    /// Polls the future.
    ///
    /// # Safety
    ///
    /// As `poll_frame`: `h` heads a live, pinned frame.
    unsafe fn poll(h: NonNull<Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
        // SAFETY: the caller's contract; the table lives in constant memory.
        unsafe { ((*h.as_ref().fns).poll)(h, cx) }
    }

    /// Drops the future and frees the frame.
    ///
    /// # Safety
    ///
    /// As `drop_frame`: `h` heads a live frame, dropped once.
    unsafe fn drop(h: NonNull<Self>) {
        // SAFETY: as above.
        unsafe { ((*h.as_ref().fns).drop)(h) }
    }
}

#[repr(C)]
struct Frame<T, E, F> {
    header: Header<T, E>,
    fut: F,
}

impl<T, E, F: Future<Output = Result<T, E>>> Frame<T, E, F> {
    const FNS: *const FrameFns<T, E> = &FrameFns { poll: poll_frame::<T, E, F>, drop: drop_frame::<T, E, F> };
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

// ---------------------------------------------------------------------------------------
// The context awaited senders reach

const RUNNING: usize = 1;
const WOKEN: usize = 2;
const ONE: usize = 4;

/// What awaited senders, their receivers and the task's wakers reach, whatever the task's
/// receiver type. The first field of every task operation.
#[repr(C)]
pub struct TaskCtx {
    state: AtomicUsize,
    /// Registered, not yet started awaited operations (runner only).
    pending: Cell<*mut AwaitNode>,
    /// An awaited sender completed stopped.
    stopped: AtomicBool,
    /// The first panic of an awaited sender (or of a hop), and whether there is one.
    panic: Mutex<Option<Panic>>,
    panicked: AtomicBool,
    /// Registered awaits started by the runner and not yet known to have completed
    /// inline (runner only; moved into `state` once an operation proved remote).
    local: Cell<usize>,
    /// `change_scheduler` asked for a hop (runner only).
    hop_requested: Cell<bool>,
    /// The scheduler set by `change_scheduler` (written by the runner only).
    moved_to: UnsafeCell<Option<TaskScheduler>>,
    /// The handle clones of the waker share, made on first clone (runner only).
    wake_handle: UnsafeCell<Option<std::sync::Arc<WakeHandle>>>,
    /// Where the task resumes (set at start, then read only).
    home: Cell<Option<HomeInfo>>,
    /// The task operation's own functions.
    vtable: &'static CtxVTable,
}

struct CtxVTable {
    /// Runs the poll loop (the caller holds `RUNNING`).
    run: unsafe fn(*const TaskCtx),
    /// Resumes: inline if on the task's scheduler, else scheduled there (holds `RUNNING`).
    resume: unsafe fn(*const TaskCtx),
    /// The receiver's env: its stop token, user queries, and scheduler, erased.
    stop_token: unsafe fn(*const TaskCtx) -> StopToken<'static>,
    prop: unsafe fn(*const TaskCtx, TypeId) -> Option<*const (dyn Any + Send + Sync)>,
    scheduler: unsafe fn(*const TaskCtx) -> TaskScheduler,
}

// SAFETY: the fields shared between threads are atomics and the mutex; the `Cell` and
// `UnsafeCell` fields are touched only by the thread holding `RUNNING` (`home` is written
// at start and read-only after), handed over through the state word's acquire-release
// transitions.
unsafe impl Sync for TaskCtx {}
// SAFETY: as above.
unsafe impl Send for TaskCtx {}

crate::sync::const_thread_local! {
    /// The task being polled on this thread, for the awaited senders it polls.
    static CURRENT: Cell<*const TaskCtx> = Cell::new(ptr::null());
    /// The registered await this thread is starting, so that its inline completion is
    /// counted without atomics.
    static STARTING: Cell<*const AwaitNode> = Cell::new(ptr::null());
}

impl TaskCtx {
    fn new(vtable: &'static CtxVTable) -> Self {
        TaskCtx {
            state: AtomicUsize::new(RUNNING),
            pending: Cell::new(ptr::null_mut()),
            stopped: AtomicBool::new(false),
            panic: Mutex::new(None),
            panicked: AtomicBool::new(false),
            local: Cell::new(0),
            hop_requested: Cell::new(false),
            moved_to: UnsafeCell::new(None),
            home: Cell::new(None),
            wake_handle: UnsafeCell::new(None),
            vtable,
        }
    }

    /// Starts the awaits the last poll registered, in the order it registered them.
    /// Returns whether there were any.
    ///
    /// # Safety
    ///
    /// The caller holds `RUNNING` and has just polled the future (which returned
    /// `Pending`); every registered node is alive.
    unsafe fn start_registered(&self) -> bool {
        // The list is in reverse registration order: reverse it in place.
        let mut list = self.pending.replace(ptr::null_mut());
        let mut ordered: *mut AwaitNode = ptr::null_mut();
        while !list.is_null() {
            // SAFETY: a registered node is alive (pinned in the frame, or leaked).
            unsafe {
                let next = (*list).next;
                (*list).next = ordered;
                ordered = list;
                list = next;
            }
        }
        let started = !ordered.is_null();
        let outer = STARTING.with(Cell::get);
        while !ordered.is_null() {
            // SAFETY: registered, connected, not started; read `next` before the start,
            // which may complete the operation (and the node may then be reused).
            unsafe {
                let node = ordered;
                ordered = (*node).next;
                // Counted locally: an inline completion (on this thread, inside the
                // start) takes it back without an atomic. One still counted after the
                // start is in flight elsewhere: it moves into the state word, where its
                // completion (which may already have subtracted it) is balanced.
                self.local.set(1);
                STARTING.with(|cur| cur.set(node));
                ((*node).start)(node);
                if self.local.replace(0) != 0 {
                    self.state.fetch_add(ONE, Ordering::AcqRel);
                }
            }
        }
        STARTING.with(|cur| cur.set(outer));
        started
    }

    /// After the registered awaits were started: gives up `RUNNING` and returns `true`,
    /// unless everything already completed (inline), a waker fired, or a hop was asked
    /// for: then it keeps `RUNNING` and returns `false`, and the caller goes on.
    fn release(&self, started: bool) -> bool {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            if s < ONE && (started || s & WOKEN != 0 || self.hop_requested.get()) {
                if s & WOKEN != 0 {
                    self.state.fetch_and(!WOKEN, Ordering::AcqRel);
                }
                return false;
            }
            match self.state.compare_exchange_weak(s, s & !(RUNNING | WOKEN), Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => s = now,
            }
        }
    }

    /// Keeps the first panic of an awaited sender (or of a hop).
    fn record_panic(&self, panic: Panic) {
        let mut slot = lock(&self.panic);
        if slot.is_none() {
            *slot = Some(panic);
        }
        self.panicked.store(true, Ordering::Release);
    }

    /// The awaited operation of `node` completed.
    fn op_done(&self, node: *const AwaitNode) {
        if STARTING.with(Cell::get) == node {
            // Inline, inside its own start on the runner thread: uncount it locally.
            self.local.set(0);
            return;
        }
        // Remote. The runner may not have moved this operation into the count yet (it
        // does right after the start returns): the count may dip below zero meanwhile
        // (wrapping arithmetic on the whole word keeps the flag bits intact), and the
        // runner holds `RUNNING` until it has balanced it.
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            let mut next = s.wrapping_sub(ONE);
            let claim = next < ONE && next & RUNNING == 0;
            if claim {
                next |= RUNNING;
            }
            match self.state.compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire) {
                // SAFETY: this thread now holds `RUNNING`.
                Ok(_) if claim => return unsafe { (self.vtable.resume)(self) },
                Ok(_) => return,
                Err(now) => s = now,
            }
        }
    }

    /// A waker fired. Returns whether this call claimed `RUNNING` (the caller resumes).
    fn wake_claim(&self) -> bool {
        let mut s = self.state.load(Ordering::Acquire);
        loop {
            let (next, claim) = if s & RUNNING != 0 || s >= ONE { (s | WOKEN, false) } else { (s | RUNNING, true) };
            if next == s {
                return false;
            }
            match self.state.compare_exchange_weak(s, next, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return claim,
                Err(now) => s = now,
            }
        }
    }
}

/// Where a task resumes, in a form its awaited child tasks can inherit without touching
/// a reference count: the root task's own scheduler (owned by the root's operation),
/// asked through two functions. A child task finds its parent's through its receiver's
/// environment (a crate-private query, [`HomeKey`]), so nested tasks never materialize
/// an erased scheduler to decide where to resume.
#[derive(Clone, Copy)]
pub(crate) struct HomeInfo {
    /// The root task's operation.
    data: *const (),
    /// Whether the calling thread runs on the root's scheduler.
    here: unsafe fn(*const ()) -> bool,
    /// Resumes `ctx` (a task inheriting this home) on the root's scheduler.
    hop: unsafe fn(*const (), *const TaskCtx),
}

// SAFETY: the root task's operation (which `data` points to) outlives every task that
// inherits its home: they run as operations awaited inside it, and use the home only
// before they complete. Its scheduler is `Sync`.
unsafe impl Send for HomeInfo {}
// SAFETY: as above.
unsafe impl Sync for HomeInfo {}

/// The key of the crate-private query by which a child task finds its parent's
/// [`HomeInfo`] in its environment.
pub(crate) struct HomeKey;

/// What clones of the task's waker hold: the task while it lives.
struct WakeHandle {
    task: Mutex<Option<*const TaskCtx>>,
}

// SAFETY: the pointer is used only under the lock, while the task is alive (the task
// clears it, under the lock, before it completes).
unsafe impl Send for WakeHandle {}
// SAFETY: as above.
unsafe impl Sync for WakeHandle {}

impl std::task::Wake for WakeHandle {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref()
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        let claimed = {
            let task = lock(&self.task);
            // SAFETY: alive while the pointer is set (see above).
            task.filter(|&t| unsafe { (*t).wake_claim() })
        };
        // Holding `RUNNING`, the task cannot complete: it is safe to use after the lock.
        if let Some(t) = claimed {
            // SAFETY: this thread holds `RUNNING`.
            unsafe { ((*t).vtable.resume)(t) }
        }
    }
}

/// The waker handed to the task's future: a borrowed pointer to the task, cloned into a
/// [`WakeHandle`] only when the future keeps it.
static RAW_VTABLE: RawWakerVTable = RawWakerVTable::new(raw_clone, raw_wake, raw_wake, raw_drop);

unsafe fn raw_clone(data: *const ()) -> RawWaker {
    let ctx = data.cast::<TaskCtx>();
    // SAFETY: the raw waker is only handed out in a poll, on the runner thread, which
    // owns `wake_handle`.
    let handle = unsafe {
        (*(*ctx).wake_handle.get())
            .get_or_insert_with(|| std::sync::Arc::new(WakeHandle { task: Mutex::new(Some(ctx)) }))
            .clone()
    };
    let waker = Waker::from(handle);
    let raw = RawWaker::new(waker.data(), waker.vtable());
    std::mem::forget(waker);
    raw
}

unsafe fn raw_wake(data: *const ()) {
    // SAFETY: called during a poll (the runner holds `RUNNING`): it only records `WOKEN`.
    let claimed = unsafe { (*data.cast::<TaskCtx>()).wake_claim() };
    debug_assert!(!claimed, "the runner holds RUNNING during a poll");
}

unsafe fn raw_drop(_: *const ()) {}

// ---------------------------------------------------------------------------------------
// Awaiting a sender

/// A registered awaited operation, linked in the task's pending list.
#[repr(C)]
pub(crate) struct AwaitNode {
    next: *mut AwaitNode,
    /// Starts the operation of the `Awaited` this node heads.
    start: unsafe fn(*mut AwaitNode),
    /// The task it is registered with, until started or discarded; then [`DROP_ONLY`]
    /// if the operation is to be dropped with the `Awaited`, null otherwise.
    ctx: *const TaskCtx,
}

/// `AwaitNode::ctx` of a node no longer registered whose operation is to be dropped: the
/// drop of an `Awaited` reads that one word, so that the common await (a `just`, whose
/// operation has nothing to drop) pays no more than that.
const DROP_ONLY: *const TaskCtx = ptr::without_provenance(1);

/// A sender being awaited inside a [`Task`]: what `.await` on a sender makes.
///
/// It resolves to `Ok(value)` or `Err(error)`; a stopped or panicking sender completes the
/// task instead (the future is not resumed). It must be polled by a [`Task`]: polled
/// elsewhere it panics (use [`into_awaitable`](crate::into_awaitable()) for other
/// executors).
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

/// Awaits `sndr` inside a [`Task`]. `.await` on the crate's senders does this; use it for
/// senders of other crates (or call [`SenderExt::awaited`](crate::SenderExt::awaited)).
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
// change_scheduler

/// Moves the running task onto `sch` (P3552 `change_coroutine_scheduler`): the task
/// resumes there, now and after every later await. Resolves to the previous scheduler.
/// Must be awaited inside a [`Task`].
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

// ---------------------------------------------------------------------------------------
// The operation

/// Where a task resumes: its receiver's scheduler, or inline without one.
pub trait TaskHome: MaybeScheduler {
    /// The scheduler, erased.
    fn erase(&self) -> TaskScheduler;
    /// Whether the calling thread runs on it (always, for no scheduler).
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
    ctx: *const TaskCtx,
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

#[cfg(all(test, loom))]
mod loom_tests {
    //! The task's state word under loom: awaited operations completing inline and on
    //! another thread, a waker firing, and the runner giving up `RUNNING`, all racing.
    //! Checked: the task resumes exactly once, only after every started operation has
    //! completed, and never while another thread holds `RUNNING`.
    use super::*;
    use crate::sync::{Arc, thread};
    use loom::sync::atomic::AtomicUsize as Count;

    /// A task context plus what the model observes.
    #[repr(C)]
    struct Model {
        ctx: TaskCtx,
        /// Operations completed (each counts itself before `op_done`).
        done: Count,
        /// Resumptions (by the runner going on, or by `resume`).
        resumed: Count,
        /// Threads inside a resumption now.
        inside: Count,
        /// How many operations the model starts.
        ops: usize,
        /// The second operation's node, published by its start: its completion is the
        /// completer thread's.
        handed: Count,
    }

    /// A registered await: the node, and the model its start reports to.
    #[repr(C)]
    struct Node {
        node: AwaitNode,
        model: *const Model,
    }

    unsafe fn resume(ctx: *const TaskCtx) {
        // SAFETY: the context heads a `Model`.
        resumed(unsafe { &*ctx.cast::<Model>() });
    }
    unsafe fn unused(_: *const TaskCtx) {
        unreachable!("the model does not poll")
    }
    unsafe fn no_token(_: *const TaskCtx) -> StopToken<'static> {
        StopToken::never()
    }
    unsafe fn no_prop(_: *const TaskCtx, _: TypeId) -> Option<*const (dyn Any + Send + Sync)> {
        None
    }
    unsafe fn no_sched(_: *const TaskCtx) -> TaskScheduler {
        unreachable!("the model asks no scheduler")
    }
    static VTABLE: CtxVTable =
        CtxVTable { run: unused, resume, stop_token: no_token, prop: no_prop, scheduler: no_sched };

    /// One resumption: exclusive, and only once every operation has completed. The model's
    /// resumption ends the task (it keeps `RUNNING`).
    fn resumed(m: &Model) {
        assert_eq!(m.inside.fetch_add(1, Ordering::AcqRel), 0, "two threads hold RUNNING");
        assert_eq!(m.done.load(Ordering::Acquire), m.ops, "resumed before every operation completed");
        m.resumed.fetch_add(1, Ordering::AcqRel);
        m.inside.fetch_sub(1, Ordering::AcqRel);
    }

    fn model_of<'m>(node: *mut AwaitNode) -> &'m Model {
        // SAFETY: every node of the model heads a `Node`, whose model outlives the run.
        unsafe { &*(*node.cast::<Node>()).model }
    }

    /// Completes inline, in its start.
    unsafe fn start_inline(node: *mut AwaitNode) {
        let m = model_of(node);
        m.done.fetch_add(1, Ordering::AcqRel);
        m.ctx.op_done(node);
    }

    /// Hands its completion to the completer thread.
    unsafe fn start_handoff(node: *mut AwaitNode) {
        model_of(node).handed.store(node as usize, Ordering::Release);
    }

    fn model(ops: usize, waker: bool) {
        loom::model(move || {
            let m = Arc::new(Model {
                ctx: TaskCtx::new(&VTABLE),
                done: Count::new(0),
                resumed: Count::new(0),
                inside: Count::new(0),
                ops,
                handed: Count::new(0),
            });
            let starts: [unsafe fn(*mut AwaitNode); 2] = [start_inline, start_handoff];
            let mut nodes: Vec<Box<Node>> = starts
                .into_iter()
                .take(ops)
                .map(|start| {
                    Box::new(Node {
                        node: AwaitNode { next: ptr::null_mut(), start, ctx: &m.ctx },
                        model: Arc::as_ptr(&m),
                    })
                })
                .collect();
            // Registered as a poll registers them: each at the head of the list.
            for n in nodes.iter_mut() {
                n.node.next = m.ctx.pending.get();
                m.ctx.pending.set(&mut n.node);
            }
            let completer = (ops > 1).then(|| {
                let m = m.clone();
                thread::spawn(move || {
                    let mut node = m.handed.load(Ordering::Acquire);
                    while node == 0 {
                        loom::thread::yield_now();
                        node = m.handed.load(Ordering::Acquire);
                    }
                    m.done.fetch_add(1, Ordering::AcqRel);
                    m.ctx.op_done(node as *const AwaitNode);
                })
            });
            let wake = waker.then(|| {
                let m = m.clone();
                thread::spawn(move || {
                    if m.ctx.wake_claim() {
                        resumed(&m);
                    }
                })
            });
            // The runner holds `RUNNING` (a new context starts in it): it starts what was
            // registered, then gives `RUNNING` up or goes on.
            // SAFETY: as above; the nodes are alive.
            let started = unsafe { m.ctx.start_registered() };
            if !m.ctx.release(started) {
                resumed(&m);
            }
            if let Some(t) = completer {
                t.join().unwrap();
            }
            if let Some(t) = wake {
                t.join().unwrap();
            }
            let resumed = m.resumed.load(Ordering::Acquire);
            if ops > 0 {
                assert_eq!(resumed, 1, "resumed exactly once after the operations");
            } else {
                // Nothing in flight: only the waker resumes it.
                assert_eq!(resumed, usize::from(waker), "resumed by the waker only");
            }
            drop(nodes);
        });
    }

    #[test]
    fn an_inline_and_a_remote_completion_race_the_release() {
        model(2, false);
    }

    #[test]
    fn completions_and_a_waker_race_the_release() {
        model(2, true);
    }

    #[test]
    fn a_waker_races_the_release_with_nothing_in_flight() {
        model(0, true);
    }
}
