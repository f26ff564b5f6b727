//! The join protocol of `when_all`: the state the children share, their receivers, and
//! how an operation starts its children.
//!
//! The operation state holds the children's operation states, their value cells, the
//! stop source shared by the children, and the callback that forwards the parent's
//! stop request. Children are connected when the operation starts (when its address is
//! fixed), so each child's receiver is a pointer into the parent.
//!
//! | `state` | meaning | who may change it |
//! |---|---|---|
//! | `RUNNING` | no child failed or stopped | a child's `set_error`/`set_panic` (to `FAILED`), `set_stopped` (to `STOPPED`) |
//! | `STOPPED` | a child stopped, none failed | a child's `set_error`/`set_panic` (to `FAILED`) |
//! | `FAILED` | the first failure is stored in `failure` | nobody: terminal |
//!
//! `count` starts at the number of children; each child decrements it after writing
//! its cell or failure (`AcqRel`), and the one that brings it to zero completes the
//! parent.
//!
//! **The parent's stop, forwarded lazily.** The forwarder, a `RawStopCallback<'static,
//! ForwardStop>` on the parent's token (the crate's one stop forwarder,
//! `src/stop/forward.rs`: a named, non-generic callback, no allocation), is registered
//! the first time a child, or an operation inside one, asks its environment for the
//! stop token (`Shared::link`), and only if the parent's token can stop. A `when_all`
//! whose children never look at their token, as in a recursion of `when_all`s whose
//! leaves complete inline, registers nothing. The one caller that wins a `swap` of
//! `linked` registers; the others use the children's token at once (a parent stop
//! requested meanwhile reaches it when the registration runs the forwarder inline). The
//! winner is a child that has not arrived, so its write of the slot happens before the
//! last arrival. The callback is deregistered in `complete` *before* the parent
//! receiver is completed, which waits if it is running on another thread.
//!
//! The forwarder **holds a count** of the operation while it calls `request_stop` on
//! the children's source: it increments `count` unless it is already zero, requests
//! stop, then arrives like a child. Without that count a child whose stop callback
//! completes inline could be the last arrival, complete the operation, and let its
//! owner free it while `request_stop` is still walking the children's source inside it.
//! If the count is already zero, every child has arrived and the completer is blocked
//! in the callback's deregistration until the forwarder returns, so the forwarder
//! touches nothing else. The loom models in `tests/loom_when_all.rs` race two children
//! completing on two threads against a parent stop request, with children that link the
//! parent's token lazily (both, one, or after the stop was requested; a link that never
//! registers fails the last).
//!
//! Because a stop request may come from any thread, and the forwarder may then complete

use std::cell::{Cell, UnsafeCell};
use std::pin::Pin;
use std::ptr;

use crate::sync;

use crate::env::Env;
use crate::job::JobRef;
use crate::outcome::Failure;
use crate::panic::{Panic, discard};
use crate::receiver::Receiver;
use crate::sender::OperationState;
use crate::stop::{ForwardStop, ForwardTarget, InplaceStopSource, RawStopCallback, StopToken, hold_live_count};
use crate::sync::{AtomicBool, AtomicU8, AtomicUsize, Ordering};

use super::hook::SenderTuple;

/// One child's value cell. Each child has its own cell, so a model checker sees the
/// children's writes as independent.
pub struct ValueCell<T>(sync::UnsafeCell<Option<T>>);

impl<T> ValueCell<T> {
    pub(super) fn empty() -> Self {
        ValueCell(sync::UnsafeCell::new(None))
    }
    /// # Safety
    ///
    /// Only this cell's child writes it, once, before it arrives.
    pub(super) unsafe fn put(&self, value: T) {
        // SAFETY: exclusive by the caller's contract.
        self.0.with_mut(|p| unsafe { *p = Some(value) })
    }
    /// # Safety
    ///
    /// Every child has arrived (the `AcqRel` count orders their writes before this).
    pub(super) unsafe fn take(&self) -> T {
        // SAFETY: exclusive by the caller's contract.
        self.0.with_mut(|p| unsafe { (*p).take() }).expect("when_all: missing value")
    }
    /// Drops the value, if the child delivered one; a panic in its `Drop` is returned.
    ///
    /// # Safety
    ///
    /// As for [`take`](Self::take).
    pub(super) unsafe fn drop_value(&self) -> Result<(), Panic> {
        // SAFETY: exclusive by the caller's contract.
        discard(self.0.with_mut(|p| unsafe { (*p).take() }))
    }
}

