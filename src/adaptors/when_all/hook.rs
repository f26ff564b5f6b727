//! What [`Domain::transform_when_all`](crate::Domain::transform_when_all) takes: the
//! untransformed sender [`WhenAll`], plain data, and [`SenderTuple`], the children it can
//! run. The sender's `impl Sender` and its default lowering are in `mod.rs`.

use crate::domain::MaybeDomain;
use crate::panic::Panic;

/// The children `when_all` can run: tuples of up to twelve senders that share one error
/// type and one domain (the empty tuple included), and a `Vec` of senders of one type
/// (a number of children known only at run time).
pub trait SenderTuple: Sized {
    /// The children's values: a tuple for a tuple, a `Vec` for a `Vec`.
    type Values;
    /// One [`ValueCell`](super::ValueCell) per child value.
    type ValueCells;
    /// The shared error type.
    type Error;
    /// Whether some child may complete stopped.
    const SENDS_STOPPED: bool;
    /// The children's common domain.
    type Domain: MaybeDomain;
    /// The number of children.
    ///
    /// ```
    /// use senders::adaptors::SenderTuple;
    /// use senders::just;
    /// assert_eq!(SenderTuple::len(&(just(1), just("two"))), 2);
    /// assert_eq!(SenderTuple::len(&vec![just(1); 3]), 3);
    /// ```
    fn len(&self) -> usize;
    /// Whether there is no child.
    ///
    /// ```
    /// use senders::adaptors::SenderTuple;
    /// assert!(SenderTuple::is_empty(&()));
    /// assert!(!SenderTuple::is_empty(&(senders::just(1),)));
    /// ```
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Empty cells for `len` children.
    fn empty_cells(len: usize) -> Self::ValueCells;
    /// The values, once every cell is filled.
    ///
    /// # Safety
    ///
    /// Every child has delivered its value and arrived.
    unsafe fn take_values(cells: &Self::ValueCells) -> Self::Values;
    /// Drops the values the children delivered, when the operation does not deliver
    /// them (a child failed or stopped): each one, even if an earlier `Drop` panicked.
    /// Returns the first such panic.
    ///
    /// # Safety
    ///
    /// Every child has arrived.
    unsafe fn drop_values(cells: &Self::ValueCells) -> Result<(), Panic>;
}

/// The untransformed sender of [`when_all`](super::when_all).
#[must_use = "senders do nothing unless connected and started"]
pub struct WhenAll<C> {
    pub(super) children: C,
}

impl<C> WhenAll<C> {
    /// Builds the untransformed sender. Prefer [`when_all`](super::when_all), which also applies early
    /// customization.
    ///
    /// ```
    /// use senders::adaptors::WhenAll;
    /// use senders::{just, sync_wait};
    /// assert_eq!(sync_wait(WhenAll::new((just(1), just("a")))).unwrap(), Some((1, "a")));
    /// ```
    pub fn new(children: C) -> Self {
        WhenAll { children }
    }
    /// The children.
    ///
    /// ```
    /// use senders::adaptors::WhenAll;
    /// use senders::{just, sync_wait};
    /// let (a, b) = WhenAll::new((just(1), just(2))).into_parts();
    /// assert_eq!((sync_wait(a).unwrap(), sync_wait(b).unwrap()), (Some(1), Some(2)));
    /// ```
    pub fn into_parts(self) -> C {
        self.children
    }
}
