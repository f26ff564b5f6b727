//! Parallel collect into a `Vec`, in order: `bulk_map_collect`, `bulk_try_map_collect`
//! and `bulk_filter_map_collect` (rayon's `map(..).collect()`, `collect::<Result<..>>()`
//! and `filter_map(..).collect()`).
//!
//! Each is three stages, built from the customizable `bulk_chunked` (so every domain that
//! runs `bulk_chunked` runs them, in parallel where it splits, with no hook of their own):
//!
//! 1. a `then` ([`CollectStart`], [`FilterStart`]) moves the predecessor's value into a
//!    state beside the output;
//! 2. `bulk_chunked` of the shape (and the grain) runs a chunk function ([`MapChunk`],
//!    [`TryMapChunk`], [`FilterMapChunk`]) over it;
//! 3. a `then` ([`CollectFinish`], [`FilterFinish`]) drops the value and returns the
//!    `Vec`.
//!
//! **Indexed** (map). The start reserves the `Vec`'s capacity, `shape` elements
//! ([`Slots`]). A call for `begin..end` claims that run of the spare capacity in a
//! registry under a lock, writes element `i` at index `i`, a guard counting what it wrote,
//! and marks the run done, merged with its done neighbours. The finish checks that one
//! done run covers `0..shape` and sets the length. A call that panics or fails drops what
//! it wrote; a bulk that fails, stops or panics drops its value, the state, whose `Drop`
//! drops the elements of the done runs and frees the buffer. Nothing unwritten is read,
//! and nothing written leaks.
//!
//! The registry is what keeps this sound under any domain: `bulk_chunked` is a safe hook,
//! so a domain of one's own may call a chunk function twice, concurrently, or outside the
//! shape. A claim that overlaps another, or reaches past the shape, panics before writing
//! anything, and a finish whose runs do not cover the shape panics, after which the state
//! drops what was written. It costs two uncontended locks per call, and a call runs up to
//! 65,536 indices on the pool.
//!
//! **Unindexed** (filter). Each call appends what its chunk keeps to the part that ends
//! where the chunk begins (on the pool, the part of the piece it belongs to), or starts a
//! part of its own, and files it, with its range, under a lock ([`FilterState`]); the
//! finish sorts the parts by their range, checks they cover the shape, and appends them,
//! in order, to the first one. No `unsafe`: a failure drops the parts with the state.

use std::marker::PhantomData;
use std::mem::{self, MaybeUninit};
use std::ptr::{self, NonNull};

use crate::adaptors::bulk::{BulkChunkedFn, Grain};
use crate::adaptors::then::{Then, ThenFn, ThenImpl};
use crate::domain::MaybeDomain;
use crate::sender::Sender;
use crate::sync::{Mutex, lock};

/// `bulk_chunked` of `S` as the predecessor's domain customizes it early.
type EarlyChunked<S, F> = <<S as Sender>::Domain as MaybeDomain>::EarlyBulkChunked<S, F>;

/// The sender of [`SenderExt::bulk_map_collect`](crate::SenderExt::bulk_map_collect):
/// the value's state, `bulk_chunked` over it, and the finish.
pub type MapCollect<S, T, F> = ThenImpl<EarlyChunked<ThenImpl<S, CollectStart<T>>, MapChunk<F>>, CollectFinish>;

/// The sender of [`SenderExt::bulk_try_map_collect`](crate::SenderExt::bulk_try_map_collect).
pub type TryMapCollect<S, T, F> = ThenImpl<EarlyChunked<ThenImpl<S, CollectStart<T>>, TryMapChunk<F>>, CollectFinish>;

/// The sender of
/// [`SenderExt::bulk_filter_map_collect`](crate::SenderExt::bulk_filter_map_collect).
pub type FilterMapCollect<S, T, F> =
    ThenImpl<EarlyChunked<ThenImpl<S, FilterStart<T>>, FilterMapChunk<F>>, FilterFinish>;

/// A run of indices of the output, claimed by one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    begin: usize,
    end: usize,
    /// Every element of the run is written (and owned by the [`Slots`]).
    done: bool,
}

/// The output of an indexed collect: the reserved capacity of a `Vec<T>` and the registry
/// of the runs of it that calls claimed.
///
/// Invariants: the buffer is a `Vec<T>`'s allocation of capacity `cap >= shape` (or
/// dangling with `cap == 0` once the finish took it); the runs lie in
/// `0..shape` and do not overlap; the elements of a `done` run are initialized and owned
/// here; every other slot is uninitialized, or being written by the one call that claimed
/// it.
pub struct Slots<T> {
    ptr: NonNull<T>,
    cap: usize,
    shape: usize,
    runs: Mutex<Vec<Run>>,
}