/// A [`SenderTuple`] whose children can all be connected to `when_all`'s receivers.
pub trait ConnectTuple<R>: SenderTuple {
    /// The children's operation states, in place.
    type Ops;
    /// Connects every child to a receiver pointing into `shared`.
    ///
    /// # Safety
    ///
    /// `shared` points to the pinned shared state of a started `when_all` operation,
    /// which outlives the children's operation states.
    unsafe fn connect_all(self, shared: *const Shared<Self, R>) -> Self::Ops;

    /// The number of children `ops` holds.
    ///
    /// # Safety
    ///
    /// `ops` points to the operation states made by `connect_all`, alive.
    unsafe fn count(ops: *const Self::Ops) -> usize;

    /// Starts child `i`, in place.
    ///
    /// # Safety
    ///
    /// `ops` points to the pinned operation states made by `connect_all`, alive; `i` is
    /// below their count and child `i` was not started. Once every child is started, the
    /// operation (and `ops`) may be gone.
    unsafe fn start_child(ops: *mut Self::Ops, i: usize);

    /// The job that starts child `i`, to be run once, on any thread, while the operation
    /// is alive (an unstarted child keeps it so).
    ///
    /// # Safety
    ///
    /// As for [`start_child`](Self::start_child); the job takes that call's place.
    #[doc(hidden)]
    unsafe fn child_job(ops: *mut Self::Ops, i: usize) -> ForkJob;

    /// Whether child `i` completes at once when started
    /// ([`OperationState::completes_at_once`]); the default says `false`.
    ///
    /// # Safety
    ///
    /// As for [`start_child`](Self::start_child): child `i` was not started.
    #[inline]
    unsafe fn completes_at_once(ops: *const Self::Ops, i: usize) -> bool {
        let _ = (ops, i);
        false
    }

    /// Starts every child, in order.
    ///
    /// # Safety
    ///
    /// `ops` points to the pinned operation states made by `connect_all`, not yet
    /// started. Once the last child is started, `ops` may already be gone.
    unsafe fn start_all(ops: *mut Self::Ops) {
        // SAFETY: forwarded from the caller; the count is read before any start.
        unsafe {
            let n = Self::count(ops);
            for i in 0..n {
                Self::start_child(ops, i);
            }
        }
    }
}

/// The operation state of one child of a `when_all`, aligned so that a job (see
/// [`ForkJob`]) can point to it.
#[repr(C, align(2))]
pub struct ChildOp<Op>(pub(super) Op);

impl<Op: OperationState> OperationState for ChildOp<Op> {
    #[inline]
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: structural pinning of the one field; `start`'s contract is forwarded.
        unsafe { self.map_unchecked_mut(|c| &mut c.0).start() }
    }
    #[inline]
    unsafe fn completes_at_once(&self) -> bool {
        // SAFETY: forwarded: not started.
        unsafe { self.0.completes_at_once() }
    }
}

/// The job that starts one child of a `when_all`: what [`ConnectTuple::child_job`] hands a
/// start policy to run elsewhere. (Crate-private: only the crate's policies can run one.)
pub struct ForkJob(pub(crate) JobRef);

impl std::fmt::Debug for ForkJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("ForkJob").finish_non_exhaustive()
    }
}

