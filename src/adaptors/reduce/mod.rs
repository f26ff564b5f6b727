//! The reductions: `bulk_reduce` (fold per piece, then combine, with an identity) and
//! `bulk_map_reduce` (map each index, then combine, `None` for no index), rayon's
//! `fold(identity, fold).reduce(identity, combine)` and `map(..).reduce_with(combine)`.
//!
//! A reduction is its own customizable algorithm ([`Domain::transform_bulk_reduce`]).
//! Its default ([`default_transforms!`](crate::default_transforms)`(bulk_reduce)`) lowers
//! it onto the domain's own `bulk_chunked` ([`BulkReduce::lower_onto`]), so every domain
//! that runs `bulk_chunked` in parallel runs reductions in parallel too, the pool's
//! among them:
//!
//! 1. a `then` moves the predecessor's value and the functions into a [`ReduceState`];
//! 2. `bulk_chunked` of the shape runs, for each piece of work `begin..end` the domain
//!    hands a worker, one accumulator: `fold(identity(), begin, end, &value)`, or, where
//!    the domain cuts the piece into several calls ([`BulkChunkedFn::call_piece`]: the
//!    pool's calls of at most 65,536 indices, between which it looks at the stop flags),
//!    `fold` of each call's range into the same accumulator, in order. So there are as
//!    many accumulators as pieces: on the pool, a few per worker (the adaptive split's
//!    pieces, and those of the grain's `max_len`), not one per call. When its piece
//!    ends, the accumulator is merged with the results of the finished ranges beside it
//!    that are no longer than its own
//!    ([`ReduceState::merge`]): `combine(left, right)`, always the left range's result
//!    first, so `combine` need not be commutative, and ranges of equal length first, so
//!    the combines form a balanced tree. Merging happens on the thread that finished a
//!    piece, outside the lock that finds the neighbours, so combines run in parallel as
//!    chunks finish;
//! 3. a `then` drops the value, combines the few ranges left in order, and completes
//!    with the result (`identity()` for a shape of zero).
//!
//! On the default domain, `bulk_chunked` makes one call, so the reduction is one `fold`
//! over `0..shape` on the thread that delivered the value (one accumulator and no
//! `combine`), or, with a [`Grain`]'s `max_len`, one accumulator per chunk of at most
//! `max_len`, combined in order.

use crate::adaptors::bulk::{BulkChunked, BulkChunkedFn, Grain};
use crate::adaptors::then::{Then, ThenFn, ThenImpl};
use crate::domain::{Domain, LateDomain, MaybeDomain};
use crate::env::Env;
use crate::receiver::Receiver;
use crate::sender::{Sender, SenderTo, adaptor_sender};
use crate::sync::{Mutex, lock};

mod hook;

pub use hook::{BulkReduce, ReduceFns};

/// The functions of [`SenderExt::bulk_reduce`](crate::SenderExt::bulk_reduce):
/// `identity()`, `fold(acc, begin, end, &value)`, `combine(left, right)`.
pub struct FoldReduce<I, F, C> {
    identity: I,
    fold: F,
    combine: C,
}

impl<I, F, C> FoldReduce<I, F, C> {
    /// Bundles the three functions.
    ///
    /// ```
    /// use senders::adaptors::{BulkReduce, FoldReduce};
    /// use senders::{just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let fns = FoldReduce::new(|| 0, |acc, b, e, v: &Vec<i32>| acc + v[b..e].iter().sum::<i32>(), |l, r| l + r);
    /// assert_eq!(sync_wait(BulkReduce::new(just(vec![1, 2, 3]), 3, fns)).unwrap(), Some(6));
    /// ```
    pub fn new(identity: I, fold: F, combine: C) -> Self {
        FoldReduce { identity, fold, combine }
    }
}

impl<V, A, I, F, C> ReduceFns<V> for FoldReduce<I, F, C>
where
    I: Fn() -> A,
    F: Fn(A, usize, usize, &V) -> A,
    C: Fn(A, A) -> A,
{
    type Acc = A;
    #[inline]
    fn identity(&self) -> A {
        (self.identity)()
    }
    #[inline]
    fn fold(&self, acc: A, begin: usize, end: usize, value: &V) -> A {
        (self.fold)(acc, begin, end, value)
    }
    #[inline]
    fn combine(&self, left: A, right: A) -> A {
        (self.combine)(left, right)
    }
}

/// The functions of [`SenderExt::bulk_map_reduce`](crate::SenderExt::bulk_map_reduce):
/// `map(i, &value)` for each index, `combine(left, right)` of the results; the
/// accumulator is an `Option`, `None` for no index.
pub struct MapReduce<M, C> {
    map: M,
    combine: C,
}

