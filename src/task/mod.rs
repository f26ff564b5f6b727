//! `Task` (P3552): a lazy sender written as an `async` block, which awaits senders.
//!
//! A [`Task`] is one heap block (its *frame*, recycled per thread like spawn blocks)
//! holding a Rust future. Connecting and starting it polls the future on the thread that
//! starts it. Inside, `.await` on a sender of this crate (or on
//! [`awaited(sndr)`](crate::SenderExt::awaited) for any sender) returns `Ok(value)` or
//! `Err(error)`; a stopped sender completes the task stopped without resuming it, and a
//! panic completes it with the panic.
//!
//! The protocol in full (the deferred start, where an awaited operation lives, the state
//! word, wakers, the environment of awaited senders) and why it is sound are in
//! `README.md` beside this file.
//!
//! # The deferred start
//!
//! Awaiting a sender does not start it. The first poll of an [`Awaited`] connects the
//! sender inside itself (pinned in the frame) and registers it with the running task.
//! When the poll of the task's future returns `Pending`, the task starts every registered
//! operation, and it polls the future again only once **all** of them have completed.
//! So no awaited operation ever runs while the future runs: an awaited sender may
//! borrow the future's locals, and leaking an [`Awaited`] mid-await (`mem::forget`)
//! cannot let its operation outlive what it borrows, since the future is not resumed,
//! and so cannot return and drop its locals, until that operation has completed. Several
//! senders awaited together (e.g. by a `join!` of futures) run concurrently.
//!
//! # States
//!
//! One atomic word: the number of started awaited operations not yet completed, a
//! `RUNNING` bit (someone is polling, or starting the registered operations, or about
//! to), and a `WOKEN` bit (a waker fired while `RUNNING`).
//!
//! | event | transition | then |
//! |---|---|---|
//! | the runner polls: `Ready` | — | completes (the count is 0) |
//! | the runner polls: `Pending` | count += one per registered operation, each started | — |
//! | then, count 0 and (something started, or `WOKEN`) | stays `RUNNING`, clears `WOKEN` | polls again (a loop: inline completions cannot grow the stack) |
//! | then, otherwise | clears `RUNNING` | returns |
//! | an awaited operation completes | count −= 1; at 0 without `RUNNING`, sets `RUNNING` | resumes the task |
//! | a waker fires | with `RUNNING` or a count: sets `WOKEN`; otherwise sets `RUNNING` | resumes the task |
//!
//! *Resuming* runs the poll loop inline if the calling thread is on the task's scheduler
//! (or the environment has none, or it is the inline scheduler), and otherwise
//! `schedule()`s it there (P3552 scheduler affinity, without the needless reschedule of
//! stdexec #1634).
//!
//! # Environment
//!
//! Awaited senders see an environment with the task's scheduler, erased as a
//! [`TaskScheduler`]; the pool's domain (which customizes `when_all` and `bulk` only
//! when it runs on a pool worker, and is the default elsewhere, so that `when_all` of
//! tasks forks on the pool); the receiver's user queries; and the receiver's stop token
//! itself (the token types match, so nothing needs linking).

mod affinity;
mod awaiting;
mod frame;
mod op;
mod scheduler;
mod state;

pub use affinity::{ChangeScheduler, TaskHome, TaskHop, change_scheduler};
pub use awaiting::{AwaitRcvr, Awaited, awaited};
pub use frame::Task;
pub use op::TaskOp;
pub use scheduler::{ErasedScheduleReceiver, TaskScheduleOp, TaskScheduleSender, TaskScheduler};
pub use state::TaskCtx;
