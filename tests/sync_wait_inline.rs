//! `sync_wait` of a sender that completes inline allocates nothing (after the first call
//! on a thread, which makes the thread's cached run loop), and an inline `when_all` or a
//! nested `sync_wait` does not either (after the first nested one, which makes a loop
//! for the thread's nested waits). Counted per thread by a wrapping global allocator,
//! so the test harness's other threads do not interfere.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use senders::{SenderExt, just, sync_wait, when_all};

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const-initialized
// thread-local without a destructor, so touching it never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|a| a.set(a.get() + 1));
        // SAFETY: forwarded.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn an_inline_sync_wait_allocates_nothing_after_the_first() {
    assert_eq!(sync_wait(just(1).then(|x| x + 1)), Ok(Some(2)));
    let before = allocations();
    for i in 0..1000u64 {
        assert_eq!(sync_wait(just(i).then(|x| x + 1)), Ok(Some(i + 1)));
        assert_eq!(sync_wait(when_all((just(i), just(2u64).then(|x| x * 2)))), Ok(Some((i, 4))));
    }
    assert_eq!(allocations() - before, 0);
}

#[test]
fn a_nested_inline_sync_wait_allocates_only_the_first_time() {
    let nested = || sync_wait(just(()).then(|()| sync_wait(just(3)).unwrap().unwrap())).unwrap().unwrap();
    assert_eq!(nested(), 3);
    let before = allocations();
    for _ in 0..100 {
        assert_eq!(nested(), 3);
    }
    // The inner call finds the thread's cached loop taken by the outer one and reuses
    // the loop the first inner call made (kept for the thread's nested waits).
    assert_eq!(allocations() - before, 0);
}
