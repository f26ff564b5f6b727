//! The parallel sorts: `bulk_sort`, `bulk_sort_unstable` and their `_by` and `_by_key`
//! forms. Sorting is not in the papers: it is a crate extension built on the same pieces
//! as a user's own recursion (`when_all` forks on the pool, `let_value_ref` lends the
//! halves of the slice and of the merge buffer).
//!
//! | file | what |
//! |---|---|
//! | `mod.rs` | the sender ([`BulkSort`]), the comparators ([`SortCompare`]), and where the work runs |
//! | `stable.rs` | the stable sort: a parallel merge sort (std `sort` on runs, merges split by binary search) |
//! | `unstable.rs` | the unstable sort: a parallel pattern-defeating quicksort (std `sort_unstable` below a cutoff) |
//!
//! Where the work runs, and what a panic or a stop leaves: see [`BulkSort`].

use std::cmp::Ordering;
use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::mem::MaybeUninit;
use std::pin::Pin;

use crate::adaptors::let_ref::{LendAny, LendScope, LetValueRef};
use crate::any::AnySender;
use crate::env::Env;
use crate::panic::{Panic, discard};
use crate::pool::WorkerThread;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, adaptor_sender, sender};
use crate::{SenderExt, just};

mod stable;
mod unstable;

/// How a sort orders its elements: by [`Ord`] ([`ByOrd`]), by a comparator
/// ([`By`]) or by a key ([`ByKey`]). Shared by the pieces of a parallel sort, so `Sync`.
pub trait SortCompare<T>: Sync {
    /// The order of `a` and `b`.
    ///
    /// ```
    /// use senders::adaptors::{ByOrd, SortCompare};
    /// use std::cmp::Ordering;
    /// assert_eq!(SortCompare::<u32>::compare(&ByOrd, &1, &2), Ordering::Less);
    /// ```
    fn compare(&self, a: &T, b: &T) -> Ordering;

    /// Whether `a` sorts before `b`.
    ///
    /// ```
    /// use senders::adaptors::{ByKey, SortCompare};
    /// let by_len = ByKey::new(|s: &&str| s.len());
    /// assert!(by_len.is_less(&"ab", &"abc"));
    /// ```
    #[inline]
    fn is_less(&self, a: &T, b: &T) -> bool {
        self.compare(a, b) == Ordering::Less
    }

    /// Sorts `v` on the calling thread with the std sort of the same order: `sort_by`
    /// (`stable`) or `sort_unstable_by`, or their `Ord` and `_by_key` forms.
    ///
    /// ```
    /// use senders::adaptors::{By, SortCompare};
    /// let mut v = [3, 1, 2];
    /// By::new(|a: &i32, b: &i32| b.cmp(a)).sort_seq(&mut v, true);
    /// assert_eq!(v, [3, 2, 1]);
    /// ```
    fn sort_seq(&self, v: &mut [T], stable: bool) {
        if stable {
            v.sort_by(|a, b| self.compare(a, b));
        } else {
            v.sort_unstable_by(|a, b| self.compare(a, b));
        }
    }
}

/// The order of [`Ord`]: what `bulk_sort` and `bulk_sort_unstable` sort by.
#[derive(Clone, Copy, Debug, Default)]
pub struct ByOrd;

impl<T: Ord> SortCompare<T> for ByOrd {
    #[inline]
    fn compare(&self, a: &T, b: &T) -> Ordering {
        a.cmp(b)
    }
    #[inline]
    fn is_less(&self, a: &T, b: &T) -> bool {
        a < b
    }
    fn sort_seq(&self, v: &mut [T], stable: bool) {
        if stable { v.sort() } else { v.sort_unstable() }
    }
}

/// The order of a comparator `Fn(&T, &T) -> Ordering`: what `bulk_sort_by` and
/// `bulk_sort_unstable_by` sort by.
#[derive(Clone, Copy, Debug)]
pub struct By<F>(F);

impl<F> By<F> {
    /// The order of `compare`.
    ///
    /// ```
    /// use senders::adaptors::{By, SortCompare};
    /// assert!(By::new(|a: &i32, b: &i32| b.cmp(a)).is_less(&2, &1));
    /// ```
    pub fn new(compare: F) -> Self {
        By(compare)
    }
}

impl<T, F: Fn(&T, &T) -> Ordering + Sync> SortCompare<T> for By<F> {
    #[inline]
    fn compare(&self, a: &T, b: &T) -> Ordering {
        (self.0)(a, b)
    }
}

/// The order of a key `Fn(&T) -> K`, `K: Ord` (the key is computed for every
/// comparison, as `slice::sort_by_key` does): what `bulk_sort_by_key` and
/// `bulk_sort_unstable_by_key` sort by.
#[derive(Clone, Copy, Debug)]
pub struct ByKey<F>(F);

