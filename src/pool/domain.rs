//! The pool's domain (P2999): parallel `bulk` and fork-join `when_all`.
//!
//! Both find the pool through the worker thread they run on: the early case
//! (`pool.scheduler().schedule().bulk(..)`) and the late case
//! (`starts_on(pool.scheduler(), just(v).bulk(..))`) both deliver the value on a
//! worker. Off the pool (a value that arrives on another thread) they fall back to the
//! default, sequential behaviour.

use std::cell::UnsafeCell;
use std::marker::PhantomPinned;
use std::pin::Pin;

use super::{JobRef, WorkerThread};
use crate::adaptors::bulk::{Bulk, BulkFn};
use crate::adaptors::then::{Then, ThenFn, ThenImpl};
use crate::adaptors::when_all::{ConnectTuple, SenderTuple, StartPolicy, WhenAll, WhenAllImpl};
use crate::domain::Domain;
use crate::env::Env;
use crate::panic::{Panic, catch};
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo};
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

    type WhenAll<C: SenderTuple> = WhenAllImpl<C, ForkOnPool>;
    fn transform_when_all<C: SenderTuple, E: Env>(self, sndr: WhenAll<C>, _: Option<&E>) -> WhenAllImpl<C, ForkOnPool> {
        sndr.lower_with()
    }
}

/// `when_all` on the pool: every child but the first is pushed on the current worker's
/// deque, where idle workers steal it; the first runs inline (as a join does).
#[derive(Debug)]
pub enum ForkOnPool {}

