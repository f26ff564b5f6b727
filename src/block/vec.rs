//! `BlockSlice` and `BlockVec`: a run-time number of values in one recycled block.

use std::ptr::NonNull;

use super::recycler::{free_array, uninit_array};

/// `len` values side by side in one recycled heap block (`crate::block`), which never
/// moves: the value cells and the operation states of a run-time number of children.
pub struct BlockSlice<T> {
    ptr: NonNull<T>,
    len: usize,
}

// SAFETY: owns its values as a `Box<[T]>` would.
unsafe impl<T: Send> Send for BlockSlice<T> {}
// SAFETY: as above: a shared reference gives shared access to the values only.
unsafe impl<T: Sync> Sync for BlockSlice<T> {}

impl<T> BlockSlice<T> {
    /// `len` values, `value(i)` for each `i` in order, in a fresh block.
    pub(crate) fn new(len: usize, mut value: impl FnMut(usize) -> T) -> Self {
        Self::new_at(len, |i, _| value(i))
    }

    /// As [`new`](Self::new), where `value(i, at)` is also told the address `at` that
    /// value `i` will be written to (uninitialized when it is called).
    pub(crate) fn new_at(len: usize, mut value: impl FnMut(usize, *mut T) -> T) -> Self {
        /// The values written so far; dropped with the block if `values` unwinds (a
        /// child's `connect` panicked).
        struct Partial<T> {
            ptr: NonNull<T>,
            len: usize,
            written: usize,
        }
        impl<T> Drop for Partial<T> {
            fn drop(&mut self) {
                // SAFETY: the first `written` values were written, and the block is this
                // allocation of `len` values, freed once, here.
                unsafe {
                    std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.written).drop_in_place();
                    free_array(self.ptr, self.len);
                }
            }
        }
        let mut partial = Partial { ptr: uninit_array::<T>(len), len, written: 0 };
        while partial.written < len {
            // SAFETY: in bounds of the block of `len` values.
            let at = unsafe { partial.ptr.as_ptr().add(partial.written) };
            let v = value(partial.written, at);
            // SAFETY: in bounds, written once.
            unsafe { at.write(v) };
            partial.written += 1;
        }
        let this = BlockSlice { ptr: partial.ptr, len };
        std::mem::forget(partial);
        this
    }

    /// The values, shared.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: `len` initialized values in the block, alive as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// Value `i`, by raw pointer: its neighbours may be in use (running children), so no
    /// reference to the whole slice is made.
    pub(crate) fn at(this: *const Self, i: usize) -> *mut T {
        // SAFETY: reading the fields of a live `BlockSlice`; the arithmetic stays in the
        // block (callers pass `i` below its length).
        unsafe { (*this).ptr.as_ptr().add(i) }
    }
}

impl<T> Drop for BlockSlice<T> {
    fn drop(&mut self) {
        // SAFETY: the values are initialized and nobody uses them any more (the
        // operation is dropped only after it completed, or unstarted); the block is
        // freed once.
        unsafe {
            // Freed also when a value's drop panics (the others are still dropped).
            let _free = FreeArrayOnExit { ptr: self.ptr, len: self.len };
            std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len).drop_in_place();
        }
    }
}

/// Values of one type in a recycled heap block (`crate::block`) that grows as a `Vec`
/// does: what [`when_all_iter`](crate::when_all_iter) collects its senders into, so that
/// a node of a recursion with a run-time number of children takes no memory from the
/// global allocator for them. Built from an iterator (`collect`), read by `len` and
/// consumed by `into_iter`.
pub struct BlockVec<T> {
    ptr: NonNull<T>,
    len: usize,
    cap: usize,
}

// SAFETY: owns its values as a `Vec<T>` would.
unsafe impl<T: Send> Send for BlockVec<T> {}
// SAFETY: as above; a shared reference gives no access to the values.
unsafe impl<T: Sync> Sync for BlockVec<T> {}

impl<T> BlockVec<T> {
    /// Room for `cap` values (as many as fit in no memory for a zero-sized `T`).
    fn with_capacity(cap: usize) -> Self {
        let cap = if size_of::<T>() == 0 { usize::MAX } else { cap };
        BlockVec { ptr: uninit_array::<T>(cap), len: 0, cap }
    }

    #[inline]
    fn push(&mut self, value: T) {
        if self.len == self.cap {
            self.grow();
        }
        // SAFETY: `len < cap` in a block of `cap` values; written once.
        unsafe { self.ptr.as_ptr().add(self.len).write(value) };
        self.len += 1;
    }

    /// Moves the values to a block twice as large (an iterator whose size hint was low).
    #[cold]
    fn grow(&mut self) {
        let cap = self.cap.checked_mul(2).expect("BlockVec: too many values").max(4);
        let ptr = uninit_array::<T>(cap);
        // SAFETY: the first `len` values are initialized and moved, not copied: the old
        // block is freed without dropping them.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), ptr.as_ptr(), self.len);
            free_array(self.ptr, self.cap);
        }
        self.ptr = ptr;
        self.cap = cap;
    }

    /// The number of values.
    ///
    /// ```
    /// use senders::adaptors::BlockVec;
    /// let v: BlockVec<i32> = (1..=3).collect();
    /// assert_eq!(v.len(), 3);
    /// ```
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no value.
    ///
    /// ```
    /// use senders::adaptors::BlockVec;
    /// assert!(std::iter::empty::<i32>().collect::<BlockVec<_>>().is_empty());
    /// assert!(!std::iter::once(1).collect::<BlockVec<_>>().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T> FromIterator<T> for BlockVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let iter = iter.into_iter();
        let mut values = BlockVec::with_capacity(iter.size_hint().0);
        for value in iter {
            values.push(value);
        }
        values
    }
}

