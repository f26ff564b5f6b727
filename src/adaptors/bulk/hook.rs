//! What the bulk hooks of [`Domain`](crate::Domain) take: the untransformed senders
//! ([`Bulk`], [`BulkChunked`], [`BulkUnchunked`], [`BulkEach`], [`BulkChunksMut`]), plain
//! data, and the functions they run. Their `impl Sender`s and default lowerings are in
//! `mod.rs`.

use std::marker::PhantomData;

use crate::stop::StopToken;

use super::grain::Grain;

/// What one bulk iteration may return: `()`, or `Result<(), E>` to fail the whole bulk.
pub trait BulkOutcome<E> {
    /// The iteration's result.
    ///
    /// ```
    /// use senders::adaptors::BulkOutcome;
    /// assert_eq!(BulkOutcome::<&str>::into_result(()), Ok(()));
    /// assert_eq!(BulkOutcome::into_result(Err::<(), _>("bad index")), Err("bad index"));
    /// ```
    fn into_result(self) -> Result<(), E>;
}
impl<E> BulkOutcome<E> for () {
    #[inline]
    fn into_result(self) -> Result<(), E> {
        Ok(())
    }
}
impl<E> BulkOutcome<E> for Result<(), E> {
    #[inline]
    fn into_result(self) -> Result<(), E> {
        self
    }
}

/// A bulk iteration function. Implemented for every `Fn(usize, &V) -> O` where `O` is
/// `()` or `Result<(), E>`.
///
/// Iterations get a shared reference to the value because a customized `bulk` runs
/// them in parallel.
pub trait BulkFn<V, E> {
    /// Runs iteration `i`.
    ///
    /// ```
    /// use senders::adaptors::BulkFn;
    /// let f = |i: usize, v: &Vec<i32>| if v[i] < 0 { Err("negative") } else { Ok(()) };
    /// assert_eq!(BulkFn::call(&f, 0, &vec![1, -1]), Ok(()));
    /// assert_eq!(BulkFn::call(&f, 1, &vec![1, -1]), Err("negative"));
    /// ```
    fn call(&self, i: usize, value: &V) -> Result<(), E>;
}

impl<V, E, O: BulkOutcome<E>, F: Fn(usize, &V) -> O> BulkFn<V, E> for F {
    #[inline]
    fn call(&self, i: usize, value: &V) -> Result<(), E> {
        self(i, value).into_result()
    }
}

/// The untransformed sender of `bulk(sndr, shape, f)`.
#[must_use = "senders do nothing unless connected and started"]
pub struct Bulk<S, F> {
    pub(super) sndr: S,
    pub(super) shape: usize,
    pub(super) f: F,
    pub(super) grain: Grain,
}

impl<S, F> Bulk<S, F> {
    /// Builds the untransformed sender. Prefer [`SenderExt::bulk`](crate::SenderExt::bulk).
    ///
    /// ```
    /// use senders::adaptors::Bulk;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let add = |i: usize, sum: &AtomicUsize| { sum.fetch_add(i, Ordering::Relaxed); };
    /// let b = Bulk::new(just(AtomicUsize::new(0)), 4, add);
    /// assert_eq!(sync_wait(b).unwrap().unwrap().into_inner(), 1 + 2 + 3);
    /// ```
    pub fn new(sndr: S, shape: usize, f: F) -> Self {
        Bulk { sndr, shape, f, grain: Grain::new() }
    }
    /// The same sender with the bounds `grain` on its chunks.
    ///
    /// ```
    /// use senders::adaptors::Bulk;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let add = |i: usize, sum: &AtomicUsize| { sum.fetch_add(i, Ordering::Relaxed); };
    /// let b = Bulk::new(just(AtomicUsize::new(0)), 4, add).with_grain(Grain::new().min_len(2));
    /// assert_eq!(b.grain().min(), 2);
    /// ```
    pub fn with_grain(self, grain: Grain) -> Self {
        Bulk { grain, ..self }
    }
    /// The bounds on its chunks.
    ///
    /// ```
    /// use senders::adaptors::Bulk;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let add = |i: usize, sum: &AtomicUsize| { sum.fetch_add(i, Ordering::Relaxed); };
    /// assert_eq!(Bulk::new(just(AtomicUsize::new(0)), 4, add).grain(), Grain::new());
    /// ```
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor, the shape and the function.
    ///
    /// ```
    /// use senders::adaptors::Bulk;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let add = |i: usize, sum: &AtomicUsize| { sum.fetch_add(i, Ordering::Relaxed); };
    /// let (pred, shape, f) = Bulk::new(just(AtomicUsize::new(0)), 4, add).into_parts();
    /// assert_eq!(shape, 4);
    /// let sum = sync_wait(pred).unwrap().unwrap();
    /// f(3, &sum);
    /// assert_eq!(sum.into_inner(), 3);
    /// ```
    pub fn into_parts(self) -> (S, usize, F) {
        (self.sndr, self.shape, self.f)
    }
}

