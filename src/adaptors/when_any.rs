//! `when_any`: race several senders; the first to complete decides the completion
//! (stdexec's `exec::when_any`).
//!
//! Completion rules:
//!
//! - The first child to complete, on any channel (a value, an error, stopped or a panic),
//!   is the *winner*: its completion is stored and every other child gets a stop request.
//! - The operation completes only after **every** child has completed, with the
//!   winner's completion. So nothing a child runs outlives the operation, and nothing it
//!   borrows is used after it.
//! - A *loser's* value or error is dropped (before the loser arrives). A loser's panic is
//!   not: it replaces the winner's value, error or stopped completion, as a panic is
//!   never lost (of several panics, the first is delivered, as in `when_all`).
//! - If the receiver's stop token was asked to stop, the operation completes stopped
//!   (unless a child panicked), whatever the winner was: the reference does the same.
//!   A stop request from the receiver is forwarded to every child; one that arrives
//!   before `start` completes the operation stopped without starting any child.
//! - `when_any_iter` of no sender completes stopped at once: nothing could win.
//!
//! The children share one value type and one error type (convert with `then` and
//! `map_error` first). They are connected when the operation starts (the shared state's
//! address is fixed then), started in order, and the thread starting them holds one
//! extra count on the operation until the last is started, so a child that completes
//! inline cannot end the operation under it.
//!
//! `count` starts at the number of children plus that one hold; each child decrements it
//! (`AcqRel`) after storing what it carries, and the decrement that reaches zero
//! completes the operation. A stop forwarder from the receiver's token adds one while it
//! runs, to a count it sees above zero only (see [`ForwardTarget`]).

use std::cell::UnsafeCell;
use std::marker::PhantomPinned;
use std::pin::Pin;

use crate::block::{BlockSlice, BlockVec};
use crate::domain::MaybeDomain;
use crate::env::Env;
use crate::outcome::{Outcome, outcome_completions};
use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::{ForwardStop, ForwardTarget, InplaceStopSource, RawStopCallback, StopToken, hold_live_count};
use crate::sync::{self, AtomicBool, AtomicUsize, Ordering};

use super::when_all::{DomainFold, nest};

/// The children `when_any` can race: tuples of one to twelve senders with one value type,
/// one error type and one domain (a child with no known domain fits any), and a `Vec` or
/// [`BlockVec`](crate::adaptors::BlockVec) of senders of one type, whose length is known
/// only at run time.
pub trait WhenAnyChildren: Sized {
    /// The shared value type.
    type Value;
    /// The shared error type.
    type Error;
    /// The children's common domain.
    type Domain: MaybeDomain;
    /// The number of children.
    ///
    /// ```
    /// use senders::adaptors::WhenAnyChildren;
    /// use senders::{just, just_stopped};
    /// assert_eq!(WhenAnyChildren::len(&(just(1), just_stopped())), 2);
    /// assert_eq!(WhenAnyChildren::len(&vec![just(1); 3]), 3);
    /// ```
    fn len(&self) -> usize;
    /// Whether there is no child.
    ///
    /// ```
    /// use senders::adaptors::WhenAnyChildren;
    /// use senders::factories::Just;
    /// assert!(WhenAnyChildren::is_empty(&Vec::<Just<i32>>::new()));
    /// assert!(!WhenAnyChildren::is_empty(&(senders::just(1),)));
    /// ```
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// [`WhenAnyChildren`] whose children can all be connected to `when_any`'s receivers.
pub trait ConnectWhenAny<R>: WhenAnyChildren {
    /// The children's operation states, in place.
    type Ops;

    /// Connects every child to a receiver pointing at `race`.
    ///
    /// # Safety
    ///
    /// `race` points to the pinned shared state of a started `when_any` operation, which
    /// outlives the children's operation states.
    unsafe fn connect_all(self, race: *const Race<Self::Value, Self::Error, R>) -> Self::Ops;