impl StartPolicy for ForkOnPool {
    unsafe fn start<C: ConnectTuple<R>, R>(ops: *mut C::Ops) {
        WorkerThread::with_current(|worker| match worker {
            // SAFETY: forwarded from the caller; each forked start runs exactly once as a
            // job, while the `when_all` operation (which outlives its children) is alive.
            Some(worker) => unsafe {
                C::start_forked(ops, |op, start| {
                    worker.push_local(JobRef::new(op, start));
                    true
                })
            },
            // SAFETY: forwarded from the caller.
            None => unsafe { C::start_all(ops) },
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

enum Failure<E> {
    Error(E),
    Panic(Panic),
}

/// The sender of `bulk` customized by the pool.
#[must_use = "senders do nothing unless connected and started"]
pub struct PoolBulk<S, F> {
    sndr: S,
    shape: usize,
    f: F,
}

impl<S: Sender, F: BulkFn<S::Value, S::Error>> Sender for PoolBulk<S, F> {
    type Value = S::Value;
    type Error = S::Error;
    const SENDS_STOPPED: bool = true;
    type Domain = S::Domain;
    type CompletionScheduler = S::CompletionScheduler;
    fn completion_scheduler(&self) -> S::CompletionScheduler {
        self.sndr.completion_scheduler()
    }
}

/// The state of a running parallel `bulk`, shared by its chunks.
pub struct BulkState<V, E, F, R> {
    rcvr: UnsafeCell<Option<R>>,
    f: F,
    shape: usize,
    value: UnsafeCell<Option<V>>,
    /// Chunks started and not yet finished (the root counts as one).
    pending: AtomicUsize,
    state: AtomicU8,
    failure: UnsafeCell<Option<Failure<E>>>,
}

impl<V, E, F: BulkFn<V, E>, R: Receiver<V, E>> BulkState<V, E, F, R> {
    fn env(&self) -> &R::Env {
        // SAFETY: the receiver stays in place until `complete` takes it, after every
        // chunk has finished.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("bulk: env after completion").env()
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
        // SAFETY: the value is written before any chunk runs and only read until the
        // completer takes it after the last chunk.
        let value = unsafe { (*self.value.get()).as_ref() }.expect("bulk: value present");
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
                    self.f.call(j, value)?;
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
            worker.push_local(unsafe { JobRef::new(Box::into_raw(job).cast(), BulkJob::<V, E, F, R>::run) });
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
            let rcvr = (*s.rcvr.get()).take().expect("bulk completes once");
            let value = (*s.value.get()).take().expect("bulk: value present");
            match s.state.load(Ordering::Relaxed) {
                RUNNING => rcvr.set_value(value),
                STOPPED => rcvr.set_stopped(),
                _ => match (*s.failure.get()).take() {
                    Some(Failure::Error(e)) => rcvr.set_error(e),
                    Some(Failure::Panic(p)) => rcvr.set_panic(p),
                    None => unreachable!("bulk: failed without a failure"),
                },
            }
        }
    }
}

/// A stealable piece of a parallel `bulk`.
struct BulkJob<V, E, F, R> {
    state: *const BulkState<V, E, F, R>,
    lo: usize,
    hi: usize,
    splits: usize,
    origin: usize,
}

impl<V, E, F: BulkFn<V, E>, R: Receiver<V, E>> BulkJob<V, E, F, R> {
    /// # Safety
    ///
    /// `data` is a `Box<BulkJob<V, E, F, R>>` turned into a raw pointer; called once.
    unsafe fn run(data: *const ()) {
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
            None => {
                // SAFETY: as above; off the pool there is nobody to split for.
                unsafe {
                    (*job.state).run_range(job.lo, job.hi);
                    BulkState::arrive(job.state);
                }
            }
        })
    }
}

/// The receiver of the pool `bulk`'s predecessor.
pub struct PoolBulkReceiver<V, E, F, R> {
    state: *const BulkState<V, E, F, R>,
}

// SAFETY: the value is shared by chunks on every worker (`Sync`) and moved to the thread
// of the last chunk (`Send`); `f` is called from every worker (`Sync`); the final
// receiver completes on any worker (`Send`) and its env is read by all (`Sync`).
unsafe impl<V: Send + Sync, E: Send, F: Sync + Send, R: Receiver<V, E> + Send> Send for PoolBulkReceiver<V, E, F, R> where
    R::Env: Sync
{
}

impl<V, E, F: BulkFn<V, E>, R: Receiver<V, E>> Receiver<V, E> for PoolBulkReceiver<V, E, F, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        // SAFETY: the state outlives this receiver.
        unsafe { (*self.state).env() }
    }
    fn set_value(self, value: V) {
        let state = self.state;
        // SAFETY: the state is pinned in the operation; no chunk runs yet, so the value
        // slot is ours, and we hold the root count.
        unsafe {
            *(*state).value.get() = Some(value);
            let shape = (*state).shape;
            WorkerThread::with_current(|worker| match worker {
                Some(worker) if shape > MIN_CHUNK => {
                    BulkState::process(state, worker, 0, shape, worker.registry().num_threads())
                }
                _ => {
                    (*state).run_range(0, shape);
                    BulkState::arrive(state);
                }
            })
        }
    }
    fn set_error(self, error: E) {
        // SAFETY: no chunk ever runs; the receiver is ours to complete.
        unsafe { (*(*self.state).rcvr.get()).take() }.expect("bulk completes once").set_error(error)
    }
    fn set_stopped(self) {
        // SAFETY: as in `set_error`.
        unsafe { (*(*self.state).rcvr.get()).take() }.expect("bulk completes once").set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        // SAFETY: as in `set_error`.
        unsafe { (*(*self.state).rcvr.get()).take() }.expect("bulk completes once").set_panic(panic)
    }
}

/// The operation state of the pool `bulk`.
pub struct PoolBulkOp<S, F, R>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, F, R>>,
    F: BulkFn<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    state: BulkState<S::Value, S::Error, F, R>,
    sndr: Option<S>,
    child: Option<S::Operation>,
    _pin: PhantomPinned,
}

impl<S, F, R> SenderTo<R> for PoolBulk<S, F>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, F, R>>,
    F: BulkFn<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = PoolBulkOp<S, F, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        PoolBulkOp {
            state: BulkState {
                rcvr: UnsafeCell::new(Some(receiver)),
                f: self.f,
                shape: self.shape,
                value: UnsafeCell::new(None),
                pending: AtomicUsize::new(1),
                state: AtomicU8::new(RUNNING),
                failure: UnsafeCell::new(None),
            },
            sndr: Some(self.sndr),
            child: None,
            _pin: PhantomPinned,
        }
    }
}

impl<S, F, R> OperationState for PoolBulkOp<S, F, R>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, F, R>>,
    F: BulkFn<S::Value, S::Error>,
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
