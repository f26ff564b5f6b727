//! The pool's domain (P2999): the parallel bulk algorithms (`bulk.rs`), fork-join
//! `when_all`, and the `spawn` hook.
//!
//! They find the pool through the worker thread they run on: the early case
//! (`pool.scheduler().schedule().bulk(..)`) and the late case
//! (`starts_on(pool.scheduler(), just(v).bulk(..))`) both deliver the value on a
//! worker. Off the pool (a value that arrives on another thread) they fall back to the
//! default, sequential behaviour.

use std::ptr::NonNull;

use super::WorkerThread;
use super::bulk::{BulkChunkedKernel, BulkChunksMutKernel, BulkEachKernel, BulkKernel, BulkUnchunkedKernel, PoolBulk};
use crate::adaptors::bulk::{
    Bulk, BulkChunked, BulkChunkedFn, BulkChunksMut, BulkChunksMutFn, BulkEach, BulkEachFn, BulkFn, BulkUnchunked,
    Grain,
};
use crate::adaptors::when_all::{
    ConnectTuple, SenderTuple, Shared as WhenAllShared, StartPolicy, WhenAll, WhenAllImpl,
};
use crate::domain::Domain;
use crate::env::Env;
use crate::job::{JobRef, SpawnedOp};
use crate::receiver::Receiver;
use crate::sender::Sender;

/// The domain of a [`StaticThreadPool`](super::StaticThreadPool)'s scheduler and of the
/// senders completing on it. It customizes the bulk algorithms (`bulk`, `bulk_chunked`,
/// `bulk_unchunked`, `bulk_each`, `bulk_chunks_mut`: parallel, adaptively split chunks,
/// `bulk.rs`; the reductions run on its `bulk_chunked`),
/// `when_all` (children forked onto the workers) and `spawn` (on the worker's deque).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolDomain;

impl Domain for PoolDomain {
    crate::default_transforms!(except bulk, bulk_chunked, bulk_unchunked, bulk_each, bulk_chunks_mut, when_all, apply_spawn);
    // `bulk_reduce` keeps its default: reductions run on the pool's own `bulk_chunked`
    // (`adaptors/reduce.rs`), each chunk folded where it runs and merged with its
    // finished neighbours there.

    type Bulk<S: Sender, F: BulkFn<S::Value, S::Error>> = PoolBulk<S, BulkKernel<F>>;
    fn transform_bulk<S: Sender, F: BulkFn<S::Value, S::Error>, E: Env>(
        self,
        sndr: Bulk<S, F>,
        _: Option<&E>,
    ) -> Self::Bulk<S, F> {
        let grain = sndr.grain();
        let (sndr, shape, f) = sndr.into_parts();
        PoolBulk::new(sndr, BulkKernel::new(f, shape, grain))
    }

    type BulkChunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>> = PoolBulk<S, BulkChunkedKernel<F>>;
    fn transform_bulk_chunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>, E: Env>(
        self,
        sndr: BulkChunked<S, F>,
        _: Option<&E>,
    ) -> Self::BulkChunked<S, F> {
        let grain = sndr.grain();
        let (sndr, shape, f) = sndr.into_parts();
        PoolBulk::new(sndr, BulkChunkedKernel::new(f, shape, grain))
    }

    type BulkUnchunked<S: Sender, F: BulkFn<S::Value, S::Error>> = PoolBulk<S, BulkUnchunkedKernel<F>>;
    fn transform_bulk_unchunked<S: Sender, F: BulkFn<S::Value, S::Error>, E: Env>(
        self,
        sndr: BulkUnchunked<S, F>,
        _: Option<&E>,
    ) -> Self::BulkUnchunked<S, F> {
        let (sndr, shape, f) = sndr.into_parts();
        PoolBulk::new(sndr, BulkUnchunkedKernel::new(f, shape, Grain::new()))
    }

