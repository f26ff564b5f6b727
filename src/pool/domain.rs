//! The pool's domain (P2999): parallel `bulk` and fork-join `when_all`.
//!
//! Both find the pool through the worker thread they run on: the early case
//! (`pool.scheduler().schedule().bulk(..)`) and the late case
//! (`starts_on(pool.scheduler(), just(v).bulk(..))`) both deliver the value on a
//! worker. Off the pool (a value that arrives on another thread) they fall back to the
//! default, sequential behaviour.

use std::cell::UnsafeCell;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use super::WorkerThread;
use crate::adaptors::bulk::{Bulk, BulkEach, BulkEachFn, BulkFn};
use crate::adaptors::then::{Then, ThenFn, ThenImpl};
use crate::adaptors::when_all::{
    ConnectTuple, ForkJob, SenderTuple, Shared as WhenAllShared, StartPolicy, WhenAll, WhenAllImpl,
};
use crate::domain::Domain;
use crate::env::Env;
use crate::job::{JobRef, SpawnedOp};
use crate::outcome::Failure;
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, adaptor_sender};
use crate::sync::{AtomicU8, AtomicUsize, Ordering};

/// The domain of a [`StaticThreadPool`](super::StaticThreadPool)'s scheduler and of the
/// senders completing on it. It customizes `bulk` (parallel, adaptively split chunks)
/// and `when_all` (children forked onto the workers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolDomain;

impl Domain for PoolDomain {
    type Then<S: Sender, F: ThenFn<S::Value>> = ThenImpl<S, F>;
    fn transform_then<S: Sender, F: ThenFn<S::Value>, E: Env>(self, sndr: Then<S, F>, _: Option<&E>) -> ThenImpl<S, F> {
        sndr.lower()
    }

    type Bulk<S: Sender, F: BulkFn<S::Value, S::Error>> = PoolBulk<S, F>;
    fn transform_bulk<S: Sender, F: BulkFn<S::Value, S::Error>, E: Env>(
        self,
        sndr: Bulk<S, F>,
        _: Option<&E>,
    ) -> PoolBulk<S, F> {
        let (sndr, shape, f) = sndr.into_parts();
        PoolBulk { sndr, shape, f }
    }

    type BulkEach<S: Sender, T, F: BulkEachFn<T, S::Error>>
        = PoolBulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>;
    fn transform_bulk_each<S: Sender, T, F: BulkEachFn<T, S::Error>, E: Env>(
        self,
        sndr: BulkEach<S, T, F>,
        _: Option<&E>,
    ) -> PoolBulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>,
    {
        let (sndr, f) = sndr.into_parts();
        PoolBulkEach { sndr, f, _t: PhantomData }
    }

    type WhenAll<C: SenderTuple> = WhenAllImpl<C, ForkOnPool>;

    /// On a worker, the spawned operation goes straight onto that worker's deque (where
    /// idle workers steal it); elsewhere it starts inline. When a worker takes it, the
    /// operation's first `schedule()` on that worker's pool completes inline: the
    /// spawn was already the hop onto the pool.
    #[inline]
    fn apply_spawn(self, op: SpawnedOp) {
        WorkerThread::with_current(|worker| match worker {
            Some(worker) => worker.push_spawned(op.into_job()),
            None => op.start(),
        })
    }
    fn transform_when_all<C: SenderTuple, E: Env>(self, sndr: WhenAll<C>, _: Option<&E>) -> WhenAllImpl<C, ForkOnPool> {
        sndr.lower_with()
    }
}

/// `when_all` on the pool: every child but the first is pushed on the current worker's
/// deque, where idle workers steal it; the first runs inline (as a join does).
///
/// A join without the join's atomics when nobody steals (as `rayon::join` avoids its
/// latch): the starting worker holds one count of its own on the operation, and
/// arrivals of the children on this worker while the first child starts inline are only
/// noted (`Shared::start_first_deferring` in `when_all`). If the first child completed
/// that way and the `when_all` has two children, the worker then takes the second child
/// back from the top of its deque; if nobody stole it, the count is set to one without
/// a read-modify-write and the second child runs inline here, and its arrival completes
/// the `when_all` without one either. Otherwise the hold and the noted arrivals are
/// released in one read-modify-write. So a recursion whose subtrees complete inline pays
/// no locked instruction for its `when_all`s, only the deque's.
#[derive(Debug)]
pub enum ForkOnPool {}

/// Inline runs of taken-back children nested on one worker's stack beyond which they
/// are left to the worker loop instead: a chain of `when_all`s nested in the second
/// child would otherwise grow the stack with its length.
const MAX_TAKEN_BACK_DEPTH: u32 = 64;

