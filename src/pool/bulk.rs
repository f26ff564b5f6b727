//! The pool's bulk algorithms: `bulk`, `bulk_chunked`, `bulk_unchunked`, `bulk_each`
//! and `bulk_chunks_mut`, run in parallel over the workers (the reductions run on
//! `bulk_chunked`, `adaptors/reduce.rs`).
//!
//! One operation ([`PoolBulkOp`]) runs all five; what differs is its [`Kernel`], which
//! says what a call does with a range of indices and how the range may be split.
//!
//! **Splitting** (rayon's adaptive splitter is the model). The worker that receives the
//! value starts with a split budget of one split per worker: while its range has more
//! than one index and budget is left, it halves the range, pushes the right half on its
//! deque (where idle workers steal it) and halves the budget. A piece that another
//! worker steals gets a fresh budget there, so work spreads further exactly where
//! workers were idle, down to single indices when each index is expensive; a piece that
//! nobody steals is run by its owner without further splitting, so a large bulk of cheap
//! indices is cut into a few chunks per worker, not more. `bulk_unchunked`'s kernel
//! ignores the budget and splits down to single indices at once: every index is a job of
//! its own, which any idle worker may take.
//!
//! **Grain** ([`Grain`], the `*_with` forms). A range longer than the grain's `max_len`
//! is split even without budget (rayon's `with_max_len`), and no range is split into
//! halves shorter than its `min_len` (`with_min_len`). A call of `bulk_chunked`'s
//! function gets at most `max_len` indices (65,536 without one, or twice `min_len` if
//! that is more), cut by [`Grain::next_end`](crate::Grain) so that the last call of a
//! range is not left shorter than `min_len` where the range allows.
//!
//! **Completion.** `pending` counts the pieces not yet finished (the root counts as
//! one); the last to finish completes the bulk: with the value, or with the first failure
//! (error or panic, `state` `FAILED`), or stopped. A piece looks at the state and at the
//! receiver's stop token between two calls of its kernel and stops early once the bulk
//! failed or was stopped.
//!
//! **Fairness.** A piece of many calls (an unstolen chunk may be most of the shape) also
//! asks its worker, between two calls, whether work from outside the pool waits
//! ([`WorkerThread::outside_work_waits`]). If it does, the piece queues the rest of its
//! range as a new piece on its worker's deque, with its count, moves the outside work
//! above it ([`WorkerThread::yield_to_outside_work`]), and returns to the worker's loop,
//! which takes the outside work next: a timer's stop request, a `timeout`, a round trip
//! from another thread reach a running bulk within one call (`src/pool/README.md`,
//! *Fairness*).

use std::cell::{Cell, UnsafeCell};
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;
use std::ptr::NonNull;

use super::registry::WorkerThread;
use crate::adaptors::bulk::{BulkChunkedFn, BulkChunksMutFn, BulkEachFn, BulkFn, Grain, chunk_count};
use crate::env::Env;
use crate::job::JobRef;
use crate::outcome::Failure;
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, adaptor_sender};
use crate::sync::{AtomicU8, AtomicUsize, Ordering};

/// Indices a per-index kernel runs between two looks at the stop flags.
const STOP_CHECK: usize = 1024;
/// The longest chunk `bulk_chunked`'s function is given (a look at the stop flags
/// between two chunks).
pub(crate) const MAX_CHUNK: usize = 1 << 16;

const RUNNING: u8 = 0;
const STOPPED: u8 = 1;
const FAILED: u8 = 2;

/// What a parallel bulk does with a range of indices, and how it reaches its data.
///
/// # Safety
///
/// `ready` and `call` must only touch the value through the pointer they are given, as
/// their contracts say; the pool relies on this to run `call` concurrently.
pub unsafe trait Kernel<V, E>: Sync {
    /// What the calls need from the value (a pointer), computed once it arrived.
    type Ready: Copy;
    /// Whether every index is its own job (`bulk_unchunked`), rather than chunks split
    /// adaptively.
    const EAGER: bool = false;
    /// The most indices one call runs.
    const PIECE: usize = STOP_CHECK;

