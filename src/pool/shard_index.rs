//! Shard indices: a small integer per pool worker thread, unique among live threads,
//! that names the worker's shard in every scope's counter.
//!
//! A scope's counter has one shard per index. Indices are global rather than per pool so
//! that one shard never has two live owners, whichever pools run (see `counter.rs`:
//! only a shard's owner increments it). An index is reused once its worker exits; the
//! index table's lock orders the old owner's last increment before the new owner's
//! first.

use std::cell::Cell;

const NONE: usize = usize::MAX;

crate::sync::const_thread_local! {
    static INDEX: Cell<usize> = Cell::new(NONE);
}

struct Table {
    free: Vec<usize>,
    next: usize,
}

#[cfg(not(loom))]
static TABLE: parking_lot::Mutex<Table> = parking_lot::Mutex::new(Table { free: Vec::new(), next: 0 });

#[cfg(not(loom))]
fn table() -> parking_lot::MutexGuard<'static, Table> {
    TABLE.lock()
}

// One table per loom execution, under a loom lock: indices handed out in one execution
// are not seen by the next, and the lock's ordering of an index's old and new owner is
// checked like any other.
#[cfg(loom)]
loom::lazy_static! {
    static ref TABLE: crate::sync::Mutex<Table> = crate::sync::Mutex::new(Table { free: Vec::new(), next: 0 });
}

#[cfg(loom)]
fn table() -> crate::sync::MutexGuard<'static, Table> {
    crate::sync::lock(&TABLE)
}

/// The calling thread's index, if it is a pool worker.
#[inline]
pub(crate) fn current() -> Option<usize> {
    let index = INDEX.with(Cell::get);
    (index != NONE).then_some(index)
}

/// How many indices exist (the highest ever handed out, plus one).
pub(crate) fn high_water() -> usize {
    table().next
}

/// Holds the calling thread's index until dropped (on the same thread).
pub(crate) struct ShardIndexGuard(());

/// Gives the calling thread the lowest free index, for as long as the guard lives.
pub(crate) fn claim() -> ShardIndexGuard {
    let index = {
        let mut table = table();
        match table.free.pop() {
            Some(index) => index,
            None => {
                table.next += 1;
                table.next - 1
            }
        }
    };
    INDEX.with(|s| s.set(index));
    ShardIndexGuard(())
}

impl Drop for ShardIndexGuard {
    fn drop(&mut self) {
        let index = INDEX.with(|s| s.replace(NONE));
        let mut table = table();
        table.free.push(index);
        // Lowest first, so a long-lived program keeps its indices dense.
        table.free.sort_unstable_by(|a, b| b.cmp(a));
    }
}