impl StartPolicy for ForkOnPool {
    /// The starting thread's hold: it keeps the operation alive through the window.
    const HOLD: usize = 1;

    unsafe fn start<C: ConnectTuple<R>, R: Receiver<C::Values, C::Error>>(
        shared: *const WhenAllShared<C, R>,
        ops: *mut C::Ops,
    ) {
        WorkerThread::with_current(|worker| match worker {
            // SAFETY: forwarded from the caller; each forked start runs exactly once as a
            // job, while the `when_all` operation (which outlives its children) is alive.
            // Our hold and the noted arrivals are released exactly once below; until
            // then they keep the operation, and `ops` with it, alive.
            Some(worker) => unsafe {
                let mut last: *const () = std::ptr::null();
                C::fork_rest(ops, |ForkJob(job)| {
                    last = job.data();
                    worker.push_local(job);
                    None
                });
                let early = WhenAllShared::start_first_deferring(shared, || C::start_first(ops));
                let held = early + Self::HOLD;
                if early == 1 && C::LEN == 2 && worker.taken_back_depth() < MAX_TAKEN_BACK_DEPTH {
                    // Our own job is the only one it can be: the operation is alive, so
                    // no other job can have its second child's address.
                    if let Some(job) = worker.take_back(last) {
                        WhenAllShared::settle_taken_back(shared, held);
                        worker.run_taken_back(job);
                        return;
                    }
                }
                WhenAllShared::settle(shared, held);
            },
            // SAFETY: forwarded from the caller; our hold keeps the operation alive until
            // it is released, after the last child has started.
            None => unsafe {
                C::start_all(ops);
                WhenAllShared::settle(shared, Self::HOLD);
            },
        })
    }
}

/// Iterations below which a range is not split further.
const MIN_CHUNK: usize = 1024;
/// Iterations between two looks at the stop flags.
const STOP_CHECK: usize = 1024;

const RUNNING: u8 = 0;
const STOPPED: u8 = 1;
const FAILED: u8 = 2;

/// What one iteration of a parallel bulk does, and how it reaches its data.
///
/// # Safety
///
/// `ready` and `call` must only touch the value through the pointer they are given, as
/// their contracts say; the pool relies on this to run `call` concurrently.
pub unsafe trait Kernel<V, E>: Sync {
    /// What the iterations need from the value (a pointer), computed once it arrived.
    type Ready: Copy;
    /// Prepares the iterations: returns the data they use and the number of iterations.
    ///
    /// # Safety
    ///
    /// `value` is valid and exclusively ours for this call; called once, before `call`.
    unsafe fn ready(&self, value: *mut V) -> (Self::Ready, usize);
    /// Runs iteration `i`.
    ///
    /// # Safety
    ///
    /// `ready` came from `Self::ready` on a value that is still alive and not otherwise
    /// accessed; `i` is below the shape it returned, and no other call runs `i`.
    unsafe fn call(&self, ready: Self::Ready, i: usize) -> Result<(), E>;
}

/// The kernel of `bulk`: `f(i, &value)`.
pub struct BulkKernel<F> {
    f: F,
    shape: usize,
}

// SAFETY: iterations only read the value through a shared reference.
unsafe impl<V: Sync, E, F: BulkFn<V, E> + Sync> Kernel<V, E> for BulkKernel<F> {
    type Ready = *const V;
    unsafe fn ready(&self, value: *mut V) -> (*const V, usize) {
        (value, self.shape)
    }
    unsafe fn call(&self, value: *const V, i: usize) -> Result<(), E> {
        // SAFETY: the value is alive and only read while iterations run.
        self.f.call(i, unsafe { &*value })
    }
}

/// The kernel of `bulk_each`: `f(i, &mut value.as_mut()[i])`.
pub struct BulkEachKernel<T, F> {
    f: F,
    _t: PhantomData<fn(&mut T)>,
}

// SAFETY: `ready` derives the element pointer from one exclusive borrow; each `call`
// makes a `&mut` to its own element only, and indices are run by exactly one call.
unsafe impl<V: AsMut<[T]>, T: Send, E, F: BulkEachFn<T, E> + Sync> Kernel<V, E> for BulkEachKernel<T, F> {
    type Ready = *mut T;
    unsafe fn ready(&self, value: *mut V) -> (*mut T, usize) {
        // SAFETY: the caller gives us exclusive access for this call.
        let slice = unsafe { (*value).as_mut() };
        (slice.as_mut_ptr(), slice.len())
    }
    unsafe fn call(&self, base: *mut T, i: usize) -> Result<(), E> {
        // SAFETY: `i` is in bounds and no other call touches element `i`.
        self.f.call(i, unsafe { &mut *base.add(i) })
    }
}