    /// Starts every child, in order.
    ///
    /// # Safety
    ///
    /// `ops` points to the pinned operation states made by `connect_all`, none started,
    /// and the caller holds a count on the operation throughout (so `ops` stays alive).
    unsafe fn start_all(ops: *mut Self::Ops);
}

/// The state `when_any`'s children share.
pub struct Race<V, E, R> {
    rcvr: UnsafeCell<Option<R>>,
    /// The winner's completion: written once, by the child that set `decided`.
    winner: sync::UnsafeCell<Option<Outcome<V, E>>>,
    /// A loser's panic: written once, by the loser that set `panicked`.
    late_panic: sync::UnsafeCell<Option<Panic>>,
    decided: AtomicBool,
    panicked: AtomicBool,
    count: AtomicUsize,
    /// The children's stop source.
    source: InplaceStopSource,
    on_parent_stop: sync::UnsafeCell<Option<RawStopCallback<'static, ForwardStop>>>,
}

// SAFETY: a hold is a count of the operation, which keeps it (and its source) alive
// until `arrive` releases it.
unsafe impl<V, E, R: Receiver<V, E>> ForwardTarget for Race<V, E, R> {
    type Hold = ();
    fn hold(&self) -> Option<()> {
        hold_live_count(&self.count)
    }
    fn request_stop(&self) {
        self.stop_children();
    }
    unsafe fn release(this: *const Self, (): ()) {
        // SAFETY: the caller's contract: the count `hold` took, released once.
        unsafe { Self::arrive(this) }
    }
}

impl<V, E, R: Receiver<V, E>> Race<V, E, R> {
    fn new(rcvr: R, children: usize) -> Self {
        Race {
            rcvr: UnsafeCell::new(Some(rcvr)),
            winner: sync::UnsafeCell::new(None),
            late_panic: sync::UnsafeCell::new(None),
            decided: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            // One count per child and one for the starting thread.
            count: AtomicUsize::new(children + 1),
            source: InplaceStopSource::new(),
            on_parent_stop: sync::UnsafeCell::new(None),
        }
    }

    fn env(&self) -> &R::Env {
        // SAFETY: `rcvr` is taken only by the completion, after every child (and the
        // starting thread) has arrived; until then it is only read.
        unsafe { (*self.rcvr.get()).as_ref() }.expect("when_any: receiver used after completion").env()
    }

    /// A child completed with `outcome`: it wins, or it loses (a loser's panic, and a
    /// panic while dropping what a loser carries, is kept for the completion). Then the
    /// child arrives.
    ///
    /// # Safety
    ///
    /// `this` is the live shared state; called once per child.
    unsafe fn finish(this: *const Self, outcome: Outcome<V, E>) {
        // SAFETY: alive: this child's count is held until `arrive` below.
        let s = unsafe { &*this };
        if !s.decided.swap(true, Ordering::Relaxed) {
            // SAFETY: only the child that set `decided` writes `winner`; the completer
            // reads it after the last arrival (ordered by `count`'s `AcqRel`).
            s.winner.with_mut(|p| unsafe { *p = Some(outcome) });
            // The siblings' stop callbacks may complete them here; this child's count
            // keeps the operation alive meanwhile.
            s.stop_children();
        } else {
            let panic = match outcome {
                Outcome::Panic(p) => Some(p),
                // Dropped before this child arrives: what it borrows may end with the
                // operation.
                other => discard(other).err(),
            };
            if let Some(p) = panic {
                s.keep_late_panic(p);
            }
        }
        // SAFETY: this child's count, released once.
        unsafe { Self::arrive(this) }
    }

    /// Requests stop on the children. A stop callback's panic is kept for the
    /// completion, as a loser's panic is.
    ///
    /// The caller holds a count (a child's or a forwarder's hold).
    fn stop_children(&self) {
        if let Err(p) = self.source.request_stop_catching() {
            self.keep_late_panic(p);
        }
    }

