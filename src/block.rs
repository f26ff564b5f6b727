//! Heap blocks, recycled per thread: the crate's one allocator for what it puts on the
//! heap while work runs.
//!
//! Its users: the block of every spawned operation (`spawn`, `spawn_future` and
//! `into_awaitable`, `scope/spawn.rs`), a [`Task`](crate::Task)'s frame and the large
//! operations it awaits (`task/mod.rs`), an [`AnySender`](crate::AnySender)'s erased
//! operation (`any.rs`), the block of an erased `schedule()` (`task/scheduler.rs`), and
//! the [`BlockSlice`] of a run-time number of children (`when_all`'s and `when_any`'s), and
//! the [`BlockVec`] that `when_all_iter` collects its senders into.
//! Each is allocated once and freed when its operation completes, often on another
//! thread than the one that allocated it.
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
#![cfg_attr(any(loom, senders_uncached_blocks), allow(dead_code))]

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
pub(crate) unsafe fn free_after<T, R>(ptr: NonNull<T>, drop_contents: impl FnOnce() -> R) -> R {
    struct FreeOnExit<T>(NonNull<T>);
    impl<T> Drop for FreeOnExit<T> {
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
mod cache {
    use super::*;
    use std::cell::Cell;
    use std::sync::Mutex;

    /// `Remote`s of exited threads, for new threads to adopt.
    static PARKED: Mutex<Vec<&'static Remote>> = Mutex::new(Vec::new());

    /// One thread's cache. Built by a constant expression, so the thread-local needs no
    /// lazy initialization on the hot path; its `Remote` is taken on first need.
    struct Cache {
        remote: Cell<*const Remote>,
        lists: [Cell<*mut Free>; CLASSES],
        lens: [Cell<u32>; CLASSES],
        /// The outgoing chain: free blocks of `out_owner`'s, of class `out_class`, linked
        /// from `out_first` to `out_last`; `out_len` of them (none: `out_first` null).
        out_owner: Cell<*const Remote>,
        out_class: Cell<usize>,
        out_first: Cell<*mut Free>,
        out_last: Cell<*mut Free>,
        out_len: Cell<u32>,
    }

    impl Cache {
        const fn new() -> Self {
            Cache {
                remote: Cell::new(ptr::null()),
                lists: [const { Cell::new(ptr::null_mut()) }; CLASSES],
                lens: [const { Cell::new(0) }; CLASSES],
                out_owner: Cell::new(ptr::null()),
                out_class: Cell::new(0),
                out_first: Cell::new(ptr::null_mut()),
                out_last: Cell::new(ptr::null_mut()),
                out_len: Cell::new(0),
            }
        }

        /// Adds a free block of another thread's to the outgoing chain, sending the chain
        /// home first if it holds blocks of another owner or class, and after if it is
        /// full.
        ///
        /// # Safety
        ///
        /// `free` is the link of a free block of `class` owned by `owner` (not null, not
        /// this thread's `Remote`), handed over here.
        #[inline]
        unsafe fn send(&self, owner: *const Remote, class: usize, free: *mut Free) {
            let first = self.out_first.get();
            if first.is_null() || !ptr::eq(self.out_owner.get(), owner) || self.out_class.get() != class {
                self.flush();
                self.out_owner.set(owner);
                self.out_class.set(class);
                self.out_last.set(free);
                self.out_len.set(0);
            } else {
                // SAFETY: the block is free and ours until sent.
                unsafe { (*free).next = first };
            }
            self.out_first.set(free);
            let len = self.out_len.get() + 1;
            self.out_len.set(len);
            if len >= OUT_BATCH {
                self.flush();
            }
        }

        /// Sends the outgoing chain home, if there is one.
        fn flush(&self) {
            let first = self.out_first.replace(ptr::null_mut());
            if !first.is_null() {
                // SAFETY: the chain holds free blocks of `out_owner`'s of `out_class`,
                // linked from `first` to `out_last`; `Remote`s are never freed.
                unsafe {
                    (*self.out_owner.get()).push(
                        first,
                        self.out_last.get(),
                        self.out_len.get() as usize,
                        self.out_class.get(),
                    )
                };
            }
        }

        /// This thread's `Remote`: a parked one adopted, or a new one, on first use.
        fn remote(&self) -> &'static Remote {
            let mut remote = self.remote.get();
            if remote.is_null() {
                let parked = PARKED.lock().unwrap_or_else(|e| e.into_inner()).pop();
                remote = parked.unwrap_or_else(|| Box::leak(Box::new(Remote::new())));
                self.remote.set(remote);
            }
            // SAFETY: `Remote`s are leaked, never freed.
            unsafe { &*remote }
        }

        #[inline]
        fn pop(&self, class: usize) -> Option<*mut u8> {
            let head = self.lists[class].get();
            if head.is_null() {
                return None;
            }
            // SAFETY: blocks on our local list are free and ours.
            let next = unsafe { (*head).next };
            self.lists[class].set(next);
            prefetch(next);
            // Wrapping: a batch taken back may hold more blocks than its count said (a
            // push that had not added its count yet); then `keep` sees a huge length and
            // gives this thread's own frees back to the allocator until the next batch
            // sets the length again. Slower for a while, never unbounded.
            self.lens[class].set(self.lens[class].get().wrapping_sub(1));
            Some(block_of(head))
        }

        /// Puts a free block of ours on its local list, or back to the allocator if the
        /// list holds [`LOCAL_CAP`] blocks (as `lens` counts them: a batch taken back
        /// sets it from the batch's count, a hint; see the module documentation).
        ///
        /// # Safety
        ///
        /// `block` is a free block owned by this thread's `Remote`.
        #[inline]
        unsafe fn keep(&self, block: *mut u8, class: usize) {
            let len = self.lens[class].get();
            if len as usize >= LOCAL_CAP {
                // SAFETY: free and on no list.
                unsafe { release_block(block) };
                return;
            }
            let free = link(block);
            // SAFETY: the block is free; its value area holds the link.
            unsafe { (*free).next = self.lists[class].get() };
            self.lists[class].set(free);
            self.lens[class].set(len + 1);
        }
    }

    impl Drop for Cache {
        fn drop(&mut self) {
            self.flush();
            if self.remote.get().is_null() {
                // Never allocated a block: nothing is ours.
                return;
            }
            for class in 0..CLASSES {
                // SAFETY: our local list and our remote stack: free blocks of ours, taken
                // off both.
                unsafe {
                    release_chain(self.lists[class].replace(ptr::null_mut()));
                    release_chain(self.remote().take(class).0);
                }
                self.lens[class].set(0);
            }
            PARKED.lock().unwrap_or_else(|e| e.into_inner()).push(self.remote());
        }
    }

    /// Asks the processor to bring the block behind `free` (its header and link) into
    /// the cache, ahead of the next `pop`. A hint: never faults, even on null.
    #[inline(always)]
    fn prefetch(free: *mut Free) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: `prefetcht0` needs only SSE, which every x86_64 processor has; it reads
        // nothing the program can observe and does not fault on any address.
        unsafe {
            use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
            _mm_prefetch::<_MM_HINT_T0>(block_of(free).cast::<i8>());
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = free;
    }

    thread_local! {
        static CACHE: Cache = const { Cache::new() };
    }

    /// A block of `class`: from the local list, else from the remote stack, else new.
    #[inline]
    pub(super) fn alloc(class: usize) -> *mut u8 {
        CACHE
            .try_with(|c| c.pop(class).unwrap_or_else(|| refill(c, class)))
            // A thread whose cache is gone (in its own exit) still gets a block, owned
            // by nobody's list: it goes back to the allocator when freed.
            .unwrap_or_else(|_| fresh_block(class, ptr::null()))
    }

    /// The slow path of `alloc`: the local list of `class` is empty. The blocks of that
    /// class freed elsewhere become the list: unwalked if the count says they are at
    /// most [`LOCAL_CAP`]; else the first `LOCAL_CAP` (the last freed, the likeliest
    /// to be in a cache) and the rest go back to the allocator. Recycling a long chain
    /// whole would keep every block a burst ever had in flight circulating, and as
    /// their order scrambles, each reuse would miss the cache and the TLB: the flat
    /// benchmark went from 40 to 70 ms per iteration over 20 iterations that way.
    #[cold]
    fn refill(c: &Cache, class: usize) -> *mut u8 {
        let remote = c.remote();
        let (chain, count) = remote.take(class);
        let mut len = count;
        if count > LOCAL_CAP {
            // Cut after `LOCAL_CAP` blocks (or keep all: the count is a hint).
            len = 0;
            let (mut last, mut rest) = (ptr::null_mut::<Free>(), chain);
            while len < LOCAL_CAP && !rest.is_null() {
                last = rest;
                // SAFETY: a chain from our remote stack: free blocks of ours.
                rest = unsafe { (*rest).next };
                len += 1;
            }
            if !rest.is_null() {
                // SAFETY: as above (`last` precedes `rest`); the tail is taken off the
                // chain, on no list.
                unsafe {
                    (*last).next = ptr::null_mut();
                    release_chain(rest);
                }
            }
        }
        c.lists[class].set(chain);
        c.lens[class].set(len as u32);
        c.pop(class).unwrap_or_else(|| fresh_block(class, remote))
    }

    /// How many blocks this thread's local list of `class` holds, for tests.
    #[cfg(test)]
    pub(super) fn local_len(class: usize) -> usize {
        CACHE.with(|c| {
            let (mut n, mut free) = (0, c.lists[class].get());
            while !free.is_null() {
                n += 1;
                // SAFETY: blocks on our local list are free and ours.
                free = unsafe { (*free).next };
            }
            n
        })
    }

    /// Gives every block of a chain back to the allocator.
    ///
    /// # Safety
    ///
    /// `free` heads a chain of free blocks (linked through `next`) on no list.
    unsafe fn release_chain(mut free: *mut Free) {
        while !free.is_null() {
            // SAFETY: the caller's contract.
            let next = unsafe { (*free).next };
            // SAFETY: as above; unlinked.
            unsafe { release_block(block_of(free)) };
            free = next;
        }
    }

    /// Frees `block` to its owner: the local list if that is this thread, its remote
    /// stack otherwise.
    ///
    /// # Safety
    ///
    /// `block` is a block from `alloc` whose value is gone; freed once.
    #[inline]
    pub(super) unsafe fn free(block: *mut u8) {
        // SAFETY: the header is intact.
        let Header { owner, class } = unsafe { block.cast::<Header>().read() };
        let taken = CACHE.try_with(|c| {
            // A block with no owner is never ours, even before this thread has a `Remote`.
            if !owner.is_null() && ptr::eq(c.remote.get(), owner) {
                // SAFETY: ours, free.
                unsafe { c.keep(block, class) };
                true
            } else {
                false
            }
        });
        if taken != Ok(true) {
            // SAFETY: forwarded: not this thread's block.
            unsafe { free_elsewhere(block, owner, class, taken.is_ok()) }
        }
    }

    /// `free` of a block that is not this thread's: back to the allocator if it has no
    /// owner, else onto the outgoing chain, or (`cache` false: this thread's cache is
    /// gone, in its own exit) straight home.
    ///
    /// # Safety
    ///
    /// `block` is a free block of `class` owned by `owner`, not this thread's, handed
    /// over here.
    #[inline(never)]
    unsafe fn free_elsewhere(block: *mut u8, owner: *const Remote, class: usize, cache: bool) {
        let free = link(block);
        if owner.is_null() {
            // SAFETY: free, on no list.
            unsafe { release_block(block) };
        } else if cache {
            // SAFETY: another thread's (the owner is not null), free, handed over; the
            // cache is alive (this runs on the thread that just used it).
            CACHE.with(|c| unsafe { c.send(owner, class, free) });
        } else {
            // SAFETY: `Remote`s are never freed; the block is handed over.
            unsafe { (*owner).push(free, free, 1, class) };
        }
    }
}

#[cfg(any(loom, senders_uncached_blocks))]
mod cache {
    use super::*;

    pub(super) fn alloc(class: usize) -> *mut u8 {
        fresh_block(class, ptr::null())
    }

    /// # Safety
    ///
    /// As in the non-loom build.
    #[inline]
    pub(super) unsafe fn free(block: *mut u8) {
        // SAFETY: forwarded.
        unsafe { release_block(block) }
    }
}

#[cfg(all(test, not(any(loom, senders_uncached_blocks))))]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_block_freed_by_its_thread_is_reused() {
        let a = new([7u64; 4]);
        // SAFETY: from `new`, contents are `Copy`.
        unsafe { free(a) };
        let b = new([8u64; 4]);
        assert_eq!(a, b, "the freed block is the next one handed out");
        // SAFETY: as above.
        unsafe { free(b) };
    }

    /// How many of `addrs` (blocks of `T`'s class) this thread's next allocations of a
    /// `T` hand out. It allocates until it has seen them all, or `slack` more blocks than
    /// that: a test thread may have adopted a parked `Remote` whose stacks hold blocks
    /// other tests freed after their thread exited, and those can come out first.
    fn handed_out<T: Copy>(addrs: &[usize], value: T) -> usize {
        let slack = LOCAL_CAP;
        let mut held = Vec::new();
        let mut seen = 0;
        while seen < addrs.len() && held.len() < addrs.len() + slack {
            let b = new(value);
            seen += usize::from(addrs.contains(&b.as_ptr().addr()));
            held.push(b);
        }
        for b in held {
            // SAFETY: from `new`, `Copy` contents, freed once.
            unsafe { free(b) };
        }
        seen
    }

    #[test]
    fn blocks_freed_elsewhere_return_to_their_owner() {
        let addrs: Vec<usize> = (0..100).map(|i| new([i as u64; 8]).as_ptr().addr()).collect();
        let sendable: Vec<usize> = addrs.clone();
        std::thread::spawn(move || {
            for a in sendable {
                // SAFETY: each block is freed once, its contents are `Copy`.
                unsafe { free(NonNull::new(a as *mut [u64; 8]).unwrap()) };
            }
        })
        .join()
        .unwrap();
        assert_eq!(handed_out(&addrs, [0u64; 8]), 100, "every block came back through the remote stack");
    }

    /// A thread freeing blocks of two owners and two classes, interleaved, sends every
    /// one home: each owner reuses all of its blocks once that thread has exited.
    #[test]
    fn blocks_of_several_owners_and_classes_freed_interleaved_all_go_home() {
        fn allocate() -> (Vec<usize>, Vec<usize>) {
            let small = (0..40).map(|i| new([i as u64; 2]).as_ptr().addr()).collect();
            let large = (0..40).map(|i| new([i as u64; 20]).as_ptr().addr()).collect();
            (small, large)
        }
        fn reused((small, large): &(Vec<usize>, Vec<usize>)) -> usize {
            handed_out(small, [0u64; 2]) + handed_out(large, [0u64; 20])
        }
        let ours = allocate();
        let (tx, rx) = mpsc::channel();
        let (go, wait) = mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let theirs = allocate();
            tx.send(theirs.clone()).unwrap();
            wait.recv().unwrap();
            reused(&theirs)
        });
        let theirs = rx.recv().unwrap();
        let (a, b) = (ours.clone(), theirs.clone());
        std::thread::spawn(move || {
            for i in 0..40 {
                // SAFETY: each block is freed once; `Copy` contents.
                unsafe {
                    free(NonNull::new(a.0[i] as *mut [u64; 2]).unwrap());
                    free(NonNull::new(b.1[i] as *mut [u64; 20]).unwrap());
                    free(NonNull::new(b.0[i] as *mut [u64; 2]).unwrap());
                    free(NonNull::new(a.1[i] as *mut [u64; 20]).unwrap());
                }
            }
        })
        .join()
        .unwrap();
        go.send(()).unwrap();
        assert_eq!(reused(&ours), 80, "every block of ours came home");
        assert_eq!(other.join().unwrap(), 80, "every block of the other owner's came home");
    }

    /// A long batch taken back is cut at `LOCAL_CAP` blocks (the rest go back to the
    /// allocator), so a burst's blocks do not all stay in circulation; a short one is
    /// taken whole.
    #[test]
    fn a_long_batch_taken_back_is_cut_at_the_cap() {
        type Big = [u64; 60];
        let class = class_of(Layout::new::<Big>()).unwrap();
        let mut held = Vec::new();
        // A short batch may hold a few more blocks than were freed here: blocks other
        // tests freed to a parked `Remote` this thread adopted.
        for (n, want) in [(3 * LOCAL_CAP, LOCAL_CAP..=LOCAL_CAP), (100, 100..=LOCAL_CAP)] {
            let addrs: Vec<usize> = (0..n).map(|_| new([0u64; 60]).as_ptr().addr()).collect();
            assert_eq!(cache::local_len(class), 0, "the list was used up");
            std::thread::spawn(move || {
                for a in addrs {
                    // SAFETY: each block is freed once; `Copy` contents.
                    unsafe { free(NonNull::new(a as *mut Big).unwrap()) };
                }
            })
            .join()
            .unwrap();
            // This allocation takes the batch back, and hands out its first block.
            let b = new([1u64; 60]);
            let taken = cache::local_len(class) + 1;
            assert!(want.contains(&taken), "{n} blocks freed elsewhere, {taken} taken back");
            // SAFETY: from `new`, `Copy` contents, freed once.
            unsafe { free(b) };
            while cache::local_len(class) > 0 {
                held.push(new([2u64; 60]));
            }
        }
        for b in held {
            // SAFETY: from `new`, `Copy` contents, freed once.
            unsafe { free(b) };
        }
    }

    #[test]
    fn large_and_aligned_values_use_the_global_allocator_and_keep_their_contents() {
        #[repr(align(64))]
        struct Aligned([u8; 64]);
        let a = new(Aligned([3; 64]));
        assert_eq!(a.as_ptr().addr() % 64, 0);
        // SAFETY: live, initialized.
        assert_eq!(unsafe { a.as_ref() }.0[63], 3);
        // SAFETY: from `new`, no drop glue.
        unsafe { free(a) };
        let big = new([5u8; MAX_SIZE + 1]);
        // SAFETY: as above.
        assert_eq!(unsafe { big.as_ref() }[MAX_SIZE], 5);
        // SAFETY: as above.
        unsafe { free(big) };
        let zst = new(());
        // SAFETY: as above.
        unsafe { free(zst) };
    }

    #[test]
    fn an_exited_threads_blocks_are_adopted_with_its_remote() {
        let (tx, rx) = mpsc::channel::<usize>();
        std::thread::spawn(move || {
            tx.send(new([1u64; 2]).as_ptr().addr()).unwrap();
        })
        .join()
        .unwrap();
        // The owner exited; freeing here parks the block on its (parked) remote stack.
        let addr = rx.recv().unwrap();
        // SAFETY: freed once; `Copy` contents.
        unsafe { free(NonNull::new(addr as *mut [u64; 2]).unwrap()) };
        // Threads adopting parked remotes reuse it; allocation keeps working meanwhile.
        let handles: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    let b = new([2u64; 2]);
                    // SAFETY: from `new`.
                    unsafe { free(b) };
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }
}

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
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no value.
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