// SAFETY: `Slots` owns its elements as a `Vec<T>` does.
unsafe impl<T: Send> Send for Slots<T> {}
// SAFETY: through `&Slots` a call only moves `T`s in (from the thread it runs on) into
// the run it claimed, which no other call touches; no `&T` is ever handed out.
unsafe impl<T: Send> Sync for Slots<T> {}

impl<T> Slots<T> {
    fn new(shape: usize) -> Self {
        let mut buf = mem::ManuallyDrop::new(Vec::<T>::with_capacity(shape));
        // SAFETY: a `Vec`'s pointer is never null.
        let ptr = unsafe { NonNull::new_unchecked(buf.as_mut_ptr()) };
        Slots { ptr, cap: buf.capacity(), shape, runs: Mutex::new(Vec::new()) }
    }

    /// Claims `begin..end` (not empty) for the calling chunk.
    ///
    /// # Panics
    ///
    /// If the run reaches past the shape or overlaps a run claimed before: the domain ran
    /// an index twice, or one outside the shape.
    fn claim(&self, begin: usize, end: usize) {
        assert!(
            begin < end && end <= self.shape,
            "collect: bulk_chunked ran the chunk {begin}..{end} outside the shape"
        );
        let free = {
            let mut runs = lock(&self.runs);
            let free = runs.iter().all(|r| r.end <= begin || end <= r.begin);
            if free {
                runs.push(Run { begin, end, done: false });
            }
            free
        };
        // Not under the lock: the crate's locks are never poisoned.
        assert!(free, "collect: bulk_chunked ran an index of {begin}..{end} twice");
    }

    /// Marks the claimed run `begin..end` written, merged with the done runs it touches.
    fn done(&self, begin: usize, end: usize) {
        let mut runs = lock(&self.runs);
        let k =
            runs.iter().position(|r| (r.begin, r.end, r.done) == (begin, end, false)).expect("collect: a claimed run");
        let mut run = runs.swap_remove(k);
        run.done = true;
        if let Some(k) = runs.iter().position(|r| r.done && r.end == run.begin) {
            run.begin = runs.swap_remove(k).begin;
        }
        if let Some(k) = runs.iter().position(|r| r.done && r.begin == run.end) {
            run.end = runs.swap_remove(k).end;
        }
        runs.push(run);
    }

    /// Writes `item(i)` at `i` for each `i` in `begin..end`, in order, stopping at the
    /// first error (`item` panicking or failing leaves nothing written).
    fn fill<E>(&self, begin: usize, end: usize, item: impl FnMut(usize) -> Result<T, E>) -> Result<(), E> {
        if begin == end {
            return Ok(());
        }
        self.claim(begin, end);
        // SAFETY: `begin < end <= shape <= cap`: the run is within the allocation; it is
        // ours alone (claimed) and not written yet, so a unique `&mut` to it as
        // uninitialized slots is sound.
        let run = unsafe {
            std::slice::from_raw_parts_mut(self.ptr.as_ptr().add(begin).cast::<MaybeUninit<T>>(), end - begin)
        };
        write_run(run, begin, item)?;
        self.done(begin, end);
        Ok(())
    }

    /// The `Vec` of the `shape` elements, once one done run covers them.
    ///
    /// # Panics
    ///
    /// If the runs do not cover the shape (the domain's `bulk_chunked` completed with its
    /// value without running every index once); the elements written are dropped.
    fn into_vec(mut self) -> Vec<T> {
        let runs = mem::take(&mut *lock(&self.runs));
        let whole = self.shape == 0 || runs[..] == [Run { begin: 0, end: self.shape, done: true }];
        if !whole {
            *lock(&self.runs) = runs;
            panic!("collect: bulk_chunked completed without running every index");
        }
        let (ptr, cap) = (mem::replace(&mut self.ptr, NonNull::dangling()), mem::take(&mut self.cap));
        // SAFETY: the allocation of a `Vec<T>` of capacity `cap` whose first `shape`
        // elements are written (the one done run); `self` no longer owns either.
        unsafe { Vec::from_raw_parts(ptr.as_ptr(), self.shape, cap) }
    }
}

