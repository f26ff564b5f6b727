//! What [`Domain::transform_bulk_reduce`](crate::Domain::transform_bulk_reduce) takes:
//! the untransformed sender [`BulkReduce`], plain data, and [`ReduceFns`], the functions of
//! a reduction. Its `impl Sender` and default lowering are in `mod.rs`.

use crate::adaptors::bulk::Grain;

/// The three functions of a reduction over the indices of a value `V`: an identity, a
/// fold of a chunk of indices into an accumulator, and an associative combine of two
/// accumulators (the left range's first).
///
/// [`FoldReduce`](super::FoldReduce) (from [`SenderExt::bulk_reduce`](crate::SenderExt::bulk_reduce)) and
/// [`MapReduce`](super::MapReduce) (from [`SenderExt::bulk_map_reduce`](crate::SenderExt::bulk_map_reduce))
/// implement it; a domain that customizes reductions calls these. A type of one's own
/// may implement it too, and be reduced with [`BulkReduce::new`]:
///
/// ```
/// use senders::adaptors::{BulkReduce, ReduceFns};
/// use senders::{StaticThreadPool, just, starts_on, sync_wait};
/// /// The least and the greatest element of a slice.
/// struct MinMax;
/// impl ReduceFns<Vec<i32>> for MinMax {
///     type Acc = (i32, i32);
///     fn identity(&self) -> (i32, i32) {
///         (i32::MAX, i32::MIN)
///     }
///     fn fold(&self, (lo, hi): (i32, i32), begin: usize, end: usize, v: &Vec<i32>) -> (i32, i32) {
///         v[begin..end].iter().fold((lo, hi), |(lo, hi), &x| (lo.min(x), hi.max(x)))
///     }
///     fn combine(&self, l: (i32, i32), r: (i32, i32)) -> (i32, i32) {
///         (l.0.min(r.0), l.1.max(r.1))
///     }
/// }
/// let pool = StaticThreadPool::new(2).unwrap();
/// let v: Vec<i32> = (0..1000).map(|i| (i * 37) % 1001 - 500).collect();
/// // Customized late: the pool's domain is found at `connect`.
/// let r = sync_wait(starts_on(pool.scheduler(), BulkReduce::new(just(v), 1000, MinMax)));
/// assert_eq!(r, Ok(Some((-500, 500))));
/// ```
pub trait ReduceFns<V> {
    /// The accumulator, and the reduction's result.
    type Acc;
    /// The accumulator of no index: `combine(identity(), a)` and `combine(a, identity())`
    /// are `a`.
    ///
    /// ```
    /// use senders::adaptors::{FoldReduce, ReduceFns};
    /// let sum = FoldReduce::new(|| 0, |acc, b, e, v: &Vec<i32>| acc + v[b..e].iter().sum::<i32>(), |l, r| l + r);
    /// let v = vec![1, 2, 3, 4];
    /// assert_eq!(sum.identity(), 0);
    /// ```
    fn identity(&self) -> Self::Acc;
    /// Folds the indices `begin..end`, in order, into `acc`.
    ///
    /// ```
    /// use senders::adaptors::{FoldReduce, ReduceFns};
    /// let sum = FoldReduce::new(|| 0, |acc, b, e, v: &Vec<i32>| acc + v[b..e].iter().sum::<i32>(), |l, r| l + r);
    /// let v = vec![1, 2, 3, 4];
    /// assert_eq!(sum.fold(10, 1, 3, &v), 10 + 2 + 3);
    /// ```
    fn fold(&self, acc: Self::Acc, begin: usize, end: usize, value: &V) -> Self::Acc;
    /// Combines the accumulators of two adjacent ranges, `left` before `right`.
    ///
    /// ```
    /// use senders::adaptors::{FoldReduce, ReduceFns};
    /// let sum = FoldReduce::new(|| 0, |acc, b, e, v: &Vec<i32>| acc + v[b..e].iter().sum::<i32>(), |l, r| l + r);
    /// let v = vec![1, 2, 3, 4];
    /// let (l, r) = (sum.fold(sum.identity(), 0, 2, &v), sum.fold(sum.identity(), 2, 4, &v));
    /// assert_eq!(ReduceFns::<Vec<i32>>::combine(&sum, l, r), 10);
    /// ```
    fn combine(&self, left: Self::Acc, right: Self::Acc) -> Self::Acc;
}

/// The untransformed sender of a reduction: `bulk_reduce(sndr, shape, fns)`. It
/// completes with the reduction of the indices `0..shape` of the predecessor's value,
/// which it drops first.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkReduce<S, R> {
    pub(super) sndr: S,
    pub(super) shape: usize,
    pub(super) fns: R,
    pub(super) grain: Grain,
}

impl<S, R> BulkReduce<S, R> {
    /// Builds the untransformed sender. Prefer
    /// [`SenderExt::bulk_reduce`](crate::SenderExt::bulk_reduce).
    ///
    /// ```
    /// use senders::adaptors::{BulkReduce, MapReduce};
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let max = MapReduce::new(|i: usize, v: &Vec<i32>| v[i], i32::max);
    /// assert_eq!(sync_wait(BulkReduce::new(just(vec![3, 9, 4]), 3, max)).unwrap(), Some(Some(9)));
    /// ```
    pub fn new(sndr: S, shape: usize, fns: R) -> Self {
        BulkReduce { sndr, shape, fns, grain: Grain::new() }
    }
    /// The same sender with the bounds `grain` on its chunks.
    ///
    /// ```
    /// use senders::adaptors::{BulkReduce, MapReduce};
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let max = MapReduce::new(|i: usize, v: &Vec<i32>| v[i], i32::max);
    /// let r = BulkReduce::new(just(vec![3, 9, 4]), 3, max).with_grain(Grain::new().max_len(1));
    /// assert_eq!(r.grain().max(), Some(1));
    /// assert_eq!(sync_wait(r).unwrap(), Some(Some(9)));
    /// ```
    pub fn with_grain(self, grain: Grain) -> Self {
        BulkReduce { grain, ..self }
    }
    /// The bounds on its chunks.
    ///
    /// ```
    /// use senders::adaptors::{BulkReduce, MapReduce};
    /// use senders::{Grain, just, sync_wait};
    /// let max = MapReduce::new(|i: usize, v: &Vec<i32>| v[i], i32::max);
    /// assert_eq!(BulkReduce::new(just(vec![3]), 1, max).grain(), Grain::new());
    /// ```
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor, the shape and the functions.
    ///
    /// ```
    /// use senders::adaptors::{BulkReduce, MapReduce};
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let max = MapReduce::new(|i: usize, v: &Vec<i32>| v[i], i32::max);
    /// let (pred, shape, _max) = BulkReduce::new(just(vec![3, 9, 4]), 3, max).into_parts();
    /// assert_eq!((sync_wait(pred).unwrap(), shape), (Some(vec![3, 9, 4]), 3));
    /// ```
    pub fn into_parts(self) -> (S, usize, R) {
        (self.sndr, self.shape, self.fns)
    }
}