impl<F> ByKey<F> {
    /// The order of `key`.
    ///
    /// ```
    /// use senders::adaptors::{ByKey, SortCompare};
    /// assert!(ByKey::new(|x: &i32| x.abs()).is_less(&1, &-2));
    /// ```
    pub fn new(key: F) -> Self {
        ByKey(key)
    }
}

impl<T, K: Ord, F: Fn(&T) -> K + Sync> SortCompare<T> for ByKey<F> {
    #[inline]
    fn compare(&self, a: &T, b: &T) -> Ordering {
        (self.0)(a).cmp(&(self.0)(b))
    }
    #[inline]
    fn is_less(&self, a: &T, b: &T) -> bool {
        (self.0)(a) < (self.0)(b)
    }
    fn sort_seq(&self, v: &mut [T], stable: bool) {
        if stable {
            v.sort_by_key(&self.0);
        } else {
            v.sort_unstable_by_key(&self.0);
        }
    }
}

/// The sender of the parallel sorts ([`SenderExt::bulk_sort`](crate::SenderExt::bulk_sort)
/// and its forms): completes with the predecessor's value (`V: AsMut<[T]>`: a `Vec<T>`,
/// a `Box<[T]>`, a borrowed `&mut [T]`, ...) with its slice sorted by `C`, stably if
/// `STABLE`.
///
/// **Where the work runs.** The sender keeps the value in its operation (as
/// `let_value_ref` does) and looks at the thread that delivered it. On a worker of a
/// [`StaticThreadPool`](crate::StaticThreadPool) (the predecessor completes on the pool's
/// scheduler), the recursion runs on that pool: every split is a two-child `when_all`
/// whose second child idle workers steal. Anywhere else the slice is sorted by the std
/// sort (`slice::sort_by` or `slice::sort_unstable_by`) on that thread, before the
/// sender completes: `sync_wait(just(v).bulk_sort())` is the sequential sort.
///
/// **Panics, stop, errors.** The recursion only moves elements by swaps (the quicksort),
/// by the std sorts (on the leaves) and by copying a fully merged buffer back over its
/// run (the merges), so at any point, a panic of the comparator included, the slice holds
/// a permutation of its input, as the std sorts promise. A panic is delivered with
/// `set_panic` once every piece has finished (the others see a stop request and skip
/// their work); a stop request is seen before each piece starts, and completes the sender
/// stopped with the slice a permutation of its input (an owned value is dropped, a
/// borrowed slice keeps that permutation). An error or stop of the predecessor passes
/// through.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkSort<S, T, C, const STABLE: bool> {
    sndr: S,
    cmp: C,
    _t: PhantomData<fn(&mut T)>,
}

impl<S, T, C, const STABLE: bool> BulkSort<S, T, C, STABLE> {
    pub(crate) fn new(sndr: S, cmp: C) -> Self {
        BulkSort { sndr, cmp, _t: PhantomData }
    }
}

adaptor_sender!([S: Sender, T, C, const STABLE: bool] BulkSort<S, T, C, STABLE> where [] {
    value = S::Value, error = S::Error, stopped = true
});

/// What the sort keeps in its operation while it runs: the value, the order, and the
/// stable sort's merge buffer (empty until the sort starts on a pool).
///
/// `E`, the error type, is only named so that the lending function's signature implies
/// that it outlives the loan.
pub struct Sorting<V, C, T, E> {
    value: V,
    cmp: C,
    buf: Box<[MaybeUninit<T>]>,
    _e: PhantomData<fn() -> E>,
}

/// The function that lends the kept value to the sort's recursion.
type LendSort<V, C, T, E> = for<'a> fn(&'a mut Sorting<V, C, T, E>, LendScope<'a, 'static>) -> AnySender<'a, (), E>;

/// The `let_value_ref` the sort is made of: the value with its order, lent to the
/// recursion.
type SortLend<S, T, C> = LetValueRef<
    Attach<S, C, T>,
    LendAny<'static, LendSort<<S as Sender>::Value, C, T, <S as Sender>::Error>, (), crate::scheduler::NoScheduler>,
>;

impl<S, T, C, R, const STABLE: bool> SenderTo<R> for BulkSort<S, T, C, STABLE>
where
    S: Sender,
    S::Value: AsMut<[T]> + Send,
    S::Error: Send,
    T: Send,
    C: SortCompare<T> + Send,
    R: Receiver<S::Value, S::Error>,
    SortLend<S, T, C>: Sender<Value = (Sorting<S::Value, C, T, S::Error>, ()), Error = S::Error> + SenderTo<Detach<R>>,
{
    type Operation = <SortLend<S, T, C> as SenderTo<Detach<R>>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        let lend: LendSort<S::Value, C, T, S::Error> = lend::<S::Value, T, C, S::Error, STABLE>;
        LetValueRef::new(Attach { sndr: self.sndr, cmp: self.cmp, _t: PhantomData }, LendAny::new(lend))
            .connect(Detach { rcvr: receiver })
    }
}