    type BulkEach<S: Sender, T, F: BulkEachFn<T, S::Error>>
        = PoolBulk<S, BulkEachKernel<T, F>>
    where
        S::Value: AsMut<[T]>;
    fn transform_bulk_each<S: Sender, T, F: BulkEachFn<T, S::Error>, E: Env>(
        self,
        sndr: BulkEach<S, T, F>,
        _: Option<&E>,
    ) -> Self::BulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>,
    {
        let grain = sndr.grain();
        let (sndr, f) = sndr.into_parts();
        PoolBulk::new(sndr, BulkEachKernel::new(f, grain))
    }

    type BulkChunksMut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>
        = PoolBulk<S, BulkChunksMutKernel<T, F>>
    where
        S::Value: AsMut<[T]>;
    fn transform_bulk_chunks_mut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>, E: Env>(
        self,
        sndr: BulkChunksMut<S, T, F>,
        _: Option<&E>,
    ) -> Self::BulkChunksMut<S, T, F>
    where
        S::Value: AsMut<[T]>,
    {
        let grain = sndr.grain();
        let (sndr, chunk_len, f) = sndr.into_parts();
        PoolBulk::new(sndr, BulkChunksMutKernel::new(f, chunk_len, grain))
    }

    type WhenAll<C: SenderTuple> = WhenAllImpl<C, ForkOnPool>;

    /// On a worker, the spawned operation goes straight onto that worker's deque (where
    /// idle workers steal it); elsewhere it starts inline. When a worker takes it, the
    /// operation's first `schedule()` on that worker's pool completes inline: the
    /// spawn was already the hop onto the pool.
    #[inline(always)]
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

/// `when_all` on the pool: the children but the first are handed out on the current
/// worker's deque, where idle workers steal them; the first runs inline (as a join does).
///
/// The children `1..n` are handed out by halves: the starting worker pushes the range
/// `n/2..n`, then `n/4..n/2`, and so on, so it pushes about `log2(n)` jobs, not `n - 1`;
/// whoever runs a range pushes its right half and goes on with the left one. Ranges of
/// up to eight children are handed out one child at a time (the last first),
/// down to child 1. A range of one child is that child's own job; a longer one is a small
/// job in a recycled block. A two-child `when_all` pushes exactly its second child, as a
/// join.
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

/// Inline runs of taken-back children (and of first children's first `schedule()`,
/// `WorkerThread::run_first_hop`) nested on one worker's stack beyond which they are left
/// to the worker loop instead: a chain of `when_all`s nested in a child that hops onto
/// the pool would otherwise grow the stack with its length.
pub(crate) const MAX_TAKEN_BACK_DEPTH: u32 = 64;

impl StartPolicy for ForkOnPool {
    /// The starting thread's hold: it keeps the operation alive through the window.
    const HOLD: usize = 1;