    /// Keeps `p` for the completion, unless an earlier one was kept (then `p` is
    /// dropped). The caller holds a count, released after this.
    fn keep_late_panic(&self, p: Panic) {
        if !self.panicked.swap(true, Ordering::Relaxed) {
            // SAFETY: only the caller that set `panicked` writes `late_panic`; the
            // completer reads it after the last arrival, which the caller's release
            // orders after this write (`count`'s `AcqRel`).
            self.late_panic.with_mut(|slot| unsafe { *slot = Some(p) });
        }
    }

    /// Releases one count; the last completes the operation, which may be gone when this
    /// returns.
    ///
    /// # Safety
    ///
    /// `this` is live, and the caller holds a count, released once.
    unsafe fn arrive(this: *const Self) {
        // SAFETY: alive: the caller's count keeps it so until the decrement.
        if unsafe { (*this).count.fetch_sub(1, Ordering::AcqRel) } == 1 {
            // SAFETY: every count is released: the completion is ours alone.
            unsafe { Self::complete(this) }
        }
    }

    /// # Safety
    ///
    /// Every child has arrived and the starting thread's hold is released; called once.
    unsafe fn complete(this: *const Self) {
        // SAFETY: exclusive access: what the children wrote is ordered before the last
        // decrement, which this thread made or acquired.
        let s = unsafe { &*this };
        // Deregister first: this waits for a forwarder running on another thread.
        // SAFETY: exclusive, as above.
        s.on_parent_stop.with_mut(|p| unsafe { *p = None });
        // SAFETY: exclusive, as above.
        let rcvr = unsafe { (*s.rcvr.get()).take() }.expect("when_any completes once");
        // SAFETY: exclusive, as above.
        let (winner, late) = unsafe { (s.winner.with_mut(|p| (*p).take()), s.late_panic.with_mut(|p| (*p).take())) };
        let outcome = match (winner, late) {
            (Some(Outcome::Panic(p)), _) => Outcome::Panic(p),
            (winner, Some(p)) => {
                // A second panic, from the winner's `Drop`, is dropped: the first wins.
                let _ = discard(winner);
                Outcome::Panic(p)
            }
            (Some(won), None) if rcvr.env().stop_token().stop_requested() => match discard(won) {
                Ok(()) => Outcome::Stopped,
                Err(p) => Outcome::Panic(p),
            },
            (Some(won), None) => won,
            (None, None) => Outcome::Stopped,
        };
        outcome.deliver(rcvr)
    }

    /// Completes an operation none of whose children was started.
    ///
    /// # Safety
    ///
    /// `this` is the live shared state of a started operation: no child was started, no
    /// forwarder was registered, and this is its only completion.
    unsafe fn complete_unstarted(this: *const Self, outcome: Outcome<V, E>) {
        // SAFETY: the caller's contract: nobody else touches the receiver.
        let rcvr = unsafe { (*(*this).rcvr.get()).take() }.expect("when_any completes once");
        outcome.deliver(rcvr)
    }
}

/// The receiver of one of `when_any`'s children. It is also the child's environment:
/// the parent's, with the children's shared stop token.
pub struct WhenAnyReceiver<V, E, R> {
    race: *const Race<V, E, R>,
}

// SAFETY: a child may complete on another thread: it moves a `V` or an `E` across, and
// may complete the parent receiver there; the children call `R::env(&R)` concurrently,
// hence `R: Sync`, and share the env, hence `Sync`.
unsafe impl<V: Send, E: Send, R: Receiver<V, E> + Send + Sync> Send for WhenAnyReceiver<V, E, R> where R::Env: Sync {}

// SAFETY: a shared reference only reaches the environment: the parent's through
// `R::env(&R)` (`R: Sync`, `R::Env: Sync`) and the children's source (`Sync`).
unsafe impl<V, E, R: Receiver<V, E> + Sync> Sync for WhenAnyReceiver<V, E, R> where R::Env: Sync {}

impl<V, E, R: Receiver<V, E>> WhenAnyReceiver<V, E, R> {
    fn race(&self) -> &Race<V, E, R> {
        // SAFETY: the shared state outlives every child's receiver (it completes only
        // after every child has).
        unsafe { &*self.race }
    }