/// How a `when_all` operation starts its children.
pub trait StartPolicy: 'static {
    /// Counts that the starting thread holds on the operation besides its children's
    /// (the count starts at the number of children plus this): while it holds one, the
    /// operation cannot complete, so it stays alive. `start` must release each, once,
    /// through the shared state's `settle` (or `settle_taken_back`).
    const HOLD: usize = 0;

    /// Starts the children of the operation whose shared state is `shared`.
    ///
    /// # Safety
    ///
    /// As for [`ConnectTuple::start_all`]; `shared` is the operation's pinned shared
    /// state, alive until the last child arrives (and `HOLD` is released).
    unsafe fn start<C: ConnectTuple<R>, R: Receiver<C::Values, C::Error>>(
        shared: *const Shared<C, R>,
        ops: *mut C::Ops,
    );
}

/// The default policy: start the children one after the other on the calling thread.
#[derive(Debug)]
pub enum Sequential {}

impl StartPolicy for Sequential {
    unsafe fn start<C: ConnectTuple<R>, R: Receiver<C::Values, C::Error>>(
        shared: *const Shared<C, R>,
        ops: *mut C::Ops,
    ) {
        // SAFETY: forwarded from the caller. Without children (and without a hold) the
        // count is zero: nobody would arrive, so the operation completes here.
        unsafe { if C::count(ops) == 0 { Shared::complete(shared) } else { C::start_all(ops) } }
    }
}

pub(super) const RUNNING: u8 = 0;
pub(super) const STOPPED: u8 = 1;
pub(super) const FAILED: u8 = 2;

/// The state that `when_all`'s children share.
pub struct Shared<C: SenderTuple, R> {
    pub(super) rcvr: UnsafeCell<Option<R>>,
    pub(super) cells: C::ValueCells,
    pub(super) failure: sync::UnsafeCell<Option<Failure<C::Error>>>,
    pub(super) state: AtomicU8,
    pub(super) count: AtomicUsize,
    pub(super) source: InplaceStopSource,
    /// Whether a child asked for its stop token, which links the parent's token to
    /// `source` (see [`link`](Self::link)).
    pub(super) linked: AtomicBool,
    pub(super) on_parent_stop: sync::UnsafeCell<Option<RawStopCallback<'static, ForwardStop>>>,
}

/// The parent's stop request is forwarded to the children's source under a count of the
/// operation: the children's stop callbacks may complete them inline, and without the
/// extra count the last of them could complete (and free) the operation while
/// `request_stop` is still walking the source inside it.
// SAFETY: a count keeps the operation, and its source, alive until `arrive` releases it.
unsafe impl<C: SenderTuple, R: Receiver<C::Values, C::Error>> ForwardTarget for Shared<C, R> {
    type Hold = ();
    fn hold(&self) -> Option<()> {
        hold_live_count(&self.count)
    }
    fn request_stop(&self) {
        self.stop_children();
    }
    unsafe fn release(this: *const Self, (): ()) {
        // SAFETY: the caller's contract: the count taken by `hold`, released once.
        unsafe { Self::arrive(this) }
    }
}

/// The window of [`Shared::start_first_deferring`] open on this thread: whose first child
/// is starting, how many of its children's arrivals were noted meanwhile, and which
/// inline hop the next `schedule()` on the pool made on this thread may take
/// ([`InlineHop`]). They share a word, so opening a window sets the hop with the one
/// store it makes anyway, and a `schedule()` reads one thread-local word.
#[derive(Clone, Copy)]
struct Window {
    /// The operation, named by the address of its count: no other live operation's
    /// count can share it (an atomic contains nothing, so neither operation can hold the
    /// other there), whereas the start of a shared state may also be the start of
    /// something nested in its first field.
    count: *const AtomicUsize,
    early: u32,
    hop: InlineHop,
}

/// The inline hop open to the next `schedule()` on the pool that this thread, one of the
/// pool's workers, makes: that `schedule()` is on the pool already, so it may complete
/// inline. Read and closed by [`take_inline_hop`]; at most one is open at a time. A plain
/// integer in the window, not an enum, so that the window stays a pair of words that
/// opening and closing it move whole.
pub(crate) type InlineHop = u32;