    // Always inlined into `WhenAllOp::start`, its one caller: out of line (which the
    // compiler chose once a second kind of child, `fork_join`'s, was forked in the same
    // program), a `fib` call costs about 20 instructions more.
    #[inline(always)]
    unsafe fn start<C: ConnectTuple<R>, R: Receiver<C::Values, C::Error>>(
        shared: *const WhenAllShared<C, R>,
        ops: *mut C::Ops,
    ) {
        WorkerThread::with_current(|worker| match worker {
            // SAFETY: forwarded from the caller; each handed-out child is started exactly
            // once, by a job, while the `when_all` operation (which outlives its children)
            // is alive. Our hold and the noted arrivals are released exactly once below;
            // until then they keep the operation, and `ops` with it, alive.
            Some(worker) => unsafe {
                let n = C::count(ops);
                if n == 0 {
                    return WhenAllShared::settle(shared, Self::HOLD);
                }
                // Hand out `1..n`, the last push being child 1 alone. A child handed out
                // alone that completes at once (a ready value) is not handed out: it is
                // started here with the first, in the window (`here` has its bit).
                let mut hi = n;
                let mut last: *const () = std::ptr::null();
                let mut here = 0usize;
                while hi > 1 {
                    let mid = split_point(0, hi);
                    if mid == hi - 1 && C::completes_at_once(ops, mid) {
                        here |= 1 << mid;
                    } else {
                        last = push_children::<C, R>(worker, ops, mid, hi);
                    }
                    hi = mid;
                }
                let early = WhenAllShared::start_first_deferring(shared, || {
                    while here != 0 {
                        C::start_child(ops, here.trailing_zeros() as usize);
                        here &= here - 1;
                    }
                    // The window's hop state lets the first child's first `schedule()` on
                    // this pool complete inline (`PoolOp::start`).
                    C::start_child(ops, 0)
                });
                let held = early + Self::HOLD;
                if early == 1 && n == 2 && !last.is_null() && worker.taken_back_depth() < MAX_TAKEN_BACK_DEPTH {
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

/// Children at most that are handed out one job each rather than by halves: a range job
/// costs a block and a second trip through a deque, which only pays off for many.
const ONE_BY_ONE: usize = 8;

/// Where the children `lo..hi` (more than one) are split: the last child goes alone while
/// there are few of them, the right half otherwise.
fn split_point(lo: usize, hi: usize) -> usize {
    if hi - lo <= ONE_BY_ONE { hi - 1 } else { lo + (hi - lo) / 2 }
}

/// Pushes the job that starts the children `lo..hi` on `worker`'s deque: the child's own
/// job for one child, a [`ChildRange`] for more. Returns the job's pointer.
///
/// # Safety
///
/// `ops` holds the started `when_all`'s pinned children, of which `lo..hi` are unstarted
/// and handed out nowhere else.
// Always inlined: out of line (which the compiler chose once `fork` grew), the fork
// costs a call and the spills around it, about 18 instructions per `fib` call.
#[inline(always)]
unsafe fn push_children<C: ConnectTuple<R>, R>(
    worker: &WorkerThread,
    ops: *mut C::Ops,
    lo: usize,
    hi: usize,
) -> *const () {
    let job = if hi - lo == 1 {
        // SAFETY: forwarded: child `lo` is started once, by this job.
        unsafe { C::child_job(ops, lo) }.0
    } else {
        let range = crate::block::new(ChildRange::<C, R> { ops, lo, hi });
        // SAFETY: the range's children keep the operation alive until they start, which
        // this job does, once each; `ChildRange::run` frees the block.
        unsafe { JobRef::new(range.as_ptr(), ChildRange::<C, R>::run) }
    };
    // Tagged as a spawn's job is: the worker that runs it (taken back, popped or stolen)
    // is on the pool already, so the child's first `schedule()` on it completes inline.
    let job = job.tagged();
    let data = job.data();
    worker.fork(job);
    data
}

/// Children `lo..hi` of a `when_all` on the pool, handed out as one job.
struct ChildRange<C: ConnectTuple<R>, R> {
    ops: *mut C::Ops,
    lo: usize,
    hi: usize,
}

impl<C: ConnectTuple<R>, R> ChildRange<C, R> {
    /// Pushes the right half, and the right half of what is left, down to one child,
    /// which it starts here.
    ///
    /// # Safety
    ///
    /// `data` is a `ChildRange<C, R>` from `block::new`, whose children are unstarted;
    /// called once.
    unsafe fn run(data: *const (), (): ()) {
        let block = data.cast_mut().cast::<Self>();
        // SAFETY: the caller's contract; the range is plain data, read out before its block
        // is freed, once.
        let ChildRange { ops, lo, mut hi } = unsafe {
            let range = block.read();
            crate::block::free(NonNull::new_unchecked(block));
            range
        };
        WorkerThread::with_current(|worker| match worker {
            // SAFETY: the unstarted children keep the operation alive; each is handed out
            // or started once; nothing here touches `ops` after the last start.
            Some(worker) => unsafe {
                while hi - lo > 1 {
                    let mid = split_point(lo, hi);
                    push_children::<C, R>(worker, ops, mid, hi);
                    hi = mid;
                }
                C::start_child(ops, lo);
            },
            // SAFETY: as above; off the pool (a job drained after the workers exited)
            // they start in order.
            None => unsafe {
                for i in lo..hi {
                    C::start_child(ops, i);
                }
            },
        })
    }
}