impl<T> Drop for Slots<T> {
    fn drop(&mut self) {
        // SAFETY: the allocation of a `Vec<T>` of capacity `cap` (or dangling with 0):
        // freed when this returns, even if an element's `Drop` panics.
        let _buf = unsafe { Vec::from_raw_parts(self.ptr.as_ptr(), 0, self.cap) };
        let runs = mem::take(&mut *lock(&self.runs));
        for run in runs.iter().filter(|r| r.done) {
            // SAFETY: a done run's elements are initialized and owned here, and no run
            // overlaps another: each is dropped once.
            unsafe {
                let first = self.ptr.as_ptr().add(run.begin);
                ptr::drop_in_place(ptr::slice_from_raw_parts_mut(first, run.end - run.begin));
            }
        }
    }
}

/// Writes `item(begin + k)` into `run[k]`, in order, stopping at the first error;
/// `item` panicking or failing leaves nothing written. `run` is an argument (not a field)
/// so that the compiler knows the writes alias nothing `item` reads, and keeps what it
/// reads through the value in registers.
#[inline]
fn write_run<T, E>(
    run: &mut [MaybeUninit<T>],
    begin: usize,
    mut item: impl FnMut(usize) -> Result<T, E>,
) -> Result<(), E> {
    let mut written = Written { run, len: 0 };
    while written.len < written.run.len() {
        let x = item(begin + written.len)?;
        written.run[written.len].write(x);
        written.len += 1;
    }
    mem::forget(written);
    Ok(())
}

/// The slots of a run and how many of them one call wrote so far: those are dropped if
/// the call panics or fails.
struct Written<'a, T> {
    run: &'a mut [MaybeUninit<T>],
    len: usize,
}

impl<T> Drop for Written<'_, T> {
    fn drop(&mut self) {
        let init: *mut [MaybeUninit<T>] = &mut self.run[..self.len];
        // SAFETY: the first `len` slots are written, by this call alone.
        unsafe { ptr::drop_in_place(init as *mut [T]) }
    }
}

/// The predecessor's value and the output of an indexed collect, shared by its calls.
pub struct CollectState<V, T> {
    value: V,
    slots: Slots<T>,
}

/// The `then` that starts an indexed collect: reserves `shape` elements beside the value.
pub struct CollectStart<T> {
    shape: usize,
    _t: PhantomData<fn() -> T>,
}

impl<V, T> ThenFn<V> for CollectStart<T> {
    type Output = CollectState<V, T>;
    fn call(self, value: V) -> CollectState<V, T> {
        CollectState { value, slots: Slots::new(self.shape) }
    }
}

/// The `bulk_chunked` function of [`MapCollect`]: writes `map(i, &value)` at `i`.
pub struct MapChunk<F>(F);

impl<V, T, E, F: Fn(usize, &V) -> T> BulkChunkedFn<CollectState<V, T>, E> for MapChunk<F> {
    #[inline]
    fn call(&self, begin: usize, end: usize, state: &CollectState<V, T>) -> Result<(), E> {
        state.slots.fill(begin, end, |i| Ok((self.0)(i, &state.value)))
    }
}

/// The `bulk_chunked` function of [`TryMapCollect`]: writes `map(i, &value)?` at `i`.
pub struct TryMapChunk<F>(F);

impl<V, T, E, F: Fn(usize, &V) -> Result<T, E>> BulkChunkedFn<CollectState<V, T>, E> for TryMapChunk<F> {
    #[inline]
    fn call(&self, begin: usize, end: usize, state: &CollectState<V, T>) -> Result<(), E> {
        state.slots.fill(begin, end, |i| (self.0)(i, &state.value))
    }
}

/// The `then` that ends an indexed collect: drops the value, then returns the `Vec`.
pub struct CollectFinish;

impl<V, T> ThenFn<CollectState<V, T>> for CollectFinish {
    type Output = Vec<T>;
    fn call(self, state: CollectState<V, T>) -> Vec<T> {
        let CollectState { value, slots } = state;
        drop(value);
        slots.into_vec()
    }
}

/// The predecessor's value and the parts of a filter-collect, shared by its calls: each
/// call's range and what it kept.
pub struct FilterState<V, T> {
    value: V,
    shape: usize,
    parts: Mutex<Vec<(usize, usize, Vec<T>)>>,
}

/// The `then` that starts a filter-collect.
pub struct FilterStart<T> {
    shape: usize,
    _t: PhantomData<fn() -> T>,
}

impl<V, T> ThenFn<V> for FilterStart<T> {
    type Output = FilterState<V, T>;
    fn call(self, value: V) -> FilterState<V, T> {
        FilterState { value, shape: self.shape, parts: Mutex::new(Vec::new()) }
    }
}

