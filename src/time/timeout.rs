//! [`timeout`]: a sender raced against a timer.

use std::fmt;
use std::time::Duration;

use super::TimedScheduler;
use crate::adaptors::{Let, MapError, OnValue, WhenAny, WhenAnyChildren, WithError, when_any};
use crate::ext::SenderExt;
use crate::factories::{JustError, just_error};
use crate::sender::Sender;

/// The error of [`timeout`]: the time ran out, or the sender failed.
///
/// ```
/// use std::time::Duration;
/// use senders::{SingleThreadContext, just_error, sync_wait, timeout};
/// use senders::time::TimeoutError;
/// let ctx = SingleThreadContext::new();
/// let failed = timeout(just_error::<i32, _>("disk full"), &ctx.scheduler(), Duration::from_secs(5));
/// assert_eq!(sync_wait(failed), Err(TimeoutError::Failed("disk full")));
/// assert_eq!(TimeoutError::<&str>::Elapsed.to_string(), "the time limit passed");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeoutError<E> {
    /// The limit passed before the sender completed (it was asked to stop).
    Elapsed,
    /// The sender completed with this error first.
    Failed(E),
}

impl<E: fmt::Display> fmt::Display for TimeoutError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TimeoutError::Elapsed => f.write_str("the time limit passed"),
            TimeoutError::Failed(e) => e.fmt(f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for TimeoutError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TimeoutError::Elapsed => None,
            TimeoutError::Failed(e) => Some(e),
        }
    }
}

/// The sender of [`timeout`] over `S`, with the timed sender `T` of the scheduler that
/// keeps the time: `when_any` of `S` (its error wrapped in
/// [`TimeoutError::Failed`]) and the timer (completing with [`TimeoutError::Elapsed`]).
pub type Timeout<S, T> = WhenAny<TimeoutChildren<S, T>>;

/// The two senders [`Timeout`] races.
pub type TimeoutChildren<S, T> = (
    MapError<S, fn(<S as Sender>::Error) -> TimeoutError<<S as Sender>::Error>>,
    Let<OnValue, WithError<T, TimeoutError<<S as Sender>::Error>>, ElapsedFn<S>>,
);

/// What the timer becomes when it fires.
type ElapsedFn<S> = fn(()) -> JustError<<S as Sender>::Value, TimeoutError<<S as Sender>::Error>>;

/// `timeout(sndr, sch, limit)`: completes with `sndr`'s result, or, if `limit` passes
/// first on `sch`'s clock, with the error [`TimeoutError::Elapsed`], once `sndr` has
/// obeyed the stop request that it then gets.
///
/// It is `when_any((sndr.map_error(Failed), schedule_after(sch, limit) -> Elapsed))`: the
/// first to complete wins and the other is stopped, so a `sndr` that finishes in time
/// cancels the timer at once, and one that ignores stop requests is waited for (the
/// operation never ends before its children). A stop request from the receiver
/// completes it stopped; a panic in `sndr` is delivered. `sndr`'s domain and `sch`'s
/// must agree (or `sndr` have none), as for `when_any`.
///
/// ```
/// use std::time::Duration;
/// use senders::{SenderExt, StaticThreadPool, just, schedule_after, sync_wait, timeout};
/// use senders::time::TimeoutError;
/// let pool = StaticThreadPool::new(2).unwrap();
/// let sch = pool.scheduler();
/// // In time:
/// assert_eq!(sync_wait(timeout(just(7).with_error::<()>(), &sch, Duration::from_secs(5))), Ok(Some(7)));
/// // Too slow: an hour's sleep is stopped after 10 ms.
/// let slow = schedule_after(&sch, Duration::from_secs(3600)).with_error::<()>();
/// assert_eq!(sync_wait(timeout(slow, &sch, Duration::from_millis(10))), Err(TimeoutError::Elapsed));
/// ```
pub fn timeout<S, Sch>(sndr: S, sch: &Sch, limit: Duration) -> Timeout<S, Sch::TimedSender>
where
    S: Sender,
    Sch: TimedScheduler,
    TimeoutChildren<S, Sch::TimedSender>: WhenAnyChildren,
{
    let failed: fn(S::Error) -> TimeoutError<S::Error> = TimeoutError::Failed;
    let elapsed: ElapsedFn<S> = |()| just_error(TimeoutError::Elapsed);
    when_any((sndr.map_error(failed), sch.schedule_after(limit).with_error().let_value(elapsed)))
}