/// Starts the sort of the kept value: on a pool worker, the parallel recursion; anywhere
/// else, the std sort, here.
fn lend<'a, V, T, C, E, const STABLE: bool>(
    sorting: &'a mut Sorting<V, C, T, E>,
    _: LendScope<'a, 'static>,
) -> AnySender<'a, (), E>
where
    V: AsMut<[T]> + Send,
    T: Send,
    C: SortCompare<T> + Send,
    E: Send,
{
    let Sorting { value, cmp, buf, .. } = sorting;
    let v = value.as_mut();
    let cmp = &*cmp;
    let workers = WorkerThread::with_current(|worker| worker.map(|w| w.registry().num_threads()));
    let root = match workers {
        Some(workers) if v.len() > 1 => {
            if STABLE {
                *buf = Box::new_uninit_slice(v.len());
                stable::sort(v, buf, cmp, workers)
            } else {
                unstable::sort(v, cmp, workers)
            }
        }
        _ => {
            cmp.sort_seq(v, STABLE);
            done()
        }
    };
    root.with_error::<E>().boxed()
}

/// A finished piece of the recursion.
fn done<'a>() -> AnySender<'a, ()> {
    just(()).boxed()
}

/// Reverses `v`, by pieces in parallel: the element `i` and its mirror `len - 1 - i`
/// are swapped by the piece that holds both.
fn reverse<'a, T: Send>(v: &'a mut [T]) -> AnySender<'a, ()> {
    let half = v.len() / 2;
    let (front, rest) = v.split_at_mut(half);
    let skip = rest.len() - half;
    let back = &mut rest[skip..];
    mirror_swap(front, back)
}

/// Swaps `a[i]` with `b[b.len() - 1 - i]` for every `i` (`a` and `b` as long), by pieces
/// in parallel.
fn mirror_swap<'a, T: Send>(a: &'a mut [T], b: &'a mut [T]) -> AnySender<'a, ()> {
    StopGate
        .let_value(move |()| {
            if a.len() <= PIECE {
                a.iter_mut().zip(b.iter_mut().rev()).for_each(|(x, y)| std::mem::swap(x, y));
                return done();
            }
            let mid = a.len() / 2;
            let (a1, a2) = a.split_at_mut(mid);
            let (b1, b2) = b.split_at_mut(b.len() - mid);
            mirror_swap_pair(a1, b2, a2, b1)
        })
        .boxed()
}

/// The two halves of a [`mirror_swap`], in parallel.
fn mirror_swap_pair<'a, T: Send>(
    a1: &'a mut [T],
    b2: &'a mut [T],
    a2: &'a mut [T],
    b1: &'a mut [T],
) -> AnySender<'a, ()> {
    crate::when_all((mirror_swap(a1, b2), mirror_swap(a2, b1))).then(|_| ()).boxed()
}

/// Whether `ok(&v[i - 1], &v[i])` holds for every `i` in `1..v.len()`. The pairs are
/// checked by blocks of [`SCAN_BLOCK`], with no early exit inside a block, so that the
/// compiler vectorizes the check of a plain order (a sorted or reversed input is
/// scanned whole before anything moves); `ok` runs at most `SCAN_BLOCK - 1` times past
/// the first pair that fails.
fn every_pair<T>(v: &[T], ok: impl Fn(&T, &T) -> bool) -> bool {
    let Some(last) = v.len().checked_sub(1) else { return true };
    let (prev, next) = (&v[..last], &v[1..]);
    prev.chunks(SCAN_BLOCK)
        .zip(next.chunks(SCAN_BLOCK))
        .all(|(a, b)| a.iter().zip(b).fold(true, |all, (x, y)| all & ok(x, y)))
}

/// The pairs [`every_pair`] checks between its early exits.
const SCAN_BLOCK: usize = 32;

/// The longest piece of a merge, a copy, an exchange or a reversal that is not split
/// further.
const PIECE: usize = 1 << 15;

/// The length of the pieces a recursion over `len` elements on `workers` workers stops
/// splitting at: about eight per worker, and never below `min`.
fn leaf_len(len: usize, workers: usize, min: usize) -> usize {
    (len / (8 * workers.max(1))).max(min)
}

