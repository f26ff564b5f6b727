//! The bulk algorithms (P3481's three forms, and `bulk_each`): run a function over the
//! indices `0..shape`, then pass the value on.
//!
//! | algorithm | the function gets | on the pool | by default |
//! |---|---|---|---|
//! | `bulk(shape, f)` | `f(i, &value)` | chunks split adaptively, down to single indices | `f(0..shape)` in order, as the domain's `bulk_chunked` of [`EachIndex`]`(f)` |
//! | `bulk_chunked(shape, f)` | `f(begin, end, &value)` for chunks that cover `0..shape` | the same chunks, one call each | one call, `f(0, shape, &value)` |
//! | `bulk_unchunked(shape, f)` | `f(i, &value)` | every index its own job | in order |
//! | `bulk_each(f)` | `f(i, &mut value[i])` | as `bulk` | in order |
//!
//! P3481 defines `bulk` through `bulk_chunked`: `bulk(shape, f)` is `bulk_chunked` of the
//! same shape whose function runs `f` for each index of its chunk ([`Bulk::into_chunked`]).
//! The default `transform_bulk` ([`default_transforms!`](crate::default_transforms)) does
//! that, then hands the result to the domain's own `transform_bulk_chunked`, so a domain
//! that customizes only `bulk_chunked` runs plain `bulk` too. A domain that customizes
//! `bulk` itself (the pool's) is not affected.
//!
//! | file | what |
//! |---|---|
//! | `hook.rs` | what the domain hooks take: the untransformed senders and the functions they run |
//! | `grain.rs` | [`Grain`], the bounds on the chunks |
//! | `mod.rs` | the senders, the default lowerings, and the early customization entries |

use std::marker::PhantomData;

use sync_wrapper::SyncWrapper;

use crate::domain::{Domain, LateDomain, MaybeDomain};
use crate::env::Env;
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::sender::{Sender, SenderTo, adaptor_sender};
use crate::stop::StopToken;

mod grain;
mod hook;

pub use grain::Grain;
pub use hook::{
    Bulk, BulkChunked, BulkChunkedFn, BulkChunksMut, BulkChunksMutFn, BulkEach, BulkEachFn, BulkFn, BulkOutcome,
    BulkUnchunked,
};

impl<S, F> Bulk<S, F> {
    /// The default, sequential implementation.
    ///
    /// ```
    /// use senders::adaptors::Bulk;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let add = |i: usize, sum: &AtomicUsize| { sum.fetch_add(i, Ordering::Relaxed); };
    /// let lowered = Bulk::new(just(AtomicUsize::new(0)), 4, add).lower();
    /// assert_eq!(sync_wait(lowered).unwrap().unwrap().into_inner(), 6);
    /// ```
    pub fn lower(self) -> BulkImpl<S, F> {
        BulkImpl { sndr: self.sndr, shape: self.shape, f: self.f }
    }
    /// `bulk` as P3481 defines it: `bulk_chunked` of the same shape whose function runs
    /// `f` for each index of its chunk, in order. The default `transform_bulk`
    /// ([`default_transforms!`](crate::default_transforms)) transforms this with the
    /// domain's `transform_bulk_chunked`.
    ///
    /// ```
    /// use senders::adaptors::Bulk;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let add = |i: usize, sum: &AtomicUsize| { sum.fetch_add(i, Ordering::Relaxed); };
    /// let chunked = Bulk::new(just(AtomicUsize::new(0)), 4, add).into_chunked();
    /// assert_eq!(sync_wait(chunked).unwrap().unwrap().into_inner(), 6);
    /// ```
    pub fn into_chunked(self) -> BulkChunked<S, EachIndex<F>> {
        BulkChunked { sndr: self.sndr, shape: self.shape, f: EachIndex(self.f), grain: self.grain }
    }
}

adaptor_sender!([S: Sender, F: BulkFn<S::Value, S::Error>] Bulk<S, F> where [] {
    value = S::Value, error = S::Error, stopped = true
});
adaptor_sender!([S: Sender, F: BulkFn<S::Value, S::Error>] BulkImpl<S, F> where [] {
    value = S::Value, error = S::Error, stopped = true
});

impl<S, F, R> SenderTo<R> for Bulk<S, F>
where
    S: Sender,
    F: BulkFn<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
    <LateDomain<S, R::Env> as Domain>::Bulk<S, F>: SenderTo<R>,
{
    type Operation = <<LateDomain<S, R::Env> as Domain>::Bulk<S, F> as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        let domain = <LateDomain<S, R::Env>>::default();
        domain.transform_bulk(self, Some(receiver.env())).connect(receiver)
    }
}

