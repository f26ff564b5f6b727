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
    pub fn new(sndr: S, shape: usize, f: F) -> Self {
        Bulk { sndr, shape, f, grain: Grain::new() }
    }
    /// The same sender with the bounds `grain` on its chunks.
    pub fn with_grain(self, grain: Grain) -> Self {
        Bulk { grain, ..self }
    }
    /// The bounds on its chunks.
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor, the shape and the function.
    pub fn into_parts(self) -> (S, usize, F) {
        (self.sndr, self.shape, self.f)
    }
}

/// A `bulk_chunked` function: `f(begin, end, &value)` runs the indices `begin..end`.
/// Implemented for every `Fn(usize, usize, &V) -> O` where `O` is `()` or
/// `Result<(), E>`.
pub trait BulkChunkedFn<V, E> {
    /// Runs the chunk `begin..end`.
    fn call(&self, begin: usize, end: usize, value: &V) -> Result<(), E>;

    /// Runs the chunk `begin..end` on the calling thread, and may end it early, before
    /// an index, once `token` is stopped: it then returns `Ok(false)`. By default one
    /// [`call`](Self::call), which never ends early; [`EachIndex`](super::EachIndex) (a `bulk`'s function
    /// lowered to `bulk_chunked`) looks at the token every 64 indices, as the default
    /// `bulk` does. The default `bulk_chunked` runs its one chunk through this.
    fn call_stoppable(&self, begin: usize, end: usize, value: &V, token: &StopToken<'_>) -> Result<bool, E> {
        let _ = token;
        self.call(begin, end, value).map(|()| true)
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
    pub fn new(sndr: S, shape: usize, f: F) -> Self {
        BulkChunked { sndr, shape, f, grain: Grain::new() }
    }
    /// The same sender with the bounds `grain` on its chunks.
    pub fn with_grain(self, grain: Grain) -> Self {
        BulkChunked { grain, ..self }
    }
    /// The bounds on its chunks.
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor, the shape and the function.
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
    pub fn new(sndr: S, shape: usize, f: F) -> Self {
        BulkUnchunked { sndr, shape, f }
    }
    /// The predecessor, the shape and the function.
    pub fn into_parts(self) -> (S, usize, F) {
        (self.sndr, self.shape, self.f)
    }
}

/// A function `bulk_each` applies to every element: implemented for every
/// `Fn(usize, &mut T) -> O` where `O` is `()` or `Result<(), E>`.
pub trait BulkEachFn<T, E> {
    /// Runs the iteration for element `i`.
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
    pub fn new(sndr: S, f: F) -> Self {
        BulkEach { sndr, f, grain: Grain::new(), _t: PhantomData }
    }
    /// The same sender with the bounds `grain` on its chunks.
    pub fn with_grain(self, grain: Grain) -> Self {
        BulkEach { grain, ..self }
    }
    /// The bounds on its chunks.
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor and the function.
    pub fn into_parts(self) -> (S, F) {
        (self.sndr, self.f)
    }
}

/// A function `bulk_chunks_mut` applies to every chunk: implemented for every
/// `Fn(usize, &mut [T]) -> O` where `O` is `()` or `Result<(), E>`. It gets the chunk's
/// index `c` and the elements `c * chunk_len ..`, at most `chunk_len` of them.
pub trait BulkChunksMutFn<T, E> {
    /// Runs the iteration for chunk `c`.
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
    #[track_caller]
    pub fn new(sndr: S, chunk_len: usize, f: F) -> Self {
        assert!(chunk_len > 0, "bulk_chunks_mut: chunk_len is zero");
        BulkChunksMut { sndr, chunk_len, f, grain: Grain::new(), _t: PhantomData }
    }
    /// The same sender with the bounds `grain` on its pieces, counted in chunks.
    pub fn with_grain(self, grain: Grain) -> Self {
        BulkChunksMut { grain, ..self }
    }
    /// The bounds on its pieces, counted in chunks.
    pub fn grain(&self) -> Grain {
        self.grain
    }
    /// The predecessor, the chunk length and the function.
    pub fn into_parts(self) -> (S, usize, F) {
        (self.sndr, self.chunk_len, self.f)
    }
}
