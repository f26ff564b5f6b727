//! Time: timed schedulers (`schedule_at`, `schedule_after`, the reference
//! implementation's timed-scheduler concept) and [`timeout`].
//!
//! | file | what |
//! |---|---|
//! | `timed.rs` | [`TimedScheduler`], [`schedule_at`], [`schedule_after`], the crate schedulers' impls |
//! | `schedule_at.rs` | [`ScheduleAt`], the timed sender: a timer, then a hop onto the scheduler |
//! | `timers.rs` | the timer service: sharded heaps of pending timers and the thread that fires them |
//! | `firing.rs` | the firing threads, where what the timer thread must not run runs |
//! | `timeout.rs` | [`timeout`]: a sender raced against a timer with `when_any` |
//!
//! Every crate scheduler but [`InlineScheduler`](crate::InlineScheduler) is timed. Their
//! timers live in one service per process, whose thread sleeps until the earliest
//! deadline (without a timer, it sleeps until one is set: an idle process spends no CPU
//! on time) and then starts a `schedule()` of each due timer's scheduler, so the timed
//! sender completes where the scheduler runs work. The timer thread runs no user code:
//! it starts the `schedule()` of the crate's queueing schedulers itself (which only queue
//! work), and hands any other scheduler's (a user's, the inline scheduler) to a firing
//! thread, where an inline continuation then runs; a continuation that blocks holds its
//! firing thread only. A stop request removes a pending timer from its heap at once and
//! completes the sender stopped on the requesting thread.

// Under loom only the models use it: its global is the timed senders'.
#[cfg_attr(loom, allow(dead_code))]
mod firing;
#[cfg(not(loom))]
mod schedule_at;
mod timed;
#[cfg(not(loom))]
mod timeout;
// Under loom only the service's models use it: the timed senders need its thread.
#[cfg_attr(loom, allow(dead_code))]
pub(crate) mod timers;

pub use firing::{DEFAULT_MAX_FIRING_THREADS, max_firing_threads, set_max_firing_threads};
#[cfg(not(loom))]
pub use schedule_at::{CancelTimer, ScheduleAt, ScheduleAtOp, TimerReceiver, TimerState};
pub use timed::{TimedScheduler, schedule_after, schedule_at};
#[cfg(not(loom))]
pub use timeout::{Timeout, TimeoutChildren, TimeoutError, timeout};

#[cfg(test)]
mod tests;