impl<M, C> MapReduce<M, C> {
    /// Bundles the two functions.
    ///
    /// ```
    /// use senders::adaptors::{BulkReduce, MapReduce};
    /// use senders::{just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let fns = MapReduce::new(|i: usize, v: &Vec<i32>| v[i], i32::max);
    /// assert_eq!(sync_wait(BulkReduce::new(just(vec![3, 9, 4]), 3, fns)).unwrap(), Some(Some(9)));
    /// ```
    pub fn new(map: M, combine: C) -> Self {
        MapReduce { map, combine }
    }
}

impl<V, A, M, C> ReduceFns<V> for MapReduce<M, C>
where
    M: Fn(usize, &V) -> A,
    C: Fn(A, A) -> A,
{
    type Acc = Option<A>;
    #[inline]
    fn identity(&self) -> Option<A> {
        None
    }
    #[inline]
    fn fold(&self, acc: Option<A>, begin: usize, end: usize, value: &V) -> Option<A> {
        let mut indices = begin..end;
        let first = match acc {
            Some(a) => a,
            None => (self.map)(indices.next()?, value),
        };
        Some(indices.fold(first, |a, i| (self.combine)(a, (self.map)(i, value))))
    }
    #[inline]
    fn combine(&self, left: Option<A>, right: Option<A>) -> Option<A> {
        match (left, right) {
            (Some(l), Some(r)) => Some((self.combine)(l, r)),
            (l, None) => l,
            (None, r) => r,
        }
    }
}

impl<S, R> BulkReduce<S, R> {
    /// The default implementation: the reduction as `domain`'s `bulk_chunked` of the
    /// same shape and grain (the module's documentation says how), which `domain`
    /// transforms with `env` (`None` for early customization).
    ///
    /// ```
    /// use senders::adaptors::{BulkReduce, MapReduce};
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let max = MapReduce::new(|i: usize, v: &Vec<i32>| v[i], i32::max);
    /// use senders::{DefaultDomain, EmptyEnv};
    /// let lowered = BulkReduce::new(just(vec![3, 9, 4]), 3, max).lower_onto(DefaultDomain, None::<&EmptyEnv>);
    /// assert_eq!(sync_wait(lowered).unwrap(), Some(Some(9)));
    /// ```
    pub fn lower_onto<D: Domain, E: Env>(self, domain: D, env: Option<&E>) -> ReduceOnChunked<D, S, R>
    where
        S: Sender,
        R: ReduceFns<S::Value>,
    {
        let start = Then::new(self.sndr, ReduceStart(self.fns)).lower();
        let chunked =
            domain.transform_bulk_chunked(BulkChunked::new(start, self.shape, ReduceChunk).with_grain(self.grain), env);
        Then::new(chunked, ReduceFinish).lower()
    }
}

/// The default reduction on domain `D` ([`BulkReduce::lower_onto`]): `D`'s
/// `bulk_chunked` between two `then`s.
pub type ReduceOnChunked<D, S, R> =
    ThenImpl<<D as Domain>::BulkChunked<ThenImpl<S, ReduceStart<R>>, ReduceChunk>, ReduceFinish>;

adaptor_sender!([S: Sender, R: ReduceFns<S::Value>] BulkReduce<S, R> where [] {
    value = R::Acc, error = S::Error, stopped = true
});

impl<S, R, Rc> SenderTo<Rc> for BulkReduce<S, R>
where
    S: Sender,
    R: ReduceFns<S::Value>,
    Rc: Receiver<R::Acc, S::Error>,
    <LateDomain<S, Rc::Env> as Domain>::BulkReduce<S, R>: SenderTo<Rc>,
{
    type Operation = <<LateDomain<S, Rc::Env> as Domain>::BulkReduce<S, R> as SenderTo<Rc>>::Operation;
    fn connect(self, receiver: Rc) -> Self::Operation {
        let domain = <LateDomain<S, Rc::Env>>::default();
        domain.transform_bulk_reduce(self, Some(receiver.env())).connect(receiver)
    }
}

/// What a reduction lowered onto `bulk_chunked` runs over: the predecessor's value, the
/// functions, and the results of the ranges that have finished and have no finished
/// neighbour yet.
pub struct ReduceState<V, R: ReduceFns<V>> {
    value: V,
    fns: R,
    /// `(begin, end, result)` of finished ranges not merged yet.
    parts: Mutex<Vec<(usize, usize, R::Acc)>>,
}

