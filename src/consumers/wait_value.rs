//! `sync_wait_value`: [`sync_wait`] for a sender that cannot fail, returning its value.

use std::convert::Infallible;

use crate::consumers::sync_wait::{SyncWaitReceiver, sync_wait};
use crate::sender::{Sender, SenderTo};

/// Starts `sndr`, blocks until it completes, and returns its value: `sync_wait(sndr)`
/// without the `.unwrap().unwrap()`, for a sender whose `Error` is
/// [`Infallible`] (checked at compile time: a fallible sender does not compile, use
/// [`sync_wait`] and handle the error).
///
/// # Panics
///
/// If the sender completes stopped. `sync_wait`'s environment never asks for a stop, so
/// that happens only when the work stops itself: a [`just_stopped`](crate::just_stopped),
/// a `schedule()` that a pool or context shutting down refuses, a stop requested on a
/// scope it runs in. The type does not rule it out, because nearly every sender that
/// schedules says it may complete stopped ([`Sender::SENDS_STOPPED`] is `true` for a
/// pool's `schedule()` and for [`AnySender`](crate::AnySender)), so a compile-time rule
/// would turn away the programs that need this most; [`sync_wait`] returns `Ok(None)`
/// instead. A panic in the work resumes here, as in `sync_wait`.
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, just, starts_on, sync_wait_value, when_all};
/// let pool = StaticThreadPool::new(2).unwrap();
/// let (a, b) = sync_wait_value(starts_on(pool.scheduler(), when_all((just(20), just(1).then(|x| x + 1)))));
/// assert_eq!(a + b, 22);
/// ```
pub fn sync_wait_value<S>(sndr: S) -> S::Value
where
    S: Sender<Error = Infallible> + SenderTo<SyncWaitReceiver<<S as Sender>::Value, Infallible>>,
{
    match sync_wait(sndr) {
        Ok(Some(value)) => value,
        Ok(None) => panic!("sync_wait_value: the sender completed stopped (use `sync_wait` to see a stop)"),
        Err(never) => match never {},
    }
}
