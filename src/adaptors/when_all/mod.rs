//! `when_all`: run several senders concurrently and complete when all have.
//!
//! Completion rules (P2300): all values, then `set_value` with the tuple of values;
//! the first error or panic wins and requests stop on the siblings; otherwise, if any
//! child stopped, `set_stopped` (also requesting stop on the siblings). A stop request
//! from the receiver's environment is forwarded to every child.
//!
//! | file | what |
//! |---|---|
//! | `hook.rs` | what the domain hook takes: the untransformed [`WhenAll`] and the [`SenderTuple`] of its children |
//! | `join.rs` | the join protocol: the shared state, the children's receivers, the start policies |
//! | `tuple.rs` | the children as a tuple |
//! | `list.rs` | the children as a `Vec` or a `BlockVec` |
//! | `iter.rs` | `when_all_iter`'s sender: the iterator, pulled into a `BlockVec` when the operation starts |
//! | `mod.rs` | the senders, the operation state, and the public functions |

use std::cell::UnsafeCell;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;

use crate::sync;

use crate::domain::{Domain, LateDomain, MaybeDomain};
use crate::factories::{Defer, defer};
use crate::panic::catch;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, sender};
use crate::stop::InplaceStopSource;
use crate::sync::{AtomicBool, AtomicU8, AtomicUsize};

mod hook;
mod iter;
mod join;
mod list;
mod tuple;

pub use hook::{SenderTuple, WhenAll};
pub use iter::{WhenAllIter, WhenAllIterOp, WhenAllOfBlockVec};
use join::RUNNING;
#[cfg(all(test, not(loom)))]
pub(crate) use join::inline_hop;
pub use join::{ChildOp, ConnectTuple, ForkJob, Sequential, Shared, StartPolicy, ValueCell, WhenAllReceiver};
pub(crate) use join::{FIRST_HOP, FRESH_HOP, NO_HOP, set_inline_hop, take_inline_hop};
pub use list::{ChildSlot, ListCells};
pub use tuple::DomainFold;
pub(crate) use tuple::nest;

impl<C> WhenAll<C> {
    /// The default implementation.
    ///
    /// ```
    /// use senders::adaptors::WhenAll;
    /// use senders::{just, sync_wait};
    /// assert_eq!(sync_wait(WhenAll::new(vec![just(1), just(2)]).lower()).unwrap(), Some(vec![1, 2]));
    /// ```
    pub fn lower(self) -> WhenAllImpl<C> {
        self.lower_with()
    }
    /// The default implementation with another way to start the children (a pool
    /// forks them onto its workers).
    ///
    /// ```
    /// use senders::adaptors::{Sequential, WhenAll};
    /// use senders::{just, sync_wait};
    /// let lowered = WhenAll::new((just(1), just(2))).lower_with::<Sequential>();
    /// assert_eq!(sync_wait(lowered).unwrap(), Some((1, 2)));
    /// ```
    pub fn lower_with<P: StartPolicy>(self) -> WhenAllImpl<C, P> {
        WhenAllImpl { children: self.children, _p: PhantomData }
    }
}

/// The default implementation of `when_all`: children are started one after the other
/// on the starting thread (with policy `P` = [`Sequential`]) and run wherever they take
/// themselves.
#[must_use = "senders do nothing unless connected and started"]
pub struct WhenAllImpl<C, P = Sequential> {
    children: C,
    _p: PhantomData<fn() -> P>,
}

sender!([C: SenderTuple] WhenAll<C> { value = C::Values, error = C::Error, stopped = C::SENDS_STOPPED, domain = C::Domain });

sender!([C: SenderTuple, P] WhenAllImpl<C, P> { value = C::Values, error = C::Error, stopped = C::SENDS_STOPPED, domain = C::Domain });

impl<C, R> SenderTo<R> for WhenAll<C>
where
    C: SenderTuple,
    R: Receiver<C::Values, C::Error>,
    <LateDomain<Self, R::Env> as Domain>::WhenAll<C>: SenderTo<R>,
{
    type Operation = <<LateDomain<Self, R::Env> as Domain>::WhenAll<C> as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        let domain = <LateDomain<Self, R::Env>>::default();
        domain.transform_when_all(self, Some(receiver.env())).connect(receiver)
    }
}