/// The sender of `bulk` customized by the pool.
#[must_use = "senders do nothing unless connected and started"]
pub struct PoolBulk<S, F> {
    sndr: S,
    shape: usize,
    f: F,
}

adaptor_sender!([S: Sender, F: BulkFn<S::Value, S::Error>] PoolBulk<S, F> where [] {
    value = S::Value, error = S::Error, stopped = true
});

/// The sender of `bulk_each` customized by the pool.
#[must_use = "senders do nothing unless connected and started"]
pub struct PoolBulkEach<S, T, F> {
    sndr: S,
    f: F,
    _t: PhantomData<fn(&mut T)>,
}

adaptor_sender!([S: Sender, T, F: BulkEachFn<T, S::Error>] PoolBulkEach<S, T, F> where [S::Value: AsMut<[T]>] {
    value = S::Value, error = S::Error, stopped = true
});

/// The state of a running parallel bulk, shared by its chunks.
pub(crate) struct BulkState<V, E, K: Kernel<V, E>, R> {
    rcvr: UnsafeCell<Option<R>>,
    kernel: K,
    value: UnsafeCell<Option<V>>,
    /// The kernel's data and the shape, once the value arrived.
    ready: UnsafeCell<Option<(K::Ready, usize)>>,
    /// Chunks started and not yet finished (the root counts as one).
    pending: AtomicUsize,
    state: AtomicU8,
    failure: UnsafeCell<Option<Failure<E>>>,
}

// SAFETY: the kernel's `Ready` pointer only points into this state's own value, which
// moves with it; everything else is owned data, `Send` by these bounds.
unsafe impl<V: Send, E: Send, K: Kernel<V, E> + Send, R: Send> Send for BulkState<V, E, K, R> {}

impl<V, E, K: Kernel<V, E>, R: Receiver<V, E>> BulkState<V, E, K, R> {
    fn env(&self) -> &R::Env {
        // SAFETY: the receiver stays in place until `arrive` takes it, after every chunk
        // has finished.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("bulk: env after completion").env()
    }

    fn take_rcvr(&self) -> R {
        // SAFETY: only the completion takes the receiver, once.
        unsafe { (*self.rcvr.get()).take() }.expect("bulk completes once")
    }

