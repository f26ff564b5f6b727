//! The stable parallel sort: a merge sort. The slice is halved down to runs of about
//! an eighth of a worker's share, which the std stable sort sorts (so a run already in
//! order, or strictly reversed, costs one pass); two sorted halves are then merged into
//! the buffer by pieces that run in parallel (split by binary search), and the buffer
//! is copied back over them, also by pieces. Two halves already in order are left as
//! they are; two whose right half is wholly below the left one (a reversed input) are
//! swapped or rotated, without a merge.
//!
//! The slice only changes through the std sort and through the copy of a fully merged
//! buffer back over its run, which cannot panic: a panic of the comparator in a merge
//! leaves the run as it was before the merge, and the slice a permutation of its input.

use std::mem::MaybeUninit;
use std::ptr;

use super::{PIECE, SortCompare, StopGate, done, every_pair, leaf_len, reverse};
use crate::any::AnySender;
use crate::{SenderExt, just, when_all};

/// The shortest run the recursion sorts with the std sort.
const MIN_LEAF: usize = 1 << 12;

/// Sorts `v` (more than one element) with `buf`, as long, as the merge buffer.
pub(super) fn sort<'a, T: Send, C: SortCompare<T>>(
    v: &'a mut [T],
    buf: &'a mut [MaybeUninit<T>],
    cmp: &'a C,
    workers: usize,
) -> AnySender<'a, ()> {
    // A strictly descending input (its first two elements say whether to look) is
    // reversed, which is its stable sort, in one pass and a parallel reversal.
    if cmp.is_less(&v[1], &v[0]) && every_pair(v, |a, b| cmp.is_less(b, a)) {
        return reverse(v);
    }
    let leaf = leaf_len(v.len(), workers, MIN_LEAF);
    node(v, buf, cmp, leaf)
}

/// Sorts `v` with the buffer `buf` (as long): its halves, in parallel, then their merge.
fn node<'a, T: Send, C: SortCompare<T>>(
    v: &'a mut [T],
    buf: &'a mut [MaybeUninit<T>],
    cmp: &'a C,
    leaf: usize,
) -> AnySender<'a, ()> {
    StopGate
        .let_value(move |()| {
            if v.len() <= leaf {
                // A run already in order (checked by vectorized blocks) is left as it is.
                if !every_pair(v, |a, b| !cmp.is_less(b, a)) {
                    cmp.sort_seq(v, true);
                }
                return done();
            }
            just((v, buf))
                .let_value_ref(move |(v, buf), _| {
                    let mid = v.len() / 2;
                    let (v1, v2) = v.split_at_mut(mid);
                    let (b1, b2) = buf.split_at_mut(mid);
                    when_all((node(v1, b1, cmp, leaf), node(v2, b2, cmp, leaf))).then(|_| ()).boxed()
                })
                .let_value(move |((v, buf), ())| merge_halves(v, buf, cmp))
                .boxed()
        })
        .boxed()
}

/// Merges the sorted halves `v[..mid]` and `v[mid..]` (`mid = len / 2`), with `buf` as
/// long as `v`.
fn merge_halves<'a, T: Send, C: SortCompare<T>>(
    v: &'a mut [T],
    buf: &'a mut [MaybeUninit<T>],
    cmp: &'a C,
) -> AnySender<'a, ()> {
    let (len, mid) = (v.len(), v.len() / 2);
    if !cmp.is_less(&v[mid], &v[mid - 1]) {
        // Already in order.
        return done();
    }
    if cmp.is_less(&v[len - 1], &v[0]) {
        // Every element of the right half sorts strictly before every one of the left:
        // the merge is the halves' exchange, which keeps equal elements in order.
        if len % 2 == 0 {
            let (l, r) = v.split_at_mut(mid);
            return swap_halves(l, r);
        }
        v.rotate_left(mid);
        return done();
    }
    just((v, buf))
        .let_value_ref(move |(v, buf), _| {
            let (l, r) = v.split_at_mut(mid);
            merge(l, r, buf, cmp)
        })
        .let_value(|((v, buf), ())| copy_back(buf, v))
        .boxed()
}