/// A `bulk_chunked` function: `f(begin, end, &value)` runs the indices `begin..end`.
/// Implemented for every `Fn(usize, usize, &V) -> O` where `O` is `()` or
/// `Result<(), E>`.
pub trait BulkChunkedFn<V, E> {
    /// Runs the chunk `begin..end`.
    ///
    /// ```
    /// use senders::adaptors::BulkChunkedFn;
    /// let f = |b: usize, e: usize, v: &Vec<i32>| if v[b..e].contains(&0) { Err("zero") } else { Ok(()) };
    /// assert_eq!(BulkChunkedFn::call(&f, 0, 2, &vec![1, 2, 0]), Ok(()));
    /// assert_eq!(BulkChunkedFn::call(&f, 0, 3, &vec![1, 2, 0]), Err("zero"));
    /// ```
    fn call(&self, begin: usize, end: usize, value: &V) -> Result<(), E>;

    /// Runs the chunk `begin..end` on the calling thread, and may end it early, before
    /// an index, once `token` is stopped: it then returns `Ok(false)`. By default one
    /// [`call`](Self::call), which never ends early; [`EachIndex`](super::EachIndex) (a `bulk`'s function
    /// lowered to `bulk_chunked`) looks at the token every 64 indices, as the default
    /// `bulk` does. The default `bulk_chunked` runs its one chunk through this.
    ///
    /// ```
    /// use senders::adaptors::BulkChunkedFn;
    /// use senders::StopToken;
    /// let f = |_b: usize, _e: usize, _v: &()| -> Result<(), ()> { Ok(()) };
    /// assert_eq!(f.call_stoppable(0, 8, &(), &StopToken::never()), Ok(true), "ran to the end");
    /// ```
    fn call_stoppable(&self, begin: usize, end: usize, value: &V, token: &StopToken<'_>) -> Result<bool, E> {
        let _ = token;
        self.call(begin, end, value).map(|()| true)
    }

    /// Runs a *piece*, the indices `begin..end` that one worker takes, as consecutive
    /// calls: `next(i)` says where the call that starts at `i` ends, or `None` to end
    /// the piece before `i` (the bulk failed or was stopped, or the worker yields the
    /// rest of the piece to other work). Returns the first index not run (`end` once all
    /// ran). By default one [`call`](Self::call) per range that `next` gives; a
    /// reduction's function overrides it to fold the whole piece into one accumulator.
    /// The pool's `bulk_chunked` runs each piece of its split through this, cut into
    /// calls of at most 65,536 indices (or the [`Grain`]'s `max_len`) so that it looks at
    /// the stop flags between two.
    ///
    /// ```
    /// use senders::adaptors::BulkChunkedFn;
    /// use std::sync::Mutex;
    /// let f = |b: usize, e: usize, calls: &Mutex<Vec<(usize, usize)>>| calls.lock().unwrap().push((b, e));
    /// let calls = Mutex::new(vec![]);
    /// // Calls of at most 4 indices, ended before index 8.
    /// let end = BulkChunkedFn::<_, ()>::call_piece(&f, 0, 10, &calls, |i| (i < 8).then(|| (i + 4).min(10)));
    /// assert_eq!(end, Ok(8));
    /// assert_eq!(calls.into_inner().unwrap(), [(0, 4), (4, 8)]);
    /// ```
    #[inline]
    fn call_piece(
        &self,
        begin: usize,
        end: usize,
        value: &V,
        mut next: impl FnMut(usize) -> Option<usize>,
    ) -> Result<usize, E> {
        let mut i = begin;
        while i < end {
            let Some(e) = next(i) else { break };
            self.call(i, e, value)?;
            i = e;
        }
        Ok(i)
    }
}