    fn fail(&self, failure: Option<Failure<E>>) {
        let target = if failure.is_some() { FAILED } else { STOPPED };
        let mut cur = self.state.load(Ordering::Relaxed);
        while cur != FAILED && !(cur == STOPPED && target == STOPPED) {
            match self.state.compare_exchange_weak(cur, target, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    if let Some(f) = failure {
                        // SAFETY: only the chunk that moved `state` to `FAILED` writes it;
                        // the completer reads it after the last `AcqRel` arrival.
                        unsafe { *self.failure.get() = Some(f) };
                    }
                    return;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// Runs iterations `lo..hi`, stopping early once the bulk failed or was stopped.
    fn run_range(&self, lo: usize, hi: usize) {
        // SAFETY: written by `start_with` before any chunk runs, then only read.
        let (ready, _) = unsafe { (*self.ready.get()).expect("bulk: value prepared") };
        let token = self.env().stop_token();
        let run = catch(|| {
            let mut i = lo;
            while i < hi {
                if self.state.load(Ordering::Relaxed) != RUNNING {
                    return Ok(());
                }
                if token.stop_requested() {
                    self.fail(None);
                    return Ok(());
                }
                let end = hi.min(i + STOP_CHECK);
                for j in i..end {
                    // SAFETY: each index of `0..shape` is in exactly one range, run once.
                    unsafe { self.kernel.call(ready, j) }?;
                }
                i = end;
            }
            Ok(())
        });
        match run {
            Ok(Ok(())) => {}
            Ok(Err(e)) => self.fail(Some(Failure::Error(e))),
            Err(p) => self.fail(Some(Failure::Panic(p))),
        }
    }

    /// Takes the value, prepares the kernel, and runs the bulk: split across the pool
    /// when on a worker and large enough, otherwise in order on this thread.
    ///
    /// # Safety
    ///
    /// `this` is the live state of a started bulk, and no chunk runs yet.
    unsafe fn start_with(this: *const Self, value: V) {
        // SAFETY: no chunk runs yet, so the slots are ours; the value stays in place
        // (pinned operation) until the completion takes it.
        let prepared = unsafe {
            let s = &*this;
            let slot: *mut V = (*s.value.get()).insert(value);
            // The kernel calls user code (`bulk_each`'s `AsMut`): a panic fails the bulk.
            catch(|| s.kernel.ready(slot))
        };
        let shape = match prepared {
            Ok((ready, shape)) => {
                // SAFETY: no chunk runs yet, so the slot is ours.
                unsafe { *(*this).ready.get() = Some((ready, shape)) };
                shape
            }
            Err(p) => {
                // SAFETY: no chunk ever runs: this holds the root count, released once.
                unsafe {
                    (*this).fail(Some(Failure::Panic(p)));
                    Self::arrive(this);
                }
                return;
            }
        };
        WorkerThread::with_current(|worker| match worker {
            Some(worker) if shape > MIN_CHUNK => {
                // SAFETY: we hold the root count.
                unsafe { Self::process(this, worker, 0, shape, worker.registry().num_threads()) }
            }
            // SAFETY: as above; off the pool (or small), run in order here.
            _ => unsafe {
                (*this).run_range(0, shape);
                Self::arrive(this);
            },
        })
    }

    /// Splits `lo..hi` while it is large and the split budget lasts, pushing the right
    /// halves for other workers to steal, then runs what is left and arrives.
    ///
    /// # Safety
    ///
    /// `this` is the live state of a started bulk; the caller holds one `pending` count.
    unsafe fn process(this: *const Self, worker: &WorkerThread, lo: usize, mut hi: usize, mut splits: usize) {
        // SAFETY: alive while we hold a count.
        let s = unsafe { &*this };
        while hi - lo > MIN_CHUNK && splits > 0 && s.state.load(Ordering::Relaxed) == RUNNING {
            let mid = lo + (hi - lo) / 2;
            splits /= 2;
            s.pending.fetch_add(1, Ordering::Relaxed);
            let job = Box::new(BulkJob { state: this, lo: mid, hi, splits, origin: worker.index() });
            // SAFETY: the job owns one count, so the state outlives it; `BulkJob::run`
            // matches the boxed type and frees it.
            worker.push_local(unsafe { JobRef::new(Box::into_raw(job), BulkJob::<V, E, K, R>::run) });
            hi = mid;
        }
        s.run_range(lo, hi);
        // SAFETY: releases the count the caller held.
        unsafe { Self::arrive(this) };
    }

    /// # Safety
    ///
    /// Each count is released exactly once.
    unsafe fn arrive(this: *const Self) {
        // SAFETY: alive until the last arrival, which may be this one.
        if unsafe { (*this).pending.fetch_sub(1, Ordering::AcqRel) } != 1 {
            return;
        }
        // SAFETY: every chunk has finished: exclusive access.
        unsafe {
            let s = &*this;
            let rcvr = s.take_rcvr();
            let value = (*s.value.get()).take().expect("bulk: value present");
            let state = s.state.load(Ordering::Relaxed);
            if state == RUNNING {
                return rcvr.set_value(value);
            }
            // The value is not delivered: drop it before completing (the crate's discard
            // rule), and let a panic in its `Drop` replace a stop or an error.
            let dropped = discard(value);
            match (state, (*s.failure.get()).take(), dropped) {
                (_, Some(Failure::Panic(p)), _) => rcvr.set_panic(p),
                (_, _, Err(p)) => rcvr.set_panic(p),
                (STOPPED, _, Ok(())) => rcvr.set_stopped(),
                (_, Some(Failure::Error(e)), Ok(())) => rcvr.set_error(e),
                (_, None, Ok(())) => unreachable!("bulk: failed without a failure"),
            }
        }
    }
}

/// A stealable piece of a parallel bulk.
struct BulkJob<V, E, K: Kernel<V, E>, R> {
    state: *const BulkState<V, E, K, R>,
    lo: usize,
    hi: usize,
    splits: usize,
    origin: usize,
}

impl<V, E, K: Kernel<V, E>, R: Receiver<V, E>> BulkJob<V, E, K, R> {
    /// # Safety
    ///
    /// `data` is a `Box<BulkJob<V, E, K, R>>` turned into a raw pointer; called once.
    unsafe fn run(data: *const (), (): ()) {
        // SAFETY: the caller's contract.
        let job = unsafe { Box::from_raw(data.cast_mut().cast::<Self>()) };
        WorkerThread::with_current(|worker| match worker {
            Some(worker) => {
                // Stolen: the thief gets a fresh split budget, so work spreads further
                // where it was needed (adaptive splitting).
                let splits = if worker.index() == job.origin { job.splits } else { worker.registry().num_threads() };
                // SAFETY: the job owns one count.
                unsafe { BulkState::process(job.state, worker, job.lo, job.hi, splits) }
            }
            // SAFETY: as above; off the pool there is nobody to split for.
            None => unsafe {
                (*job.state).run_range(job.lo, job.hi);
                BulkState::arrive(job.state);
            },
        })
    }
}

/// The receiver of a pool bulk's predecessor.
pub struct PoolBulkReceiver<V, E, K: Kernel<V, E>, R> {
    state: *const BulkState<V, E, K, R>,
}

// SAFETY: the value moves to the thread of the last chunk (`Send`) and the kernel runs
// on every worker (`Kernel: Sync`, which also requires what iterations share to be
// `Sync` and what they mutate to be `Send`); the final receiver completes on any worker
// (`Send`) and its env is read by all (`Sync`).
unsafe impl<V: Send, E: Send, K: Kernel<V, E> + Send, R: Receiver<V, E> + Send + Sync> Send
    for PoolBulkReceiver<V, E, K, R>
where
    R::Env: Sync,
{
}

// SAFETY: a shared reference only reaches the environment (`env`), the final receiver's,
// `Sync` by these bounds; the value, the kernel and the completion are reached only
// through the receiver taken by value.
unsafe impl<V, E, K: Kernel<V, E>, R: Receiver<V, E> + Sync> Sync for PoolBulkReceiver<V, E, K, R> where R::Env: Sync {}

impl<V, E, K: Kernel<V, E>, R: Receiver<V, E>> Receiver<V, E> for PoolBulkReceiver<V, E, K, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        // SAFETY: the state outlives this receiver.
        unsafe { (*self.state).env() }
    }
    fn set_value(self, value: V) {
        // SAFETY: the state is pinned in the started operation and no chunk runs yet.
        unsafe { BulkState::start_with(self.state, value) }
    }
    fn set_error(self, error: E) {
        // SAFETY: the state outlives this receiver; no chunk ever runs.
        unsafe { (*self.state).take_rcvr() }.set_error(error)
    }
    fn set_stopped(self) {
        // SAFETY: as in `set_error`.
        unsafe { (*self.state).take_rcvr() }.set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        // SAFETY: as in `set_error`.
        unsafe { (*self.state).take_rcvr() }.set_panic(panic)
    }
}

/// The operation state of a pool bulk.
pub struct PoolBulkOp<S, K, R>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, K, R>>,
    K: Kernel<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    state: BulkState<S::Value, S::Error, K, R>,
    sndr: Option<S>,
    child: Option<S::Operation>,
    _pin: PhantomPinned,
}

