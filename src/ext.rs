//! `SenderExt`: the blanket extension trait that chains adaptors.

use std::convert::Infallible;

use crate::adaptors::bulk::{self, BulkOutcome, Grain};
use crate::adaptors::channels::{IntoVariant, MapError, StoppedAsError, StoppedAsOptional, WithError};
use crate::adaptors::collect::{self, FilterMapCollect, MapCollect, TryMapCollect};
use crate::adaptors::continues_on::{ScheduleFrom, schedule_from};
use crate::adaptors::either::EitherSender;
use crate::adaptors::let_::{Let, OnError, OnStopped, OnValue};
use crate::adaptors::let_ref::{LendAny, LendFn, LendScope, LendTyped, LetValueRef};
use crate::adaptors::reduce::{self, FoldReduce, MapReduce};
use crate::adaptors::sort::{BulkSort, By, ByKey, ByOrd};
use crate::adaptors::then::{self, UponError, UponStopped};
use crate::adaptors::write_env::{Prop, WriteEnv};
use crate::any::{AnyReceiver, AnySender};
use crate::bridge::{AwaitReceiver, SenderFuture};
use crate::domain::MaybeDomain;
use crate::env::Query;
use crate::scheduler::NoScheduler;
use crate::scheduler::{MaybeScheduler, Scheduler};
use crate::scope::{self, IntoScopeSender, LetAsyncScope, LetAsyncScopeReduce, LetReduceToken, LetScopeToken};
use crate::sender::{Sender, SenderTo};
use crate::task::{AwaitRcvr, Awaited};

/// Adaptor methods for every [`Sender`]. Each returns a named `#[must_use]` sender type
/// (or, for the customizable algorithms, whatever the predecessor's domain turns the
/// default one into).
///
/// ```
/// use senders::{SenderExt, just, sync_wait};
/// let work = just("20").then(|s| s.parse::<i32>().unwrap() + 1).let_value(|n| just(n * 2));
/// assert_eq!(sync_wait(work), Ok(Some(42)));
/// ```
pub trait SenderExt: Sender {
    /// `then(sndr, f)`: completes with `f(value)`. Customizable by domains.
    ///
    /// ```
    /// use senders::{just, sync_wait, SenderExt};
    /// assert_eq!(sync_wait(just(2).then(|x| x * 10)).unwrap(), Some(20));
    /// ```
    fn then<F, U>(self, f: F) -> <Self::Domain as MaybeDomain>::EarlyThen<Self, F>
    where
        F: FnOnce(Self::Value) -> U,
    {
        then::then(self, f)
    }

    /// `upon_error(sndr, f)`: an error `e` becomes the value `f(e)`.
    ///
    /// ```
    /// use senders::{just_error, sync_wait, SenderExt};
    /// let v = sync_wait(just_error::<i32, _>("no").upon_error(|e: &str| e.len() as i32));
    /// assert_eq!(v.unwrap(), Some(2));
    /// ```
    fn upon_error<F>(self, f: F) -> UponError<Self, F>
    where
        F: FnOnce(Self::Error) -> Self::Value,
    {
        UponError::new(self, f)
    }

    /// `upon_stopped(sndr, f)`: a stop becomes the value `f()`.
    ///
    /// ```
    /// use senders::{just_stopped, sync_wait, SenderExt};
    /// use std::convert::Infallible;
    /// let v = sync_wait(just_stopped::<i32, Infallible>().upon_stopped(|| -1));
    /// assert_eq!(v.unwrap(), Some(-1));
    /// ```
    fn upon_stopped<F>(self, f: F) -> UponStopped<Self, F>
    where
        F: FnOnce() -> Self::Value,
    {
        UponStopped::new(self, f)
    }

