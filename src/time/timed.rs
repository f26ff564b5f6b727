//! [`TimedScheduler`] and the free functions over it; the crate's timed schedulers.

use std::time::{Duration, Instant};

#[cfg(not(loom))]
use super::ScheduleAt;
use crate::scheduler::Scheduler;
use crate::sender::Sender;

/// A scheduler that can complete at a point in time (the reference implementation's
/// `timed_scheduler`: `now`, `schedule_at`, `schedule_after`).
///
/// Implemented by [`StaticThreadPool`](crate::StaticThreadPool)'s, [`RunLoop`](crate::RunLoop)'s,
/// [`SingleThreadContext`](crate::SingleThreadContext)'s and a [`Task`](crate::Task)'s
/// schedulers. A user scheduler implements it with its own timed sender, or with the
/// crate's timers through [`ScheduleAt`] (whose docs say on which thread it completes):
///
/// ```
/// use std::convert::Infallible;
/// use std::time::{Duration, Instant};
/// use senders::time::{ScheduleAt, TimedScheduler};
/// use senders::{PoolScheduler, Receiver, Scheduler, Sender, SenderTo, StaticThreadPool, schedule_after, sync_wait};
///
/// /// A scheduler of the user's: here, the pool's under another name.
/// #[derive(Clone, PartialEq)]
/// struct Mine(PoolScheduler);
/// # struct MineSender(Mine);
/// # impl Sender for MineSender {
/// #     type Value = ();
/// #     type Error = Infallible;
/// #     const SENDS_STOPPED: bool = true;
/// #     type Domain = <PoolScheduler as Scheduler>::Domain;
/// #     type CompletionScheduler = Mine;
/// #     fn completion_scheduler(&self) -> Mine { self.0.clone() }
/// # }
/// # impl<R: Receiver<(), Infallible>> SenderTo<R> for MineSender
/// # where <PoolScheduler as Scheduler>::Sender: SenderTo<R> {
/// #     type Operation = <<PoolScheduler as Scheduler>::Sender as SenderTo<R>>::Operation;
/// #     fn connect(self, r: R) -> Self::Operation { (self.0).0.schedule().connect(r) }
/// # }
/// # impl Scheduler for Mine {
/// #     type Domain = <PoolScheduler as Scheduler>::Domain;
/// #     type Sender = MineSender;
/// #     fn schedule(&self) -> MineSender { MineSender(self.clone()) }
/// # }
///
/// impl TimedScheduler for Mine {
///     type TimedSender = ScheduleAt<Self>;
///     fn schedule_at(&self, deadline: Instant) -> ScheduleAt<Self> {
///         ScheduleAt::new(self.clone(), Some(deadline))
///     }
///     fn schedule_after(&self, delay: Duration) -> ScheduleAt<Self> {
///         ScheduleAt::after(self.clone(), delay)
///     }
/// }
///
/// let pool = StaticThreadPool::new(1).unwrap();
/// let start = Instant::now();
/// sync_wait(schedule_after(&Mine(pool.scheduler()), Duration::from_millis(5))).unwrap();
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// ```
pub trait TimedScheduler: Scheduler {
    /// The sender of `schedule_at` and `schedule_after`: completes with `()` on this
    /// scheduler once its deadline has passed, or stopped as soon as a stop request
    /// comes before that.
    type TimedSender: Sender<Value = (), Error = std::convert::Infallible>;

    /// The scheduler's clock: [`Instant::now`] unless the scheduler keeps its own time.
    ///
    /// ```
    /// use std::time::Duration;
    /// use senders::{SingleThreadContext, TimedScheduler, sync_wait};
    /// let ctx = SingleThreadContext::new();
    /// let sch = ctx.scheduler();
    /// let deadline = sch.now() + Duration::from_millis(2);
    /// sync_wait(sch.schedule_at(deadline)).unwrap();
    /// assert!(sch.now() >= deadline);
    /// ```
    fn now(&self) -> Instant {
        Instant::now()
    }