impl<C: ConnectTuple<R>, R: Receiver<C::Values, C::Error> + Send, P: StartPolicy> SenderTo<R> for WhenAllImpl<C, P>
where
    C::Values: Send,
    C::Error: Send,
{
    type Operation = WhenAllOp<C, R, P>;
    fn connect(self, receiver: R) -> WhenAllOp<C, R, P> {
        WhenAllOp {
            shared: Shared {
                rcvr: UnsafeCell::new(Some(receiver)),
                cells: C::empty_cells(self.children.len()),
                failure: sync::UnsafeCell::new(None),
                state: AtomicU8::new(RUNNING),
                count: AtomicUsize::new(self.children.len() + P::HOLD),
                source: InplaceStopSource::new(),
                linked: AtomicBool::new(false),
                on_parent_stop: sync::UnsafeCell::new(None),
            },
            children: Some(self.children),
            ops: None,
            _p: PhantomData,
            _pin: PhantomPinned,
        }
    }
}

/// The operation state of the default `when_all`.
pub struct WhenAllOp<C: ConnectTuple<R>, R, P = Sequential> {
    /// Declared (so dropped) before `shared`: a child may hold a stop callback on the
    /// children's source inside it.
    ops: Option<C::Ops>,
    shared: Shared<C, R>,
    children: Option<C>,
    _p: PhantomData<fn() -> P>,
    _pin: PhantomPinned,
}

impl<C: ConnectTuple<R>, R: Receiver<C::Values, C::Error> + Send, P: StartPolicy> OperationState for WhenAllOp<C, R, P>
where
    C::Values: Send,
    C::Error: Send,
{
    #[inline]
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: we never move the pinned fields: `shared` and `ops` stay in place and
        // are only addressed; `children` is moved out (not structurally pinned).
        let this = unsafe { self.get_unchecked_mut() };
        let Some(children) = this.children.take() else { return };
        // The parent's stop token is linked lazily, when a child asks for its own.
        let shared: *const Shared<C, R> = &this.shared;
        // SAFETY: `shared` is pinned inside this started operation, which outlives the
        // children's operations.
        let ops = match catch(|| unsafe { children.connect_all(shared) }) {
            Ok(ops) => ops,
            // A child's `connect` panicked: the children connected before it were dropped
            // unstarted, and the operation completes with the panic.
            // SAFETY: no child was started, so nothing else completes the operation.
            Err(p) => return unsafe { Shared::fail_unstarted(shared, p) },
        };
        let ops = this.ops.insert(ops);
        // SAFETY: `ops` is pinned in place and unstarted; `shared` is pinned beside it.
        unsafe { P::start::<C, R>(shared, ops) };
    }
}

/// Runs every sender of `children` concurrently; completes with their values. The
/// children are a tuple (up to twelve, or none: `when_all(())` completes with `()`), whose
/// values come as a tuple, or a `Vec` of senders of one type, whose values come as a
/// `Vec` (see also [`when_all_iter`]). Customizable by domains. Children must share their
/// error type and their domain (a child with no known domain fits any).
///
/// The receiver and the results must be `Send`: a stop request may arrive on any
/// thread, and the operation may complete there.
///
/// ```
/// use senders::{just, sync_wait, when_all};
/// assert_eq!(sync_wait(when_all((just(1), just("a")))).unwrap(), Some((1, "a")));
/// ```
pub fn when_all<C: SenderTuple>(children: C) -> <C::Domain as MaybeDomain>::EarlyWhenAll<C> {
    <C::Domain as MaybeDomain>::early_when_all(WhenAll::new(children))
}

