//! Schedulers provided by the core ([`InlineScheduler`], [`RunLoop`],
//! [`SingleThreadContext`]), their senders and operation states, and the
//! "no scheduler" markers. The thread pool is in [`crate::pool`].
pub(crate) mod inline;
pub(crate) mod run_loop;
pub(crate) mod single_thread;

pub use crate::scheduler::{MaybeScheduler, NoScheduler, Scheduler, schedule};
pub use inline::{InlineOp, InlineScheduler, InlineSender};
pub use run_loop::{RunLoop, RunLoopOp, RunLoopScheduler, RunLoopSender};
pub use single_thread::{SingleThreadContext, SingleThreadScheduler, SingleThreadSender};