fn bulk_op<S, K, R>(sndr: S, kernel: K, receiver: R) -> PoolBulkOp<S, K, R>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, K, R>>,
    K: Kernel<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    PoolBulkOp {
        state: BulkState {
            rcvr: UnsafeCell::new(Some(receiver)),
            kernel,
            value: UnsafeCell::new(None),
            ready: UnsafeCell::new(None),
            pending: AtomicUsize::new(1),
            state: AtomicU8::new(RUNNING),
            failure: UnsafeCell::new(None),
        },
        sndr: Some(sndr),
        child: None,
        _pin: PhantomPinned,
    }
}

impl<S, F, R> SenderTo<R> for PoolBulk<S, F>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, BulkKernel<F>, R>>,
    F: BulkFn<S::Value, S::Error>,
    BulkKernel<F>: Kernel<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = PoolBulkOp<S, BulkKernel<F>, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        bulk_op(self.sndr, BulkKernel { f: self.f, shape: self.shape }, receiver)
    }
}

impl<S, T, F, R> SenderTo<R> for PoolBulkEach<S, T, F>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, BulkEachKernel<T, F>, R>>,
    S::Value: AsMut<[T]>,
    F: BulkEachFn<T, S::Error>,
    BulkEachKernel<T, F>: Kernel<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = PoolBulkOp<S, BulkEachKernel<T, F>, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        bulk_op(self.sndr, BulkEachKernel { f: self.f, _t: PhantomData }, receiver)
    }
}

impl<S, K, R> OperationState for PoolBulkOp<S, K, R>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, K, R>>,
    K: Kernel<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `state` and `child` are only addressed in place; `sndr` is not
        // structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(sndr) = this.sndr.take() else { return };
        let child = this.child.insert(sndr.connect(PoolBulkReceiver { state: &this.state }));
        // SAFETY: pinned in place, started once.
        unsafe { Pin::new_unchecked(child).start() };
    }
}
