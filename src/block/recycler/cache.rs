//! The thread-local cache: each thread's local lists, its outgoing chain, and its
//! `Remote`, parked for the next thread when it exits.

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
