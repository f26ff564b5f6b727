//! The unstable parallel sort: a quicksort in the manner of pattern-defeating quicksort.
//! A node picks a pivot (the median of three, or of three medians of three on longer
//! slices), partitions around it, and forks on the two sides; below a cutoff (about an
//! eighth of a worker's share) a side is sorted by the std unstable sort.
//!
//! Against the inputs that make a quicksort quadratic:
//! - **sorted or reversed**: when the pivot's samples are all in order (or all in reverse
//!   order), the node checks the whole slice, and a sorted one is done (a reversed one
//!   is reversed and done), in one pass;
//! - **many equal elements**: a side's left neighbour (the pivot of the partition that
//!   made it, which is not more than any of its elements) is passed down; when the new
//!   pivot is not more than it either, the elements equal to it are put first and left
//!   there;
//! - **bad pivots**: a partition whose shorter side is under an eighth of the slice
//!   counts against a budget of `log2(len)` and shuffles a few elements; once the budget
//!   is spent, the side is sorted by the std unstable sort (which is `O(n log n)` in
//!   the worst case).
//!
//! Only swaps move elements (and the std sort), so a panic leaves a permutation.

use super::{SortCompare, StopGate, done, every_pair, leaf_len, reverse};
use crate::any::AnySender;
use crate::{SenderExt, when_all};

/// The shortest side the recursion sorts with the std sort.
const MIN_LEAF: usize = 1 << 12;

/// Sorts `v` (more than one element).
pub(super) fn sort<'a, T: Send, C: SortCompare<T>>(v: &'a mut [T], cmp: &'a C, workers: usize) -> AnySender<'a, ()> {
    let leaf = leaf_len(v.len(), workers, MIN_LEAF);
    let limit = usize::BITS - v.len().leading_zeros();
    node(v, None, cmp, Limits { leaf, bad: limit })
}

/// The cutoff and the bad-pivot budget left.
#[derive(Clone, Copy)]
struct Limits {
    leaf: usize,
    bad: u32,
}

/// Sorts `v`, whose left neighbour in the whole slice is `pred` (not more than any of
/// its elements).
fn node<'a, T: Send, C: SortCompare<T>>(
    v: &'a mut [T],
    pred: Option<&'a mut T>,
    cmp: &'a C,
    limits: Limits,
) -> AnySender<'a, ()> {
    StopGate
        .let_value(move |()| match step(v, pred, cmp, limits) {
            Next::Done => done(),
            Next::Reverse(v) => reverse(v),
            Next::Split((l, lp, ll), (r, rp, rl)) => {
                when_all((node(l, lp, cmp, ll), node(r, rp, cmp, rl))).then(|_| ()).boxed()
            }
        })
        .boxed()
}

/// A side to sort: the slice, its left neighbour, its limits.
type Side<'a, T> = (&'a mut [T], Option<&'a mut T>, Limits);

/// What is left of a node after its own work.
enum Next<'a, T> {
    /// Sorted.
    Done,
    /// Sorted once reversed.
    Reverse(&'a mut [T]),
    /// Partitioned: the two sides to sort.
    Split(Side<'a, T>, Side<'a, T>),
}

/// One node's work: sorts `v` here if it is short, sorted, or if the bad-pivot budget is
/// spent; finds it reversed; or partitions it and returns its two sides.
fn step<'a, T, C: SortCompare<T>>(
    mut v: &'a mut [T],
    pred: Option<&'a mut T>,
    cmp: &C,
    mut limits: Limits,
) -> Next<'a, T> {
    loop {
        let len = v.len();
        if len <= limits.leaf || limits.bad == 0 {
            cmp.sort_seq(v, false);
            return Next::Done;
        }
        let (p, hint) = choose_pivot(v, cmp);
        match hint {
            Hint::Ascending if every_pair(v, |a, b| !cmp.is_less(b, a)) => return Next::Done,
            Hint::Descending if every_pair(v, |a, b| !cmp.is_less(a, b)) => return Next::Reverse(v),
            _ => {}
        }
        if let Some(pred) = pred.as_deref()
            && !cmp.is_less(pred, &v[p])
        {
            // The pivot equals `pred`, the least value here: the elements equal to it go
            // first and are in place; the rest is sorted in the next round.
            v.swap(0, p);
            let (pivot, rest) = v.split_first_mut().expect("a long slice");
            let mid = partition(rest, pivot, |x, pivot| !cmp.is_less(pivot, x));
            v = &mut v[mid + 1..];
            continue;
        }
        v.swap(0, p);
        let mid = {
            let (pivot, rest) = v.split_first_mut().expect("a long slice");
            partition(rest, pivot, |x, pivot| cmp.is_less(x, pivot))
        };
        // The pivot goes between the sides: `v[..mid]` sorts before it, `v[mid + 1..]`
        // not.
        v.swap(0, mid);
        let (left, rest) = v.split_at_mut(mid);
        let (pivot, right) = rest.split_first_mut().expect("the pivot");
        if left.len().min(right.len()) < len / 8 {
            limits.bad -= 1;
            break_patterns(left);
            break_patterns(right);
        }
        return Next::Split((left, pred, limits), (right, Some(pivot), limits));
    }
}

/// What the pivot's samples say about the slice.
enum Hint {
    /// All in order.
    Ascending,
    /// All in reverse order.
    Descending,
    /// Neither.
    Mixed,
}

/// The pivot's index: the median of three samples, or, on a slice of 64 or more, the
/// median of three medians of three (pdqsort's choice).
fn choose_pivot<T, C: SortCompare<T>>(v: &[T], cmp: &C) -> (usize, Hint) {
    let len = v.len();
    let (mut a, mut b, mut c) = (len / 4, len / 2, len / 4 * 3);
    let mut swaps = 0;
    let mut sort2 = |x: &mut usize, y: &mut usize| {
        if cmp.is_less(&v[*y], &v[*x]) {
            std::mem::swap(x, y);
            swaps += 1;
        }
    };
    let max = if len >= 64 {
        for m in [&mut a, &mut b, &mut c] {
            let (mut x, mut y, mut z) = (*m - 1, *m, *m + 1);
            sort2(&mut x, &mut y);
            sort2(&mut y, &mut z);
            sort2(&mut x, &mut y);
            *m = y;
        }
        12
    } else {
        3
    };
    sort2(&mut a, &mut b);
    sort2(&mut b, &mut c);
    sort2(&mut a, &mut b);
    let hint = match swaps {
        0 => Hint::Ascending,
        n if n == max => Hint::Descending,
        _ => Hint::Mixed,
    };
    (b, hint)
}

/// Moves the elements `x` of `v` with `goes_left(x, pivot)` first; returns how many there
/// are. Branchless (Lomuto's scheme, one swap per element).
#[inline]
fn partition<T>(v: &mut [T], pivot: &T, goes_left: impl Fn(&T, &T) -> bool) -> usize {
    let mut l = 0;
    for i in 0..v.len() {
        let left = goes_left(&v[i], pivot);
        v.swap(l, i);
        l += usize::from(left);
    }
    l
}

/// Swaps three elements of a side (at its quarters) with pseudo-random others, so that an
/// input built against the pivot choice does not keep defeating it.
fn break_patterns<T>(v: &mut [T]) {
    let len = v.len();
    if len < 8 {
        return;
    }
    let mut seed = len as u64 | 1;
    for pos in [len / 4, len / 2, len / 4 * 3] {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        v.swap(pos, (seed % len as u64) as usize);
    }
}
