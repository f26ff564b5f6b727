//! The floors of the fork-join and spawn benchmarks: `rayon::join` recursions that add
//! only what our semantics require of every node, each done the cheapest way we know, so
//! that a group can report how much of our time over `rayon::join` the semantics cost
//! any implementation (floor ÷ `rayon::join`) and how much is our own machinery
//! (ours ÷ floor). Shared by `benches/pool.rs` (erased recursion, also completing
//! through receivers) and `benches/scope.rs` (one spawn per node).
//!
//! What a node needs beyond `rayon::join`'s stack frame is storage that outlives the
//! frame that made it: an erased sender's block, or a spawned operation, which the
//! spawning frame does not wait for. [`Slot`] is that storage at its cheapest: a block
//! popped from and pushed back on a per-thread free list, a few instructions each way,
//! never a call into the allocator once warm.

use std::cell::Cell;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::ptr::{self, NonNull};

/// Words of payload in a block: with the link, 64 bytes, smaller than any of our
/// operations.
const WORDS: usize = 7;

struct Block {
    next: *mut Block,
    data: MaybeUninit<[u64; WORDS]>,
}

/// The calling thread's free blocks, given back to the allocator when the thread exits.
struct FreeList(Cell<*mut Block>);

impl Drop for FreeList {
    fn drop(&mut self) {
        let mut next = self.0.get();
        while !next.is_null() {
            // SAFETY: every block on the list came from `Box::into_raw` and is on the
            // list once; nothing else refers to it.
            let block = unsafe { Box::from_raw(next) };
            next = block.next;
        }
    }
}

thread_local! {
    static FREE: FreeList = const { FreeList(Cell::new(ptr::null_mut())) };
}

/// A `T` in a block of its own, from the per-thread free list; the block goes back on the
/// list of the thread that drops the slot.
pub struct Slot<T: Copy> {
    block: NonNull<Block>,
    _value: PhantomData<T>,
}

// SAFETY: the slot owns its block exclusively and holds only a `T`, which is `Send`.
unsafe impl<T: Copy + Send> Send for Slot<T> {}

impl<T: Copy> Slot<T> {
    /// A slot holding `value`.
    #[inline]
    pub fn new(value: T) -> Self {
        const {
            assert!(size_of::<T>() <= size_of::<[u64; WORDS]>() && align_of::<T>() <= align_of::<u64>());
        }
        let reused = FREE
            .try_with(|free| {
                let head = free.0.get();
                if !head.is_null() {
                    // SAFETY: `head` is a block on this thread's list, owned by the list.
                    free.0.set(unsafe { (*head).next });
                }
                head
            })
            .unwrap_or(ptr::null_mut());
        let block = NonNull::new(reused).unwrap_or_else(|| {
            NonNull::from(Box::leak(Box::new(Block { next: ptr::null_mut(), data: MaybeUninit::uninit() })))
        });
        // SAFETY: the block is ours alone, and `T` fits its payload (checked above).
        unsafe { (&raw mut (*block.as_ptr()).data).cast::<T>().write(value) };
        Slot { block, _value: PhantomData }
    }

    /// The value.
    #[inline]
    pub fn get(&self) -> T {
        // SAFETY: `new` wrote a `T` there, which is `Copy`.
        unsafe { (&raw const (*self.block.as_ptr()).data).cast::<T>().read() }
    }
}

impl<T: Copy> Drop for Slot<T> {
    #[inline]
    fn drop(&mut self) {
        let block = self.block.as_ptr();
        let kept = FREE.try_with(|free| {
            // SAFETY: the block is ours alone; it now belongs to the list.
            unsafe { (*block).next = free.0.get() };
            free.0.set(block);
        });
        if kept.is_err() {
            // The thread is exiting and its list is gone.
            // SAFETY: the block came from `Box::leak` in `new` and is no longer used.
            drop(unsafe { Box::from_raw(block) });
        }
    }
}