/// The default `bulk`: runs the iterations in order on the thread that delivered the
/// value. The first error or panic ends the loop and is forwarded; a stop request seen
/// between iterations completes stopped. A shape of zero forwards the value at once.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkImpl<S, F> {
    sndr: S,
    shape: usize,
    f: F,
}

impl<S, F, R> SenderTo<R> for BulkImpl<S, F>
where
    S: SenderTo<BulkReceiver<F, R>>,
    F: BulkFn<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(BulkReceiver { shape: self.shape, f: SyncWrapper::new(self.f), rcvr: receiver })
    }
}

/// The receiver the default `bulk` connects its predecessor to.
pub struct BulkReceiver<F, R> {
    shape: usize,
    f: SyncWrapper<F>,
    rcvr: R,
}

/// How many iterations run between two looks at the stop token.
const STOP_CHECK_INTERVAL: usize = 64;

/// Runs `step(i)` for `i` in `0..shape`, in order, looking at the receiver's stop token
/// every [`STOP_CHECK_INTERVAL`] iterations. `Ok(Ok(true))`: all ran; `Ok(Ok(false))`:
/// stopped; `Ok(Err(e))`: an iteration failed; `Err(p)`: an iteration panicked.
fn run_in_order<V, E, R: Receiver<V, E>>(
    rcvr: &R,
    shape: usize,
    mut step: impl FnMut(usize) -> Result<(), E>,
) -> Result<Result<bool, E>, Panic> {
    catch(|| {
        let token = rcvr.env().stop_token();
        for i in 0..shape {
            if i % STOP_CHECK_INTERVAL == 0 && token.stop_requested() {
                return Ok(false);
            }
            step(i)?;
        }
        Ok(true)
    })
}

/// Completes a sequential bulk with what [`run_in_order`] reported, after dropping its
/// function and, unless it is delivered, its value (a panic in either `Drop` is reported
/// unless the run panicked).
fn finish<V, E, F, R: Receiver<V, E>>(rcvr: R, value: V, f: F, run: Result<Result<bool, E>, Panic>) {
    let run = match (discard(f), run) {
        (Err(p), Ok(_)) => Err(p),
        (_, run) => run,
    };
    if let Ok(Ok(true)) = run {
        return rcvr.set_value(value);
    }
    // The value is not delivered: it is dropped before completing, and a panic in its
    // `Drop` replaces a stop or an error.
    let run = match (discard(value), run) {
        (Err(p), Ok(_)) => Err(p),
        (_, run) => run,
    };
    match run {
        Ok(Ok(_)) => rcvr.set_stopped(),
        Ok(Err(e)) => rcvr.set_error(e),
        Err(p) => rcvr.set_panic(p),
    }
}

impl<V, E, F: BulkFn<V, E>, R: Receiver<V, E>> Receiver<V, E> for BulkReceiver<F, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, value: V) {
        let BulkReceiver { shape, f, rcvr } = self;
        let f = f.into_inner();
        let run = run_in_order(&rcvr, shape, |i| f.call(i, &value));
        finish(rcvr, value, f, run);
    }
    fn set_error(self, error: E) {
        forward_error(self.f.into_inner(), self.rcvr, error)
    }
    fn set_stopped(self) {
        forward_stopped(self.f.into_inner(), self.rcvr)
    }
    fn set_panic(self, panic: Panic) {
        forward_panic(self.f.into_inner(), self.rcvr, panic)
    }
}

/// Early customization entry used by [`SenderExt::bulk`](crate::SenderExt::bulk).
pub(crate) fn bulk<S: Sender, F: BulkFn<S::Value, S::Error>>(
    sndr: S,
    grain: Grain,
    shape: usize,
    f: F,
) -> <S::Domain as MaybeDomain>::EarlyBulk<S, F> {
    <S::Domain as MaybeDomain>::early_bulk(Bulk::new(sndr, shape, f).with_grain(grain))
}

/// The function of a `bulk` lowered to `bulk_chunked` ([`Bulk::into_chunked`]): runs the
/// `bulk`'s `f(i, &value)` for each index `i` of its chunk, in order, stopping at the
/// first error.
pub struct EachIndex<F>(F);