/// `when_all` over an iterator of senders of one type (typically
/// [`AnySender`](crate::AnySender)s): completes with the `Vec` of their values, in the
/// iterator's order. Once started it behaves as
/// `when_all(senders.into_iter().collect::<Vec<_>>())`: the first error or stop wins and
/// requests stop on the others, a panic is delivered, and no sender completes with an
/// empty `Vec` at once.
///
/// **The iterator is pulled when the operation starts**, not when this is called: the
/// sender holds `senders` as it is, and building it builds nothing else. So the natural
/// recursion, a node that returns `when_all_iter(children.map(visit))`, builds one node
/// at a time: each node makes its children's senders (calling `visit` for each, which
/// builds one sender each) when it starts, on the thread that starts it — on a pool, the
/// worker that runs or stole it — and a tree of any size is built as it runs, with
/// memory bounded by what is running. A panic in the iterator (or in making a sender)
/// is delivered to the receiver with `set_panic`, after the senders made so far and the
/// iterator are dropped.
///
/// The senders are collected into a [`BlockVec`](crate::adaptors::BlockVec), a recycled
/// block rather than a `Vec`, and the children's value cells and operation states share
/// one more block: a node of a recursion takes memory from the global allocator only for
/// the `Vec` of values it completes with. On a pool the children are handed out by
/// halves (a node with a thousand children pushes about ten jobs, which the workers
/// that steal them split further), through the pool's domain `when_all`.
///
/// ```
/// use senders::{AnySender, SenderExt, StaticThreadPool, just, schedule, starts_on, sync_wait, when_all_iter};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let sch = pool.scheduler();
/// let squares = when_all_iter((0..10u64).map(|i| schedule(&sch).then(move |()| i * i).boxed()));
/// assert_eq!(sync_wait(squares).unwrap().unwrap().iter().sum::<u64>(), 285);
/// let none = when_all_iter(Vec::<AnySender<u64>>::new());
/// assert_eq!(sync_wait(starts_on(pool.scheduler(), none)).unwrap(), Some(vec![]));
///
/// // A tree, recursively: the number of nodes below depth `d` of a 4-ary tree. Building
/// // `count(10)` makes one sender; the nodes are made as they run, on the pool.
/// fn count(d: u32) -> AnySender<'static, u64> {
///     if d == 0 {
///         return just(1).boxed();
///     }
///     when_all_iter((0..4).map(move |_| count(d - 1))).then(|c| 1 + c.iter().sum::<u64>()).boxed()
/// }
/// assert_eq!(sync_wait(starts_on(pool.scheduler(), count(10))).unwrap(), Some(1_398_101));
/// ```
pub fn when_all_iter<I>(senders: I) -> WhenAllIter<I>
where
    I: IntoIterator,
    I::Item: Sender,
{
    WhenAllIter(senders)
}

/// The sender of [`fork_join`]: the `when_all` of two [`Defer`]s, as early customization
/// leaves it (the children's common domain decides).
pub type ForkJoin<FA, FB> =
    <<(Defer<FA>, Defer<FB>) as SenderTuple>::Domain as MaybeDomain>::EarlyWhenAll<(Defer<FA>, Defer<FB>)>;

/// Runs the senders that `left` and `right` make concurrently, and completes with the
/// pair of their values: `when_all((defer(left), defer(right)))`, the form of a
/// fork-join recursion (as `rayon::join(left, right)`).
///
/// The children are made when the `when_all` starts, inside its operation: a node of a
/// recursion is one operation state (one block when erased in an
/// [`AnySender`](crate::AnySender)), with one join count, and no `let_value` around it.
/// On a pool worker the right child is forked (stealable) and the left one runs inline,
/// as the pool's `when_all` does. `when_all`'s rules apply: the first error or panic (a
/// panic in `left` or `right` included) wins and requests stop on the other child, a
/// stop request reaches both, and a stopped child makes the pair stopped.
///
/// ```
/// use senders::{AnySender, SenderExt, StaticThreadPool, fork_join, just, starts_on, sync_wait};
///
/// fn fib(n: u64) -> AnySender<'static, u64> {
///     if n < 2 {
///         return just(n).boxed();
///     }
///     fork_join(move || fib(n - 1), move || fib(n - 2)).then(|(a, b)| a + b).boxed()
/// }
///
/// let pool = StaticThreadPool::new(2).unwrap();
/// assert_eq!(sync_wait(starts_on(pool.scheduler(), fib(20))).unwrap(), Some(6765));
/// ```
pub fn fork_join<FA, FB, A, B>(left: FA, right: FB) -> ForkJoin<FA, FB>
where
    FA: FnOnce() -> A,
    FB: FnOnce() -> B,
    A: Sender,
    B: Sender<Error = A::Error>,
    (Defer<FA>, Defer<FB>): SenderTuple,
{
    when_all((defer(left), defer(right)))
}

/// `when_all_with_variant`: since every sender here has exactly one value type,
/// `into_variant` is the identity and this is [`when_all`].
///
/// ```
/// use senders::{just, sync_wait, when_all_with_variant};
/// assert_eq!(sync_wait(when_all_with_variant((just(1), just('b')))).unwrap(), Some((1, 'b')));
/// ```
pub fn when_all_with_variant<C: SenderTuple>(children: C) -> <C::Domain as MaybeDomain>::EarlyWhenAll<C> {
    when_all(children)
}
