//! The per-thread recycler of heap blocks. A block is allocated once and freed when its
//! operation completes, often on another thread than the one that allocated it.
//! With the global allocator that pattern is slow where spawning matters most: when
//! one thread spawns and the workers complete (`main` spawning a million jobs), glibc
//! returns every block to the spawning thread's arena under its lock, and the profile of
//! the flat-spawn benchmark showed the spawning thread spending about 40% of its time in
//! `malloc` and in that lock. So small blocks are recycled here:
//!
//! - Every block starts with a 16-byte header naming its **owner** (the [`Remote`] of
//!   the thread that first allocated it) and its size **class** (a multiple of 64 bytes,
//!   up to [`MAX_SIZE`]). Larger or more aligned layouts go to the global allocator
//!   directly.
//! - A thread frees its own blocks onto a **local list** per class (plain pointer
//!   writes; at most [`LOCAL_CAP`] per class, the rest go back to the allocator).
//! - A thread freeing another thread's block links it onto its **outgoing chain**, and
//!   pushes the chain onto the owner's **remote stack** of its class with one
//!   compare-and-swap once it holds [`OUT_BATCH`] blocks, or when a block of another
//!   owner or class comes, or when the thread exits. (Two workers completing the work a
//!   thread spawns from outside the pool otherwise contend on that stack for every
//!   block.) At most `OUT_BATCH - 1` blocks per thread so wait to go home; the owner
//!   makes new ones meanwhile if it runs dry. The owner takes the whole stack of a
//!   class with one swap when its local list of that class runs dry, and, when the
//!   stack's count says it is short, makes it its local list as it is: a thread that
//!   only allocates (the spawning `main`) pays one atomic operation per batch instead
//!   of one per block, and touches each block only when it hands it out. (Walking every
//!   batch to sort or count it was half of that thread's time: each step is a cache
//!   miss on a line another core wrote last.) A block handed out prefetches the next
//!   one on the list, so that miss overlaps with the caller's work.
//! - The local list of a class holds at most about [`LOCAL_CAP`] blocks: a batch taken
//!   back that its count says is longer is cut there (walking that far), and the rest
//!   goes back to the allocator; a block the thread frees itself onto a full list goes
//!   back too. (Keeping every block a burst had in flight made them circulate, in an
//!   order that scrambles over time, so that each reuse missed the cache and the TLB.)
//! - A [`Remote`] is never freed: when its thread exits, the thread gives its lists back
//!   to the allocator and parks the `Remote` for the next thread to adopt. Blocks freed
//!   to it meanwhile wait there and are reused by the adopter (their header names the
//!   same `Remote`, so they are that thread's blocks from then on).
//!
//! Under loom, blocks come straight from the global allocator (the thread-local cache is
//! not modelled); the remote stack, the only shared structure, has its own loom model.
//! `--cfg senders_uncached_blocks` does the same in a normal build, so that a memory
//! checker sees every block freed and catches a use after free that recycling would hide
//! (`tools/valgrind.sh` builds the test binaries that way).

use std::alloc::{Layout, alloc, dealloc, handle_alloc_error};
use std::ptr::{self, NonNull};

use crate::sync::{AtomicPtr, AtomicUsize, Ordering};

/// The header in front of every recycled block.
#[repr(C, align(16))]
struct Header {
    owner: *const Remote,
    class: usize,
}

const HEADER: usize = size_of::<Header>();
/// Size classes are multiples of this (header included).
const GRAIN: usize = 64;
/// Number of classes: blocks up to `CLASSES * GRAIN` bytes, header included.
const CLASSES: usize = 16;
/// The largest value size (header excluded) that is recycled.
pub(crate) const MAX_SIZE: usize = CLASSES * GRAIN - HEADER;
/// The most blocks a thread keeps per class on its local list.
const LOCAL_CAP: usize = 1024;
/// The most blocks of another thread's that a thread holds before sending them home.
const OUT_BATCH: u32 = 32;

/// A free block: the link to the next one lives where the value was.
struct Free {
    next: *mut Free,
}

/// The remote stacks of one thread, one per class: blocks of its that other threads
/// freed.
pub(crate) struct Remote {
    stacks: [Stack; CLASSES],
}

/// One remote stack, with a count of the blocks pushed since it was last taken. The
/// count is only a hint (a push adds to it after its exchange, so a take may miss the
/// latest chain's count or see it before its blocks): it lets the owner take a stack
/// without walking it when it is short.
struct Stack {
    head: AtomicPtr<Free>,
    count: AtomicUsize,
}

impl Remote {
    fn new() -> Self {
        Remote {
            stacks: std::array::from_fn(|_| Stack {
                head: AtomicPtr::new(ptr::null_mut()),
                count: AtomicUsize::new(0),
            }),
        }
    }