/// Attaches the order to the predecessor's value.
pub struct Attach<S, C, T> {
    sndr: S,
    cmp: C,
    _t: PhantomData<fn(&mut T)>,
}

adaptor_sender!([S: Sender, C, T] Attach<S, C, T> where [] {
    value = Sorting<S::Value, C, T, S::Error>, error = S::Error, stopped = S::SENDS_STOPPED
});

impl<S, C, T, R> SenderTo<R> for Attach<S, C, T>
where
    S: SenderTo<AttachReceiver<C, T, R>>,
    R: Receiver<Sorting<S::Value, C, T, S::Error>, S::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(AttachReceiver { cmp: self.cmp, rcvr: receiver, _t: PhantomData })
    }
}

/// The receiver [`Attach`] connects its predecessor to.
pub struct AttachReceiver<C, T, R> {
    cmp: C,
    rcvr: R,
    _t: PhantomData<fn(&mut T)>,
}

impl<V, E, C, T, R: Receiver<Sorting<V, C, T, E>, E>> Receiver<V, E> for AttachReceiver<C, T, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, value: V) {
        self.rcvr.set_value(Sorting { value, cmp: self.cmp, buf: Box::new([]), _e: PhantomData })
    }
    fn set_error(self, error: E) {
        // DROP ORDER: the order is dropped before the completion; a panic in its drop
        // replaces the error.
        match discard(self.cmp) {
            Ok(()) => self.rcvr.set_error(error),
            Err(p) => {
                let _ = discard(error);
                self.rcvr.set_panic(p)
            }
        }
    }
    fn set_stopped(self) {
        match discard(self.cmp) {
            Ok(()) => self.rcvr.set_stopped(),
            Err(p) => self.rcvr.set_panic(p),
        }
    }
    fn set_panic(self, panic: Panic) {
        let _ = discard(self.cmp);
        self.rcvr.set_panic(panic)
    }
}

/// The receiver of the sort's `let_value_ref`: hands on the sorted value, after dropping
/// the order and the buffer.
pub struct Detach<R> {
    rcvr: R,
}

impl<V, E, C, T, R: Receiver<V, E>> Receiver<(Sorting<V, C, T, E>, ()), E> for Detach<R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, (sorting, ()): (Sorting<V, C, T, E>, ())) {
        let Sorting { value, cmp, buf, .. } = sorting;
        // DROP ORDER: the order and the buffer are dropped before the completion; a panic
        // in the order's drop is delivered instead of the value, which is dropped first.
        drop(buf);
        match discard(cmp) {
            Ok(()) => self.rcvr.set_value(value),
            Err(p) => {
                let _ = discard(value);
                self.rcvr.set_panic(p)
            }
        }
    }
    fn set_error(self, error: E) {
        self.rcvr.set_error(error)
    }
    fn set_stopped(self) {
        self.rcvr.set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.rcvr.set_panic(panic)
    }
}

/// A sender of `()` that completes stopped if its receiver's stop token is stopped when
/// it starts: the look at the stop token before each piece of the recursion.
pub struct StopGate;

sender!([] StopGate { value = (), error = Infallible, stopped = true, domain = crate::domain::NoDomain });

impl<R: Receiver<(), Infallible>> SenderTo<R> for StopGate {
    type Operation = StopGateOp<R>;
    fn connect(self, receiver: R) -> StopGateOp<R> {
        StopGateOp { rcvr: Some(receiver), _pin: PhantomPinned }
    }
}

/// The operation of [`StopGate`].
pub struct StopGateOp<R> {
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible>> OperationState for StopGateOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `rcvr` is not structurally pinned; it is only moved out.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(rcvr) = this.rcvr.take() else { return };
        if rcvr.env().stop_token().stop_requested() { rcvr.set_stopped() } else { rcvr.set_value(()) }
    }
}

#[cfg(test)]
mod tests {
    use super::{SCAN_BLOCK, every_pair};

    #[test]
    fn every_pair_finds_the_one_pair_out_of_order_wherever_it_is() {
        let in_order = |a: &u32, b: &u32| a <= b;
        assert!(every_pair::<u32>(&[], in_order));
        assert!(every_pair(&[7], in_order));
        for len in [2, SCAN_BLOCK, SCAN_BLOCK + 1, SCAN_BLOCK + 2, 3 * SCAN_BLOCK + 5] {
            let sorted: Vec<u32> = (0..len as u32).map(|i| 2 * i + 2).collect();
            assert!(every_pair(&sorted, in_order), "len {len}");
            for i in 1..len {
                let mut v = sorted.clone();
                v[i] = v[i - 1] - 1;
                assert!(!every_pair(&v, in_order), "len {len}, pair {i}");
            }
        }
    }
}
