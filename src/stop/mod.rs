//! TEMPORARY stub, replaced by the real stop module.
#![allow(missing_docs)]
use std::marker::PhantomData;
#[derive(Clone, Copy)]
pub struct StopToken<'a>(Option<&'a InplaceStopSource>);
impl StopToken<'_> {
    pub const fn never() -> StopToken<'static> { StopToken(None) }
    pub fn stop_requested(&self) -> bool { self.0.is_some_and(|s| s.stop_requested()) }
    pub fn stop_possible(&self) -> bool { self.0.is_some() }
    pub unsafe fn detach(self) -> StopToken<'static> { unsafe { std::mem::transmute(self) } }
}
#[derive(Default)]
pub struct InplaceStopSource(std::sync::atomic::AtomicBool);
impl InplaceStopSource {
    pub fn new() -> Self { Self::default() }
    pub fn token(&self) -> StopToken<'_> { StopToken(Some(self)) }
    pub fn request_stop(&self) -> bool { !self.0.swap(true, std::sync::atomic::Ordering::SeqCst) }
    pub fn stop_requested(&self) -> bool { self.0.load(std::sync::atomic::Ordering::SeqCst) }
}
pub struct StopCallback<'a, F: FnOnce() + Send>(StopToken<'a>, Option<F>, PhantomData<std::marker::PhantomPinned>);
impl<'a, F: FnOnce() + Send> StopCallback<'a, F> {
    pub fn new(t: StopToken<'a>, f: F) -> Self { Self(t, Some(f), PhantomData) }
    pub fn register(self: std::pin::Pin<&mut Self>) {}
}
