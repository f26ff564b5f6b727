//! `then`, `upon_error`, `upon_stopped`: map one completion channel with a function.

use std::convert::Infallible;

use sync_wrapper::SyncWrapper;

use crate::domain::{Domain, LateDomain, MaybeDomain};
use crate::env::Env;
use crate::panic::{Panic, catch, discard};
use crate::ready::{ReadyCall, ReadyFn};
use crate::receiver::Receiver;
use crate::sender::seal::Seal;
use crate::sender::{Sender, SenderTo, adaptor_sender};

mod hook;

pub use hook::{Then, ThenFn};

impl<S, F> Then<S, F> {
    /// The default implementation of this `then`.
    ///
    /// ```
    /// use senders::adaptors::Then;
    /// use senders::{just, sync_wait};
    /// let lowered = Then::new(just(2), |x: i32| x * 21).lower();
    /// assert_eq!(sync_wait(lowered).unwrap(), Some(42));
    /// ```
    pub fn lower(self) -> ThenImpl<S, F> {
        ThenImpl { sndr: self.sndr, f: self.f }
    }
}

adaptor_sender!([S: Sender, F: ThenFn<S::Value>] Then<S, F> where [] {
    value = F::Output, error = S::Error, stopped = S::SENDS_STOPPED
} {
    /// `then` of a value its predecessor holds, where the domain found at `connect` leaves
    /// `then` as it is, is the plain call of `f`, when the value and `f` fit a word and
    /// need no drop.
    fn into_ready_fn<'a, En: Env>(self, seal: Seal) -> Result<ReadyFn<'a, F::Output>, Self>
    where
        Self: 'a,
    {
        if !<LateDomain<S, En> as Domain>::THEN_IS_DEFAULT || !ReadyFn::<F::Output>::fits::<ThenCall<S::Value, F>>() {
            return Err(self);
        }
        match self.sndr.into_held_value(seal) {
            Ok(value) => Ok(ReadyFn::new(ThenCall { value, f: self.f })),
            Err(sndr) => Err(Then { sndr, f: self.f }),
        }
    }
});

/// The state of `then` of a held value as a [`ReadyFn`]: the value and the function.
struct ThenCall<V, F> {
    value: V,
    f: F,
}

impl<V, F: ThenFn<V>> ReadyCall for ThenCall<V, F> {
    type Output = F::Output;
    #[inline]
    fn call(self) -> F::Output {
        self.f.call(self.value)
    }
}

impl<S, F, R> SenderTo<R> for Then<S, F>
where
    S: Sender,
    F: ThenFn<S::Value>,
    R: Receiver<F::Output, S::Error>,
    <LateDomain<S, R::Env> as Domain>::Then<S, F>: SenderTo<R>,
{
    type Operation = <<LateDomain<S, R::Env> as Domain>::Then<S, F> as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        let domain = <LateDomain<S, R::Env>>::default();
        domain.transform_then(self, Some(receiver.env())).connect(receiver)
    }
}

/// The default implementation of `then`: calls `f` with the value on the thread that
/// delivered it. A panic in `f` completes with `set_panic`.
#[must_use = "senders do nothing unless connected and started"]
pub struct ThenImpl<S, F> {
    sndr: S,
    f: F,
}

adaptor_sender!([S: Sender, F: ThenFn<S::Value>] ThenImpl<S, F> where [] {
    value = F::Output, error = S::Error, stopped = S::SENDS_STOPPED
});

impl<S, F, R> SenderTo<R> for ThenImpl<S, F>
where
    S: SenderTo<ThenReceiver<F, R>>,
    F: ThenFn<S::Value>,
    R: Receiver<F::Output, S::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(ThenReceiver { f: SyncWrapper::new(self.f), rcvr: receiver })
    }
}

/// The receiver `then` connects its predecessor to.
pub struct ThenReceiver<F, R> {
    f: SyncWrapper<F>,
    rcvr: R,
}

impl<V, E, F: ThenFn<V>, R: Receiver<F::Output, E>> Receiver<V, E> for ThenReceiver<F, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    #[inline]
    fn set_value(self, value: V) {
        let f = self.f.into_inner();
        match catch(move || f.call(value)) {
            Ok(u) => self.rcvr.set_value(u),
            Err(p) => self.rcvr.set_panic(p),
        }
    }
    fn set_error(self, error: E) {
        let ThenReceiver { f, rcvr } = self;
        let f = f.into_inner();
        match discard(f) {
            Ok(()) => rcvr.set_error(error),
            Err(p) => {
                // DROP ORDER: what the panic replaces is dropped before the completion.
                let _ = discard(error);
                rcvr.set_panic(p)
            }
        }
    }
    fn set_stopped(self) {
        let ThenReceiver { f, rcvr } = self;
        let f = f.into_inner();
        match discard(f) {
            Ok(()) => rcvr.set_stopped(),
            Err(p) => rcvr.set_panic(p),
        }
    }
    fn set_panic(self, panic: Panic) {
        let ThenReceiver { f, rcvr } = self;
        let f = f.into_inner();
        let _ = discard(f);
        rcvr.set_panic(panic)
    }
}

