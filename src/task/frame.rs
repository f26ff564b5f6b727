//! The frame: one heap block holding the task's future behind a one-word header.

use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// Polls the future behind a frame header.
pub(super) type PollFn<T, E> = unsafe fn(NonNull<Header<T, E>>, &mut Context<'_>) -> Poll<Result<T, E>>;

/// How to poll and drop the future of one frame type.
pub(super) struct FrameFns<T, E> {
    poll: PollFn<T, E>,
    drop: unsafe fn(NonNull<Header<T, E>>),
}

/// The type-erased part of a frame: a pointer to its functions, built by a constant
/// (one word, so that a small future's whole frame is copied without a call to `memcpy`).
#[repr(C)]
pub(super) struct Header<T, E> {
    pub(super) fns: *const FrameFns<T, E>,
}

impl<T, E> Header<T, E> {
    /// Polls the future.
    ///
    /// # Safety
    ///
    /// As `poll_frame`: `h` heads a live, pinned frame.
    pub(super) unsafe fn poll(h: NonNull<Self>, cx: &mut Context<'_>) -> Poll<Result<T, E>> {
        // SAFETY: the caller's contract; the table lives in constant memory.
        unsafe { ((*h.as_ref().fns).poll)(h, cx) }
    }

    /// Drops the future and frees the frame.
    ///
    /// # Safety
    ///
    /// As `drop_frame`: `h` heads a live frame, dropped once.
    pub(super) unsafe fn drop(h: NonNull<Self>) {
        // SAFETY: as above.
        unsafe { ((*h.as_ref().fns).drop)(h) }
    }
}

#[repr(C)]
pub(super) struct Frame<T, E, F> {
    pub(super) header: Header<T, E>,
    pub(super) fut: F,
}

impl<T, E, F: Future<Output = Result<T, E>>> Frame<T, E, F> {
    pub(super) const FNS: *const FrameFns<T, E> =
        &FrameFns { poll: poll_frame::<T, E, F>, drop: drop_frame::<T, E, F> };
}

/// # Safety
///
/// `h` heads a live, pinned `Frame<T, E, F>`.
unsafe fn poll_frame<T, E, F: Future<Output = Result<T, E>>>(
    h: NonNull<Header<T, E>>,
    cx: &mut Context<'_>,
) -> Poll<Result<T, E>> {
    // SAFETY: the caller's contract; the frame never moves (it is a heap block).
    unsafe { Pin::new_unchecked(&mut (*h.cast::<Frame<T, E, F>>().as_ptr()).fut) }.poll(cx)
}

/// # Safety
///
/// `h` heads a live `Frame<T, E, F>` from `Task::new`; called once.
unsafe fn drop_frame<T, E, F>(h: NonNull<Header<T, E>>) {
    let frame = h.cast::<Frame<T, E, F>>();
    // SAFETY: the caller's contract.
    unsafe { crate::block::drop_and_free(frame) }
}
