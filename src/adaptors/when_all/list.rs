//! The list form of `when_all`'s children: a `Vec` or a `BlockVec` of senders of one
//! type, a number of children known only at run time.

use std::cell::UnsafeCell;
use std::pin::Pin;
use std::ptr;

use crate::block::{BlockSlice, BlockVec};
use crate::panic::Panic;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, start_job};

use super::hook::SenderTuple;
use super::join::{ChildOp, ConnectTuple, ForkJob, Shared, ValueCell, WhenAllReceiver};

/// Where the value cells of a run-time number of children are: in the children's
/// [`ChildSlot`]s, one block for every cell and operation state, which `connect_all`
/// makes when the operation starts (the cells cannot live in the shared state, whose
/// size is fixed at compile time).
pub struct ListCells<V> {
    /// The first slot's cell and the distance between slots, in bytes; written by
    /// `connect_all` before any child starts, read by `take_values` after every child
    /// arrived.
    at: UnsafeCell<(*const ValueCell<V>, usize)>,
    len: usize,
}

// SAFETY: the cells hold `V`s, sent across threads as a `BlockSlice<ValueCell<V>>`
// would be; the pointer is only followed by the operation that owns the slots.
unsafe impl<V: Send> Send for ListCells<V> {}

impl<V> ListCells<V> {
    fn new(len: usize) -> Self {
        ListCells { at: UnsafeCell::new((ptr::null(), 0)), len }
    }

    /// The values, in the children's order.
    ///
    /// # Safety
    ///
    /// `connect_all` recorded the slots, which are alive, and every child has arrived
    /// with its value.
    unsafe fn take(&self) -> Vec<V> {
        // SAFETY: the caller's contract: the slots are recorded and alive; each holds a
        // cell at offset 0 (`ChildSlot` is `repr(C)`) that its child filled.
        unsafe {
            let (first, stride) = *self.at.get();
            (0..self.len).map(|i| (*first.byte_add(i * stride)).take()).collect()
        }
    }

    /// Drops the values delivered, each one; returns the first panic of a `Drop`.
    ///
    /// # Safety
    ///
    /// Every child has arrived; if `connect_all` recorded the slots, they are alive.
    unsafe fn drop_values(&self) -> Result<(), Panic> {
        // SAFETY: the caller's contract: the slots, if recorded, are alive and hold a
        // cell at offset 0 each; with none recorded there is no value.
        unsafe {
            let (first, stride) = *self.at.get();
            if first.is_null() {
                return Ok(());
            }
            // Every cell, even after a panic (no short circuit): the first panic is kept.
            let mut first_panic = Ok(());
            for i in 0..self.len {
                let dropped = (*first.byte_add(i * stride)).drop_value();
                first_panic = first_panic.and(dropped);
            }
            first_panic
        }
    }
}

/// The cell and the operation state of one of a run-time number of children, side by
/// side, so that their `when_all` takes one block for both.
#[repr(C)]
pub struct ChildSlot<V, Op> {
    /// First: [`ListCells`] finds the cells at offset 0.
    cell: ValueCell<V>,
    op: ChildOp<Op>,
}

/// `SenderTuple` and `ConnectTuple` for a collection of senders of one type, consumed in
/// order by `into_iter`.
macro_rules! list_impls {
    ($list:ident) => {
        impl<S: Sender> SenderTuple for $list<S> {
            type Values = Vec<S::Value>;
            type ValueCells = ListCells<S::Value>;
            type Error = S::Error;
            const SENDS_STOPPED: bool = S::SENDS_STOPPED;
            type Domain = S::Domain;
            fn len(&self) -> usize {
                $list::len(self)
            }
            fn empty_cells(len: usize) -> Self::ValueCells {
                ListCells::new(len)
            }
            unsafe fn take_values(cells: &Self::ValueCells) -> Vec<S::Value> {
                // SAFETY: forwarded from the caller: every child has arrived, so
                // `connect_all` recorded the slots, alive in the started operation.
                unsafe { cells.take() }
            }
            unsafe fn drop_values(cells: &Self::ValueCells) -> Result<(), Panic> {
                // SAFETY: forwarded from the caller: every child has arrived; the slots,
                // if recorded, are alive in the started operation.
                unsafe { cells.drop_values() }
            }
        }

        impl<R, S> ConnectTuple<R> for $list<S>
        where
            R: Receiver<Vec<S::Value>, S::Error>,
            S: Sender + SenderTo<WhenAllReceiver<<S as Sender>::Value, Self, R>>,
        {
            type Ops = BlockSlice<ChildSlot<S::Value, S::Operation>>;
            unsafe fn connect_all(self, shared: *const Shared<Self, R>) -> Self::Ops {
                // SAFETY: the caller guarantees `shared` is alive, and no child runs yet:
                // the cells' record is ours to write.
                let cells = unsafe { &(*shared).cells };
                let mut children = self.into_iter();
                let slots = BlockSlice::new_at(cells.len, |_, slot: *mut ChildSlot<S::Value, S::Operation>| {
                    let child = children.next().expect("when_all: as many children as cells");
                    // SAFETY: the slot's address in the block; only the field's address
                    // is taken, and the cell is written (with the slot) before any child
                    // starts.
                    let cell = unsafe { &raw const (*slot).cell };
                    ChildSlot { cell: ValueCell::empty(), op: ChildOp(child.connect(WhenAllReceiver { shared, cell })) }
                });
                // The first slot's cell is at the slot's address (`repr(C)`, the cell
                // first), so no place is made from a pointer that may dangle (no child).
                let first = slots.as_slice().as_ptr().cast::<ValueCell<S::Value>>();
                // SAFETY: as above: no child has started, nobody reads the record yet.
                unsafe { *cells.at.get() = (first, size_of::<ChildSlot<S::Value, S::Operation>>()) };
                slots
            }
            unsafe fn count(ops: *const Self::Ops) -> usize {
                // SAFETY: the caller's contract: `ops` is alive.
                unsafe { (*ops).as_slice().len() }
            }
            unsafe fn start_child(ops: *mut Self::Ops, i: usize) {
                // SAFETY: forwarded from the caller: child `i` is pinned in the block and
                // unstarted; only its operation is borrowed.
                unsafe { Pin::new_unchecked(&mut (*BlockSlice::at(ops, i)).op).start() }
            }
            unsafe fn child_job(ops: *mut Self::Ops, i: usize) -> ForkJob {
                // SAFETY: forwarded from the caller: the job starts child `i`, pinned in
                // place, once.
                unsafe { ForkJob(start_job(&raw const (*BlockSlice::at(ops, i)).op)) }
            }
            #[inline]
            unsafe fn completes_at_once(ops: *const Self::Ops, i: usize) -> bool {
                // SAFETY: forwarded from the caller: child `i` is alive and unstarted.
                unsafe { (*BlockSlice::at(ops, i)).op.completes_at_once() }
            }
        }
    };
}

// A number of children known at run time: `when_all(vec)` completes with the `Vec` of
// their values, in the children's order (an empty `Vec` at once for no child); a
// `BlockVec` is what `when_all_iter` collects into.
list_impls!(Vec);
list_impls!(BlockVec);
