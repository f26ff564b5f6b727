//! The context awaited senders reach: the state word, the registered awaits' list,
//! where the task resumes, the wakers.

use std::any::{Any, TypeId};
use std::cell::{Cell, UnsafeCell};
use std::ptr;
use std::task::{RawWaker, RawWakerVTable, Waker};

use crate::panic::Panic;
use crate::stop::StopToken;
use crate::sync::{AtomicBool, AtomicUsize, Mutex, Ordering, lock};

use super::scheduler::TaskScheduler;

const RUNNING: usize = 1;
const WOKEN: usize = 2;
const ONE: usize = 4;

/// What awaited senders, their receivers and the task's wakers reach, whatever the task's
/// receiver type. The first field of every task operation.
#[repr(C)]
pub struct TaskCtx {
    pub(super) state: AtomicUsize,
    /// Registered, not yet started awaited operations (runner only).
    pub(super) pending: Cell<*mut AwaitNode>,
    /// An awaited sender completed stopped.
    pub(super) stopped: AtomicBool,
    /// The first panic of an awaited sender (or of a hop), and whether there is one.
    pub(super) panic: Mutex<Option<Panic>>,
    pub(super) panicked: AtomicBool,
    /// Registered awaits started by the runner and not yet known to have completed
    /// inline (runner only; moved into `state` once an operation proved remote).
    pub(super) local: Cell<usize>,
    /// `change_scheduler` asked for a hop (runner only).
    pub(super) hop_requested: Cell<bool>,
    /// The scheduler set by `change_scheduler` (written by the runner only).
    pub(super) moved_to: UnsafeCell<Option<TaskScheduler>>,
    /// The handle clones of the waker share, made on first clone (runner only).
    pub(super) wake_handle: UnsafeCell<Option<std::sync::Arc<WakeHandle>>>,
    /// Where the task resumes (set at start, then read only).
    pub(super) home: Cell<Option<HomeInfo>>,
    /// The task operation's own functions.
    pub(super) vtable: &'static CtxVTable,
}

pub(super) struct CtxVTable {
    /// Runs the poll loop (the caller holds `RUNNING`).
    pub(super) run: unsafe fn(*const TaskCtx),
    /// Resumes: inline if on the task's scheduler, else scheduled there (holds `RUNNING`).
    pub(super) resume: unsafe fn(*const TaskCtx),
    /// The receiver's env: its stop token, user queries, and scheduler, erased.
    pub(super) stop_token: unsafe fn(*const TaskCtx) -> StopToken<'static>,
    pub(super) prop: unsafe fn(*const TaskCtx, TypeId) -> Option<*const (dyn Any + Send + Sync)>,
    pub(super) scheduler: unsafe fn(*const TaskCtx) -> TaskScheduler,
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
    pub(super) static CURRENT: Cell<*const TaskCtx> = Cell::new(ptr::null());
    /// The registered await this thread is starting, so that its inline completion is
    /// counted without atomics.
    static STARTING: Cell<*const AwaitNode> = Cell::new(ptr::null());
}

impl TaskCtx {
    pub(super) fn new(vtable: &'static CtxVTable) -> Self {
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
    pub(super) unsafe fn start_registered(&self) -> bool {
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
    pub(super) fn release(&self, started: bool) -> bool {
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
    pub(super) fn record_panic(&self, panic: Panic) {
        let mut slot = lock(&self.panic);
        if slot.is_none() {
            *slot = Some(panic);
        }
        self.panicked.store(true, Ordering::Release);
    }

    /// The awaited operation of `node` completed.
    pub(super) fn op_done(&self, node: *const AwaitNode) {
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
    pub(super) fn wake_claim(&self) -> bool {
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
    pub(super) data: *const (),
    /// Whether the calling thread runs on the root's scheduler.
    pub(super) here: unsafe fn(*const ()) -> bool,
    /// Resumes `ctx` (a task inheriting this home) on the root's scheduler.
    pub(super) hop: unsafe fn(*const (), *const TaskCtx),
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

/// A registered awaited operation, linked in the task's pending list.
#[repr(C)]
pub(crate) struct AwaitNode {
    pub(super) next: *mut AwaitNode,
    /// Starts the operation of the `Awaited` this node heads.
    pub(super) start: unsafe fn(*mut AwaitNode),
    /// The task it is registered with, until started or discarded; then [`DROP_ONLY`]
    /// if the operation is to be dropped with the `Awaited`, null otherwise.
    pub(super) ctx: *const TaskCtx,
}

/// `AwaitNode::ctx` of a node no longer registered whose operation is to be dropped: the
/// drop of an `Awaited` reads that one word, so that the common await (a `just`, whose
/// operation has nothing to drop) pays no more than that.
pub(super) const DROP_ONLY: *const TaskCtx = ptr::without_provenance(1);

/// What clones of the task's waker hold: the task while it lives.
pub(super) struct WakeHandle {
    pub(super) task: Mutex<Option<*const TaskCtx>>,
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
pub(super) static RAW_VTABLE: RawWakerVTable = RawWakerVTable::new(raw_clone, raw_wake, raw_wake, raw_drop);

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
