//! Heap blocks, recycled per thread: the crate's one allocator for what it puts on the
//! heap while work runs.
//!
//! Its users: the block of every spawned operation (`spawn`, `spawn_future` and
//! `into_awaitable`, `scope/spawn.rs`), a [`Task`](crate::Task)'s frame and the large
//! operations it awaits (`task/`), an [`AnySender`](crate::AnySender)'s erased
//! operation (`any.rs`), the block of an erased `schedule()` (`task/scheduler.rs`), and
//! the [`BlockSlice`] of a run-time number of children (`when_all`'s and `when_any`'s), and
//! the [`BlockVec`] that `when_all_iter` collects its senders into.
//! Each is allocated once and freed when its operation completes, often on another
//! thread than the one that allocated it.
//!
//! The recycler is in `recycler.rs`; [`BlockSlice`] and [`BlockVec`], a run-time number of
//! values in one block, are in `vec.rs`.
#![cfg_attr(any(loom, senders_uncached_blocks), allow(dead_code))]

mod recycler;
mod vec;

pub(crate) use recycler::{drop_and_free, free, free_after, new, uninit};
pub use vec::{BlockSlice, BlockVec, BlockVecIntoIter};