impl<V, E, F: BulkFn<V, E>> BulkChunkedFn<V, E> for EachIndex<F> {
    #[inline]
    fn call(&self, begin: usize, end: usize, value: &V) -> Result<(), E> {
        (begin..end).try_for_each(|i| self.0.call(i, value))
    }

    fn call_stoppable(&self, begin: usize, end: usize, value: &V, token: &StopToken<'_>) -> Result<bool, E> {
        for i in begin..end {
            if (i - begin).is_multiple_of(STOP_CHECK_INTERVAL) && token.stop_requested() {
                return Ok(false);
            }
            self.0.call(i, value)?;
        }
        Ok(true)
    }
}

impl<S, F> BulkChunked<S, F> {
    /// The default implementation: one call, `f(0, shape, &value)`, or calls of at most
    /// the grain's `max_len`, in order.
    ///
    /// ```
    /// use senders::adaptors::BulkChunked;
    /// use senders::{Grain, just, sync_wait};
    /// use std::sync::Mutex;
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let record = |b: usize, e: usize, calls: &Mutex<Vec<(usize, usize)>>| calls.lock().unwrap().push((b, e));
    /// let lowered = BulkChunked::new(just(Mutex::<Vec<(usize, usize)>>::new(vec![])), 10, record).lower();
    /// assert_eq!(sync_wait(lowered).unwrap().unwrap().into_inner().unwrap(), [(0, 10)]);
    /// ```
    pub fn lower(self) -> BulkChunkedImpl<S, F> {
        BulkChunkedImpl { sndr: self.sndr, shape: self.shape, f: self.f, grain: self.grain }
    }
}

/// The default `bulk_chunked`: one call `f(0, shape, &value)` on the thread that
/// delivered the value (none for a shape of zero), or, with a [`Grain`] that has a
/// `max_len`, calls of at most that many indices, in order; a look at the stop token
/// before each call, which is made through [`BulkChunkedFn::call_stoppable`] (so a
/// lowered `bulk` also looks between its indices); the error, panic and stop rules of
/// the default `bulk`.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkChunkedImpl<S, F> {
    sndr: S,
    shape: usize,
    f: F,
    grain: Grain,
}

adaptor_sender!([S: Sender, F: BulkChunkedFn<S::Value, S::Error>] BulkChunked<S, F> where [] {
    value = S::Value, error = S::Error, stopped = true
});
adaptor_sender!([S: Sender, F: BulkChunkedFn<S::Value, S::Error>] BulkChunkedImpl<S, F> where [] {
    value = S::Value, error = S::Error, stopped = true
});

impl<S, F, R> SenderTo<R> for BulkChunked<S, F>
where
    S: Sender,
    F: BulkChunkedFn<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
    <LateDomain<S, R::Env> as Domain>::BulkChunked<S, F>: SenderTo<R>,
{
    type Operation = <<LateDomain<S, R::Env> as Domain>::BulkChunked<S, F> as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        let domain = <LateDomain<S, R::Env>>::default();
        domain.transform_bulk_chunked(self, Some(receiver.env())).connect(receiver)
    }
}

impl<S, F, R> SenderTo<R> for BulkChunkedImpl<S, F>
where
    S: SenderTo<BulkChunkedReceiver<F, R>>,
    F: BulkChunkedFn<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(BulkChunkedReceiver {
            shape: self.shape,
            grain: self.grain,
            f: SyncWrapper::new(self.f),
            rcvr: receiver,
        })
    }
}

/// The receiver the default `bulk_chunked` connects its predecessor to.
pub struct BulkChunkedReceiver<F, R> {
    shape: usize,
    grain: Grain,
    f: SyncWrapper<F>,
    rcvr: R,
}

impl<V, E, F: BulkChunkedFn<V, E>, R: Receiver<V, E>> Receiver<V, E> for BulkChunkedReceiver<F, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, value: V) {
        let BulkChunkedReceiver { shape, grain, f, rcvr } = self;
        let f = f.into_inner();
        // One chunk, the whole shape, unless the grain bounds it; a look at the stop
        // token before each.
        let run = catch(|| {
            let token = rcvr.env().stop_token();
            let mut i = 0;
            while i < shape {
                if token.stop_requested() {
                    return Ok(false);
                }
                let end = grain.next_end(i, shape);
                if !f.call_stoppable(i, end, &value, &token)? {
                    return Ok(false);
                }
                i = end;
            }
            Ok(true)
        });
        finish(rcvr, value, f, run);
    }
    fn set_error(self, error: E) {
        forward_error(self.f.into_inner(), self.rcvr, error)
    }
    fn set_stopped(self) {
        forward_stopped(self.f.into_inner(), self.rcvr)
    }
    fn set_panic(self, panic: Panic) {
        forward_panic(self.f.into_inner(), self.rcvr, panic)
    }
}

