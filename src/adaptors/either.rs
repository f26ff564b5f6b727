//! `EitherSender`: one of two sender types chosen at run time, without boxing.
//!
//! Its operation state is the chosen sender's, stored inline and pinned in place: `start`
//! projects the pin onto the one branch that exists, which is never moved or replaced.

use std::marker::PhantomPinned;
use std::pin::Pin;

use crate::domain::CommonDomain;
use crate::receiver::Receiver;
use crate::sender::{OperationState, Sender, SenderTo, sender};

/// One of two senders with the same value and error types, so that the branches of an
/// `if`/`else` or a `match` may return different sender types without boxing (like
/// `futures::future::Either`). Build it with the variants or with
/// [`SenderExt::left_sender`](crate::SenderExt::left_sender) /
/// [`right_sender`](crate::SenderExt::right_sender).
///
/// - **Completions**: both sides have one `Value` and one `Error` type (a sender has a
///   single completion signature, `docs/DESIGN.md` §2.1); convert with `then`,
///   `with_error` or `map_error` first when they differ. It may complete stopped if
///   either side may.
/// - **Domain**: the one both sides share (as for `let_*`, P2999 §2.4 item 14): equal
///   domains, or a known one beside none. Two different known domains do not compile.
/// - **Completion scheduler**: none. Which side runs is known only at run time, and
///   the type cannot say "the scheduler if both sides have the same one" without
///   specialization.
///
/// The chosen side is connected to the receiver itself, so it sees the receiver's
/// environment (stop token, scheduler, queries) unchanged.
///
/// ```
/// use senders::{EitherSender, SenderExt, just, sync_wait};
/// // Each branch is a different sender type; the closure returns one type.
/// let parse = |text: &'static str| match text.parse::<i32>() {
///     Ok(n) => EitherSender::Left(just(n)),
///     Err(_) => EitherSender::Right(just(text).then(|t| t.len() as i32)),
/// };
/// assert_eq!(sync_wait(parse("42")), Ok(Some(42)));
/// assert_eq!(sync_wait(parse("four")), Ok(Some(4)));
/// ```
#[must_use = "senders do nothing unless connected and started"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EitherSender<L, R> {
    /// The first alternative.
    Left(L),
    /// The second alternative.
    Right(R),
}

sender!([L, R] EitherSender<L, R> where [L: Sender,
    R: Sender<Value = L::Value, Error = L::Error>,
    L::Domain: CommonDomain<R::Domain>] { value = L::Value, error = L::Error, stopped = L::SENDS_STOPPED || R::SENDS_STOPPED, domain = <L::Domain as CommonDomain<R::Domain>>::Out });

/// Which side's operation an [`EitherOp`] holds.
enum Branch<A, B> {
    Left(A),
    Right(B),
}

/// The operation state of an [`EitherSender`]: the chosen side's operation, inline.
pub struct EitherOp<A, B> {
    branch: Branch<A, B>,
    _pin: PhantomPinned,
}

impl<L, R, Rc> SenderTo<Rc> for EitherSender<L, R>
where
    L: SenderTo<Rc>,
    R: SenderTo<Rc> + Sender<Value = L::Value, Error = L::Error>,
    L::Domain: CommonDomain<R::Domain>,
    Rc: Receiver<L::Value, L::Error>,
{
    type Operation = EitherOp<L::Operation, R::Operation>;
    fn connect(self, receiver: Rc) -> Self::Operation {
        let branch = match self {
            EitherSender::Left(l) => Branch::Left(l.connect(receiver)),
            EitherSender::Right(r) => Branch::Right(r.connect(receiver)),
        };
        EitherOp { branch, _pin: PhantomPinned }
    }
}

impl<A: OperationState, B: OperationState> OperationState for EitherOp<A, B> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: the branch is structurally pinned: it is set once in `connect`, never
        // moved out or replaced, and `EitherOp` has no `Drop` impl that could move it.
        let this = unsafe { self.get_unchecked_mut() };
        match &mut this.branch {
            // SAFETY: pinned in place (above); the caller's contract (`start` once, no drop
            // before the completion) passes on to the one inner operation unchanged.
            Branch::Left(a) => unsafe { Pin::new_unchecked(a).start() },
            // SAFETY: as for the left side.
            Branch::Right(b) => unsafe { Pin::new_unchecked(b).start() },
        }
    }
}