    /// The user's bounds on the pieces of work ([`Grain`]): a range longer than its
    /// `max_len` is split even without split budget, and none is split into pieces
    /// shorter than its `min_len`.
    fn grain(&self) -> Grain {
        Grain::new()
    }

    /// The bounds on one call's range. Where the function sees that range
    /// (`bulk_chunked`): the grain's, with [`PIECE`](Self::PIECE) as the `max_len` if it
    /// has none (twice its `min_len` if that is more). For kernels whose function sees
    /// one index at a time: at most `PIECE` (how many indices run between two looks at
    /// the stop flags).
    fn call_grain(&self) -> Grain {
        Grain::new().max_len(Self::PIECE)
    }

    /// Prepares the calls: returns the data they use and the number of indices.
    ///
    /// # Safety
    ///
    /// `value` is valid and exclusively ours for this call; called once, before `call`.
    unsafe fn ready(&self, value: *mut V) -> (Self::Ready, usize);

    /// Runs the indices `lo..hi` (at most [`PIECE`](Self::PIECE) of them).
    ///
    /// # Safety
    ///
    /// `ready` came from `Self::ready` on a value that is still alive and not otherwise
    /// accessed; `lo < hi` is within the shape it returned, and no other call runs any
    /// of these indices.
    unsafe fn call(&self, ready: Self::Ready, lo: usize, hi: usize) -> Result<(), E>;

    /// Runs a piece of the split, `lo..hi`, as consecutive calls: `next(i)` says where
    /// the call that starts at `i` ends, or `None` to end the piece before `i`. Returns
    /// the first index not run. By default one [`call`](Self::call) per range; the kernel
    /// of `bulk_chunked` hands the piece to its function
    /// ([`BulkChunkedFn::call_piece`]), so that a reduction folds it into one accumulator.
    ///
    /// # Safety
    ///
    /// As [`call`](Self::call)'s, for `lo..hi`; `next` returns ends within `i + 1..=hi`.
    #[inline]
    unsafe fn call_piece(
        &self,
        ready: Self::Ready,
        lo: usize,
        hi: usize,
        mut next: impl FnMut(usize) -> Option<usize>,
    ) -> Result<usize, E> {
        let mut i = lo;
        while i < hi {
            let Some(end) = next(i) else { break };
            // SAFETY: forwarded: `i..end` is within `lo..hi`, which the caller gave us.
            unsafe { self.call(ready, i, end) }?;
            i = end;
        }
        Ok(i)
    }
}

/// The kernel of `bulk`: `f(i, &value)` for each index; with `EAGER`, the kernel of
/// `bulk_unchunked` ([`BulkUnchunkedKernel`]), every index a job of its own.
pub struct BulkKernel<F, const EAGER: bool = false> {
    f: F,
    shape: usize,
    grain: Grain,
}

/// The kernel of `bulk_unchunked`: `f(i, &value)`, every index a job of its own.
pub type BulkUnchunkedKernel<F> = BulkKernel<F, true>;

// SAFETY: calls only read the value through a shared reference.
unsafe impl<V: Sync, E, F: BulkFn<V, E> + Sync, const EAGER: bool> Kernel<V, E> for BulkKernel<F, EAGER> {
    type Ready = *const V;
    const EAGER: bool = EAGER;
    fn grain(&self) -> Grain {
        self.grain
    }
    unsafe fn ready(&self, value: *mut V) -> (*const V, usize) {
        (value, self.shape)
    }
    #[inline]
    unsafe fn call(&self, value: *const V, lo: usize, hi: usize) -> Result<(), E> {
        // SAFETY: the value is alive and only read while calls run.
        let value = unsafe { &*value };
        (lo..hi).try_for_each(|i| self.f.call(i, value))
    }
}

/// The kernel of `bulk_chunked`: `f(lo, hi, &value)`, once per chunk.
pub struct BulkChunkedKernel<F> {
    f: F,
    shape: usize,
    grain: Grain,
}

