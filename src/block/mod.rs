//! Heap blocks, recycled per thread (`recycler.rs`): the crate's one allocator for what
//! it puts on the heap while work runs; and [`BlockSlice`] and [`BlockVec`] (`vec.rs`), a
//! run-time number of values side by side in one such block.

mod recycler;
mod vec;

pub(crate) use recycler::*;
pub use vec::{BlockSlice, BlockVec, BlockVecIntoIter};