    fn complete(self, outcome: Outcome<V, E>) {
        // SAFETY: alive until the last arrival; this child finishes once (the receiver
        // is consumed).
        unsafe { Race::finish(self.race, outcome) }
    }
}

impl<V, E, R: Receiver<V, E>> Env for WhenAnyReceiver<V, E, R> {
    type Scheduler = <R::Env as Env>::Scheduler;
    type Domain = <R::Env as Env>::Domain;
    fn scheduler(&self) -> Self::Scheduler {
        self.race().env().scheduler()
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.race().source.token()
    }
    fn prop(&self, key: std::any::TypeId) -> Option<&(dyn std::any::Any + Send + Sync)> {
        self.race().env().prop(key)
    }
}

impl<V, E, R: Receiver<V, E>> Receiver<V, E> for WhenAnyReceiver<V, E, R> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    outcome_completions!(complete);
}

macro_rules! tuple_impls {
    ($S0:ident $i0:tt $(, $S:ident $i:tt)*) => {
        impl<$S0: Sender $(, $S: Sender<Value = $S0::Value, Error = $S0::Error>)*> WhenAnyChildren for ($S0, $($S,)*)
        where
            nest!($S0::Domain $(, $S::Domain)*): DomainFold,
        {
            type Value = $S0::Value;
            type Error = $S0::Error;
            type Domain = <nest!($S0::Domain $(, $S::Domain)*) as DomainFold>::Out;
            fn len(&self) -> usize {
                1 $(+ tuple_impls!(@one $S))*
            }
        }

        impl<R, $S0 $(, $S)*> ConnectWhenAny<R> for ($S0, $($S,)*)
        where
            nest!(<$S0 as Sender>::Domain $(, <$S as Sender>::Domain)*): DomainFold,
            R: Receiver<<$S0 as Sender>::Value, <$S0 as Sender>::Error>,
            $S0: Sender + SenderTo<WhenAnyReceiver<<$S0 as Sender>::Value, <$S0 as Sender>::Error, R>>,
            $($S: Sender<Value = <$S0 as Sender>::Value, Error = <$S0 as Sender>::Error>
                + SenderTo<WhenAnyReceiver<<$S0 as Sender>::Value, <$S0 as Sender>::Error, R>>,)*
        {
            type Ops = ($S0::Operation, $($S::Operation,)*);
            unsafe fn connect_all(self, race: *const Race<Self::Value, Self::Error, R>) -> Self::Ops {
                (self.$i0.connect(WhenAnyReceiver { race }), $(self.$i.connect(WhenAnyReceiver { race }),)*)
            }
            unsafe fn start_all(ops: *mut Self::Ops) {
                // SAFETY: forwarded from the caller: each child is pinned in place and
                // started once; only its field is borrowed, and the caller's count keeps
                // the tuple alive while later children start.
                unsafe {
                    Pin::new_unchecked(&mut (*ops).$i0).start();
                    $(Pin::new_unchecked(&mut (*ops).$i).start();)*
                }
            }
        }
    };
    (@one $S:ident) => { 1 };
}

tuple_impls!(S0 0);
tuple_impls!(S0 0, S1 1);
tuple_impls!(S0 0, S1 1, S2 2);
tuple_impls!(S0 0, S1 1, S2 2, S3 3);
tuple_impls!(S0 0, S1 1, S2 2, S3 3, S4 4);
tuple_impls!(S0 0, S1 1, S2 2, S3 3, S4 4, S5 5);
tuple_impls!(S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6);
tuple_impls!(S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7);
tuple_impls!(S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7, S8 8);
tuple_impls!(S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7, S8 8, S9 9);
tuple_impls!(S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7, S8 8, S9 9, S10 10);
tuple_impls!(S0 0, S1 1, S2 2, S3 3, S4 4, S5 5, S6 6, S7 7, S8 8, S9 9, S10 10, S11 11);