    /// Pushes a chain of `len` free blocks of `class`, linked from `first` to `last`
    /// (from any thread).
    ///
    /// # Safety
    ///
    /// The blocks from `first` to `last` are free blocks of `class`, owned by the caller
    /// and linked through `next` (which `last`'s link is overwritten here), handed over
    /// here.
    unsafe fn push(&self, first: *mut Free, last: *mut Free, len: usize, class: usize) {
        let stack = &self.stacks[class];
        let head_of_class = &stack.head;
        let mut head = head_of_class.load(Ordering::Relaxed);
        loop {
            // SAFETY: the chain is ours until the exchange publishes it.
            unsafe { (*last).next = head };
            // Release: the owner that takes the stack sees the links (and that the
            // blocks' last users are done with them).
            match head_of_class.compare_exchange_weak(head, first, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => head = now,
            }
        }
        // A hint only: relaxed.
        stack.count.fetch_add(len, Ordering::Relaxed);
    }

    /// Takes every block of `class` pushed so far (by the owner only, or by the thread
    /// parking it): a chain linked through `next`, and about how many blocks it holds.
    fn take(&self, class: usize) -> (*mut Free, usize) {
        let stack = &self.stacks[class];
        // Acquire: pairs with the pushes' release.
        let chain = stack.head.swap(ptr::null_mut(), Ordering::Acquire);
        (chain, stack.count.swap(0, Ordering::Relaxed))
    }
}

/// The class of a value layout, if it is recycled.
fn class_of(layout: Layout) -> Option<usize> {
    (layout.align() <= HEADER && layout.size() <= MAX_SIZE).then(|| (layout.size() + HEADER).div_ceil(GRAIN) - 1)
}

/// The layout of a whole block of `class`.
fn block_layout(class: usize) -> Layout {
    // Cannot fail: a small multiple of 64 with alignment 16.
    Layout::from_size_align((class + 1) * GRAIN, HEADER).expect("block layout")
}

/// Moves `value` into a block: a recycled one for small layouts, the global allocator's
/// otherwise.
#[inline]
pub(crate) fn new<T>(value: T) -> NonNull<T> {
    let ptr = uninit::<T>();
    // SAFETY: fresh memory, aligned for a `T`.
    unsafe { ptr.as_ptr().write(value) };
    ptr
}

/// A block for a `T`, uninitialized, for a caller that writes the value field by field
/// (a value with a large union, of which only a small member is live, would otherwise be
/// copied whole). Freed with [`free`] or [`drop_and_free`] like a block from [`new`],
/// once its value is written.
#[inline]
pub(crate) fn uninit<T>() -> NonNull<T> {
    uninit_layout(Layout::new::<T>()).cast()
}

/// A block for `len` values of `T` side by side, uninitialized. Freed with
/// [`free_array`] with the same `len`.
#[inline]
pub(crate) fn uninit_array<T>(len: usize) -> NonNull<T> {
    uninit_layout(Layout::array::<T>(len).expect("block: array too large")).cast()
}

#[inline]
fn uninit_layout(layout: Layout) -> NonNull<u8> {
    match class_of(layout) {
        // SAFETY: a fresh block of `class`; the value lives right after the header, which
        // keeps 16-byte alignment.
        Some(class) if layout.size() > 0 => unsafe { NonNull::new_unchecked(cache::alloc(class).add(HEADER)) },
        _ => global_alloc(layout),
    }
}

/// Frees the memory of a block from [`new`], without dropping its contents.
///
/// # Safety
///
/// `ptr` came from `new::<T>`, with the same `T`, and is freed once;
/// its contents are dropped or moved out already.
#[inline]
pub(crate) unsafe fn free<T>(ptr: NonNull<T>) {
    // SAFETY: forwarded.
    unsafe { free_layout(ptr.cast(), Layout::new::<T>()) }
}

/// Frees the memory of a block from [`uninit_array`], without dropping its contents.
///
/// # Safety
///
/// `ptr` came from `uninit_array::<T>(len)`, with the same `T` and `len`, and is freed
/// once; its contents are dropped or moved out already.
#[inline]
pub(crate) unsafe fn free_array<T>(ptr: NonNull<T>, len: usize) {
    let layout = Layout::array::<T>(len).expect("block: array too large");
    // SAFETY: forwarded.
    unsafe { free_layout(ptr.cast(), layout) }
}

/// # Safety
///
/// `ptr` came from `uninit_layout(layout)` and is freed once.
#[inline]
unsafe fn free_layout(ptr: NonNull<u8>, layout: Layout) {
    match class_of(layout) {
        // SAFETY: the block was allocated with this header in front of the value.
        Some(_) if layout.size() > 0 => unsafe { cache::free(ptr.as_ptr().sub(HEADER)) },
        // SAFETY: allocated by `global_alloc` with this layout (or dangling for a ZST).
        _ => unsafe { global_free(ptr, layout) },
    }
}

/// Runs `drop_contents` (which drops or moves out what the block holds), then frees the
/// block, even if `drop_contents` unwinds (a user `Drop` that panics): the memory is not
/// leaked, and the panic goes on.
///
/// # Safety
///
/// As for [`free`], once `drop_contents` has returned or unwound: `drop_contents` leaves
/// nothing in the block that still needs dropping, also when it unwinds (drop glue goes on
/// dropping the other fields of a value whose field panics in `Drop`).
#[inline]
pub(crate) unsafe fn free_after<T, R>(ptr: NonNull<T>, drop_contents: impl FnOnce() -> R) -> R {
    struct FreeOnExit<T>(NonNull<T>);
    impl<T> Drop for FreeOnExit<T> {
        #[inline]
        fn drop(&mut self) {
            // SAFETY: the caller's contract: the contents are gone, and this runs once.
            unsafe { free(self.0) }
        }
    }
    let _free = FreeOnExit(ptr);
    drop_contents()
}