// SAFETY: calls only read the value through a shared reference.
unsafe impl<V: Sync, E, F: BulkChunkedFn<V, E> + Sync> Kernel<V, E> for BulkChunkedKernel<F> {
    type Ready = *const V;
    const PIECE: usize = MAX_CHUNK;
    fn grain(&self) -> Grain {
        self.grain
    }
    fn call_grain(&self) -> Grain {
        self.grain.for_calls(MAX_CHUNK)
    }
    unsafe fn ready(&self, value: *mut V) -> (*const V, usize) {
        (value, self.shape)
    }
    #[inline]
    unsafe fn call(&self, value: *const V, lo: usize, hi: usize) -> Result<(), E> {
        // SAFETY: the value is alive and only read while calls run.
        self.f.call(lo, hi, unsafe { &*value })
    }
    #[inline]
    unsafe fn call_piece(
        &self,
        value: *const V,
        lo: usize,
        hi: usize,
        next: impl FnMut(usize) -> Option<usize>,
    ) -> Result<usize, E> {
        // SAFETY: the value is alive and only read while calls run.
        self.f.call_piece(lo, hi, unsafe { &*value }, next)
    }
}

/// The kernel of `bulk_each`: `f(i, &mut value.as_mut()[i])` for each index.
pub struct BulkEachKernel<T, F> {
    f: F,
    grain: Grain,
    _t: PhantomData<fn(&mut T)>,
}

// SAFETY: `ready` derives the element pointer from one exclusive borrow; each `call`
// makes a `&mut` to its own elements only, and indices are run by exactly one call.
unsafe impl<V: AsMut<[T]>, T: Send, E, F: BulkEachFn<T, E> + Sync> Kernel<V, E> for BulkEachKernel<T, F> {
    type Ready = *mut T;
    fn grain(&self) -> Grain {
        self.grain
    }
    unsafe fn ready(&self, value: *mut V) -> (*mut T, usize) {
        // SAFETY: the caller gives us exclusive access for this call.
        let slice = unsafe { (*value).as_mut() };
        (slice.as_mut_ptr(), slice.len())
    }
    #[inline]
    unsafe fn call(&self, base: *mut T, lo: usize, hi: usize) -> Result<(), E> {
        // SAFETY: `i` is in bounds and no other call touches element `i`.
        (lo..hi).try_for_each(|i| self.f.call(i, unsafe { &mut *base.add(i) }))
    }
}

/// The kernel of `bulk_chunks_mut`: `f(c, chunk)` for each chunk index `c`, the chunk
/// being the elements `c * chunk_len ..` (at most `chunk_len`) of `value.as_mut()`.
pub struct BulkChunksMutKernel<T, F> {
    f: F,
    chunk_len: usize,
    grain: Grain,
    _t: PhantomData<fn(&mut T)>,
}

// SAFETY: `ready` derives the element pointer from one exclusive borrow; each `call`
// makes a `&mut` to the elements of its own chunks only (chunks do not overlap), and
// chunk indices are run by exactly one call.
unsafe impl<V: AsMut<[T]>, T: Send, E, F: BulkChunksMutFn<T, E> + Sync> Kernel<V, E> for BulkChunksMutKernel<T, F> {
    /// The first element and the slice's length.
    type Ready = (*mut T, usize);
    fn grain(&self) -> Grain {
        self.grain
    }
    unsafe fn ready(&self, value: *mut V) -> ((*mut T, usize), usize) {
        // SAFETY: the caller gives us exclusive access for this call.
        let slice = unsafe { (*value).as_mut() };
        ((slice.as_mut_ptr(), slice.len()), chunk_count(slice.len(), self.chunk_len))
    }
    #[inline]
    unsafe fn call(&self, (base, len): (*mut T, usize), lo: usize, hi: usize) -> Result<(), E> {
        (lo..hi).try_for_each(|c| {
            let start = c * self.chunk_len;
            let n = self.chunk_len.min(len - start);
            // SAFETY: chunk `c < chunk_count(len, chunk_len)` is within the slice, and no
            // other call touches its elements.
            self.f.call(c, unsafe { std::slice::from_raw_parts_mut(base.add(start), n) })
        })
    }
}