impl<V, R: ReduceFns<V>> ReduceState<V, R> {
    /// Adds the result `acc` of the range `begin..end`: while a finished range touches
    /// it and is no longer than it, takes that range out (under the lock) and combines
    /// the two (outside it), the left one first; then puts the union back. Ranges of
    /// equal length merge as a binary counter does, so the combines form a balanced tree,
    /// as rayon's `reduce` does (a left-to-right chain would combine ever longer results
    /// with short ones: twice the work of the tree for a product of big integers). What
    /// is left unmerged (ranges longer than the neighbour that finished last) is combined
    /// in order at the end ([`ReduceFinish`]).
    pub fn merge(&self, mut begin: usize, mut end: usize, mut acc: R::Acc) {
        loop {
            let mut parts = lock(&self.parts);
            let len = end - begin;
            let Some(k) = parts.iter().position(|&(b, e, _)| (e == begin || b == end) && e - b <= len) else {
                parts.push((begin, end, acc));
                return;
            };
            let (b, e, other) = parts.swap_remove(k);
            drop(parts);
            if e == begin {
                acc = self.fns.combine(other, acc);
                begin = b;
            } else {
                acc = self.fns.combine(acc, other);
                end = e;
            }
        }
    }
}

/// The `then` that starts a lowered reduction: moves the value and the functions into a
/// [`ReduceState`].
pub struct ReduceStart<R>(R);

impl<V, R: ReduceFns<V>> ThenFn<V> for ReduceStart<R> {
    type Output = ReduceState<V, R>;
    fn call(self, value: V) -> ReduceState<V, R> {
        ReduceState { value, fns: self.0, parts: Mutex::new(Vec::new()) }
    }
}

/// The `bulk_chunked` function of a lowered reduction: folds a call's chunk, or all the
/// calls of a piece ([`BulkChunkedFn::call_piece`]), into one accumulator from the
/// identity, and merges the result ([`ReduceState::merge`]).
pub struct ReduceChunk;

impl<V, E, R: ReduceFns<V>> BulkChunkedFn<ReduceState<V, R>, E> for ReduceChunk {
    #[inline]
    fn call(&self, begin: usize, end: usize, state: &ReduceState<V, R>) -> Result<(), E> {
        let acc = state.fns.fold(state.fns.identity(), begin, end, &state.value);
        state.merge(begin, end, acc);
        Ok(())
    }

    /// One accumulator for the whole piece: each call's range is folded into it, in
    /// order; it is merged once, when the piece ends.
    #[inline]
    fn call_piece(
        &self,
        begin: usize,
        end: usize,
        state: &ReduceState<V, R>,
        mut next: impl FnMut(usize) -> Option<usize>,
    ) -> Result<usize, E> {
        if begin == end {
            return Ok(begin);
        }
        let Some(first) = next(begin) else { return Ok(begin) };
        let mut acc = state.fns.fold(state.fns.identity(), begin, first, &state.value);
        let mut i = first;
        while i < end {
            let Some(e) = next(i) else { break };
            acc = state.fns.fold(acc, i, e, &state.value);
            i = e;
        }
        state.merge(begin, i, acc);
        Ok(i)
    }
}

/// The `then` that ends a lowered reduction: drops the value and returns the result of
/// the whole shape (the identity for a shape of zero). Everything it does not return
/// is dropped before it returns, so before the reduction completes.
pub struct ReduceFinish;

impl<V, R: ReduceFns<V>> ThenFn<ReduceState<V, R>> for ReduceFinish {
    type Output = R::Acc;
    fn call(self, state: ReduceState<V, R>) -> R::Acc {
        let ReduceState { value, fns, parts } = state;
        drop(value);
        let mut parts = std::mem::take(&mut *lock(&parts));
        // What is left is a few ranges, longer to the left: combined from the right, the
        // short ones first.
        parts.sort_unstable_by_key(|&(b, _, _)| b);
        match parts.into_iter().map(|(_, _, acc)| acc).rev().reduce(|r, l| fns.combine(l, r)) {
            Some(acc) => acc,
            None => fns.identity(),
        }
    }
}

/// Early customization entry used by the reductions of [`SenderExt`](crate::SenderExt).
pub(crate) fn bulk_reduce<S: Sender, R: ReduceFns<S::Value>>(
    sndr: S,
    grain: Grain,
    shape: usize,
    fns: R,
) -> <S::Domain as MaybeDomain>::EarlyBulkReduce<S, R> {
    <S::Domain as MaybeDomain>::early_bulk_reduce(BulkReduce::new(sndr, shape, fns).with_grain(grain))
}