impl<S, F> BulkUnchunked<S, F> {
    /// The default implementation: the indices in order, as the default `bulk` (the one
    /// execution agent there is).
    ///
    /// ```
    /// use senders::adaptors::BulkUnchunked;
    /// use senders::{just, sync_wait};
    /// use std::sync::Mutex;
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let record = |i: usize, seen: &Mutex<Vec<usize>>| seen.lock().unwrap().push(i);
    /// let lowered = BulkUnchunked::new(just(Mutex::<Vec<usize>>::new(vec![])), 3, record).lower();
    /// assert_eq!(sync_wait(lowered).unwrap().unwrap().into_inner().unwrap(), [0, 1, 2], "in order");
    /// ```
    pub fn lower(self) -> BulkImpl<S, F> {
        BulkImpl { sndr: self.sndr, shape: self.shape, f: self.f }
    }
}

adaptor_sender!([S: Sender, F: BulkFn<S::Value, S::Error>] BulkUnchunked<S, F> where [] {
    value = S::Value, error = S::Error, stopped = true
});

impl<S, F, R> SenderTo<R> for BulkUnchunked<S, F>
where
    S: Sender,
    F: BulkFn<S::Value, S::Error>,
    R: Receiver<S::Value, S::Error>,
    <LateDomain<S, R::Env> as Domain>::BulkUnchunked<S, F>: SenderTo<R>,
{
    type Operation = <<LateDomain<S, R::Env> as Domain>::BulkUnchunked<S, F> as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        let domain = <LateDomain<S, R::Env>>::default();
        domain.transform_bulk_unchunked(self, Some(receiver.env())).connect(receiver)
    }
}

/// Early customization entry used by [`SenderExt::bulk_chunked`](crate::SenderExt::bulk_chunked).
pub(crate) fn bulk_chunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>>(
    sndr: S,
    grain: Grain,
    shape: usize,
    f: F,
) -> <S::Domain as MaybeDomain>::EarlyBulkChunked<S, F> {
    <S::Domain as MaybeDomain>::early_bulk_chunked(BulkChunked::new(sndr, shape, f).with_grain(grain))
}

/// Early customization entry used by
/// [`SenderExt::bulk_unchunked`](crate::SenderExt::bulk_unchunked).
pub(crate) fn bulk_unchunked<S: Sender, F: BulkFn<S::Value, S::Error>>(
    sndr: S,
    shape: usize,
    f: F,
) -> <S::Domain as MaybeDomain>::EarlyBulkUnchunked<S, F> {
    <S::Domain as MaybeDomain>::early_bulk_unchunked(BulkUnchunked::new(sndr, shape, f))
}

/// A sequential bulk's function is dropped before its receiver completes (the crate's
/// discard rule); a panic in its `Drop` replaces the completion.
fn forward_error<F, V, E, R: Receiver<V, E>>(f: F, rcvr: R, error: E) {
    match discard(f) {
        Ok(()) => rcvr.set_error(error),
        Err(p) => {
            // DROP ORDER: what the panic replaces is dropped before the completion.
            let _ = discard(error);
            rcvr.set_panic(p)
        }
    }
}

/// As [`forward_error`], for a stop.
fn forward_stopped<F, V, E, R: Receiver<V, E>>(f: F, rcvr: R) {
    match discard(f) {
        Ok(()) => rcvr.set_stopped(),
        Err(p) => rcvr.set_panic(p),
    }
}

/// As [`forward_error`], for a panic: the first panic wins.
fn forward_panic<F, V, E, R: Receiver<V, E>>(f: F, rcvr: R, panic: Panic) {
    let _ = discard(f);
    rcvr.set_panic(panic)
}

impl<S, T, F> BulkEach<S, T, F> {
    /// The default, sequential implementation.
    ///
    /// ```
    /// use senders::adaptors::BulkEach;
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let add = |i: usize, x: &mut u32| *x += i as u32;
    /// assert_eq!(sync_wait(BulkEach::<_, u32, _>::new(just(vec![10u32; 3]), add).lower()).unwrap(), Some(vec![10, 11, 12]));
    /// ```
    pub fn lower(self) -> BulkEachImpl<S, T, F> {
        BulkEachImpl { sndr: self.sndr, f: self.f, _t: PhantomData }
    }
}

