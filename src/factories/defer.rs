//! `defer`: a sender built when it is connected.

use crate::receiver::Receiver;
use crate::sender::{Sender, SenderTo, sender};

/// The sender of [`defer`].
#[must_use = "senders do nothing unless connected and started"]
#[derive(Clone, Debug)]
pub struct Defer<F>(F);

/// A sender that calls `make` when it is connected and is then the sender `make`
/// returned: its operation state is that sender's own, with no layer around it.
///
/// It is how a recursion builds its children only when they run, as
/// `just(()).let_value(move |()| make())` does, but without `let_value`'s operation (the
/// predecessor's, the closure and a second operation state built when the first
/// completes). Inside [`when_all`](crate::when_all), which connects its children when it
/// starts, the children are built when the `when_all` starts (see [`fork_join`](crate::fork_join)).
///
/// `make` runs on the thread that connects. A panic in it propagates out of `connect`:
/// [`when_all`](crate::when_all) and [`AnySender`](crate::AnySender), which connect when
/// they start, deliver it with `set_panic`; `sync_wait` lets it unwind to its caller.
///
/// ```
/// use senders::{SenderExt, defer, just, sync_wait};
/// use std::cell::Cell;
/// let built = Cell::new(false);
/// let sndr = defer(|| {
///     built.set(true);
///     just(2).then(|x| x * 21)
/// });
/// assert!(!built.get(), "nothing is built before connect");
/// assert_eq!(sync_wait(sndr).unwrap(), Some(42));
/// assert!(built.get());
/// ```
pub fn defer<F: FnOnce() -> S, S: Sender>(make: F) -> Defer<F> {
    Defer(make)
}

sender!([F, S] Defer<F> where [F: FnOnce() -> S, S: Sender] {
    value = S::Value,
    error = S::Error,
    stopped = S::SENDS_STOPPED,
    domain = S::Domain,
});

impl<F, S, R> SenderTo<R> for Defer<F>
where
    F: FnOnce() -> S,
    S: SenderTo<R>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = S::Operation;
    #[inline]
    fn connect(self, receiver: R) -> S::Operation {
        (self.0)().connect(receiver)
    }
}
