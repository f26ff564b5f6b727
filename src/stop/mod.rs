//! In-place stop tokens: [`InplaceStopSource`], [`StopToken`], [`StopCallback`] and
//! [`MergedStopSource`], in the spirit of C++26's `std::inplace_stop_source`,
//! `inplace_stop_token` and `inplace_stop_callback`, with lifetimes for safety.
//!
//! Nothing here allocates: a registered callback is an intrusive node living inside the
//! (pinned) [`StopCallback`], linked into a doubly-linked list owned by the source.
//!
//! # The protocol
//!
//! The source has one atomic state word with two bits:
//!
//! | bit              | meaning                                                        |
//! |------------------|----------------------------------------------------------------|
//! | `STOP_REQUESTED` | set once by the first `request_stop`, never cleared            |
//! | `LOCKED`         | a tiny spinlock guarding the list and the notifying thread id  |
//!
//! Only the lock holder changes the word; taking the lock is a compare-exchange
//! (Acquire), releasing it a store (Release).
//!
//! - **register** takes the lock *unless* stop was requested. If it got the lock it
//!   links the node at the head of the list; otherwise it runs the callback inline.
//! - **request_stop** takes the lock *and* sets `STOP_REQUESTED` in one
//!   compare-exchange, unless the bit was already set (then it returns `false`). It
//!   records its thread id as the *notifying thread*, then repeatedly pops the head
//!   node, **releases the lock**, runs the callback, marks the node `completed`
//!   (Release) and retakes the lock, until the list is empty. Each callback thus runs
//!   exactly once, one at a time, on the requesting thread, and callbacks may themselves
//!   register or drop callbacks on the same source.
//! - **drop** (deregistration) takes the lock. A node still linked is unlinked: it
//!   never ran and never will. A node no longer linked was popped by `request_stop`:
//!   if the notifying thread is another thread, drop releases the lock and waits
//!   (spinning, then yielding) until `completed` is set (Acquire); if it is this thread,
//!   the callback is either finished or is the one dropping itself right now, so drop
//!   must not wait (that would deadlock): instead it sets the *removed-during-callback*
//!   flag, which lives on `request_stop`'s stack and to which the node points while its
//!   callback runs, so `request_stop` never touches the (now freed) node again.
//!
//! # Node states
//!
//! | state      | `linked` | `completed` | who may touch the node                          |
//! |------------|----------|-------------|-------------------------------------------------|
//! | idle       | no       | no          | the owner only (not registered yet)             |
//! | inline     | no       | no          | the owner only: never linked (the never token, or stop was already requested and the callback ran in `register`) |
//! | linked     | yes      | no          | the lock holder: the links; the owner's drop unlinks it under the lock |
//! | running    | no       | no          | the notifying thread: takes the callback out, runs it, sets `removed`/`completed`; the owner only spins on `completed` (or, on the notifying thread, sets the removed flag) |
//! | completed  | no       | yes         | the owner only (it may now free the node)       |
//!
//! The owner is whoever holds the [`StopCallback`]; it alone knows (without
//! synchronization) whether it registered the node, and only its drop removes it.
//!
//! # Lifetimes and leaking
//!
//! A [`StopToken<'a>`](StopToken) borrows its source, and a [`StopCallback<'a, F>`]
//! holds such a token, so safe code cannot drop a source while callbacks are registered
//! on it. Because a registered callback may be leaked (and then still be called by its
//! source), the safe [`StopCallback::register`] requires `F: 'static`; callbacks that
//! borrow data use the `unsafe` [`StopCallback::register_unchecked`]. Operation states
//! that cannot carry the source's lifetime use [`StopToken::detach`] and keep the source
//! alive by contract.

mod callback;
mod forward;
mod merged;
mod source;

pub use callback::StopCallback;
pub use merged::MergedStopSource;
pub use source::{InplaceStopSource, StopToken};

pub(crate) use callback::{Invoke, RawStopCallback};
pub(crate) use forward::{ForwardStop, ForwardTarget, hold_live_count};
