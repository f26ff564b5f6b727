//! Shard slots: a small integer per pool worker thread, unique among live threads.
//!
//! A scope's counter has one shard per slot. Slots are global rather than per pool so
//! that one shard never has two live owners, whichever pools run (see `counter.rs`:
//! only a shard's owner increments it). A slot is reused once its worker exits; the
//! slot table's lock orders the old owner's last increment before the new owner's
//! first.

use std::cell::Cell;

const NONE: usize = usize::MAX;

crate::sync::const_thread_local! {
    static SLOT: Cell<usize> = Cell::new(NONE);
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

// One table per loom execution, under a loom lock: slots handed out in one execution
// are not seen by the next, and the lock's ordering of a slot's old and new owner is
// checked like any other.
#[cfg(loom)]
loom::lazy_static! {
    static ref TABLE: crate::sync::Mutex<Table> = crate::sync::Mutex::new(Table { free: Vec::new(), next: 0 });
}

#[cfg(loom)]
fn table() -> crate::sync::MutexGuard<'static, Table> {
    crate::sync::lock(&TABLE)
}

/// The calling thread's slot, if it is a pool worker.
#[inline]
pub(crate) fn current() -> Option<usize> {
    let slot = SLOT.with(Cell::get);
    (slot != NONE).then_some(slot)
}

/// How many slots exist (the highest ever handed out, plus one).
pub(crate) fn high_water() -> usize {
    table().next
}

/// Holds the calling thread's slot until dropped (on the same thread).
pub(crate) struct SlotGuard(());

/// Gives the calling thread the lowest free slot, for as long as the guard lives.
pub(crate) fn claim() -> SlotGuard {
    let slot = {
        let mut table = table();
        match table.free.pop() {
            Some(slot) => slot,
            None => {
                table.next += 1;
                table.next - 1
            }
        }
    };
    SLOT.with(|s| s.set(slot));
    SlotGuard(())
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        let slot = SLOT.with(|s| s.replace(NONE));
        let mut table = table();
        table.free.push(slot);
        // Lowest first, so a long-lived program keeps its slots dense.
        table.free.sort_unstable_by(|a, b| b.cmp(a));
    }
}