impl<T> Drop for BlockVec<T> {
    fn drop(&mut self) {
        // SAFETY: the first `len` values are initialized and dropped once; the block is
        // this allocation of `cap` values, freed once, after them.
        unsafe {
            let _free = FreeArrayOnExit { ptr: self.ptr, len: self.cap };
            std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.len).drop_in_place();
        }
    }
}

/// Frees an array block when dropped, so that a value's `Drop` that unwinds does not
/// leak the block (its contents are dropped or moved out first).
struct FreeArrayOnExit<T> {
    ptr: NonNull<T>,
    len: usize,
}

impl<T> Drop for FreeArrayOnExit<T> {
    fn drop(&mut self) {
        // SAFETY: built only around a block of `len` values from `uninit_array`, whose
        // contents are gone by now, freed once, here.
        unsafe { free_array(self.ptr, self.len) }
    }
}

impl<T> IntoIterator for BlockVec<T> {
    type Item = T;
    type IntoIter = BlockVecIntoIter<T>;
    fn into_iter(self) -> BlockVecIntoIter<T> {
        let this = std::mem::ManuallyDrop::new(self);
        BlockVecIntoIter { ptr: this.ptr, next: 0, len: this.len, cap: this.cap }
    }
}

/// The values of a [`BlockVec`], moved out in order.
pub struct BlockVecIntoIter<T> {
    ptr: NonNull<T>,
    next: usize,
    len: usize,
    cap: usize,
}

// SAFETY: owns the values not yet moved out, as `BlockVec` does.
unsafe impl<T: Send> Send for BlockVecIntoIter<T> {}
// SAFETY: as above; a shared reference gives no access to the values.
unsafe impl<T: Sync> Sync for BlockVecIntoIter<T> {}

impl<T> Iterator for BlockVecIntoIter<T> {
    type Item = T;
    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.next == self.len {
            return None;
        }
        // SAFETY: value `next` is initialized and not moved out yet; it is moved out once,
        // as `next` moves past it.
        let value = unsafe { self.ptr.as_ptr().add(self.next).read() };
        self.next += 1;
        Some(value)
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.len - self.next;
        (n, Some(n))
    }
}

impl<T> ExactSizeIterator for BlockVecIntoIter<T> {}

impl<T> Drop for BlockVecIntoIter<T> {
    fn drop(&mut self) {
        // SAFETY: the values from `next` to `len` are initialized and not moved out; they
        // are dropped once, then the block of `cap` values is freed once.
        unsafe {
            let _free = FreeArrayOnExit { ptr: self.ptr, len: self.cap };
            let rest = self.ptr.as_ptr().add(self.next);
            std::ptr::slice_from_raw_parts_mut(rest, self.len - self.next).drop_in_place();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod block_vec_tests {
    use super::*;
    use std::rc::Rc;

    #[test]
    fn a_block_vec_grows_keeps_its_order_and_drops_what_is_not_moved_out() {
        let marker = Rc::new(());
        // No size hint: it starts empty and grows.
        let values: BlockVec<(usize, Rc<()>)> = (0..100).filter(|_| true).map(|i| (i, marker.clone())).collect();
        assert_eq!(values.len(), 100);
        assert_eq!(Rc::strong_count(&marker), 101);
        let mut it = values.into_iter();
        assert_eq!(it.len(), 100);
        for want in 0..40 {
            assert_eq!(it.next().map(|(i, _)| i), Some(want));
        }
        assert_eq!(Rc::strong_count(&marker), 61, "moved-out values are the caller's");
        drop(it);
        assert_eq!(Rc::strong_count(&marker), 1, "the 60 left were dropped with the iterator");
        let empty: BlockVec<Rc<()>> = std::iter::empty().collect();
        assert!(empty.is_empty());
        assert_eq!(empty.into_iter().next(), None);
        let zsts: BlockVec<()> = std::iter::repeat_n((), 1000).collect();
        assert_eq!(zsts.into_iter().count(), 1000);
    }

    /// A value whose drop panics: the others are dropped, and the block goes back to the
    /// recycler (the next block of its class is the same one), not lost.
    #[test]
    fn a_block_slice_whose_value_panics_in_drop_drops_the_rest_and_frees_its_block() {
        struct Bomb {
            _counted: Rc<()>,
            panics: bool,
        }
        impl Drop for Bomb {
            fn drop(&mut self) {
                if self.panics {
                    panic!("drop panicked");
                }
            }
        }
        let marker = Rc::new(());
        let slice = BlockSlice::new(5, |i| Bomb { _counted: marker.clone(), panics: i == 1 });
        let block = slice.as_slice().as_ptr();
        let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(move || drop(slice)));
        assert!(unwound.is_err());
        assert_eq!(Rc::strong_count(&marker), 1, "every value was dropped");
        // Without the recycler (`--cfg senders_uncached_blocks`, under memcheck) the block
        // goes back to the allocator, and memcheck reports it if it does not.
        #[cfg(not(senders_uncached_blocks))]
        {
            let next = BlockSlice::new(5, |_| Bomb { _counted: marker.clone(), panics: false });
            assert_eq!(next.as_slice().as_ptr(), block, "the block was freed to the recycler");
        }
        let _ = block;
    }
}