impl<F, const EAGER: bool> BulkKernel<F, EAGER> {
    pub(crate) fn new(f: F, shape: usize, grain: Grain) -> Self {
        BulkKernel { f, shape, grain }
    }
}

impl<F> BulkChunkedKernel<F> {
    pub(crate) fn new(f: F, shape: usize, grain: Grain) -> Self {
        BulkChunkedKernel { f, shape, grain }
    }
}

impl<T, F> BulkEachKernel<T, F> {
    pub(crate) fn new(f: F, grain: Grain) -> Self {
        BulkEachKernel { f, grain, _t: PhantomData }
    }
}

impl<T, F> BulkChunksMutKernel<T, F> {
    pub(crate) fn new(f: F, chunk_len: usize, grain: Grain) -> Self {
        BulkChunksMutKernel { f, chunk_len, grain, _t: PhantomData }
    }
}

/// The sender of a bulk algorithm customized by the pool: `bulk`
/// ([`BulkKernel`]), `bulk_chunked` ([`BulkChunkedKernel`]), `bulk_unchunked`
/// ([`BulkUnchunkedKernel`]), `bulk_each` ([`BulkEachKernel`]) or `bulk_chunks_mut`
/// ([`BulkChunksMutKernel`]).
#[must_use = "senders do nothing unless connected and started"]
pub struct PoolBulk<S, K> {
    sndr: S,
    kernel: K,
}

impl<S, K> PoolBulk<S, K> {
    pub(crate) fn new(sndr: S, kernel: K) -> Self {
        PoolBulk { sndr, kernel }
    }
}

adaptor_sender!([S: Sender, K] PoolBulk<S, K> where [] {
    value = S::Value, error = S::Error, stopped = true
});

/// The state of a running parallel bulk, shared by its pieces.
pub(crate) struct BulkState<V, E, K: Kernel<V, E>, R> {
    rcvr: UnsafeCell<Option<R>>,
    kernel: K,
    value: UnsafeCell<Option<V>>,
    /// The kernel's data and the shape, once the value arrived.
    ready: UnsafeCell<Option<(K::Ready, usize)>>,
    /// Pieces started and not yet finished (the root counts as one).
    pending: AtomicUsize,
    state: AtomicU8,
    failure: UnsafeCell<Option<Failure<E>>>,
}

// SAFETY: the kernel's `Ready` pointer only points into this state's own value, which
// moves with it; everything else is owned data, `Send` by these bounds.
unsafe impl<V: Send, E: Send, K: Kernel<V, E> + Send, R: Send> Send for BulkState<V, E, K, R> {}

impl<V, E, K: Kernel<V, E>, R: Receiver<V, E>> BulkState<V, E, K, R> {
    fn env(&self) -> &R::Env {
        // SAFETY: the receiver stays in place until `arrive` takes it, after every piece
        // has finished.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("bulk: env after completion").env()
    }

    fn take_rcvr(&self) -> R {
        // SAFETY: only the completion takes the receiver, once.
        unsafe { (*self.rcvr.get()).take() }.expect("bulk completes once")
    }

