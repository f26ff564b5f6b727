//! A value made by a plain call: [`ReadyFn`], what
//! [`Sender::into_ready_fn`](crate::Sender::into_ready_fn) hands over for `just(x).then(f)`,
//! and the one word of room it keeps its state in. [`AnySender`](crate::AnySender) keeps
//! such a leaf (and a ready value of its own) in that room instead of a heap block.

use std::marker::PhantomData;
use std::mem::MaybeUninit;

/// The room an [`AnySender`](crate::AnySender) has for a ready value of its own, instead of a block: one
/// word, so that an `AnySender` is two (a tag and the room or the block) and is passed
/// and returned in registers.
pub(crate) type Room = MaybeUninit<usize>;

/// Whether a `T` fits the [`Room`], in size and alignment.
#[inline]
pub(crate) const fn fits_room<T>() -> bool {
    size_of::<T>() <= size_of::<Room>() && align_of::<T>() <= align_of::<Room>()
}

/// A value made at once by a plain call from a state of at most one word that needs no
/// drop: what [`Sender::into_ready_fn`](crate::Sender::into_ready_fn) hands over for
/// `just(x).then(f)`, so that an [`AnySender`](crate::AnySender) keeps such a leaf without a heap block.
/// Only the crate makes one. `'a` is what the state borrows.
pub struct ReadyFn<'a, V> {
    pub(crate) lazy: Lazy<V>,
    _borrow: PhantomData<&'a ()>,
}

impl<'a, V> ReadyFn<'a, V> {
    /// Whether a state of type `C` may be kept: it fits the word and needs no drop.
    #[inline]
    pub(crate) const fn fits<C>() -> bool {
        fits_room::<C>() && !std::mem::needs_drop::<C>()
    }

    /// Keeps `state`, made into the value when called. The caller checks first that it
    /// [fits](Self::fits) (before taking the state out of its sender).
    #[inline]
    pub(crate) fn new<C: ReadyCall<Output = V> + 'a>(state: C) -> Self {
        assert!(Self::fits::<C>(), "AnySender: a plain call whose state does not fit");
        let mut room = Room::uninit();
        // SAFETY: the room has the size and alignment for a `C` (asserted).
        unsafe { room.as_mut_ptr().cast::<C>().write(state) };
        ReadyFn { lazy: Lazy { call: call_ready::<C>, room }, _borrow: PhantomData }
    }
}

/// The state of a [`ReadyFn`]: what makes the value from it.
pub(crate) trait ReadyCall {
    /// The value.
    type Output;
    /// Makes it.
    fn call(self) -> Self::Output;
}

/// # Safety
///
/// The room holds a `C` (`ReadyFn::new`), not read before.
unsafe fn call_ready<C: ReadyCall>(room: Room) -> C::Output {
    // SAFETY: the caller's contract.
    unsafe { room.as_ptr().cast::<C>().read() }.call()
}

/// The lifetime-free part of a [`ReadyFn`], as an [`AnySender`](crate::AnySender) keeps it (the
/// `AnySender`'s own lifetime bounds the state's borrows).
pub(crate) struct Lazy<V> {
    pub(crate) call: unsafe fn(Room) -> V,
    pub(crate) room: Room,
}

impl<V> Lazy<V> {
    /// Makes the value.
    #[inline]
    pub(crate) fn call(self) -> V {
        // SAFETY: `call` was made for the state in the room (`ReadyFn::new`), which is
        // read once: `self` is consumed.
        unsafe { (self.call)(self.room) }
    }
}