/// The first `schedule()` made while the worker starts the first child of a `when_all`
/// on the pool inline (a window is open, `ForkOnPool`). Zero, so that the store opening a
/// window writes it and the count of arrivals as one zero word.
pub(crate) const FIRST_HOP: InlineHop = 0;
/// No inline hop: the `schedule()` goes through the worker's deque.
pub(crate) const NO_HOP: InlineHop = 1;
/// The first `schedule()` of a tagged job (a spawned operation's, a forked child's) that
/// the worker is running: the spawn or fork was the hop (the pool's `run_job`).
pub(crate) const FRESH_HOP: InlineHop = 2;

const NO_WINDOW: Window = Window { count: std::ptr::null(), early: 0, hop: NO_HOP };

crate::sync::const_thread_local! {
    static WINDOW: Cell<Window> = Cell::new(NO_WINDOW);
}

/// The inline hop open to a `schedule()` on the pool starting now on this thread, one of
/// the pool's workers; it is taken (closed) unless it is [`NO_HOP`].
#[inline]
pub(crate) fn take_inline_hop() -> InlineHop {
    WINDOW.with(|w| {
        let hop = w.get().hop;
        if hop != NO_HOP {
            set_hop(w, NO_HOP);
        }
        hop
    })
}

/// Opens ([`FRESH_HOP`]) or closes ([`NO_HOP`]) the inline hop of a job that the pool
/// runs on this thread, one of its workers.
#[inline]
pub(crate) fn set_inline_hop(hop: InlineHop) {
    WINDOW.with(|w| set_hop(w, hop));
}

/// The inline hop open on this thread, for white-box tests.
#[cfg(all(test, not(loom)))]
pub(crate) fn inline_hop() -> InlineHop {
    WINDOW.with(|w| w.get().hop)
}

#[inline(always)]
fn set_hop(w: &Cell<Window>, hop: InlineHop) {
    // SAFETY: the cell is this thread's, and no reference into it is alive (`Cell`
    // hands out none); one field is written, not the whole window.
    unsafe { (*w.as_ptr()).hop = hop };
}

impl<C: SenderTuple, R: Receiver<C::Values, C::Error>> Shared<C, R> {
    fn env(&self) -> &R::Env {
        // SAFETY: `rcvr` is written before any child starts and taken only by `complete`,
        // after every child has completed; children read it only before completing.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("when_all: receiver used after completion").env()
    }