/// The sender of `upon_error(sndr, f)`, made by
/// [`SenderExt::upon_error`](crate::SenderExt::upon_error): an error `e` becomes the value
/// `f(e)`.
#[must_use = "senders do nothing unless connected and started"]
pub struct UponError<S, F> {
    sndr: S,
    f: F,
}

impl<S, F> UponError<S, F> {
    pub(crate) fn new(sndr: S, f: F) -> Self {
        UponError { sndr, f }
    }
}

adaptor_sender!([S: Sender, F: FnOnce(S::Error) -> S::Value] UponError<S, F> where [] {
    value = S::Value, error = Infallible, stopped = S::SENDS_STOPPED
});

impl<S, F, R> SenderTo<R> for UponError<S, F>
where
    S: SenderTo<UponErrorReceiver<F, R>>,
    F: FnOnce(S::Error) -> S::Value,
    R: Receiver<S::Value, Infallible>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(UponErrorReceiver { f: SyncWrapper::new(self.f), rcvr: receiver })
    }
}

/// The receiver `upon_error` connects its predecessor to.
pub struct UponErrorReceiver<F, R> {
    f: SyncWrapper<F>,
    rcvr: R,
}

impl<V, E, F: FnOnce(E) -> V, R: Receiver<V, Infallible>> Receiver<V, E> for UponErrorReceiver<F, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, value: V) {
        let UponErrorReceiver { f, rcvr } = self;
        let f = f.into_inner();
        match discard(f) {
            Ok(()) => rcvr.set_value(value),
            Err(p) => {
                // DROP ORDER: what the panic replaces is dropped before the completion.
                let _ = discard(value);
                rcvr.set_panic(p)
            }
        }
    }
    fn set_error(self, error: E) {
        let f = self.f.into_inner();
        match catch(move || f(error)) {
            Ok(v) => self.rcvr.set_value(v),
            Err(p) => self.rcvr.set_panic(p),
        }
    }
    fn set_stopped(self) {
        let UponErrorReceiver { f, rcvr } = self;
        let f = f.into_inner();
        match discard(f) {
            Ok(()) => rcvr.set_stopped(),
            Err(p) => rcvr.set_panic(p),
        }
    }
    fn set_panic(self, panic: Panic) {
        let UponErrorReceiver { f, rcvr } = self;
        let f = f.into_inner();
        let _ = discard(f);
        rcvr.set_panic(panic)
    }
}

/// The sender of `upon_stopped(sndr, f)`, made by
/// [`SenderExt::upon_stopped`](crate::SenderExt::upon_stopped): a stop becomes the value
/// `f()`.
#[must_use = "senders do nothing unless connected and started"]
pub struct UponStopped<S, F> {
    sndr: S,
    f: F,
}

impl<S, F> UponStopped<S, F> {
    pub(crate) fn new(sndr: S, f: F) -> Self {
        UponStopped { sndr, f }
    }
}

adaptor_sender!([S: Sender, F: FnOnce() -> S::Value] UponStopped<S, F> where [] {
    value = S::Value, error = S::Error, stopped = false
});

impl<S, F, R> SenderTo<R> for UponStopped<S, F>
where
    S: SenderTo<UponStoppedReceiver<F, R>>,
    F: FnOnce() -> S::Value,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(UponStoppedReceiver { f: SyncWrapper::new(self.f), rcvr: receiver })
    }
}

/// The receiver `upon_stopped` connects its predecessor to.
pub struct UponStoppedReceiver<F, R> {
    f: SyncWrapper<F>,
    rcvr: R,
}

impl<V, E, F: FnOnce() -> V, R: Receiver<V, E>> Receiver<V, E> for UponStoppedReceiver<F, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, value: V) {
        let UponStoppedReceiver { f, rcvr } = self;
        let f = f.into_inner();
        match discard(f) {
            Ok(()) => rcvr.set_value(value),
            Err(p) => {
                // DROP ORDER: what the panic replaces is dropped before the completion.
                let _ = discard(value);
                rcvr.set_panic(p)
            }
        }
    }
    fn set_error(self, error: E) {
        let UponStoppedReceiver { f, rcvr } = self;
        let f = f.into_inner();
        match discard(f) {
            Ok(()) => rcvr.set_error(error),
            Err(p) => {
                // DROP ORDER: what the panic replaces is dropped before the completion.
                let _ = discard(error);
                rcvr.set_panic(p)
            }
        }
    }
    fn set_stopped(self) {
        match catch(self.f.into_inner()) {
            Ok(v) => self.rcvr.set_value(v),
            Err(p) => self.rcvr.set_panic(p),
        }
    }
    fn set_panic(self, panic: Panic) {
        let UponStoppedReceiver { f, rcvr } = self;
        let f = f.into_inner();
        let _ = discard(f);
        rcvr.set_panic(panic)
    }
}

/// Early customization entry used by [`SenderExt::then`](crate::SenderExt::then).
pub(crate) fn then<S: Sender, F: ThenFn<S::Value>>(sndr: S, f: F) -> <S::Domain as MaybeDomain>::EarlyThen<S, F> {
    <S::Domain as MaybeDomain>::early_then(Then::new(sndr, f))
}
