//! [`Grain`]: the bounds on the length of the chunks a bulk's indices are cut into.

/// Bounds on the length of the chunks a bulk's indices are cut into: rayon's
/// `with_min_len` and `with_max_len`, given to the `*_with` forms of the bulk algorithms
/// ([`SenderExt::bulk_chunked_with`](crate::SenderExt::bulk_chunked_with) and the like).
///
/// - **`max_len(n)`**: no chunk is longer than `n` indices. A domain that splits (the
///   pool's) splits a longer range even when its workers are busy, as rayon's
///   `with_max_len` does; the default domain, which runs one chunk, cuts it into calls of
///   at most `n` for `bulk_chunked` (and so for the reductions).
/// - **`min_len(n)`**: a range is split only into pieces of at least `n` indices. A chunk
///   is shorter than `n` only when the whole shape is, or when the bounds are within a
///   factor of two of each other (`min_len > max_len / 2`) and a range must be cut to
///   fit `max_len`: `max_len` wins.
///
/// The forms whose function sees one index at a time (`bulk`, `bulk_each`, and
/// `bulk_chunks_mut`, whose indices are chunks) cannot see the grain: it bounds the pieces
/// of work the pool hands out, and so how many indices run together on one worker.
///
/// **How the pool splits the work.** Without a grain, the worker that receives the value
/// halves the shape once per worker, keeping the left half and leaving the right ones on
/// its deque; a worker that steals a half halves it again the same way. A piece that
/// nobody steals runs where it is, unsplit: a bulk of cheap indices becomes a few pieces
/// per worker, one of expensive indices spreads down to single indices where workers are
/// idle. Within a piece, `bulk_chunked`'s function is called for at most 65,536 indices
/// at a time, with a look at the stop flags between two calls. `max_len(n)` splits every
/// piece down to at most `n` indices; `min_len(n)` stops splitting before a half would
/// be shorter than `n`.
///
/// **Accumulators of a reduction** ([`bulk_reduce`](crate::SenderExt::bulk_reduce) and
/// [`bulk_map_reduce`](crate::SenderExt::bulk_map_reduce)): one per piece, as rayon's
/// `fold`: a few per worker without a grain (whatever the calls within a piece), at least
/// `shape / max_len` with a `max_len`, fewer with a large `min_len`; one on the default
/// domain (no scheduler), or one per chunk of at most `max_len`.
///
/// `min_len(0)` means no minimum (a chunk of at least one index, as the default);
/// `max_len(0)`, and bounds with `min_len > max_len`, panic where they are given.
///
/// ```
/// use senders::{Grain, StaticThreadPool, SenderExt, schedule, sync_wait};
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let longest = sync_wait(schedule(&pool.scheduler()).then(|()| AtomicUsize::new(0)).bulk_chunked_with(
///     Grain::new().min_len(100).max_len(250),
///     1000,
///     |begin, end, longest: &AtomicUsize| {
///         longest.fetch_max(end - begin, Ordering::Relaxed);
///     },
/// ));
/// assert!(longest.unwrap().unwrap().into_inner() <= 250);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Grain {
    min: usize,
    max: usize,
}

impl Default for Grain {
    fn default() -> Self {
        Grain::new()
    }
}

impl Grain {
    /// No bounds: chunks of at least one index, as long as the domain likes.
    ///
    /// ```
    /// use senders::Grain;
    /// assert_eq!((Grain::new().min(), Grain::new().max()), (1, None));
    /// assert_eq!(Grain::new(), Grain::default());
    /// ```
    pub const fn new() -> Self {
        Grain { min: 1, max: usize::MAX }
    }

    /// Pieces of at least `n` indices (rayon's `with_min_len`); `0` means no minimum.
    ///
    /// ```
    /// use senders::Grain;
    /// assert_eq!(Grain::new().min_len(64).min(), 64);
    /// assert_eq!(Grain::new().min_len(0).min(), 1, "no minimum: a piece of at least one index");
    /// ```
    ///
    /// # Panics
    ///
    /// If `n` is greater than a `max_len` given before.
    #[track_caller]
    pub const fn min_len(self, n: usize) -> Self {
        let n = if n == 0 { 1 } else { n };
        assert!(n <= self.max, "Grain: min_len is greater than max_len");
        Grain { min: n, max: self.max }
    }

    /// Chunks of at most `n` indices (rayon's `with_max_len`).
    ///
    /// ```
    /// use senders::{Grain, SenderExt, just, sync_wait};
    /// use std::sync::Mutex;
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// assert_eq!(Grain::new().max_len(4).max(), Some(4));
    /// // The default `bulk_chunked` cuts its one call into calls of at most `max_len`.
    /// let calls = sync_wait(just(Mutex::new(vec![])).bulk_chunked_with(Grain::new().max_len(4), 10, |b, e, c: &Mutex<Vec<_>>| {
    ///     c.lock().unwrap().push((b, e));
    /// }));
    /// assert_eq!(calls.unwrap().unwrap().into_inner().unwrap(), [(0, 4), (4, 8), (8, 10)]);
    /// ```
    ///
    /// # Panics
    ///
    /// If `n` is zero, or less than a `min_len` given before.
    #[track_caller]
    pub const fn max_len(self, n: usize) -> Self {
        assert!(n > 0, "Grain: max_len is zero");
        assert!(n >= self.min, "Grain: max_len is less than min_len");
        Grain { min: self.min, max: n }
    }

    /// The least length of a piece (at least one).
    ///
    /// ```
    /// use senders::Grain;
    /// assert_eq!(Grain::new().min_len(8).max_len(16).min(), 8);
    /// ```
    pub const fn min(&self) -> usize {
        self.min
    }

    /// The greatest length of a chunk, if bounded.
    ///
    /// ```
    /// use senders::Grain;
    /// assert_eq!(Grain::new().max(), None);
    /// assert_eq!(Grain::new().max_len(16).max(), Some(16));
    /// ```
    pub const fn max(&self) -> Option<usize> {
        if self.max == usize::MAX { None } else { Some(self.max) }
    }

    /// The bounds on the calls of a chunked function, where the domain's own limit on a
    /// call is `default` when no `max_len` was given: at most `default`, or twice
    /// `min_len` if that is more, so that a range cut to fit leaves pieces of at least
    /// `min_len`.
    pub(crate) const fn for_calls(self, default: usize) -> Grain {
        let max = if self.max != usize::MAX {
            self.max
        } else if default / 2 >= self.min {
            default
        } else {
            self.min.saturating_mul(2)
        };
        Grain { min: self.min, max }
    }

    /// Where the next call of a chunked function that starts at `i` ends, in a range that
    /// ends at `hi`: `hi` if the rest fits `max_len`; `i + max_len` if what remains after
    /// it is at least `min_len`; otherwise the rest is cut in two halves (each at most
    /// `max_len`, and at least `min_len` where the rest is at least twice that).
    pub(crate) const fn next_end(&self, i: usize, hi: usize) -> usize {
        let (rest, max) = (hi - i, self.max);
        if rest <= max {
            hi
        } else if rest - max >= self.min {
            i + max
        } else {
            i + rest / 2
        }
    }
}