    /// `bulk(sndr, shape, f)`: runs `f(i, &value)` for every `i` in `0..shape`, then
    /// completes with the value. An iteration returns `()` or `Result<(), Error>`.
    /// Customizable by domains; the default runs the iterations in order.
    ///
    /// **Where it runs.** The bulk algorithms (this one, `bulk_chunked`, `bulk_each`,
    /// `bulk_chunks_mut`, the reductions) run in parallel only where the value arrives
    /// on a scheduler whose domain runs them so: on a [`StaticThreadPool`](crate::StaticThreadPool),
    /// write `schedule(&sch).then(|()| v).bulk..(..)` or
    /// `starts_on(sch, just(v).bulk..(..))`. Without a scheduler (`sync_wait(just(v).bulk..(..))`)
    /// the default domain runs the work on the calling thread, in order: correct, and
    /// sequential. A `just(v)` cannot know which pool to run on; `starts_on` tells it.
    ///
    /// A `shape` of zero runs no iteration and passes the value through. Nothing checks
    /// `shape` against the value: an iteration that indexes past its data panics, and
    /// that panic is the completion (`set_panic`), as for any panicking iteration.
    ///
    /// ```
    /// use senders::{StaticThreadPool, just, starts_on, sync_wait, SenderExt};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// // On the pool's workers: `starts_on` delivers the value there.
    /// let hits = sync_wait(starts_on(pool.scheduler(), just(AtomicUsize::new(0)).bulk(4, |_, n: &AtomicUsize| {
    ///     n.fetch_add(1, Ordering::Relaxed);
    /// })));
    /// assert_eq!(hits.unwrap().unwrap().into_inner(), 4);
    /// ```
    fn bulk<F, O>(self, shape: usize, f: F) -> <Self::Domain as MaybeDomain>::EarlyBulk<Self, F>
    where
        F: Fn(usize, &Self::Value) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk(self, Grain::new(), shape, f)
    }

    /// `bulk` with bounds on the pieces of work its indices are cut into: see [`Grain`].
    /// The function still sees one index at a time; on a pool, `max_len` makes more
    /// pieces for idle workers to steal (for indices of uneven cost) and `min_len` fewer
    /// (for cheap ones).
    ///
    /// ```
    /// use senders::{Grain, StaticThreadPool, SenderExt, schedule, sync_wait};
    /// use std::sync::atomic::{AtomicU64, Ordering};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let sum = sync_wait(schedule(&pool.scheduler()).then(|()| AtomicU64::new(0)).bulk_with(
    ///     Grain::new().max_len(8),
    ///     100,
    ///     |i, sum: &AtomicU64| {
    ///         sum.fetch_add(i as u64, Ordering::Relaxed);
    ///     },
    /// ));
    /// assert_eq!(sum.unwrap().unwrap().into_inner(), 4950);
    /// ```
    fn bulk_with<F, O>(self, grain: Grain, shape: usize, f: F) -> <Self::Domain as MaybeDomain>::EarlyBulk<Self, F>
    where
        F: Fn(usize, &Self::Value) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk(self, grain, shape, f)
    }

    /// `bulk_chunked(sndr, shape, f)` (P3481): runs `f(begin, end, &value)` over chunks
    /// that together cover `0..shape` exactly once, then completes with the value. The
    /// callee gets a whole range, so it can vectorize a loop or keep state per chunk.
    /// Customizable by domains; the default makes one call, `f(0, shape, &value)` (none
    /// for a shape of zero). On a pool the chunks are the pool's choice: split as `bulk`
    /// splits, each chunk at most 65,536 indices long (a look at the stop token between
    /// two chunks).
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let sum = sync_wait(schedule(&pool.scheduler()).then(|()| AtomicUsize::new(0)).bulk_chunked(
    ///     1000,
    ///     |begin, end, total: &AtomicUsize| {
    ///         total.fetch_add((begin..end).sum::<usize>(), Ordering::Relaxed);
    ///     },
    /// ));
    /// assert_eq!(sum.unwrap().unwrap().into_inner(), 499_500);
    /// ```
    fn bulk_chunked<F, O>(self, shape: usize, f: F) -> <Self::Domain as MaybeDomain>::EarlyBulkChunked<Self, F>
    where
        F: Fn(usize, usize, &Self::Value) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk_chunked(self, Grain::new(), shape, f)
    }

    /// `bulk_chunked` with bounds on the length of its chunks (rayon's `with_min_len` and
    /// `with_max_len`): see [`Grain`]. The default domain, which makes one call, makes
    /// calls of at most `max_len` indices, in order.
    ///
    /// ```
    /// use senders::{Grain, StaticThreadPool, SenderExt, just, schedule, sync_wait};
    /// use std::sync::Mutex;
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let record = |begin, end, seen: &Mutex<Vec<(usize, usize)>>| seen.lock().unwrap().push((begin, end));
    /// // On the pool: chunks of at most 4 that cover `0..10`, in any order, on both workers.
    /// let on_pool = schedule(&pool.scheduler()).then(|()| Mutex::new(Vec::new()));
    /// let chunks = sync_wait(on_pool.bulk_chunked_with(Grain::new().max_len(4), 10, record));
    /// let mut chunks = chunks.unwrap().unwrap().into_inner().unwrap();
    /// chunks.sort();
    /// assert!(chunks.iter().all(|&(b, e)| e - b <= 4));
    /// assert_eq!(chunks.iter().map(|&(b, e)| e - b).sum::<usize>(), 10);
    /// // Without a scheduler the calls run on the calling thread, in order.
    /// let here = sync_wait(just(Mutex::new(Vec::new())).bulk_chunked_with(Grain::new().max_len(4), 10, record));
    /// assert_eq!(here.unwrap().unwrap().into_inner().unwrap(), [(0, 4), (4, 8), (8, 10)]);
    /// ```
    fn bulk_chunked_with<F, O>(
        self,
        grain: Grain,
        shape: usize,
        f: F,
    ) -> <Self::Domain as MaybeDomain>::EarlyBulkChunked<Self, F>
    where
        F: Fn(usize, usize, &Self::Value) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk_chunked(self, grain, shape, f)
    }

    /// `bulk_unchunked(sndr, shape, f)` (P3481): runs `f(i, &value)` for every `i` in
    /// `0..shape`, each index on an execution agent of its own where the scheduler has
    /// several: on a pool every index is its own job, so that `shape` items that wait for
    /// one another (up to the number of workers) make progress together. The default runs
    /// them in order, as `bulk`. Errors, panics and stop requests as for `bulk`.
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait};
    /// use std::collections::HashSet;
    /// use std::sync::Mutex;
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let seen = sync_wait(schedule(&pool.scheduler()).then(|()| Mutex::new(HashSet::new())).bulk_unchunked(
    ///     4,
    ///     |i, seen: &Mutex<HashSet<usize>>| {
    ///         seen.lock().unwrap().insert(i);
    ///     },
    /// ));
    /// assert_eq!(seen.unwrap().unwrap().into_inner().unwrap().len(), 4);
    /// ```
    fn bulk_unchunked<F, O>(self, shape: usize, f: F) -> <Self::Domain as MaybeDomain>::EarlyBulkUnchunked<Self, F>
    where
        F: Fn(usize, &Self::Value) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk_unchunked(self, shape, f)
    }

    /// `bulk_each(sndr, f)`: runs `f(i, &mut value[i])` for every element of the value's
    /// slice (`V: AsMut<[T]>`), then completes with the value. Each element is visited
    /// exactly once, so iterations may run in parallel with exclusive access to their
    /// element. Customizable by domains; the default visits the elements in order.
    ///
    /// There is no separate shape: it is the slice's length, so it cannot exceed the
    /// data. The value's `AsMut` is user code too: a panic in it is delivered with
    /// `set_panic`, and no element is visited.
    ///
    /// ```
    /// use senders::{StaticThreadPool, just, starts_on, sync_wait, SenderExt};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let v = sync_wait(starts_on(pool.scheduler(), just(vec![1.0, 2.0]).bulk_each(|_, x: &mut f64| *x += 1.0)));
    /// assert_eq!(v.unwrap(), Some(vec![2.0, 3.0]));
    /// ```
    fn bulk_each<T, F, O>(self, f: F) -> <Self::Domain as MaybeDomain>::EarlyBulkEach<Self, T, F>
    where
        Self::Value: AsMut<[T]>,
        F: Fn(usize, &mut T) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk_each(self, Grain::new(), f)
    }

    /// `bulk_each` with bounds on the pieces of work its elements are cut into: see
    /// [`Grain`] (rayon's `par_iter_mut().with_min_len(n)`).
    ///
    /// ```
    /// use senders::{Grain, StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let v = sync_wait(
    ///     schedule(&pool.scheduler())
    ///         .then(|()| vec![1u32; 10_000])
    ///         .bulk_each_with(Grain::new().min_len(1024), |i, x: &mut u32| *x += i as u32),
    /// );
    /// assert_eq!(v.unwrap().unwrap()[9_999], 10_000);
    /// ```
    fn bulk_each_with<T, F, O>(self, grain: Grain, f: F) -> <Self::Domain as MaybeDomain>::EarlyBulkEach<Self, T, F>
    where
        Self::Value: AsMut<[T]>,
        F: Fn(usize, &mut T) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk_each(self, grain, f)
    }

    /// `bulk_chunks_mut(sndr, chunk_len, f)`: runs `f(c, chunk)` for every chunk of
    /// `chunk_len` elements of the value's slice (`V: AsMut<[T]>`; the last chunk may be
    /// shorter), `c` being the chunk's index (its first element is `c * chunk_len`), then
    /// completes with the value: rayon's `par_chunks_mut(chunk_len).enumerate()`, writing
    /// the rows of a matrix, say. Each chunk is visited exactly once, with exclusive
    /// access to its elements. Customizable by domains; the default visits the chunks in
    /// order; the pool splits the chunks as `bulk_each` splits elements.
    ///
    /// An empty slice runs no call and passes the value through. Errors, panics and stop
    /// requests as for `bulk_each`.
    ///
    /// # Panics
    ///
    /// If `chunk_len` is zero (here, when the sender is built).
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// // Row `r` of a 3-column matrix becomes `r, r, r`.
    /// let m = sync_wait(schedule(&pool.scheduler()).then(|()| vec![0u32; 12]).bulk_chunks_mut(
    ///     3,
    ///     |r, row: &mut [u32]| row.fill(r as u32),
    /// ));
    /// assert_eq!(m.unwrap().unwrap(), [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
    /// ```
    #[track_caller]
    fn bulk_chunks_mut<T, F, O>(
        self,
        chunk_len: usize,
        f: F,
    ) -> <Self::Domain as MaybeDomain>::EarlyBulkChunksMut<Self, T, F>
    where
        Self::Value: AsMut<[T]>,
        F: Fn(usize, &mut [T]) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk_chunks_mut(self, Grain::new(), chunk_len, f)
    }

    /// `bulk_chunks_mut` with bounds on the pieces of work, counted in chunks: see
    /// [`Grain`] (rayon's `par_chunks_mut(n).with_min_len(m)`).
    ///
    /// # Panics
    ///
    /// If `chunk_len` is zero.
    ///
    /// ```
    /// use senders::{Grain, StaticThreadPool, just, starts_on, sync_wait, SenderExt};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let pairs = just(vec![1.0f64; 8]).bulk_chunks_mut_with(Grain::new().min_len(2), 2, |_, pair: &mut [f64]| {
    ///     pair[1] = -pair[0];
    /// });
    /// let v = sync_wait(starts_on(pool.scheduler(), pairs));
    /// assert_eq!(v.unwrap().unwrap(), [1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, -1.0]);
    /// ```
    #[track_caller]
    fn bulk_chunks_mut_with<T, F, O>(
        self,
        grain: Grain,
        chunk_len: usize,
        f: F,
    ) -> <Self::Domain as MaybeDomain>::EarlyBulkChunksMut<Self, T, F>
    where
        Self::Value: AsMut<[T]>,
        F: Fn(usize, &mut [T]) -> O,
        O: BulkOutcome<Self::Error>,
    {
        bulk::bulk_chunks_mut(self, grain, chunk_len, f)
    }

    /// `bulk_reduce(sndr, shape, identity, fold, combine)`: a map-reduce over the indices
    /// `0..shape` of the value. Each piece of work `begin..end` gets one accumulator,
    /// `identity()`, into which it folds its indices in order (`fold(acc, begin, end,
    /// &value)`, once or for several consecutive ranges of the piece), and the pieces'
    /// results are combined, the left range's first: `combine` must be associative, and
    /// `identity()` its identity, but it need not be commutative (a concatenation, a
    /// `Vec` collected in order). The sender completes with the result, after dropping
    /// the value. Rayon's `par_iter().fold(identity, fold).reduce(identity, combine)`.
    ///
    /// **How many accumulators.** As many as pieces, as rayon's `fold`: on a pool, a few
    /// per worker (the adaptive split halves the shape once per worker, and again where a
    /// worker steals), each of which the pool runs as calls of at most 65,536 indices
    /// folded into the piece's one accumulator; with a [`Grain`]'s `max_len`, at least
    /// one per `max_len` indices (the pieces are no longer). On the default domain (no
    /// scheduler): one, `fold(identity(), 0, shape, &value)` on the calling thread.
    ///
    /// A shape of zero completes with `identity()`. Customizable by domains; the default
    /// lowers it onto the domain's `bulk_chunked` (the pool's chunks, combined on the
    /// workers as they finish); on the default domain it is one
    /// `fold(identity(), 0, shape, &value)` on the thread that delivered the value. An
    /// error or stop of the predecessor passes through; a stop request between two chunks
    /// completes stopped; a panic in `identity`, `fold` or `combine` completes with it (on
    /// a pool, with the first to be caught: the others are dropped on their workers).
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let data: Vec<u64> = (1..=1000).collect();
    /// let sum = sync_wait(schedule(&pool.scheduler()).then(move |()| data).bulk_reduce(
    ///     1000,
    ///     || 0,
    ///     |acc, begin, end, v: &Vec<u64>| acc + v[begin..end].iter().sum::<u64>(),
    ///     |a, b| a + b,
    /// ));
    /// assert_eq!(sum.unwrap(), Some(500_500));
    /// // A collect, in order: `combine` appends the right range to the left one.
    /// let squares = sync_wait(schedule(&pool.scheduler()).bulk_reduce(
    ///     100,
    ///     Vec::new,
    ///     |mut acc: Vec<usize>, begin, end, _: &()| {
    ///         acc.extend((begin..end).map(|i| i * i));
    ///         acc
    ///     },
    ///     |mut left, mut right| {
    ///         left.append(&mut right);
    ///         left
    ///     },
    /// ));
    /// assert_eq!(squares.unwrap().unwrap(), (0..100).map(|i| i * i).collect::<Vec<_>>());
    /// ```
    fn bulk_reduce<A, I, F, C>(
        self,
        shape: usize,
        identity: I,
        fold: F,
        combine: C,
    ) -> <Self::Domain as MaybeDomain>::EarlyBulkReduce<Self, FoldReduce<I, F, C>>
    where
        I: Fn() -> A,
        F: Fn(A, usize, usize, &Self::Value) -> A,
        C: Fn(A, A) -> A,
    {
        reduce::bulk_reduce(self, Grain::new(), shape, FoldReduce::new(identity, fold, combine))
    }

    /// `bulk_reduce` with bounds on the length of its chunks: see [`Grain`]. With a
    /// `max_len`, every piece, and so every accumulator, covers at most that many
    /// indices (rayon's `with_max_len(n).fold(..)`): the default domain folds chunks of
    /// at most `max_len` indices, each from `identity()`, and combines them in order.
    ///
    /// ```
    /// use senders::{Grain, just, sync_wait, SenderExt};
    /// // Without a scheduler (`just`), on the calling thread: three chunks of at most 3.
    /// let s = sync_wait(just("abcdefg").bulk_reduce_with(
    ///     Grain::new().max_len(3),
    ///     7,
    ///     String::new,
    ///     |mut acc, begin, end, text: &&str| {
    ///         acc.push_str(&text[begin..end]);
    ///         acc.push('|');
    ///         acc
    ///     },
    ///     |left, right| left + &right,
    /// ));
    /// assert_eq!(s.unwrap().unwrap(), "abc|def|g|");
    /// ```
    fn bulk_reduce_with<A, I, F, C>(
        self,
        grain: Grain,
        shape: usize,
        identity: I,
        fold: F,
        combine: C,
    ) -> <Self::Domain as MaybeDomain>::EarlyBulkReduce<Self, FoldReduce<I, F, C>>
    where
        I: Fn() -> A,
        F: Fn(A, usize, usize, &Self::Value) -> A,
        C: Fn(A, A) -> A,
    {
        reduce::bulk_reduce(self, grain, shape, FoldReduce::new(identity, fold, combine))
    }

    /// `bulk_map_reduce(sndr, shape, map, combine)`: the reduction without an identity.
    /// Completes with `Some` of the combination of `map(i, &value)` for every `i` in
    /// `0..shape`, in order (`combine` associative, not necessarily commutative), or
    /// `None` for a shape of zero, after dropping the value. Rayon's
    /// `map(..).reduce_with(combine)`, and, with `unwrap_or_default`, `map(..).sum()`.
    /// It is [`bulk_reduce`](Self::bulk_reduce) with an `Option` accumulator
    /// ([`MapReduce`](crate::adaptors::MapReduce)), customized and run as that.
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let max = sync_wait(schedule(&pool.scheduler()).bulk_map_reduce(1000, |i, _| (i * 7919) % 1000, usize::max));
    /// assert_eq!(max.unwrap(), Some(Some(999)));
    /// let none = sync_wait(schedule(&pool.scheduler()).bulk_map_reduce(0, |i, _| i, usize::max));
    /// assert_eq!(none.unwrap(), Some(None));
    /// ```
    fn bulk_map_reduce<A, M, C>(
        self,
        shape: usize,
        map: M,
        combine: C,
    ) -> <Self::Domain as MaybeDomain>::EarlyBulkReduce<Self, MapReduce<M, C>>
    where
        M: Fn(usize, &Self::Value) -> A,
        C: Fn(A, A) -> A,
    {
        reduce::bulk_reduce(self, Grain::new(), shape, MapReduce::new(map, combine))
    }

    /// `bulk_map_reduce` with bounds on the length of its chunks: see [`Grain`]. Rayon's
    /// `with_min_len(n).map(..).sum()` is `bulk_map_reduce_with(Grain::new().min_len(n), ..)`.
    ///
    /// ```
    /// use senders::{Grain, StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let data: Vec<u64> = (1..=10_000).collect();
    /// let sum = sync_wait(schedule(&pool.scheduler()).then(move |()| data).bulk_map_reduce_with(
    ///     Grain::new().min_len(1024),
    ///     10_000,
    ///     |i, v: &Vec<u64>| v[i] * v[i],
    ///     |a, b| a + b,
    /// ));
    /// assert_eq!(sum.unwrap().unwrap(), Some((1..=10_000u64).map(|x| x * x).sum()));
    /// ```
    fn bulk_map_reduce_with<A, M, C>(
        self,
        grain: Grain,
        shape: usize,
        map: M,
        combine: C,
    ) -> <Self::Domain as MaybeDomain>::EarlyBulkReduce<Self, MapReduce<M, C>>
    where
        M: Fn(usize, &Self::Value) -> A,
        C: Fn(A, A) -> A,
    {
        reduce::bulk_reduce(self, grain, shape, MapReduce::new(map, combine))
    }

    /// `bulk_map_collect(sndr, shape, map)`: collects `map(i, &value)` for every `i` in
    /// `0..shape` into a `Vec`, in index order, then drops the value and completes with
    /// the `Vec`: rayon's `par_iter().map(map).collect::<Vec<_>>()`. The element type
    /// needs neither `Default` nor `Clone`: each element is moved straight into its slot
    /// of the `Vec`'s reserved capacity.
    ///
    /// It is `bulk_chunked` of the shape (customizable by domains as that is): on the
    /// pool, the chunks run on the workers, each writing its own run of the `Vec`; on the
    /// default domain, without a scheduler, everything runs on the thread that delivered
    /// the value. A shape of zero completes with an empty `Vec`. An error or stop of the
    /// predecessor passes through; a stop request between two chunks completes stopped;
    /// a panic in `map` completes with it. In all three the elements already written are
    /// dropped before the completion, and the `Vec` is never seen.
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let data: Vec<u64> = (0..10_000).collect();
    /// let squares = sync_wait(
    ///     schedule(&pool.scheduler()).then(move |()| data).bulk_map_collect(10_000, |i, v: &Vec<u64>| v[i] * v[i]),
    /// );
    /// assert_eq!(squares.unwrap().unwrap(), (0..10_000u64).map(|x| x * x).collect::<Vec<_>>());
    /// ```
    fn bulk_map_collect<T, F>(self, shape: usize, map: F) -> MapCollect<Self, T, F>
    where
        F: Fn(usize, &Self::Value) -> T,
    {
        collect::bulk_map_collect(self, Grain::new(), shape, map)
    }

    /// `bulk_map_collect` with bounds on the length of its chunks: see [`Grain`]
    /// (rayon's `par_iter().with_min_len(n).map(..).collect()`).
    ///
    /// ```
    /// use senders::{Grain, StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let names = sync_wait(
    ///     schedule(&pool.scheduler()).bulk_map_collect_with(Grain::new().min_len(64), 1000, |i, _| format!("#{i}")),
    /// );
    /// assert_eq!(names.unwrap().unwrap()[999], "#999");
    /// ```
    fn bulk_map_collect_with<T, F>(self, grain: Grain, shape: usize, map: F) -> MapCollect<Self, T, F>
    where
        F: Fn(usize, &Self::Value) -> T,
    {
        collect::bulk_map_collect(self, grain, shape, map)
    }

    /// `bulk_map_collect` of a fallible `map`: the first error (on a pool, the first to
    /// be caught) completes the sender with it, after the elements written are dropped.
    /// Rayon's `par_iter().map(..).collect::<Result<Vec<_>, _>>()`.
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let words = vec!["1", "2", "x", "4"];
    /// let parse = |i: usize, w: &Vec<&str>| w[i].parse::<u32>().map_err(|_| format!("bad word {i}"));
    /// let parsed = sync_wait(
    ///     schedule(&pool.scheduler()).with_error::<String>().then(move |()| words).bulk_try_map_collect(4, parse),
    /// );
    /// assert_eq!(parsed, Err("bad word 2".to_string()));
    /// ```
    fn bulk_try_map_collect<T, F>(self, shape: usize, map: F) -> TryMapCollect<Self, T, F>
    where
        F: Fn(usize, &Self::Value) -> Result<T, Self::Error>,
    {
        collect::bulk_try_map_collect(self, Grain::new(), shape, map)
    }

    /// `bulk_try_map_collect` with bounds on the length of its chunks: see [`Grain`].
    ///
    /// ```
    /// use senders::{Grain, StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let halves = sync_wait(schedule(&pool.scheduler()).with_error::<usize>().bulk_try_map_collect_with(
    ///     Grain::new().max_len(10),
    ///     100,
    ///     |i, _| if i % 2 == 0 { Ok(i / 2) } else { Err(i) },
    /// ));
    /// assert!(matches!(halves, Err(i) if i % 2 == 1));
    /// ```
    fn bulk_try_map_collect_with<T, F>(self, grain: Grain, shape: usize, map: F) -> TryMapCollect<Self, T, F>
    where
        F: Fn(usize, &Self::Value) -> Result<T, Self::Error>,
    {
        collect::bulk_try_map_collect(self, grain, shape, map)
    }

    /// `bulk_filter_map_collect(sndr, shape, f)`: collects the `Some`s of `f(i, &value)`
    /// for `i` in `0..shape` into a `Vec`, in index order, then drops the value and
    /// completes with the `Vec`: rayon's `filter_map(f).collect()`, and, with
    /// `keep(x).then(|| x.clone())`, `filter(keep).cloned().collect()`. Each piece of the
    /// split keeps its elements in a `Vec` of its own; the finish appends them, in order,
    /// to the first.
    ///
    /// Customizable, run, stopped and failed as [`bulk_map_collect`](Self::bulk_map_collect)
    /// (without a scheduler, on the thread that delivered the value).
    ///
    /// ```
    /// use senders::{StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let data: Vec<u64> = (0..10_000).collect();
    /// let odd = sync_wait(
    ///     schedule(&pool.scheduler())
    ///         .then(move |()| data)
    ///         .bulk_filter_map_collect(10_000, |i, v: &Vec<u64>| (v[i] % 2 == 1).then_some(v[i])),
    /// );
    /// assert_eq!(odd.unwrap().unwrap(), (0..10_000u64).filter(|x| x % 2 == 1).collect::<Vec<_>>());
    /// ```
    fn bulk_filter_map_collect<T, F>(self, shape: usize, f: F) -> FilterMapCollect<Self, T, F>
    where
        F: Fn(usize, &Self::Value) -> Option<T>,
    {
        collect::bulk_filter_map_collect(self, Grain::new(), shape, f)
    }

    /// `bulk_filter_map_collect` with bounds on the length of its chunks: see [`Grain`].
    ///
    /// ```
    /// use senders::{Grain, StaticThreadPool, SenderExt, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let sevens = sync_wait(
    ///     schedule(&pool.scheduler()).bulk_filter_map_collect_with(Grain::new().max_len(100), 1000, |i, _| {
    ///         (i % 7 == 0).then_some(i)
    ///     }),
    /// );
    /// assert_eq!(sevens.unwrap().unwrap(), (0..1000).step_by(7).collect::<Vec<_>>());
    /// ```
    fn bulk_filter_map_collect_with<T, F>(self, grain: Grain, shape: usize, f: F) -> FilterMapCollect<Self, T, F>
    where
        F: Fn(usize, &Self::Value) -> Option<T>,
    {
        collect::bulk_filter_map_collect(self, grain, shape, f)
    }

    /// Sorts the value's slice (`V: AsMut<[T]>`: a `Vec<T>`, a `Box<[T]>`, a borrowed
    /// `&mut [T]` or `&mut Vec<T>`, ...) by [`Ord`], stably, then completes with the
    /// value: rayon's `par_sort`. A parallel merge sort: the std `slice::sort` on runs, then
    /// merges cut by binary search so that they run in parallel, through a buffer as
    /// long as the slice.
    ///
    /// The `bulk_` prefix is the crate's for the data-parallel algorithms on a value
    /// (`bulk_each`, `bulk_chunks_mut`, `bulk_reduce`): **on a pool** (the value arrives on
    /// a worker of a [`StaticThreadPool`](crate::StaticThreadPool), as after
    /// `schedule(&pool.scheduler())`) the sort runs in parallel on that pool's workers;
    /// **elsewhere** (`just(v).bulk_sort()` waited on by `sync_wait` on an ordinary thread)
    /// it is `slice::sort`, on the thread that delivered the value. An error or stop of
    /// the predecessor passes through. A panic of `Ord` completes with `set_panic`,
    /// leaving the slice a permutation of its input (as `slice::sort` promises; a
    /// borrowed slice keeps it); a stop request seen between two pieces completes
    /// stopped, the slice likewise a permutation. Element types need neither `Default`
    /// nor `Clone`. See [`BulkSort`](crate::adaptors::BulkSort).
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let v: Vec<u32> = (0..100_000u32).map(|i| i.wrapping_mul(2_654_435_761)).collect();
    /// let sorted = sync_wait(schedule(&pool.scheduler()).then(move |()| v).bulk_sort()).unwrap().unwrap();
    /// assert!(sorted.is_sorted());
    /// ```
    ///
    /// A borrowed slice, lent by `let_value_ref`:
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, just, starts_on, sync_wait_value};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let (v, sorted) = sync_wait_value(starts_on(
    ///     pool.scheduler(),
    ///     just(vec![5, 3, 9, 1]).let_value_ref(|v, _| just(v.as_mut_slice()).bulk_sort().then(|s| s.len()).boxed()),
    /// ));
    /// assert_eq!((v, sorted), (vec![1, 3, 5, 9], 4));
    /// ```
    fn bulk_sort<T>(self) -> BulkSort<Self, T, ByOrd, true>
    where
        Self::Value: AsMut<[T]>,
        T: Ord + Send,
    {
        BulkSort::new(self, ByOrd)
    }

    /// [`bulk_sort`](Self::bulk_sort) by a comparator (`slice::sort_by`, rayon's
    /// `par_sort_by`): stable, in parallel on a pool, the std sort elsewhere.
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let words = vec!["pear", "fig", "apple", "kiwi"];
    /// let by_len = sync_wait(schedule(&pool.scheduler()).then(move |()| words).bulk_sort_by(|a, b| a.len().cmp(&b.len())));
    /// assert_eq!(by_len.unwrap().unwrap(), ["fig", "pear", "kiwi", "apple"], "stable: pear before kiwi");
    /// ```
    fn bulk_sort_by<T, F>(self, compare: F) -> BulkSort<Self, T, By<F>, true>
    where
        Self::Value: AsMut<[T]>,
        T: Send,
        F: Fn(&T, &T) -> std::cmp::Ordering + Sync,
    {
        BulkSort::new(self, By::new(compare))
    }

    /// [`bulk_sort`](Self::bulk_sort) by a key (`slice::sort_by_key`, rayon's
    /// `par_sort_by_key`; the key is computed at every comparison): stable, in parallel
    /// on a pool, the std sort elsewhere.
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let v = vec![(2, 'a'), (1, 'b'), (2, 'c'), (1, 'd')];
    /// let s = sync_wait(schedule(&pool.scheduler()).then(move |()| v).bulk_sort_by_key(|p: &(i32, char)| p.0));
    /// assert_eq!(s.unwrap().unwrap(), [(1, 'b'), (1, 'd'), (2, 'a'), (2, 'c')]);
    /// ```
    fn bulk_sort_by_key<T, K, F>(self, key: F) -> BulkSort<Self, T, ByKey<F>, true>
    where
        Self::Value: AsMut<[T]>,
        T: Send,
        K: Ord,
        F: Fn(&T) -> K + Sync,
    {
        BulkSort::new(self, ByKey::new(key))
    }

    /// Sorts the value's slice by [`Ord`], not keeping equal elements in order, in place
    /// (no buffer), then completes with the value: rayon's `par_sort_unstable`. A
    /// parallel quicksort in the manner of pattern-defeating quicksort (sorted, reversed
    /// and many-equal inputs in linear time or close, the std `slice::sort_unstable`
    /// below a cutoff and after too many bad pivots). Where it runs, and its panics,
    /// stops and errors, as for [`bulk_sort`](Self::bulk_sort): in parallel on a pool,
    /// `slice::sort_unstable` on the thread that delivered the value elsewhere.
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let v: Vec<u64> = (0..100_000u64).rev().collect();
    /// let sorted = sync_wait(schedule(&pool.scheduler()).then(move |()| v).bulk_sort_unstable()).unwrap().unwrap();
    /// assert!(sorted.iter().copied().eq(0..100_000));
    /// ```
    fn bulk_sort_unstable<T>(self) -> BulkSort<Self, T, ByOrd, false>
    where
        Self::Value: AsMut<[T]>,
        T: Ord + Send,
    {
        BulkSort::new(self, ByOrd)
    }

    /// [`bulk_sort_unstable`](Self::bulk_sort_unstable) by a comparator
    /// (`slice::sort_unstable_by`, rayon's `par_sort_unstable_by`).
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let v: Vec<i32> = (0..10_000).collect();
    /// let desc = sync_wait(schedule(&pool.scheduler()).then(move |()| v).bulk_sort_unstable_by(|a, b| b.cmp(a)));
    /// assert_eq!(desc.unwrap().unwrap()[..3], [9_999, 9_998, 9_997]);
    /// ```
    fn bulk_sort_unstable_by<T, F>(self, compare: F) -> BulkSort<Self, T, By<F>, false>
    where
        Self::Value: AsMut<[T]>,
        T: Send,
        F: Fn(&T, &T) -> std::cmp::Ordering + Sync,
    {
        BulkSort::new(self, By::new(compare))
    }

    /// [`bulk_sort_unstable`](Self::bulk_sort_unstable) by a key
    /// (`slice::sort_unstable_by_key`, rayon's `par_sort_unstable_by_key`).
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait};
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let v: Vec<i32> = (-500..500).collect();
    /// let s = sync_wait(schedule(&pool.scheduler()).then(move |()| v).bulk_sort_unstable_by_key(|x: &i32| x.abs()));
    /// assert!(s.unwrap().unwrap().windows(2).all(|w| w[0].abs() <= w[1].abs()));
    /// ```
    fn bulk_sort_unstable_by_key<T, K, F>(self, key: F) -> BulkSort<Self, T, ByKey<F>, false>
    where
        Self::Value: AsMut<[T]>,
        T: Send,
        K: Ord,
        F: Fn(&T) -> K + Sync,
    {
        BulkSort::new(self, ByKey::new(key))
    }

    /// `let_value(sndr, f)`: continues with the sender `f(value)`. The second sender
    /// sees the predecessor's domain and completion scheduler as current.
    ///
    /// ```
    /// use senders::{just, sync_wait, SenderExt};
    /// let v = sync_wait(just(3).let_value(|x| just(x * 2)));
    /// assert_eq!(v.unwrap(), Some(6));
    /// ```
    fn let_value<F, S2>(self, f: F) -> Let<OnValue, Self, F>
    where
        F: FnOnce(Self::Value) -> S2,
        S2: Sender<Error = Self::Error>,
    {
        Let::new(self, f)
    }

    /// `let_value` by reference (P2300's own semantics): the value is kept in the
    /// operation and lent to `f`, as `&'a mut V`; the [`AnySender`] that `f` returns may
    /// borrow it, and anything `f` captures by reference, until it completes. Then its
    /// operation is dropped and this sender completes with `(value, u)`, `u` being that
    /// sender's value: the parent has its value back. Errors, stop and panics of either
    /// stage pass through, after the value is dropped. `f`'s second argument only
    /// carries the lifetimes ([`LendScope`]); ignore it with `_`. See
    /// [`LetValueRef`](crate::adaptors::LetValueRef) for the rules, and
    /// [`let_value_ref_with`](Self::let_value_ref_with) for a typed sender in place of
    /// the `AnySender`.
    ///
    /// The usual divide and conquer: lend the halves of a buffer to the children, then
    /// use the whole buffer again.
    ///
    /// ```
    /// use senders::{AnySender, SenderExt, just, sync_wait_value, when_all};
    ///
    /// fn sort(v: &mut [u32]) -> AnySender<'_, ()> {
    ///     if v.len() <= 4 {
    ///         v.sort_unstable();
    ///         return just(()).boxed();
    ///     }
    ///     just(v)
    ///         .let_value_ref(|v, _| {
    ///             let (left, right) = v.split_at_mut(v.len() / 2);
    ///             when_all((sort(left), sort(right))).boxed()
    ///         })
    ///         .then(|(v, ((), ()))| {
    ///             let (left, right) = v.split_at(v.len() / 2);
    ///             let (mut i, mut j, mut merged) = (0, 0, Vec::with_capacity(v.len()));
    ///             while i < left.len() && j < right.len() {
    ///                 if left[i] <= right[j] { merged.push(left[i]); i += 1 } else { merged.push(right[j]); j += 1 }
    ///             }
    ///             merged.extend_from_slice(&left[i..]);
    ///             merged.extend_from_slice(&right[j..]);
    ///             v.copy_from_slice(&merged);
    ///         })
    ///         .boxed()
    /// }
    ///
    /// let mut data = vec![9, 3, 7, 1, 8, 2, 6, 4, 5, 0];
    /// sync_wait_value(sort(&mut data));
    /// assert_eq!(data, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    /// ```
    fn let_value_ref<'env, F, U, Sch>(self, f: F) -> LetValueRef<Self, LendAny<'env, F, U, Sch>>
    where
        F: for<'a> FnOnce(&'a mut Self::Value, LendScope<'a, 'env>) -> AnySender<'a, U, Self::Error, Sch>,
        Sch: MaybeScheduler,
    {
        LetValueRef::new(self, LendAny::new(f))
    }

    /// [`let_value_ref`](Self::let_value_ref) with a sender of any type, which may depend
    /// on the loan: `f` is a [`LendFn`], a function item such as
    /// `fn step<'a>(v: &'a mut V) -> SomeSender<'a>`, whose sender is kept in the
    /// operation without a heap block. A closure fits only if its sender does not borrow
    /// the value (a closure's return type cannot name its argument's lifetime), and the
    /// sender's type must be nameable (`impl Sender` hides how it connects): use
    /// `let_value_ref` where either bites.
    ///
    /// ```
    /// use senders::adaptors::WhenAll;
    /// use senders::{AnySender, SenderExt, just, sync_wait_value, when_all};
    ///
    /// fn fill(part: &mut [u32], base: u32) -> AnySender<'_, ()> {
    ///     just(part).then(move |part| part.iter_mut().zip(base..).for_each(|(x, i)| *x = i)).boxed()
    /// }
    /// fn halves<'a>(v: &'a mut Vec<u32>) -> WhenAll<(AnySender<'a, ()>, AnySender<'a, ()>)> {
    ///     let (left, right) = v.split_at_mut(2);
    ///     when_all((fill(left, 0), fill(right, 2)))
    /// }
    ///
    /// let (v, _) = sync_wait_value(just(vec![0; 4]).let_value_ref_with(halves));
    /// assert_eq!(v, [0, 1, 2, 3]);
    /// ```
    fn let_value_ref_with<'v, F, U>(self, f: F) -> LetValueRef<Self, LendTyped<'v, F, U>>
    where
        Self::Value: 'v,
        F: for<'a> LendFn<'a, Self::Value, U, Self::Error>,
    {
        LetValueRef::new(self, LendTyped::new(f))
    }

    /// `let_error(sndr, f)`: on error `e`, continues with the sender `f(e)`.
    ///
    /// ```
    /// use senders::{just, just_error, sync_wait, SenderExt};
    /// let v = sync_wait(just_error::<i32, _>(4).let_error(|e| just(e + 1).with_error::<()>()));
    /// assert_eq!(v.unwrap(), Some(5));
    /// ```
    fn let_error<F, S2>(self, f: F) -> Let<OnError, Self, F>
    where
        F: FnOnce(Self::Error) -> S2,
        S2: Sender<Value = Self::Value>,
    {
        Let::new(self, f)
    }

    /// `let_stopped(sndr, f)`: on stop, continues with the sender `f()`.
    ///
    /// ```
    /// use senders::{just, just_stopped, sync_wait, SenderExt};
    /// use std::convert::Infallible;
    /// let v = sync_wait(just_stopped::<i32, Infallible>().let_stopped(|| just(7)));
    /// assert_eq!(v.unwrap(), Some(7));
    /// ```
    fn let_stopped<F, S2>(self, f: F) -> Let<OnStopped, Self, F>
    where
        F: FnOnce() -> S2,
        S2: Sender<Value = Self::Value, Error = Self::Error>,
    {
        Let::new(self, f)
    }

    /// `let_async_scope(sndr, f)` (P3296): runs `f(token, &mut value)` in a new async
    /// scope that is always joined before this sender completes. See
    /// [`let_async_scope`](crate::let_async_scope()) for the rules (borrowing, errors,
    /// panics, stop, environment).
    ///
    /// ```
    /// use senders::{SenderExt, StaticThreadPool, just, schedule, spawn, sync_wait};
    /// use std::sync::Mutex;
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let sch = pool.scheduler();
    /// let out = Mutex::new(Vec::new());
    /// let out_ref = &out; // borrowed by the spawned work
    /// sync_wait(just(10).let_async_scope(|token, n| {
    ///     let n: &i32 = n; // the value lives in the operation: borrowed too
    ///     for i in 0..3 {
    ///         spawn(schedule(&sch).then(move |()| out_ref.lock().unwrap().push(*n + i)), token);
    ///     }
    /// }))
    /// .unwrap();
    /// let mut out = out.into_inner().unwrap();
    /// out.sort();
    /// assert_eq!(out, [10, 11, 12]);
    /// ```
    fn let_async_scope<'env, F, Sch, S2>(self, f: F) -> LetAsyncScope<'env, Self, F, Sch, S2>
    where
        F: for<'s> FnOnce(LetScopeToken<'s, 'env, Sch, Self::Error>, &'s mut Self::Value) -> S2,
        S2: IntoScopeSender<Self::Error>,
        Sch: MaybeScheduler,
    {
        scope::let_async_scope(self, f)
    }

    /// A [`let_async_scope`](Self::let_async_scope) whose spawned work returns values:
    /// `f(token, &mut value)` gets a [`LetReduceToken`], and every sender of value `T`
    /// spawned through it (at any depth) has its value folded into an accumulator of the
    /// worker that completes it (`fold`, each accumulator starting from `init()`). Once
    /// the scope is joined, the accumulators are merged (`merge`) and the merged value is
    /// this sender's completion (`init()` if nothing was folded).
    ///
    /// - A fold is a plain call on the completing worker's own accumulator: no atomic, no
    ///   shared cache line, no allocation per spawn. A value completed on a thread that is
    ///   no pool worker is folded into one shared accumulator under a lock.
    /// - `fold` and `merge` should make the result independent of how the values are split
    ///   between accumulators (a sum, a count, a maximum, a multiset): which worker
    ///   completes which work is the pool's choice. The accumulator need not be `Copy`,
    ///   `Clone` or `Default`.
    /// - `f` returns a sender of `()` (or `()`); work of value `()` that is not folded goes
    ///   through [`ReduceToken::token`](crate::ReduceToken::token), the plain token.
    /// - Errors, panics and stop requests are those of `let_async_scope`: the first error
    ///   (or panic, of the work, of `init`, `fold` or `merge`) wins and stops the rest. If
    ///   some reducing work completes stopped, its value is missing and the sender
    ///   completes stopped. In every case but the value, the accumulators are dropped
    ///   before the completion.
    ///
    /// ```
    /// use senders::prelude::*;
    ///
    /// struct Tree { value: u64, children: Vec<Tree> }
    /// type Tk<'s, 'e> = LetReduceToken<'s, 'e, PoolScheduler, u64>;
    ///
    /// fn visit<'s, 'e>(tk: Tk<'s, 'e>, sch: &'s PoolScheduler, t: &'s Tree) -> impl Spawnable<Tk<'s, 'e>> {
    ///     schedule(sch).then(move |()| {
    ///         t.children.iter().for_each(|c| _ = spawn(visit(tk, sch, c), tk));
    ///         t.value
    ///     })
    /// }
    ///
    /// let pool = StaticThreadPool::new(2).unwrap();
    /// let sch = pool.scheduler();
    /// let leaf = |value| Tree { value, children: vec![] };
    /// let tree = Tree { value: 1, children: vec![leaf(2), Tree { value: 3, children: vec![leaf(4)] }] };
    /// let (t, sc) = (&tree, &sch);
    /// let work = just(()).let_async_scope_reduce(|| 0, |sum: &mut u64, v| *sum += v, |a, b| a + b, |tk, ()| {
    ///     spawn(visit(tk, sc, t), tk);
    /// });
    /// assert_eq!(sync_wait(starts_on(sch.clone(), work)).unwrap(), Some(10));
    /// ```
    #[allow(clippy::type_complexity)]
    fn let_async_scope_reduce<'env, T, A, I, Fo, M, F, Sch, S2>(
        self,
        init: I,
        fold: Fo,
        merge: M,
        f: F,
    ) -> LetAsyncScopeReduce<'env, Self, T, A, I, Fo, M, F, Sch, S2>
    where
        A: Send,
        I: Fn() -> A + Send + Sync,
        Fo: Fn(&mut A, T) + Send + Sync,
        M: Fn(A, A) -> A + Send + Sync,
        F: for<'s> FnOnce(LetReduceToken<'s, 'env, Sch, T, Self::Error>, &'s mut Self::Value) -> S2,
        S2: IntoScopeSender<Self::Error>,
        S2::Sender: Sender<Value = ()>,
        Sch: MaybeScheduler,
    {
        scope::let_async_scope_reduce(self, init, fold, merge, f)
    }

    /// The sender as a [`Future`](std::future::Future) for any executor: see
    /// [`into_awaitable`](crate::into_awaitable()). It resolves to `Some(Ok(v))`,
    /// `Some(Err(e))`, or `None` when stopped; dropping it requests stop.
    ///
    /// ```
    /// use senders::{SenderExt, just};
    /// let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    /// assert_eq!(rt.block_on(just(2).then(|x| x * 21).into_awaitable()), Some(Ok(42)));
    /// ```
    fn into_awaitable(self) -> SenderFuture<Self>
    where
        Self: SenderTo<AwaitReceiver<<Self as Sender>::Value, <Self as Sender>::Error>> + 'static,
    {
        crate::bridge::into_awaitable(self)
    }

    /// Awaits this sender inside a [`Task`](crate::Task): `.await` does this for the
    /// crate's own senders; call it for senders of other crates (the orphan rule keeps
    /// this crate from implementing `IntoFuture` for them).
    ///
    /// ```
    /// use senders::{SenderExt, Task, just, sync_wait};
    /// use std::convert::Infallible;
    /// let t = Task::<_, Infallible>::new(async { Ok(just(6).then(|x| x * 7).awaited().await? ) });
    /// assert_eq!(sync_wait(t).unwrap(), Some(42));
    /// ```
    fn awaited(self) -> Awaited<Self>
    where
        Self: SenderTo<AwaitRcvr<<Self as Sender>::Value, <Self as Sender>::Error>>,
        <Self as SenderTo<AwaitRcvr<<Self as Sender>::Value, <Self as Sender>::Error>>>::Operation: Send,
    {
        crate::task::awaited(self)
    }

    /// Erases this sender into an [`AnySender`](crate::AnySender) (one recycled heap
    /// block), for recursion and for collections of different senders.
    ///
    /// ```
    /// use senders::{AnySender, SenderExt, just, sync_wait};
    /// let senders: Vec<AnySender<'static, i32>> = vec![just(1).boxed(), just(2).then(|x| x * 10).boxed()];
    /// let out: Vec<_> = senders.into_iter().map(|s| sync_wait(s).unwrap().unwrap()).collect();
    /// assert_eq!(out, [1, 20]);
    /// ```
    fn boxed<'a>(self) -> AnySender<'a, <Self as Sender>::Value, <Self as Sender>::Error>
    where
        Self: SenderTo<AnyReceiver<<Self as Sender>::Value, <Self as Sender>::Error, NoScheduler>> + Send + 'a,
        <Self as SenderTo<AnyReceiver<<Self as Sender>::Value, <Self as Sender>::Error, NoScheduler>>>::Operation: Send,
    {
        AnySender::new(self)
    }

    /// `into_variant(sndr)`: the identity on values here, since a sender has exactly
    /// one value type.
    ///
    /// ```
    /// use senders::{SenderExt, just, sync_wait};
    /// assert_eq!(sync_wait(just((1, "one")).into_variant()).unwrap(), Some((1, "one")));
    /// ```
    fn into_variant(self) -> IntoVariant<Self> {
        IntoVariant::new(self)
    }

    /// `stopped_as_optional(sndr)`: `v` becomes `Some(v)`, a stop becomes `None`.
    ///
    /// ```
    /// use senders::{just_stopped, sync_wait, SenderExt};
    /// use std::convert::Infallible;
    /// assert_eq!(sync_wait(just_stopped::<i32, Infallible>().stopped_as_optional()), Ok(Some(None)));
    /// ```
    fn stopped_as_optional(self) -> StoppedAsOptional<Self> {
        StoppedAsOptional::new(self)
    }

    /// `stopped_as_error(sndr, e)`: a stop becomes the error `e`.
    ///
    /// ```
    /// use senders::{just_stopped, sync_wait, SenderExt};
    /// assert_eq!(sync_wait(just_stopped::<i32, &str>().stopped_as_error("cancelled")), Err("cancelled"));
    /// ```
    fn stopped_as_error(self, error: Self::Error) -> StoppedAsError<Self, Self::Error> {
        StoppedAsError::new(self, error)
    }

    /// Types a sender that cannot fail as one that may fail with `E` (zero cost), so it
    /// can be combined with fallible senders, which must share one error type.
    ///
    /// ```
    /// use senders::{SenderExt, just, just_error, sync_wait, when_all};
    /// let both = when_all((just(1).with_error::<&str>(), just_error::<i32, _>("disk full")));
    /// assert_eq!(sync_wait(both), Err("disk full"));
    /// assert_eq!(sync_wait(just(1).with_error::<&str>()), Ok(Some(1)));
    /// ```
    fn with_error<E>(self) -> WithError<Self, E>
    where
        Self: Sender<Error = Infallible>,
    {
        WithError::new(self)
    }

    /// Maps the error: `e` becomes `f(e)`.
    ///
    /// ```
    /// use senders::{just_error, sync_wait, SenderExt};
    /// assert_eq!(sync_wait(just_error::<(), _>(2).map_error(|e| e * 10)), Err(20));
    /// ```
    fn map_error<F, E2>(self, f: F) -> MapError<Self, F>
    where
        F: FnOnce(Self::Error) -> E2,
    {
        MapError::new(self, f)
    }

    /// `continues_on(sndr, sch)`: completes with `sndr`'s result on `sch`
    /// (`schedule_from(sch, sndr)`).
    ///
    /// ```
    /// use senders::{Scheduler, SenderExt, SingleThreadContext, just, sync_wait};
    /// let ctx = SingleThreadContext::new();
    /// let sch = ctx.scheduler();
    /// let there = sch.clone();
    /// let s = just(6).continues_on(sch).then(move |x| (x * 7, there.is_current()));
    /// assert_eq!(sync_wait(s).unwrap(), Some((42, true)));
    /// ```
    fn continues_on<Sch: Scheduler>(self, sch: Sch) -> ScheduleFrom<Sch, Self> {
        schedule_from(sch, self)
    }

    /// Wraps this sender as the left side of an [`EitherSender`], so that it and a
    /// different sender type can be returned from two branches (like
    /// `futures::FutureExt::left_future`).
    ///
    /// ```
    /// use senders::{SenderExt, just, sync_wait};
    /// let pick = |big: bool| if big { just(10).left_sender() } else { just(1).then(|x| x + 1).right_sender() };
    /// assert_eq!(sync_wait(pick(true)).unwrap(), Some(10));
    /// assert_eq!(sync_wait(pick(false)).unwrap(), Some(2));
    /// ```
    fn left_sender<R>(self) -> EitherSender<Self, R> {
        EitherSender::Left(self)
    }

    /// Wraps this sender as the right side of an [`EitherSender`]; see
    /// [`left_sender`](Self::left_sender).
    ///
    /// ```
    /// use senders::{SenderExt, just, just_error, sync_wait};
    /// let s = if false { just_error::<i32, _>("no").left_sender() } else { just(3).with_error().right_sender() };
    /// assert_eq!(sync_wait(s), Ok(Some(3)));
    /// ```
    fn right_sender<L>(self) -> EitherSender<L, Self> {
        EitherSender::Right(self)
    }

    /// `write_env(sndr, prop)`: `sndr`'s operation sees the user query answered, down
    /// through the senders it connects.
    ///
    /// ```
    /// use senders::{Query, SenderExt, just, prop, read_env, sync_wait};
    /// struct Tenant;
    /// impl Query for Tenant { type Value = &'static str; }
    /// let inner = just(()).let_value(|()| read_env(Tenant));
    /// assert_eq!(sync_wait(inner.write_env(prop::<Tenant>("acme"))).unwrap(), Some(Some("acme")));
    /// ```
    fn write_env<Q: Query>(self, prop: Prop<Q>) -> WriteEnv<Self, Q> {
        WriteEnv::new(self, prop)
    }
}

impl<S: Sender> SenderExt for S {}