impl<V, E, O: BulkOutcome<E>, F: Fn(usize, usize, &V) -> O> BulkChunkedFn<V, E> for F {
    #[inline]
    fn call(&self, begin: usize, end: usize, value: &V) -> Result<(), E> {
        self(begin, end, value).into_result()
    }
}

/// The untransformed sender of `bulk_chunked(sndr, shape, f)` (P3481).
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkChunked<S, F> {
    pub(super) sndr: S,
    pub(super) shape: usize,
    pub(super) f: F,
    pub(super) grain: Grain,
}

impl<S, F> BulkChunked<S, F> {
    /// Builds the untransformed sender. Prefer
    /// [`SenderExt::bulk_chunked`](crate::SenderExt::bulk_chunked).
    ///
    /// ```
    /// use senders::adaptors::BulkChunked;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::Mutex;
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let record = |b: usize, e: usize, calls: &Mutex<Vec<(usize, usize)>>| calls.lock().unwrap().push((b, e));
    /// let calls = sync_wait(BulkChunked::new(just(Mutex::<Vec<(usize, usize)>>::new(vec![])), 10, record)).unwrap().unwrap();
    /// assert_eq!(calls.into_inner().unwrap(), [(0, 10)], "one call by default");
    /// ```
    pub fn new(sndr: S, shape: usize, f: F) -> Self {
        BulkChunked { sndr, shape, f, grain: Grain::new() }
    }
    /// The same sender with the bounds `grain` on its chunks.
    ///
    /// ```
    /// use senders::adaptors::BulkChunked;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::Mutex;
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let record = |b: usize, e: usize, calls: &Mutex<Vec<(usize, usize)>>| calls.lock().unwrap().push((b, e));
    /// let b = BulkChunked::new(just(Mutex::<Vec<(usize, usize)>>::new(vec![])), 10, record).with_grain(Grain::new().max_len(5));
    /// assert_eq!(sync_wait(b).unwrap().unwrap().into_inner().unwrap(), [(0, 5), (5, 10)]);
    /// ```
    pub fn with_grain(self, grain: Grain) -> Self {
        BulkChunked { grain, ..self }
    }
    /// The bounds on its chunks.
    ///
    /// ```
    /// use senders::adaptors::BulkChunked;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::Mutex;
    /// let record = |b: usize, e: usize, calls: &Mutex<Vec<(usize, usize)>>| calls.lock().unwrap().push((b, e));
    /// assert_eq!(BulkChunked::new(just(Mutex::<Vec<(usize, usize)>>::new(vec![])), 10, record).grain(), Grain::new());
    /// ```
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor, the shape and the function.
    ///
    /// ```
    /// use senders::adaptors::BulkChunked;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::Mutex;
    /// let record = |b: usize, e: usize, calls: &Mutex<Vec<(usize, usize)>>| calls.lock().unwrap().push((b, e));
    /// let (_pred, shape, f) = BulkChunked::new(just(Mutex::<Vec<(usize, usize)>>::new(vec![])), 10, record).into_parts();
    /// let calls = Mutex::new(vec![]);
    /// f(0, shape, &calls);
    /// assert_eq!(calls.into_inner().unwrap(), [(0, 10)]);
    /// ```
    pub fn into_parts(self) -> (S, usize, F) {
        (self.sndr, self.shape, self.f)
    }
}

/// The untransformed sender of `bulk_unchunked(sndr, shape, f)` (P3481): every index may
/// run on an execution agent of its own.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkUnchunked<S, F> {
    pub(super) sndr: S,
    pub(super) shape: usize,
    pub(super) f: F,
}

impl<S, F> BulkUnchunked<S, F> {
    /// Builds the untransformed sender. Prefer
    /// [`SenderExt::bulk_unchunked`](crate::SenderExt::bulk_unchunked).
    ///
    /// ```
    /// use senders::adaptors::BulkUnchunked;
    /// use senders::{just, sync_wait};
    /// use std::sync::Mutex;
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let record = |i: usize, seen: &Mutex<Vec<usize>>| seen.lock().unwrap().push(i);
    /// let seen = sync_wait(BulkUnchunked::new(just(Mutex::<Vec<usize>>::new(vec![])), 3, record)).unwrap().unwrap();
    /// assert_eq!(seen.into_inner().unwrap(), [0, 1, 2]);
    /// ```
    pub fn new(sndr: S, shape: usize, f: F) -> Self {
        BulkUnchunked { sndr, shape, f }
    }
    /// The predecessor, the shape and the function.
    ///
    /// ```
    /// use senders::adaptors::BulkUnchunked;
    /// use senders::{just, sync_wait};
    /// use std::sync::Mutex;
    /// let record = |i: usize, seen: &Mutex<Vec<usize>>| seen.lock().unwrap().push(i);
    /// let (_pred, shape, f) = BulkUnchunked::new(just(Mutex::<Vec<usize>>::new(vec![])), 3, record).into_parts();
    /// let seen = Mutex::new(vec![]);
    /// (0..shape).for_each(|i| f(i, &seen));
    /// assert_eq!(seen.into_inner().unwrap(), [0, 1, 2]);
    /// ```
    pub fn into_parts(self) -> (S, usize, F) {
        (self.sndr, self.shape, self.f)
    }
}