    fn fail(&self, failure: Option<Failure<E>>) {
        // DROP ORDER: a failure that loses is dropped when this returns, before the arrival.
        let target = if failure.is_some() { FAILED } else { STOPPED };
        let mut cur = self.state.load(Ordering::Relaxed);
        while cur != FAILED && !(cur == STOPPED && target == STOPPED) {
            match self.state.compare_exchange_weak(cur, target, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    if let Some(f) = failure {
                        // SAFETY: only the piece that moved `state` to `FAILED` writes it;
                        // the completer reads it after the last `AcqRel` arrival.
                        unsafe { *self.failure.get() = Some(f) };
                    }
                    return;
                }
                Err(actual) => cur = actual,
            }
        }
    }

    /// Runs the piece `lo..hi` ([`Kernel::call_piece`]), in calls of at most
    /// [`Kernel::PIECE`] indices (or the grain's `max_len`), stopping early once the
    /// bulk failed or was stopped. On a worker (`worker`), it also stops after a call when
    /// work from outside the pool waits, and returns the first index it did not run:
    /// the caller queues the rest.
    fn run_range(&self, lo: usize, hi: usize, worker: Option<&WorkerThread>) -> Option<usize> {
        // SAFETY: written by `start_with` before any piece runs, then only read.
        let (ready, _) = unsafe { (*self.ready.get()).expect("bulk: value prepared") };
        let token = self.env().stop_token();
        let cut = self.kernel.call_grain();
        let rest = Cell::new(None);
        let next = |i: usize| {
            if self.state.load(Ordering::Relaxed) != RUNNING {
                return None;
            }
            if token.stop_requested() {
                self.fail(None);
                return None;
            }
            if i > lo && worker.is_some_and(WorkerThread::outside_work_waits) {
                rest.set(Some(i));
                return None;
            }
            Some(cut.next_end(i, hi))
        };
        // SAFETY: each index of `0..shape` is in exactly one piece, run once; `next` cuts
        // it into calls within it.
        match catch(|| unsafe { self.kernel.call_piece(ready, lo, hi, next) }) {
            Ok(Ok(_)) => return rest.get(),
            Ok(Err(e)) => self.fail(Some(Failure::Error(e))),
            Err(p) => self.fail(Some(Failure::Panic(p))),
        }
        None
    }

    /// Takes the value, prepares the kernel, and runs the bulk: split across the pool
    /// when on a worker and there is more than one index, otherwise in order on this
    /// thread.
    ///
    /// # Safety
    ///
    /// `this` is the live state of a started bulk, and no piece runs yet.
    unsafe fn start_with(this: *const Self, value: V) {
        // SAFETY: no piece runs yet, so the cells are ours; the value stays in place
        // (pinned operation) until the completion takes it.
        let prepared = unsafe {
            let s = &*this;
            let cell: *mut V = (*s.value.get()).insert(value);
            // The kernel calls user code (`bulk_each`'s `AsMut`): a panic fails the bulk.
            catch(|| s.kernel.ready(cell))
        };
        let shape = match prepared {
            Ok((ready, shape)) => {
                // SAFETY: no piece runs yet, so the cell is ours.
                unsafe { *(*this).ready.get() = Some((ready, shape)) };
                shape
            }
            Err(p) => {
                // SAFETY: no piece ever runs: this holds the root count, released once.
                unsafe {
                    (*this).fail(Some(Failure::Panic(p)));
                    Self::arrive(this);
                }
                return;
            }
        };
        WorkerThread::with_current(|worker| match worker {
            Some(worker) if shape > 1 => {
                // SAFETY: we hold the root count.
                unsafe { Self::process(this, worker, 0, shape, worker.registry().num_threads()) }
            }
            // SAFETY: as above; off the pool (or a single index), run in order here.
            _ => unsafe {
                (*this).run_range(0, shape, None);
                Self::arrive(this);
            },
        })
    }

    /// Splits `lo..hi` while it has more than one index and the split budget lasts (to
    /// single indices for an eager kernel), pushing the right halves for other workers
    /// to steal, then runs what is left and arrives, or, if it stopped for work from
    /// outside the pool, queues the rest with its count.
    ///
    /// # Safety
    ///
    /// `this` is the live state of a started bulk; the caller holds one `pending` count.
    unsafe fn process(this: *const Self, worker: &WorkerThread, lo: usize, mut hi: usize, mut splits: usize) {
        // SAFETY: alive while we hold a count.
        let s = unsafe { &*this };
        let grain = s.kernel.grain();
        let (min, max) = (grain.min(), grain.max().unwrap_or(usize::MAX));
        while hi - lo > 1
            && (hi - lo > max || ((K::EAGER || splits > 0) && (hi - lo) / 2 >= min))
            && s.state.load(Ordering::Relaxed) == RUNNING
        {
            let mid = lo + (hi - lo) / 2;
            splits /= 2;
            s.pending.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the piece owns the count just taken.
            unsafe { Self::push_piece(this, worker, mid, hi, splits) };
            hi = mid;
        }
        match s.run_range(lo, hi, Some(worker)) {
            // SAFETY: releases the count the caller held.
            None => unsafe { Self::arrive(this) },
            Some(rest) => {
                // SAFETY: the rest owns the count the caller held. The last touch of the
                // state here: the rest may run, and complete the bulk, at once.
                unsafe { Self::push_piece(this, worker, rest, hi, splits) };
                // Above it, for the loop to take first: the outside work.
                worker.yield_to_outside_work();
            }
        }
    }

    /// Pushes the piece `lo..hi` on `worker`'s deque, where its owner or a thief runs it.
    ///
    /// # Safety
    ///
    /// `this` is the live state of a started bulk; the piece takes over one `pending`
    /// count that the caller held.
    unsafe fn push_piece(this: *const Self, worker: &WorkerThread, lo: usize, hi: usize, splits: usize) {
        let job = crate::block::new(BulkJob { state: this, lo, hi, splits, origin: worker.index() });
        // SAFETY: the job owns one count, so the state outlives it; `BulkJob::run`
        // matches the block's type and frees it.
        worker.push_local(unsafe { JobRef::new(job.as_ptr(), BulkJob::<V, E, K, R>::run) });
    }

    /// # Safety
    ///
    /// Each count is released exactly once.
    unsafe fn arrive(this: *const Self) {
        // SAFETY: alive until the last arrival, which may be this one.
        if unsafe { (*this).pending.fetch_sub(1, Ordering::AcqRel) } != 1 {
            return;
        }
        // SAFETY: every piece has finished: exclusive access.
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
            // DROP ORDER: what the completion does not deliver (an error the panic
            // replaces, a second panic) is dropped at the end of this `let`, before it.
            let failure = match (state, (*s.failure.get()).take(), dropped) {
                (_, Some(Failure::Panic(p)), _) | (_, _, Err(p)) => Some(Failure::Panic(p)),
                (STOPPED, _, Ok(())) => None,
                (_, Some(Failure::Error(e)), Ok(())) => Some(Failure::Error(e)),
                (_, None, Ok(())) => unreachable!("bulk: failed without a failure"),
            };
            match failure {
                Some(failure) => failure.deliver(rcvr),
                None => rcvr.set_stopped(),
            }
        }
    }
}

