//! The tuple form of `when_all`'s children: tuples of up to twelve senders, and `()`.

use std::convert::Infallible;
use std::pin::Pin;

use crate::domain::{CommonDomain, MaybeDomain, NoDomain};
use crate::panic::Panic;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, start_job};

use super::hook::SenderTuple;
use super::join::{ChildOp, ConnectTuple, ForkJob, Shared, ValueCell, WhenAllReceiver};

/// Folds the domains of a list of children into their common domain.
pub trait DomainFold {
    /// The common domain; [`NoDomain`] for an empty list.
    type Out: MaybeDomain;
}
impl DomainFold for () {
    type Out = NoDomain;
}
impl<D: MaybeDomain + CommonDomain<T::Out>, T: DomainFold> DomainFold for (D, T) {
    type Out = <D as CommonDomain<T::Out>>::Out;
}

/// The list of types `(A, (B, (C, ())))` that [`DomainFold`] folds.
macro_rules! nest {
    () => { () };
    ($head:ty $(, $rest:ty)*) => { ($head, $crate::adaptors::when_all::nest!($($rest),*)) };
}
pub(crate) use nest;

macro_rules! tuple_impls {
    ($len:expr; $S0:ident $i0:tt $(, $S:ident $i:tt)*) => {
        impl<$S0: Sender $(, $S: Sender<Error = $S0::Error>)*> SenderTuple for ($S0, $($S,)*)
        where
            nest!($S0::Domain $(, $S::Domain)*): DomainFold,
        {
            type Values = ($S0::Value, $($S::Value,)*);
            type ValueCells = (ValueCell<$S0::Value>, $(ValueCell<$S::Value>,)*);
            type Error = $S0::Error;
            const SENDS_STOPPED: bool = $S0::SENDS_STOPPED $(|| $S::SENDS_STOPPED)*;
            type Domain = <nest!($S0::Domain $(, $S::Domain)*) as DomainFold>::Out;
            #[inline]
            fn len(&self) -> usize {
                $len
            }
            fn empty_cells(_: usize) -> Self::ValueCells {
                (ValueCell::empty(), $(tuple_impls!(@empty $S),)*)
            }
            unsafe fn take_values(cells: &Self::ValueCells) -> Self::Values {
                // SAFETY: forwarded from the caller: every child has arrived.
                unsafe { (cells.$i0.take(), $(cells.$i.take(),)*) }
            }
            unsafe fn drop_values(cells: &Self::ValueCells) -> Result<(), Panic> {
                // SAFETY: forwarded from the caller: every child has arrived.
                unsafe {
                    let first = cells.$i0.drop_value();
                    $(let first = first.and(cells.$i.drop_value());)*
                    first
                }
            }
        }

        impl<R, $S0 $(, $S)*> ConnectTuple<R> for ($S0, $($S,)*)
        where
            nest!(<$S0 as Sender>::Domain $(, <$S as Sender>::Domain)*): DomainFold,
            R: Receiver<<Self as SenderTuple>::Values, <Self as SenderTuple>::Error>,
            $S0: Sender + SenderTo<WhenAllReceiver<<$S0 as Sender>::Value, Self, R>>,
            $($S: Sender<Error = <$S0 as Sender>::Error> + SenderTo<WhenAllReceiver<<$S as Sender>::Value, Self, R>>,)*
        {
            type Ops = (ChildOp<$S0::Operation>, $(ChildOp<$S::Operation>,)*);
            #[inline]
            unsafe fn connect_all(self, shared: *const Shared<Self, R>) -> Self::Ops {
                // SAFETY: the caller guarantees `shared` is alive; the cells are only
                // addressed here, and each child writes its own through `ValueCell::put`.
                let cells: &Self::ValueCells = unsafe { &(*shared).cells };
                (
                    ChildOp(self.$i0.connect(WhenAllReceiver { shared, cell: &cells.$i0 })),
                    $(ChildOp(self.$i.connect(WhenAllReceiver { shared, cell: &cells.$i })),)*
                )
            }
            #[inline]
            unsafe fn count(_: *const Self::Ops) -> usize {
                $len
            }
            #[inline]
            unsafe fn start_child(ops: *mut Self::Ops, i: usize) {
                // SAFETY: forwarded from the caller: child `i` is pinned in place and
                // unstarted; only its field is borrowed.
                unsafe {
                    match i {
                        $i0 => Pin::new_unchecked(&mut (*ops).$i0).start(),
                        $($i => Pin::new_unchecked(&mut (*ops).$i).start(),)*
                        _ => unreachable!("when_all: no child {i}"),
                    }
                }
            }
            #[inline]
            unsafe fn child_job(ops: *mut Self::Ops, i: usize) -> ForkJob {
                // SAFETY: forwarded from the caller: the job starts child `i`, pinned in
                // place, once.
                unsafe {
                    match i {
                        $i0 => ForkJob(start_job(&raw const (*ops).$i0)),
                        $($i => ForkJob(start_job(&raw const (*ops).$i)),)*
                        _ => unreachable!("when_all: no child {i}"),
                    }
                }
            }
            #[inline]
            unsafe fn completes_at_once(ops: *const Self::Ops, i: usize) -> bool {
                // SAFETY: forwarded from the caller: child `i` is alive and unstarted.
                unsafe {
                    match i {
                        $i0 => (*ops).$i0.completes_at_once(),
                        $($i => (*ops).$i.completes_at_once(),)*
                        _ => unreachable!("when_all: no child {i}"),
                    }
                }
            }
        }
    };
    (@empty $S:ident) => { ValueCell::empty() };
}

tuple_impls!(1; S0 0);
tuple_impls!(2; S0 0, S1 1);
tuple_impls!(3; S0 0, S1 1, S2 2);
tuple_impls!(4; S0 0, S1 1, S2 2, S3 3);
tuple_impls!(5; S0 0, S1 1, S2 2, S3 3, S4 4);
tuple_impls!(6; S0 0, S1 1, S2 2, S3 3, S4 4, S5 5);
tuple_impls!(7; S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6);
tuple_impls!(8; S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7);
tuple_impls!(9; S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7, S8 8);
tuple_impls!(10; S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7, S8 8, S9 9);
tuple_impls!(11; S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7, S8 8, S9 9, S10 10);
tuple_impls!(12; S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7, S8 8, S9 9, S10 10, S11 11);

/// No children: `when_all(())` completes with `()` as soon as it starts.
impl SenderTuple for () {
    type Values = ();
    type ValueCells = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = false;
    type Domain = NoDomain;
    fn len(&self) -> usize {
        0
    }
    fn empty_cells(_: usize) {}
    unsafe fn take_values((): &()) {}
    unsafe fn drop_values((): &()) -> Result<(), Panic> {
        Ok(())
    }
}

impl<R: Receiver<(), Infallible>> ConnectTuple<R> for () {
    type Ops = ();
    unsafe fn connect_all(self, _: *const Shared<Self, R>) {}
    unsafe fn count(_: *const ()) -> usize {
        0
    }
    unsafe fn start_child(_: *mut (), i: usize) {
        unreachable!("when_all(()): no child {i}")
    }
    unsafe fn child_job(_: *mut (), i: usize) -> ForkJob {
        unreachable!("when_all(()): no child {i}")
    }
}