/// The `bulk_chunked` function of [`FilterMapCollect`]: keeps the `Some`s of
/// `f(i, &value)` of its chunk, in order, in a `Vec` of its own.
pub struct FilterMapChunk<F>(F);

impl<V, T, E, F: Fn(usize, &V) -> Option<T>> BulkChunkedFn<FilterState<V, T>, E> for FilterMapChunk<F> {
    #[inline]
    fn call(&self, begin: usize, end: usize, state: &FilterState<V, T>) -> Result<(), E> {
        assert!(end <= state.shape, "collect: bulk_chunked ran the chunk {begin}..{end} outside the shape");
        if begin < end {
            // The part that ends where this chunk begins (on the pool, most often the
            // chunk before it in the same piece) grows by this chunk: a piece fills one
            // `Vec`, not one per call.
            let (start, mut kept) = {
                let mut parts = lock(&state.parts);
                match parts.iter().position(|&(_, e, _)| e == begin) {
                    Some(k) => {
                        let (b, _, kept) = parts.swap_remove(k);
                        (b, kept)
                    }
                    None => (begin, Vec::new()),
                }
            };
            kept.extend((begin..end).filter_map(|i| (self.0)(i, &state.value)));
            lock(&state.parts).push((start, end, kept));
        }
        Ok(())
    }
}

/// The `then` that ends a filter-collect: drops the value, then appends the parts in the
/// order of their ranges.
///
/// # Panics
///
/// If the parts do not cover the shape once each (the domain's `bulk_chunked` completed
/// with its value without running every index once).
pub struct FilterFinish;

impl<V, T> ThenFn<FilterState<V, T>> for FilterFinish {
    type Output = Vec<T>;
    fn call(self, state: FilterState<V, T>) -> Vec<T> {
        let FilterState { value, shape, parts } = state;
        drop(value);
        let mut parts = mem::take(&mut *lock(&parts));
        parts.sort_unstable_by_key(|&(begin, _, _)| begin);
        let mut next = 0;
        for &(begin, end, _) in &parts {
            assert!(begin == next, "collect: bulk_chunked did not run every index once");
            next = end;
        }
        assert!(next == shape, "collect: bulk_chunked completed without running every index");
        // The first part is the output: it grows (in place, where the allocator can) to
        // take the others, copied once each.
        let rest: usize = parts.iter().skip(1).map(|(_, _, kept)| kept.len()).sum();
        let mut parts = parts.into_iter().map(|(_, _, kept)| kept);
        let mut out = parts.next().unwrap_or_default();
        out.reserve_exact(rest);
        for mut kept in parts {
            out.append(&mut kept);
        }
        out
    }
}

/// Early customization entry of [`SenderExt::bulk_map_collect`](crate::SenderExt::bulk_map_collect).
pub(crate) fn bulk_map_collect<S, T, F>(sndr: S, grain: Grain, shape: usize, map: F) -> MapCollect<S, T, F>
where
    S: Sender,
    F: Fn(usize, &S::Value) -> T,
{
    let start = Then::new(sndr, CollectStart { shape, _t: PhantomData }).lower();
    let chunked = crate::adaptors::bulk::bulk_chunked(start, grain, shape, MapChunk(map));
    Then::new(chunked, CollectFinish).lower()
}

/// Early customization entry of
/// [`SenderExt::bulk_try_map_collect`](crate::SenderExt::bulk_try_map_collect).
pub(crate) fn bulk_try_map_collect<S, T, F>(sndr: S, grain: Grain, shape: usize, map: F) -> TryMapCollect<S, T, F>
where
    S: Sender,
    F: Fn(usize, &S::Value) -> Result<T, S::Error>,
{
    let start = Then::new(sndr, CollectStart { shape, _t: PhantomData }).lower();
    let chunked = crate::adaptors::bulk::bulk_chunked(start, grain, shape, TryMapChunk(map));
    Then::new(chunked, CollectFinish).lower()
}

/// Early customization entry of
/// [`SenderExt::bulk_filter_map_collect`](crate::SenderExt::bulk_filter_map_collect).
pub(crate) fn bulk_filter_map_collect<S, T, F>(sndr: S, grain: Grain, shape: usize, f: F) -> FilterMapCollect<S, T, F>
where
    S: Sender,
    F: Fn(usize, &S::Value) -> Option<T>,
{
    let start = Then::new(sndr, FilterStart { shape, _t: PhantomData }).lower();
    let chunked = crate::adaptors::bulk::bulk_chunked(start, grain, shape, FilterMapChunk(f));
    Then::new(chunked, FilterFinish).lower()
}