/// A function `bulk_each` applies to every element: implemented for every
/// `Fn(usize, &mut T) -> O` where `O` is `()` or `Result<(), E>`.
pub trait BulkEachFn<T, E> {
    /// Runs the iteration for element `i`.
    ///
    /// ```
    /// use senders::adaptors::BulkEachFn;
    /// let mut x = 5;
    /// assert_eq!(BulkEachFn::<i32, ()>::call(&|i: usize, x: &mut i32| *x += i as i32, 2, &mut x), Ok(()));
    /// assert_eq!(x, 7);
    /// ```
    fn call(&self, i: usize, item: &mut T) -> Result<(), E>;
}

impl<T, E, O: BulkOutcome<E>, F: Fn(usize, &mut T) -> O> BulkEachFn<T, E> for F {
    #[inline]
    fn call(&self, i: usize, item: &mut T) -> Result<(), E> {
        self(i, item).into_result()
    }
}

/// The untransformed sender of `bulk_each(sndr, f)`: `f(i, &mut value[i])` for every
/// element of the value's slice, then the value.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkEach<S, T, F> {
    pub(super) sndr: S,
    pub(super) f: F,
    pub(super) grain: Grain,
    pub(super) _t: PhantomData<fn(&mut T)>,
}

impl<S, T, F> BulkEach<S, T, F> {
    /// Builds the untransformed sender. Prefer
    /// [`SenderExt::bulk_each`](crate::SenderExt::bulk_each).
    ///
    /// ```
    /// use senders::adaptors::BulkEach;
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let add = |i: usize, x: &mut u32| *x += i as u32;
    /// assert_eq!(sync_wait(BulkEach::<_, u32, _>::new(just(vec![10u32; 3]), add)).unwrap(), Some(vec![10, 11, 12]));
    /// ```
    pub fn new(sndr: S, f: F) -> Self {
        BulkEach { sndr, f, grain: Grain::new(), _t: PhantomData }
    }
    /// The same sender with the bounds `grain` on its chunks.
    ///
    /// ```
    /// use senders::adaptors::BulkEach;
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let add = |i: usize, x: &mut u32| *x += i as u32;
    /// let b = BulkEach::<_, u32, _>::new(just(vec![10u32; 3]), add).with_grain(Grain::new().min_len(2));
    /// assert_eq!(b.grain().min(), 2);
    /// assert_eq!(sync_wait(b).unwrap(), Some(vec![10, 11, 12]));
    /// ```
    pub fn with_grain(self, grain: Grain) -> Self {
        BulkEach { grain, ..self }
    }
    /// The bounds on its chunks.
    ///
    /// ```
    /// use senders::adaptors::BulkEach;
    /// use senders::{Grain, just, sync_wait};
    /// let add = |i: usize, x: &mut u32| *x += i as u32;
    /// assert_eq!(BulkEach::<_, u32, _>::new(just(vec![10u32; 3]), add).grain(), Grain::new());
    /// ```
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor and the function.
    ///
    /// ```
    /// use senders::adaptors::BulkEach;
    /// use senders::{Grain, just, sync_wait};
    /// let add = |i: usize, x: &mut u32| *x += i as u32;
    /// let (_pred, f) = BulkEach::<_, u32, _>::new(just(vec![10u32; 3]), add).into_parts();
    /// let mut x = 1;
    /// f(4, &mut x);
    /// assert_eq!(x, 5);
    /// ```
    pub fn into_parts(self) -> (S, F) {
        (self.sndr, self.f)
    }
}