/// A stealable piece of a parallel bulk, in a recycled block.
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
    /// `data` is a `BulkJob<V, E, K, R>` from `block::new`; called once.
    unsafe fn run(data: *const (), (): ()) {
        let block = data.cast_mut().cast::<Self>();
        // SAFETY: the caller's contract; the job is plain data, read out before its block
        // is freed, once.
        let job = unsafe {
            let job = block.read();
            crate::block::free(NonNull::new_unchecked(block));
            job
        };
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
                (*job.state).run_range(job.lo, job.hi, None);
                BulkState::arrive(job.state);
            },
        })
    }
}

/// The receiver of a pool bulk's predecessor.
pub struct PoolBulkReceiver<V, E, K: Kernel<V, E>, R> {
    state: *const BulkState<V, E, K, R>,
}

// SAFETY: the value moves to the thread of the last piece (`Send`) and the kernel runs
// on every worker (`Kernel: Sync`, which also requires what calls share to be `Sync` and
// what they mutate to be `Send`); the final receiver completes on any worker (`Send`)
// and its env is read by all (`Sync`).
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
        // SAFETY: the state is pinned in the started operation and no piece runs yet.
        unsafe { BulkState::start_with(self.state, value) }
    }
    fn set_error(self, error: E) {
        // SAFETY: the state outlives this receiver; no piece ever runs.
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

impl<S, K, R> SenderTo<R> for PoolBulk<S, K>
where
    S: Sender + SenderTo<PoolBulkReceiver<<S as Sender>::Value, <S as Sender>::Error, K, R>>,
    K: Kernel<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = PoolBulkOp<S, K, R>;
    fn connect(self, receiver: R) -> Self::Operation {
        PoolBulkOp {
            state: BulkState {
                rcvr: UnsafeCell::new(Some(receiver)),
                kernel: self.kernel,
                value: UnsafeCell::new(None),
                ready: UnsafeCell::new(None),
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