/// The default `bulk_each`: visits the elements in order on the thread that delivered
/// the value, with the same error, panic and stop rules as the default `bulk`.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkEachImpl<S, T, F> {
    sndr: S,
    f: F,
    _t: PhantomData<fn(&mut T)>,
}

adaptor_sender!([S: Sender, T, F: BulkEachFn<T, S::Error>] BulkEach<S, T, F> where [S::Value: AsMut<[T]>] {
    value = S::Value, error = S::Error, stopped = true
});
adaptor_sender!([S: Sender, T, F: BulkEachFn<T, S::Error>] BulkEachImpl<S, T, F> where [S::Value: AsMut<[T]>] {
    value = S::Value, error = S::Error, stopped = true
});

impl<S, T, F, R> SenderTo<R> for BulkEach<S, T, F>
where
    S: Sender,
    S::Value: AsMut<[T]>,
    F: BulkEachFn<T, S::Error>,
    R: Receiver<S::Value, S::Error>,
    <LateDomain<S, R::Env> as Domain>::BulkEach<S, T, F>: SenderTo<R>,
{
    type Operation = <<LateDomain<S, R::Env> as Domain>::BulkEach<S, T, F> as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        let domain = <LateDomain<S, R::Env>>::default();
        domain.transform_bulk_each(self, Some(receiver.env())).connect(receiver)
    }
}

impl<S, T, F, R> SenderTo<R> for BulkEachImpl<S, T, F>
where
    S: Sender + SenderTo<BulkEachReceiver<T, F, R>>,
    S::Value: AsMut<[T]>,
    F: BulkEachFn<T, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(BulkEachReceiver { f: SyncWrapper::new(self.f), rcvr: receiver, _t: PhantomData })
    }
}

/// The receiver the default `bulk_each` connects its predecessor to.
pub struct BulkEachReceiver<T, F, R> {
    f: SyncWrapper<F>,
    rcvr: R,
    _t: PhantomData<fn(&mut T)>,
}

impl<V: AsMut<[T]>, T, E, F: BulkEachFn<T, E>, R: Receiver<V, E>> Receiver<V, E> for BulkEachReceiver<T, F, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, mut value: V) {
        let BulkEachReceiver { f, rcvr, .. } = self;
        let f = f.into_inner();
        // `AsMut` is user code too: a panic in it is the completion.
        let run = match catch(|| value.as_mut()) {
            Ok(items) => run_in_order(&rcvr, items.len(), |i| f.call(i, &mut items[i])),
            Err(p) => Err(p),
        };
        finish(rcvr, value, f, run);
    }
    fn set_error(self, error: E) {
        forward_error(self.f.into_inner(), self.rcvr, error)
    }
    fn set_stopped(self) {
        forward_stopped(self.f.into_inner(), self.rcvr)
    }
    fn set_panic(self, panic: Panic) {
        forward_panic(self.f.into_inner(), self.rcvr, panic)
    }
}

/// Early customization entry used by [`SenderExt::bulk_each`](crate::SenderExt::bulk_each).
pub(crate) fn bulk_each<S: Sender, T, F: BulkEachFn<T, S::Error>>(
    sndr: S,
    grain: Grain,
    f: F,
) -> <S::Domain as MaybeDomain>::EarlyBulkEach<S, T, F>
where
    S::Value: AsMut<[T]>,
{
    <S::Domain as MaybeDomain>::early_bulk_each(BulkEach::new(sndr, f).with_grain(grain))
}

/// The number of chunks of `chunk_len` elements (the last may be shorter) in `len`.
pub(crate) fn chunk_count(len: usize, chunk_len: usize) -> usize {
    len.div_ceil(chunk_len)
}

impl<S, T, F> BulkChunksMut<S, T, F> {
    /// The default, sequential implementation.
    ///
    /// ```
    /// use senders::adaptors::BulkChunksMut;
    /// use senders::{Grain, just, sync_wait};
    /// // No scheduler: the default domain runs this on the calling thread, in order.
    /// let fill = |c: usize, chunk: &mut [usize]| chunk.fill(c);
    /// assert_eq!(sync_wait(BulkChunksMut::<_, usize, _>::new(just(vec![0; 5]), 2, fill).lower()).unwrap(), Some(vec![0, 0, 1, 1, 2]));
    /// ```
    pub fn lower(self) -> BulkChunksMutImpl<S, T, F> {
        BulkChunksMutImpl { sndr: self.sndr, chunk_len: self.chunk_len, f: self.f, _t: PhantomData }
    }
}

