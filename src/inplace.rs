//! [`InPlace`]: an optional value built where it lives.
//!
//! Operation states nest: an adaptor's operation holds its child's, which it makes by
//! calling `connect` when it starts. Stored in an `Option`, the child's operation is
//! returned by `connect` into a temporary and then copied into the `Option`, a `memcpy`
//! of the whole nested operation (hundreds of bytes for a `let_value` around a
//! `when_all`) at every level of every recursive node. The profile of `fib` through
//! `when_all` showed these copies at a tenth of the instructions. `InPlace::emplace`
//! hands `connect` the final place instead, so the operation is built there.

use std::mem::MaybeUninit;

use crate::panic::{Panic, catch};

/// An optional value written in place by [`emplace`](Self::emplace) and dropped with the
/// `InPlace` (or by [`clear`](Self::clear)).
pub(crate) struct InPlace<T> {
    value: MaybeUninit<T>,
    live: bool,
}

impl<T> InPlace<T> {
    /// Empty.
    pub(crate) const fn empty() -> Self {
        InPlace { value: MaybeUninit::uninit(), live: false }
    }

    /// Builds the value with `make`, in place, and returns it; a panic in `make` is
    /// returned instead and leaves `self` empty. Drops the previous value first, if any.
    #[inline]
    pub(crate) fn emplace(&mut self, make: impl FnOnce() -> T) -> Result<&mut T, Panic> {
        self.clear();
        let place = &mut self.value;
        catch(move || {
            place.write(make());
        })?;
        self.live = true;
        // SAFETY: just written.
        Ok(unsafe { self.value.assume_init_mut() })
    }

    /// Drops the value, if any.
    #[inline]
    pub(crate) fn clear(&mut self) {
        if std::mem::replace(&mut self.live, false) {
            // SAFETY: `live` said the value was written and not yet dropped; it is now
            // marked gone before the drop, so a panicking `Drop` does not run twice.
            unsafe { self.value.assume_init_drop() }
        }
    }
}

impl<T> Drop for InPlace<T> {
    // Inlined: out of line (which the compiler chose once the run-time `when_all` took
    // its cells into the children's block, 964f1e6), every erased block's drop called it,
    // about 9 instructions per `fib` call.
    #[inline]
    fn drop(&mut self) {
        self.clear();
    }
}