/// Exchanges `l` and `r` (as long), by pieces in parallel.
fn swap_halves<'a, T: Send>(l: &'a mut [T], r: &'a mut [T]) -> AnySender<'a, ()> {
    StopGate
        .let_value(move |()| {
            if l.len() <= PIECE {
                l.swap_with_slice(r);
                return done();
            }
            let mid = l.len() / 2;
            let (l1, l2) = l.split_at_mut(mid);
            let (r1, r2) = r.split_at_mut(mid);
            when_all((swap_halves(l1, r1), swap_halves(l2, r2))).then(|_| ()).boxed()
        })
        .boxed()
}

/// Merges the sorted `l` and `r` into `out` (`l.len() + r.len()` long), the elements of
/// `l` first among equal ones: pieces cut by binary search, in parallel. When it
/// completes with a value, `out` holds a bitwise copy of each element of `l` and `r`,
/// once, in order; the elements themselves are still in `l` and `r`.
fn merge<'a, T: Send, C: SortCompare<T>>(
    l: &'a mut [T],
    r: &'a mut [T],
    out: &'a mut [MaybeUninit<T>],
    cmp: &'a C,
) -> AnySender<'a, ()> {
    StopGate
        .let_value(move |()| {
            if out.len() <= PIECE {
                merge_seq(l, r, out, cmp);
                return done();
            }
            // Cut the longer run in the middle, and the other where that element goes;
            // everything before the cuts sorts before everything after them, ties
            // keeping `l`'s elements first.
            let (i, j) = if l.len() >= r.len() {
                let i = l.len() / 2;
                (i, r.partition_point(|x| cmp.is_less(x, &l[i])))
            } else {
                let j = r.len() / 2;
                (l.partition_point(|x| !cmp.is_less(&r[j], x)), j)
            };
            let (l1, l2) = l.split_at_mut(i);
            let (r1, r2) = r.split_at_mut(j);
            let (o1, o2) = out.split_at_mut(i + j);
            when_all((merge(l1, r1, o1, cmp), merge(l2, r2, o2, cmp))).then(|_| ()).boxed()
        })
        .boxed()
}

/// [`merge`] on the calling thread.
fn merge_seq<T, C: SortCompare<T>>(l: &[T], r: &[T], out: &mut [MaybeUninit<T>], cmp: &C) {
    debug_assert_eq!(out.len(), l.len() + r.len());
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < l.len() && j < r.len() {
        let right = cmp.is_less(&r[j], &l[i]);
        let src = if right { &r[j] } else { &l[i] };
        // SAFETY: a bitwise copy of an element, kept as `MaybeUninit` in the buffer (never
        // dropped there): the element itself stays where it is, and only `copy_back`, once
        // the whole buffer holds each element once, turns the copies into the elements.
        out[k].write(unsafe { ptr::read(src) });
        j += usize::from(right);
        i += usize::from(!right);
        k += 1;
    }
    let rest = if i < l.len() { &l[i..] } else { &r[j..] };
    let tail = &mut out[k..];
    assert_eq!(tail.len(), rest.len(), "merge: the buffer matches the runs");
    // SAFETY: as above, for the rest of one run: `tail` is exactly as long, and the buffer
    // does not overlap the slice.
    unsafe { ptr::copy_nonoverlapping(rest.as_ptr(), tail.as_mut_ptr().cast::<T>(), rest.len()) };
}

/// Copies the merged `buf` back over `v`, by pieces in parallel.
///
/// `buf` holds, in order, a bitwise copy of each element of `v`, once: it was filled by a
/// [`merge`] of `v`'s two halves that completed with a value.
fn copy_back<'a, T: Send>(buf: &'a mut [MaybeUninit<T>], v: &'a mut [T]) -> AnySender<'a, ()> {
    just(())
        .let_value(move |()| {
            if v.len() <= PIECE {
                // SAFETY: `buf` holds a bitwise copy of each element of `v`, once (the caller's
                // contract, and for a piece, of the elements of its part): overwriting `v`
                // without dropping leaves each element in `v` exactly once; the copies left
                // in `buf` are never read or dropped again (it is `MaybeUninit`, and the next
                // merge overwrites it). Nothing between here and the end can panic.
                unsafe { ptr::copy_nonoverlapping(buf.as_ptr().cast::<T>(), v.as_mut_ptr(), v.len()) };
                return done();
            }
            let mid = v.len() / 2;
            let (b1, b2) = buf.split_at_mut(mid);
            let (v1, v2) = v.split_at_mut(mid);
            when_all((copy_back(b1, v1), copy_back(b2, v2))).then(|_| ()).boxed()
        })
        .boxed()
}