    /// A sender that completes on this scheduler at `deadline` (at once if it has
    /// passed).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use senders::{Scheduler, SenderExt, SingleThreadContext, TimedScheduler, sync_wait};
    /// let ctx = SingleThreadContext::new();
    /// let sch = ctx.scheduler();
    /// let there = sch.clone();
    /// let deadline = Instant::now() + Duration::from_millis(2);
    /// let late = sch.schedule_at(deadline).then(move |()| there.is_current());
    /// assert_eq!(sync_wait(late).unwrap(), Some(true), "it completes on the scheduler");
    /// assert!(Instant::now() >= deadline);
    /// ```
    fn schedule_at(&self, deadline: Instant) -> Self::TimedSender;

    /// A sender that completes on this scheduler `delay` after it is *started* (the
    /// reference's `schedule_at(now() + delay)`, with `now()` taken at `start`: senders
    /// are lazy, so one made and started later still waits the whole delay). A delay too
    /// long to represent never passes. With the crate's timers it is
    /// [`ScheduleAt::after`].
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use senders::{SingleThreadContext, TimedScheduler, sync_wait};
    /// let ctx = SingleThreadContext::new();
    /// let later = ctx.scheduler().schedule_after(Duration::from_millis(2));
    /// std::thread::sleep(Duration::from_millis(2));
    /// // The delay counts from `start`, not from when the sender was made.
    /// let started = Instant::now();
    /// sync_wait(later).unwrap();
    /// assert!(started.elapsed() >= Duration::from_millis(2));
    /// ```
    fn schedule_after(&self, delay: Duration) -> Self::TimedSender;
}

/// `schedule_at(sch, deadline)`: a sender that completes on `sch` at `deadline`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use senders::{StaticThreadPool, schedule_at, sync_wait};
/// let pool = StaticThreadPool::new(1).unwrap();
/// let deadline = Instant::now() + Duration::from_millis(5);
/// sync_wait(schedule_at(&pool.scheduler(), deadline)).unwrap();
/// assert!(Instant::now() >= deadline);
/// ```
pub fn schedule_at<Sch: TimedScheduler>(sch: &Sch, deadline: Instant) -> Sch::TimedSender {
    sch.schedule_at(deadline)
}

/// `schedule_after(sch, delay)`: a sender that completes on `sch` `delay` after it starts.
///
/// ```
/// use std::time::{Duration, Instant};
/// use senders::{SenderExt, StaticThreadPool, schedule_after, sync_wait};
/// let pool = StaticThreadPool::new(1).unwrap();
/// let start = Instant::now();
/// let on_pool = schedule_after(&pool.scheduler(), Duration::from_millis(5))
///     .then(|()| std::thread::current().name().map(str::to_owned));
/// assert!(sync_wait(on_pool).unwrap().unwrap().unwrap().starts_with("senders-worker"));
/// assert!(start.elapsed() >= Duration::from_millis(5));
/// ```
pub fn schedule_after<Sch: TimedScheduler>(sch: &Sch, delay: Duration) -> Sch::TimedSender {
    sch.schedule_after(delay)
}

/// Timed through the crate's timers ([`ScheduleAt`]).
#[cfg(not(loom))]
macro_rules! timed_with_crate_timers {
    ($([$($g:tt)*] $ty:ty),* $(,)?) => {$(
        impl<$($g)*> TimedScheduler for $ty {
            type TimedSender = ScheduleAt<Self>;
            fn schedule_at(&self, deadline: Instant) -> ScheduleAt<Self> {
                ScheduleAt::new(self.clone(), Some(deadline))
            }
            fn schedule_after(&self, delay: Duration) -> ScheduleAt<Self> {
                ScheduleAt::after(self.clone(), delay)
            }
        }
    )*};
}

#[cfg(not(loom))]
timed_with_crate_timers!(
    [] crate::PoolScheduler,
    [] crate::RunLoopScheduler,
    [D: crate::domain::MaybeDomain] crate::SingleThreadScheduler<D>,
    [] crate::task::TaskScheduler,
);