    /// Records that a child ended without a value. Returns nothing; the caller arrives.
    fn fail(&self, failure: Option<Failure<C::Error>>) {
        // DROP ORDER: a failure that loses is dropped when this returns, before the arrival.
        let target = if failure.is_some() { FAILED } else { STOPPED };
        let mut cur = self.state.load(Ordering::Relaxed);
        loop {
            if cur == FAILED || (cur == STOPPED && target == STOPPED) {
                break;
            }
            match self.state.compare_exchange_weak(cur, target, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    if let Some(f) = failure {
                        // SAFETY: only the child that moved `state` to `FAILED` writes
                        // `failure`, and the completer reads it after the last arrival
                        // (ordered by `count`'s `AcqRel`).
                        self.failure.with_mut(|p| unsafe { *p = Some(f) });
                    }
                    break;
                }
                Err(actual) => cur = actual,
            }
        }
        self.stop_children();
    }

    /// Requests stop on the children. A stop callback's panic fails the operation, as a
    /// child's panic does (unless a failure came first; stop is requested already, so
    /// `fail` does not come back here).
    ///
    /// The caller holds a count (a child's or a forwarder's hold), released after this.
    fn stop_children(&self) {
        if let Err(p) = self.source.request_stop_catching() {
            self.fail(Some(Failure::Panic(p)));
        }
    }

    /// Links the parent's stop token to the children's source, the first time a child
    /// (or an operation inside one) asks for its token: a `when_all` whose children never
    /// look at their stop token registers nothing on the parent's.
    ///
    /// The one caller that wins `linked` registers the forwarder; others go on with the
    /// children's token at once (a parent stop requested meanwhile reaches it when the
    /// registration runs the forwarder). The winner is a child that has not arrived, so
    /// its write of the cell happens before the last arrival, after which `complete`
    /// drops the forwarder.
    fn link(&self) {
        if self.linked.load(Ordering::Acquire) {
            return;
        }
        // A parent token that can never stop (a `sync_wait`'s) has nothing to forward:
        // no child needs to win `linked`, so none pays its read-modify-write.
        let token = self.env().stop_token();
        if !token.stop_possible() || self.linked.swap(true, Ordering::AcqRel) {
            return;
        }
        // SAFETY: the parent's env outlives this operation's completion, and the callback
        // is dropped in `complete` before the receiver is completed (which keeps the
        // forwarder's target alive while it may run); the cell is written once, by the
        // winner of `linked`, and read by `complete` after every arrival; the callback is
        // pinned in place inside the pinned operation. A `WhenAllReceiver` exists only for
        // an operation whose `SenderTo` impl requires the final receiver and the results
        // to be `Send`, which forwarding (and so possibly completing) on the
        // stop-requesting thread needs.
        unsafe {
            let token = token.detach();
            let forward = ForwardStop::new(self);
            self.on_parent_stop.with_mut(|cell| {
                let cb = (*cell).insert(RawStopCallback::new(token, forward));
                Pin::new_unchecked(cb).register();
            });
        }
    }

    /// A child has finished. On the thread that is starting this operation's first child
    /// inline, while it does (the window of
    /// [`start_first_deferring`](Self::start_first_deferring)), the arrival is only
    /// noted, for that thread to settle afterwards; otherwise it is [`arrive`](Self::arrive).
    ///
    /// # Safety
    ///
    /// As for `arrive`; called once per child.
    unsafe fn arrive_child(this: *const Self) {
        // SAFETY: alive: this child's count is still held.
        let count = unsafe { &raw const (*this).count };
        let noted = WINDOW.with(|w| {
            let mut window = w.get();
            let ours = ptr::eq(window.count, count);
            if ours {
                window.early += 1;
                w.set(window);
            }
            ours
        });
        if !noted {
            // SAFETY: forwarded.
            unsafe { Self::arrive(this) }
        }
    }

    /// A child has finished (or a stop forwarder is done). The last one completes the
    /// parent.
    ///
    /// # Safety
    ///
    /// `this` is the live shared state; each holder of a count arrives exactly once.
    unsafe fn arrive(this: *const Self) {
        // SAFETY: the caller guarantees `this` is alive until the last arrival.
        let count = unsafe { &(*this).count };
        // A count of one is this holder alone: every other child has arrived, no
        // forwarder holds a count, and none can take one (a forwarder adds only to a
        // count it sees above zero, and the one left is ours). So the last arrival needs
        // no read-modify-write: the acquire load sees the others' release decrements as
        // the RMW would. A forwarder that adds one after this load brings the count back
        // to one, never to zero, and `complete` waits for it before anything is freed.
        let last = count.load(Ordering::Acquire) == 1 || count.fetch_sub(1, Ordering::AcqRel) == 1;
        if last {
            // SAFETY: every child has arrived, so we have exclusive access.
            unsafe { Self::complete(this) };
        }
    }

    /// Starts the first child with `start`, on this thread, with the window open: the
    /// arrivals of this operation's children on this thread during the call are noted
    /// instead of counted, and their number is returned. They must be settled with
    /// [`settle`](Self::settle) (or `settle_taken_back`), together with the caller's
    /// hold.
    ///
    /// The caller holds a count (its policy's `HOLD`) throughout, so the operation cannot
    /// complete while the window is open, even if its children all arrive elsewhere:
    /// its address, which names the window, cannot be reused meanwhile by another
    /// `when_all` started on this thread, whose arrivals would then be taken for this
    /// one's.
    ///
    /// # Safety
    ///
    /// `this` is the live shared state of a started operation on which the caller holds
    /// a count, `start` starts its first child, and the caller settles what this
    /// returns.
    #[inline(always)]
    pub(crate) unsafe fn start_first_deferring(this: *const Self, start: impl FnOnce()) -> usize {
        /// Reopens the outer window when this one closes, also if `start` unwinds.
        struct Restore(Window);
        impl Drop for Restore {
            #[inline(always)]
            fn drop(&mut self) {
                WINDOW.with(|w| w.set(self.0));
            }
        }
        // SAFETY: alive, by the caller's contract (this only takes a field's address).
        let count = unsafe { &raw const (*this).count };
        let _outer = Restore(WINDOW.with(|w| w.replace(Window { count, early: 0, hop: FIRST_HOP })));
        start();
        WINDOW.with(|w| w.get().early as usize)
    }

    /// Releases `held` counts (noted arrivals and holds) of this thread; the last
    /// completes the operation, which may be gone when this returns.
    ///
    /// # Safety
    ///
    /// `this` is live, and this thread holds `held` counts on it, released once.
    pub(crate) unsafe fn settle(this: *const Self, held: usize) {
        // SAFETY: alive: the counts we hold keep it so.
        let count = unsafe { &(*this).count };
        if count.fetch_sub(held, Ordering::AcqRel) == held {
            // SAFETY: every child has arrived.
            unsafe { Self::complete(this) };
        }
    }

    /// Releases `held` counts of this thread (noted arrivals and holds) when the caller
    /// has taken back, unstarted, the one child still to arrive (a two-child `when_all`
    /// whose forked child nobody stole): nobody else can arrive or link a forwarder now,
    /// so unless a forwarder is registered the count is set to one with a plain release
    /// store, and that child's arrival, wherever it happens, finds it there and
    /// completes without a read-modify-write. The caller then starts that child.
    ///
    /// # Safety
    ///
    /// As for `settle`; exactly one child is left, not started, and every other count is
    /// among the `held` ones.
    pub(crate) unsafe fn settle_taken_back(this: *const Self, held: usize) {
        // SAFETY: alive: the remaining child holds its count.
        let s = unsafe { &*this };
        if s.linked.load(Ordering::Acquire) {
            // A forwarder may be adding to the count concurrently.
            s.count.fetch_sub(held, Ordering::AcqRel);
        } else {
            // Release: the remaining child's arrival, on any thread, sees the noted
            // children's cells through this store.
            s.count.store(1, Ordering::Release);
        }
    }

    /// Completes with `panic` an operation none of whose children was started.
    ///
    /// # Safety
    ///
    /// `this` is the live shared state of a started operation whose children were never
    /// started; called once, instead of any other completion.
    pub(super) unsafe fn fail_unstarted(this: *const Self, panic: Panic) {
        // A forwarder linked by a child's `connect` only adds to the count and takes back
        // what it added, and `complete` waits for it.
        // SAFETY: the caller's contract: no child holds a count, the completion is ours.
        unsafe {
            (*this).fail(Some(Failure::Panic(panic)));
            Self::complete(this)
        }
    }

    /// # Safety
    ///
    /// Every child has completed; called once.
    unsafe fn complete(this: *const Self) {
        // SAFETY: exclusive access (all children done); we read what they wrote before
        // their `AcqRel` decrements.
        unsafe {
            let s = &*this;
            // Deregister first: this waits for a forwarder running on another thread.
            s.on_parent_stop.with_mut(|p| *p = None);
            let rcvr = (*s.rcvr.get()).take().expect("when_all completes once");
            match s.state.load(Ordering::Relaxed) {
                RUNNING => {
                    let values = C::take_values(&s.cells);
                    rcvr.set_value(values)
                }
                // DROP ORDER: the values that are not delivered are dropped before the
                // completion; a panic in a `Drop` replaces a stop or an error.
                STOPPED => match C::drop_values(&s.cells) {
                    Ok(()) => rcvr.set_stopped(),
                    Err(p) => rcvr.set_panic(p),
                },
                _ => {
                    let failure = s.failure.with_mut(|p| (*p).take()).expect("when_all: failed without a failure");
                    match (C::drop_values(&s.cells), failure) {
                        (Err(p), Failure::Error(e)) => {
                            let _ = discard(e);
                            rcvr.set_panic(p)
                        }
                        (dropped, failure) => {
                            // A second panic loses to the first failure's panic.
                            drop(dropped);
                            failure.deliver(rcvr)
                        }
                    }
                }
            }
        }
    }
}

