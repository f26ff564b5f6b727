//! Under loom and `--cfg senders_uncached_blocks`: no cache, every block comes from
//! the global allocator and goes back to it.

use super::*;

pub(super) fn alloc(class: usize) -> *mut u8 {
    fresh_block(class, ptr::null())
}

/// # Safety
///
/// As in the non-loom build.
#[inline]
pub(super) unsafe fn free(block: *mut u8) {
    // SAFETY: forwarded.
    unsafe { release_block(block) }
}