/// A number of children known at run time: a `Vec`, or the
/// [`BlockVec`](crate::adaptors::BlockVec) that [`when_any_iter`] collects into (a
/// recycled block rather than a heap allocation); none completes stopped at once.
macro_rules! list_impls {
    ($List:ident) => {
        impl<S: Sender> WhenAnyChildren for $List<S> {
            type Value = S::Value;
            type Error = S::Error;
            type Domain = S::Domain;
            fn len(&self) -> usize {
                $List::len(self)
            }
        }

        impl<R, S> ConnectWhenAny<R> for $List<S>
        where
            R: Receiver<S::Value, S::Error>,
            S: Sender + SenderTo<WhenAnyReceiver<<S as Sender>::Value, <S as Sender>::Error, R>>,
        {
            type Ops = BlockSlice<S::Operation>;
            unsafe fn connect_all(self, race: *const Race<S::Value, S::Error, R>) -> Self::Ops {
                let len = self.len();
                let mut children = self.into_iter();
                BlockSlice::new(len, |_| {
                    children.next().expect("when_any: as many children as counted").connect(WhenAnyReceiver { race })
                })
            }
            unsafe fn start_all(ops: *mut Self::Ops) {
                // SAFETY: the caller's count keeps `ops` alive throughout; each child is
                // pinned in the block and started once, through its own pointer.
                unsafe {
                    let len = (*ops).as_slice().len();
                    for i in 0..len {
                        Pin::new_unchecked(&mut *BlockSlice::at(ops, i)).start();
                    }
                }
            }
        }
    };
}

list_impls!(Vec);
list_impls!(BlockVec);

/// The sender of [`when_any`] and [`when_any_iter`].
#[must_use = "senders do nothing unless connected and started"]
pub struct WhenAny<C> {
    children: C,
}

sender!([C: WhenAnyChildren] WhenAny<C> { value = C::Value, error = C::Error, stopped = true, domain = C::Domain });

impl<C, R> SenderTo<R> for WhenAny<C>
where
    C: ConnectWhenAny<R>,
    R: Receiver<C::Value, C::Error> + Send,
    C::Value: Send,
    C::Error: Send,
{
    type Operation = WhenAnyOp<C, R>;
    fn connect(self, receiver: R) -> WhenAnyOp<C, R> {
        WhenAnyOp {
            race: Race::new(receiver, self.children.len()),
            children: Some(self.children),
            ops: None,
            _pin: PhantomPinned,
        }
    }
}

/// The operation state of [`when_any`].
pub struct WhenAnyOp<C: ConnectWhenAny<R>, R> {
    /// Declared (so dropped) before `race`: a child may hold a stop callback on the
    /// children's source inside it.
    ops: Option<C::Ops>,
    race: Race<C::Value, C::Error, R>,
    children: Option<C>,
    _pin: PhantomPinned,
}