/// The receiver of `when_all`'s child with value type `V`. It is also the child's
/// environment: the parent's, with the children's shared stop token.
pub struct WhenAllReceiver<V, C: SenderTuple, R> {
    pub(super) shared: *const Shared<C, R>,
    pub(super) cell: *const ValueCell<V>,
}

// SAFETY: a child may complete on another thread: it moves a `V` (and possibly the
// final values and error) across, and may run the parent receiver there; the children
// call `R::env(&R)` concurrently, hence `R: Sync`, and share the env, hence `Sync`.
unsafe impl<V: Send, C: SenderTuple, R> Send for WhenAllReceiver<V, C, R>
where
    C::Values: Send,
    C::Error: Send,
    R: Receiver<C::Values, C::Error> + Send + Sync,
    R::Env: Sync,
{
}

// SAFETY: a shared reference only reaches the environment: the parent env through
// `R::env(&R)` (`R: Sync`, `R::Env: Sync`) and the children's stop source (`Sync`),
// never a cell or a completion.
unsafe impl<V, C: SenderTuple, R: Receiver<C::Values, C::Error> + Sync> Sync for WhenAllReceiver<V, C, R> where
    R::Env: Sync
{
}

impl<V, C: SenderTuple, R: Receiver<C::Values, C::Error>> WhenAllReceiver<V, C, R> {
    fn shared(&self) -> &Shared<C, R> {
        // SAFETY: the shared state outlives the child's receiver (it completes only after
        // every child has).
        unsafe { &*self.shared }
    }
}