/// Drops the value of a block from [`new`] and frees the block, also when the value's
/// `Drop` panics (see [`free_after`]).
///
/// # Safety
///
/// `ptr` came from `new::<T>`, holds a live value, and is dropped and freed once.
pub(crate) unsafe fn drop_and_free<T>(ptr: NonNull<T>) {
    // SAFETY: the caller's contract; `drop_in_place` drops every field even when one
    // panics, so nothing is left to drop when the block is freed.
    unsafe { free_after(ptr, || ptr::drop_in_place(ptr.as_ptr())) }
}

fn global_alloc(layout: Layout) -> NonNull<u8> {
    if layout.size() == 0 {
        // Aligned for the layout, as `NonNull::dangling` is for a type.
        return NonNull::new(ptr::without_provenance_mut(layout.align())).expect("an alignment is not zero");
    }
    // SAFETY: the layout has a non-zero size.
    let raw = unsafe { alloc(layout) };
    NonNull::new(raw.cast()).unwrap_or_else(|| handle_alloc_error(layout))
}

/// # Safety
///
/// `ptr` came from `global_alloc` with `layout`.
unsafe fn global_free(ptr: NonNull<u8>, layout: Layout) {
    if layout.size() != 0 {
        // SAFETY: the caller's contract.
        unsafe { dealloc(ptr.as_ptr(), layout) }
    }
}

/// A new block of `class` from the global allocator, owned by `owner`.
fn fresh_block(class: usize, owner: *const Remote) -> *mut u8 {
    let layout = block_layout(class);
    // SAFETY: non-zero size.
    let raw = unsafe { alloc(layout) };
    if raw.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: fresh memory with room and alignment for the header.
    unsafe { raw.cast::<Header>().write(Header { owner, class }) };
    raw
}

/// Gives a block back to the global allocator.
///
/// # Safety
///
/// `block` is a free block (header included), not on any list.
unsafe fn release_block(block: *mut u8) {
    // SAFETY: the header is intact while the block exists.
    let class = unsafe { (*block.cast::<Header>()).class };
    // SAFETY: allocated by `fresh_block` with this class's layout.
    unsafe { dealloc(block, block_layout(class)) }
}

/// The free-list link of a free block, which lives after its header.
fn link(block: *mut u8) -> *mut Free {
    block.wrapping_add(HEADER).cast()
}

/// The block a link belongs to.
fn block_of(free: *mut Free) -> *mut u8 {
    free.cast::<u8>().wrapping_sub(HEADER)
}

#[cfg(not(any(loom, senders_uncached_blocks)))]
mod cache;
#[cfg(any(loom, senders_uncached_blocks))]
#[path = "recycler/uncached.rs"]
mod cache;

#[cfg(all(test, not(any(loom, senders_uncached_blocks))))]
mod tests;

#[cfg(all(test, loom))]
mod loom_tests {
    //! The remote stack: pushes of a chain and of a single block from two threads
    //! against the owner taking it; every block is taken exactly once, with its link
    //! intact.
    use super::*;
    use loom::sync::Arc;

    #[test]
    fn concurrent_pushes_and_take_lose_nothing() {
        loom::model(|| {
            let remote = Arc::new(Remote::new());
            let blocks: Vec<usize> =
                (0..3).map(|_| Box::into_raw(Box::new(Free { next: ptr::null_mut() })).addr()).collect();
            // The first pusher sends a chain of two (as an outgoing chain), the second one
            // block.
            // SAFETY: the blocks are ours until pushed.
            unsafe { (*(blocks[0] as *mut Free)).next = blocks[1] as *mut Free };
            let pushers: Vec<_> = [(blocks[0], blocks[1]), (blocks[2], blocks[2])]
                .into_iter()
                .map(|(first, last)| {
                    let r = remote.clone();
                    loom::thread::spawn(move || {
                        // SAFETY: each chain is pushed once, by its only holder.
                        unsafe { r.push(first as *mut Free, last as *mut Free, 1 + usize::from(first != last), 0) };
                    })
                })
                .collect();
            let mut taken = Vec::new();
            let mut collect = |mut f: *mut Free| {
                while !f.is_null() {
                    taken.push(f.addr());
                    // SAFETY: taken from the stack; the pusher's link is visible.
                    f = unsafe { (*f).next };
                }
            };
            collect(remote.take(0).0);
            for p in pushers {
                p.join().unwrap();
            }
            collect(remote.take(0).0);
            taken.sort_unstable();
            let mut want = blocks.clone();
            want.sort_unstable();
            assert_eq!(taken, want);
            for b in blocks {
                // SAFETY: from `Box::into_raw` above, freed once.
                drop(unsafe { Box::from_raw(b as *mut Free) });
            }
        });
    }
}