impl<C, R> OperationState for WhenAnyOp<C, R>
where
    C: ConnectWhenAny<R>,
    R: Receiver<C::Value, C::Error> + Send,
    C::Value: Send,
    C::Error: Send,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `race` and `ops` stay in place and are only addressed; `children` is
        // moved out (not structurally pinned).
        let this = unsafe { self.get_unchecked_mut() };
        let Some(children) = this.children.take() else { return };
        let race: *const Race<C::Value, C::Error, R> = &this.race;
        let token = this.race.env().stop_token();
        if token.stop_requested() {
            // Nothing runs: the children are dropped unconnected.
            let outcome = match discard(children) {
                Ok(()) => Outcome::Stopped,
                Err(p) => Outcome::Panic(p),
            };
            // SAFETY: nothing was started or registered.
            return unsafe { Race::complete_unstarted(race, outcome) };
        }
        // SAFETY: `race` is pinned inside this started operation, which outlives the
        // children's operations.
        let ops = match catch(|| unsafe { children.connect_all(race) }) {
            Ok(ops) => ops,
            // A child's `connect` panicked: those connected before it were dropped
            // unstarted.
            // SAFETY: nothing was started or registered.
            Err(p) => return unsafe { Race::complete_unstarted(race, Outcome::Panic(p)) },
        };
        let ops = this.ops.insert(ops);
        if token.stop_possible() {
            // SAFETY: the parent's env outlives this operation's completion, and
            // `complete` drops the callback (waiting for a run on another thread) before
            // completing the receiver; the cell is written here, before any child runs,
            // and read by `complete` after every arrival; the callback is pinned inside
            // the pinned operation. The `SenderTo` impl requires the receiver and the
            // results to be `Send`, which forwarding (and so possibly completing) on the
            // stop-requesting thread needs. A request made meanwhile runs the forwarder
            // here: the starting thread's count keeps the operation alive.
            unsafe {
                let token = token.detach();
                this.race.on_parent_stop.with_mut(|cell| {
                    let cb = (*cell).insert(RawStopCallback::new(token, ForwardStop::new(race)));
                    Pin::new_unchecked(cb).register();
                });
            }
        }
        // SAFETY: the children are pinned in place, unstarted; this thread holds its
        // count until they are all started, then releases it (which may complete, and
        // free, the operation).
        unsafe {
            C::start_all(ops);
            Race::arrive(race);
        }
    }
}

/// Races the senders of `children`, a tuple of one to twelve senders with one value
/// type and one error type: the first to complete decides the completion, the others
/// are asked to stop, and the operation completes once all of them have (the module
/// docs of [`adaptors::when_any`](crate::adaptors) give every rule: a loser's panic is
/// delivered, a stop request from the receiver completes it stopped).
///
/// The receiver and the results must be `Send`: a child may complete, and so complete
/// the operation, on any thread.
///
/// ```
/// use std::time::Duration;
/// use senders::{StaticThreadPool, just, schedule_after, sync_wait, when_any, SenderExt};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let sch = pool.scheduler();
/// // The slow child is stopped as soon as the fast one wins: this takes no hour.
/// let slow = schedule_after(&sch, Duration::from_secs(3600)).then(|()| "slow");
/// let fast = just("fast");
/// assert_eq!(sync_wait(when_any((slow, fast))).unwrap(), Some("fast"));
/// ```
pub fn when_any<C: WhenAnyChildren>(children: C) -> WhenAny<C> {
    WhenAny { children }
}

/// [`when_any`] over an iterator of senders of one type (typically
/// [`AnySender`](crate::AnySender)s), whose number is known only at run time. With no
/// sender it completes stopped at once. The senders are collected into a
/// [`BlockVec`](crate::adaptors::BlockVec), a recycled block, as
/// [`when_all_iter`](crate::when_all_iter) collects them.
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, schedule, sync_wait, when_any_iter};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let sch = pool.scheduler();
/// let first = when_any_iter((0..4u32).map(|i| schedule(&sch).then(move |()| i).boxed()));
/// assert!(sync_wait(first).unwrap().unwrap() < 4);
/// let none = when_any_iter(Vec::<senders::AnySender<u32>>::new());
/// assert_eq!(sync_wait(none).unwrap(), None);
/// ```
pub fn when_any_iter<I>(senders: I) -> WhenAny<BlockVec<I::Item>>
where
    I: IntoIterator,
    I::Item: Sender,
{
    when_any(senders.into_iter().collect::<BlockVec<_>>())
}