impl<V, C: SenderTuple, R: Receiver<C::Values, C::Error>> Env for WhenAllReceiver<V, C, R> {
    type Scheduler = <R::Env as Env>::Scheduler;
    type Domain = <R::Env as Env>::Domain;
    fn scheduler(&self) -> Self::Scheduler {
        self.shared().env().scheduler()
    }
    fn stop_token(&self) -> StopToken<'_> {
        let shared = self.shared();
        shared.link();
        shared.source.token()
    }
    // `#[inline]`: a task awaiting `when_all` of tasks passes its home through here;
    // a local copy lets the child's lookup fold (see `TaskOp::start`).
    #[inline]
    fn prop(&self, key: std::any::TypeId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.shared().env().prop(key)
    }
}

impl<V, C: SenderTuple, R: Receiver<C::Values, C::Error>> Receiver<V, C::Error> for WhenAllReceiver<V, C, R> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: V) {
        // SAFETY: `cell` is this child's own cell in the live shared state, written once
        // before this child arrives.
        unsafe {
            (*self.cell).put(value);
            Shared::arrive_child(self.shared);
        }
    }
    fn set_error(self, error: C::Error) {
        self.shared().fail(Some(Failure::Error(error)));
        // SAFETY: the shared state is alive until the last arrival, which may be this.
        unsafe { Shared::arrive_child(self.shared) };
    }
    fn set_stopped(self) {
        self.shared().fail(None);
        // SAFETY: as in `set_error`.
        unsafe { Shared::arrive_child(self.shared) };
    }
    fn set_panic(self, panic: Panic) {
        self.shared().fail(Some(Failure::Panic(panic)));
        // SAFETY: as in `set_error`.
        unsafe { Shared::arrive_child(self.shared) };
    }
}