/// A function `bulk_chunks_mut` applies to every chunk: implemented for every
/// `Fn(usize, &mut [T]) -> O` where `O` is `()` or `Result<(), E>`. It gets the chunk's
/// index `c` and the elements `c * chunk_len ..`, at most `chunk_len` of them.
pub trait BulkChunksMutFn<T, E> {
    /// Runs the iteration for chunk `c`.
    ///
    /// ```
    /// use senders::adaptors::BulkChunksMutFn;
    /// let mut chunk = [1, 2];
    /// let r = BulkChunksMutFn::<i32, ()>::call(&|c: usize, ch: &mut [i32]| ch.iter_mut().for_each(|x| *x += c as i32), 3, &mut chunk);
    /// assert_eq!((r, chunk), (Ok(()), [4, 5]));
    /// ```
    fn call(&self, c: usize, chunk: &mut [T]) -> Result<(), E>;
}

impl<T, E, O: BulkOutcome<E>, F: Fn(usize, &mut [T]) -> O> BulkChunksMutFn<T, E> for F {
    #[inline]
    fn call(&self, c: usize, chunk: &mut [T]) -> Result<(), E> {
        self(c, chunk).into_result()
    }
}

/// The untransformed sender of `bulk_chunks_mut(sndr, chunk_len, f)`: `f(c, chunk)` for
/// every chunk of `chunk_len` elements of the value's slice (the last may be shorter),
/// then the value. Rayon's `par_chunks_mut(chunk_len).enumerate().for_each(..)`.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkChunksMut<S, T, F> {
    pub(super) sndr: S,
    pub(super) chunk_len: usize,
    pub(super) f: F,
    pub(super) grain: Grain,
    pub(super) _t: PhantomData<fn(&mut T)>,
}

impl<S, T, F> BulkChunksMut<S, T, F> {
    /// Builds the untransformed sender. Prefer
    /// [`SenderExt::bulk_chunks_mut`](crate::SenderExt::bulk_chunks_mut).
    ///
    /// # Panics
    ///
    /// If `chunk_len` is zero.
    ///
    /// ```
    /// use senders::adaptors::BulkChunksMut;
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let fill = |c: usize, chunk: &mut [usize]| chunk.fill(c);
    /// assert_eq!(sync_wait(BulkChunksMut::<_, usize, _>::new(just(vec![0; 5]), 2, fill)).unwrap(), Some(vec![0, 0, 1, 1, 2]));
    /// ```
    #[track_caller]
    pub fn new(sndr: S, chunk_len: usize, f: F) -> Self {
        assert!(chunk_len > 0, "bulk_chunks_mut: chunk_len is zero");
        BulkChunksMut { sndr, chunk_len, f, grain: Grain::new(), _t: PhantomData }
    }
    /// The same sender with the bounds `grain` on its pieces, counted in chunks.
    ///
    /// ```
    /// use senders::adaptors::BulkChunksMut;
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let fill = |c: usize, chunk: &mut [usize]| chunk.fill(c);
    /// let b = BulkChunksMut::<_, usize, _>::new(just(vec![0; 5]), 2, fill).with_grain(Grain::new().max_len(1));
    /// assert_eq!(b.grain().max(), Some(1));
    /// assert_eq!(sync_wait(b).unwrap(), Some(vec![0, 0, 1, 1, 2]));
    /// ```
    pub fn with_grain(self, grain: Grain) -> Self {
        BulkChunksMut { grain, ..self }
    }
    /// The bounds on its pieces, counted in chunks.
    ///
    /// ```
    /// use senders::adaptors::BulkChunksMut;
    /// use senders::{Grain, just, sync_wait};
    /// let fill = |c: usize, chunk: &mut [usize]| chunk.fill(c);
    /// assert_eq!(BulkChunksMut::<_, usize, _>::new(just(vec![0; 5]), 2, fill).grain(), Grain::new());
    /// ```
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor, the chunk length and the function.
    ///
    /// ```
    /// use senders::adaptors::BulkChunksMut;
    /// use senders::{Grain, just, sync_wait};
    /// let fill = |c: usize, chunk: &mut [usize]| chunk.fill(c);
    /// let (_pred, chunk_len, f) = BulkChunksMut::<_, usize, _>::new(just(vec![0; 5]), 2, fill).into_parts();
    /// let mut chunk = vec![9; chunk_len];
    /// f(7, &mut chunk);
    /// assert_eq!(chunk, [7, 7]);
    /// ```
    pub fn into_parts(self) -> (S, usize, F) {
        (self.sndr, self.chunk_len, self.f)
    }
}