/// The default `bulk_chunks_mut`: visits the chunks in order on the thread that
/// delivered the value, with the same error, panic and stop rules as the default `bulk`.
#[must_use = "senders do nothing unless connected and started"]
pub struct BulkChunksMutImpl<S, T, F> {
    sndr: S,
    chunk_len: usize,
    f: F,
    _t: PhantomData<fn(&mut T)>,
}

adaptor_sender!([S: Sender, T, F: BulkChunksMutFn<T, S::Error>] BulkChunksMut<S, T, F> where [S::Value: AsMut<[T]>] {
    value = S::Value, error = S::Error, stopped = true
});
adaptor_sender!([S: Sender, T, F: BulkChunksMutFn<T, S::Error>] BulkChunksMutImpl<S, T, F> where [S::Value: AsMut<[T]>] {
    value = S::Value, error = S::Error, stopped = true
});

impl<S, T, F, R> SenderTo<R> for BulkChunksMut<S, T, F>
where
    S: Sender,
    S::Value: AsMut<[T]>,
    F: BulkChunksMutFn<T, S::Error>,
    R: Receiver<S::Value, S::Error>,
    <LateDomain<S, R::Env> as Domain>::BulkChunksMut<S, T, F>: SenderTo<R>,
{
    type Operation = <<LateDomain<S, R::Env> as Domain>::BulkChunksMut<S, T, F> as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        let domain = <LateDomain<S, R::Env>>::default();
        domain.transform_bulk_chunks_mut(self, Some(receiver.env())).connect(receiver)
    }
}

impl<S, T, F, R> SenderTo<R> for BulkChunksMutImpl<S, T, F>
where
    S: Sender + SenderTo<BulkChunksMutReceiver<T, F, R>>,
    S::Value: AsMut<[T]>,
    F: BulkChunksMutFn<T, S::Error>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(BulkChunksMutReceiver {
            chunk_len: self.chunk_len,
            f: SyncWrapper::new(self.f),
            rcvr: receiver,
            _t: PhantomData,
        })
    }
}

/// The receiver the default `bulk_chunks_mut` connects its predecessor to.
pub struct BulkChunksMutReceiver<T, F, R> {
    chunk_len: usize,
    f: SyncWrapper<F>,
    rcvr: R,
    _t: PhantomData<fn(&mut T)>,
}

impl<V: AsMut<[T]>, T, E, F: BulkChunksMutFn<T, E>, R: Receiver<V, E>> Receiver<V, E>
    for BulkChunksMutReceiver<T, F, R>
{
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, mut value: V) {
        let BulkChunksMutReceiver { chunk_len, f, rcvr, .. } = self;
        let f = f.into_inner();
        // `AsMut` is user code too: a panic in it is the completion.
        let run = match catch(|| value.as_mut()) {
            Ok(items) => {
                let count = chunk_count(items.len(), chunk_len);
                let mut chunks = items.chunks_mut(chunk_len);
                run_in_order(&rcvr, count, |c| f.call(c, chunks.next().expect("bulk_chunks_mut: one chunk per index")))
            }
            Err(p) => Err(p),
        };
        finish(rcvr, value, f, run);
    }
    fn set_error(self, error: E) {
        forward_error(self.f.into_inner(), self.rcvr, error)
    }
    fn set_stopped(self) {
        forward_stopped(self.f.into_inner(), self.rcvr)
    }
    fn set_panic(self, panic: Panic) {
        forward_panic(self.f.into_inner(), self.rcvr, panic)
    }
}

/// Early customization entry used by
/// [`SenderExt::bulk_chunks_mut`](crate::SenderExt::bulk_chunks_mut).
#[track_caller]
pub(crate) fn bulk_chunks_mut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>(
    sndr: S,
    grain: Grain,
    chunk_len: usize,
    f: F,
) -> <S::Domain as MaybeDomain>::EarlyBulkChunksMut<S, T, F>
where
    S::Value: AsMut<[T]>,
{
    <S::Domain as MaybeDomain>::early_bulk_chunks_mut(BulkChunksMut::new(sndr, chunk_len, f).with_grain(grain))
}
