//! Adaptors that reshape completion channels without user code on the value path:
//! `into_variant`, `stopped_as_optional`, `stopped_as_error`, `with_error`, `map_error`.

use std::convert::Infallible;
use std::marker::PhantomData;

use crate::panic::{Panic, catch, discard};
use crate::receiver::Receiver;
use crate::sender::{Sender, SenderTo, adaptor_sender};

/// Declares a sender `$name<S, ..>` that connects its predecessor to `$rcv<.., R>`.
macro_rules! reshaping_sender {
    (
        $(#[$doc:meta])*
        $name:ident<S $(, $p:ident)*> { $($field:ident : $fty:ty),* }
        receiver $rcv:ident;
        value = $value:ty, error = $error:ty, stopped = $stopped:expr;
        where [$($bounds:tt)*]
    ) => {
        $(#[$doc])*
        #[must_use = "senders do nothing unless connected and started"]
        pub struct $name<S $(, $p)*> {
            sndr: S,
            $($field: $fty,)*
        }

        adaptor_sender!([S: Sender $(, $p)*] $name<S $(, $p)*> where [$($bounds)*] {
            value = $value, error = $error, stopped = $stopped
        });

        impl<S: Sender $(, $p)*, R> SenderTo<R> for $name<S $(, $p)*>
        where
            $($bounds)*
            R: Receiver<$value, $error>,
            S: SenderTo<$rcv<<S as Sender>::Value, <S as Sender>::Error $(, $p)*, R>>,
        {
            type Operation = S::Operation;
            fn connect(self, receiver: R) -> S::Operation {
                let $name { sndr, $($field,)* } = self;
                sndr.connect($rcv { rcvr: receiver, $($field,)* _t: PhantomData })
            }
        }

        /// The receiver this adaptor connects its predecessor to.
        pub struct $rcv<V, E $(, $p)*, R> {
            rcvr: R,
            $($field: $fty,)*
            _t: PhantomData<fn() -> (V, E)>,
        }
    };
}

reshaping_sender! {
    /// The sender of [`SenderExt::into_variant`](crate::SenderExt::into_variant). Every sender here has exactly one value type, so
    /// the variant of its value tuples is that type: this is the identity on values.
    IntoVariant<S> {}
    receiver IntoVariantReceiver;
    value = S::Value, error = S::Error, stopped = S::SENDS_STOPPED;
    where []
}

reshaping_sender! {
    /// The sender of
    /// [`SenderExt::stopped_as_optional`](crate::SenderExt::stopped_as_optional): a value
    /// `v` becomes `Some(v)`, a stop becomes the value `None`.
    StoppedAsOptional<S> {}
    receiver StoppedAsOptionalReceiver;
    value = Option<S::Value>, error = S::Error, stopped = false;
    where []
}

reshaping_sender! {
    /// The sender of [`SenderExt::stopped_as_error`](crate::SenderExt::stopped_as_error): a stop becomes the given error.
    StoppedAsError<S, E2> { error: E2 }
    receiver StoppedAsErrorReceiver;
    value = S::Value, error = S::Error, stopped = false;
    where [S: Sender<Error = E2>,]
}

reshaping_sender! {
    /// The sender of [`SenderExt::with_error`](crate::SenderExt::with_error): a sender
    /// that cannot fail, typed as one that may fail with `E`, so it can join `when_all`
    /// or `let_value` with fallible ones.
    WithError<S, E2> { _e: PhantomData<fn() -> E2> }
    receiver WithErrorReceiver;
    value = S::Value, error = E2, stopped = S::SENDS_STOPPED;
    where [S: Sender<Error = Infallible>,]
}

reshaping_sender! {
    /// The sender of [`SenderExt::map_error`](crate::SenderExt::map_error): an error `e` becomes the error `f(e)`.
    MapError<S, F> { f: F }
    receiver MapErrorReceiver;
    value = S::Value, error = <F as MapErrorFn<S::Error>>::Output, stopped = S::SENDS_STOPPED;
    where [F: MapErrorFn<S::Error>,]
}

impl<S> IntoVariant<S> {
    pub(crate) fn new(sndr: S) -> Self {
        IntoVariant { sndr }
    }
}
impl<S> StoppedAsOptional<S> {
    pub(crate) fn new(sndr: S) -> Self {
        StoppedAsOptional { sndr }
    }
}
impl<S, E> StoppedAsError<S, E> {
    pub(crate) fn new(sndr: S, error: E) -> Self {
        StoppedAsError { sndr, error }
    }
}
impl<S, E> WithError<S, E> {
    pub(crate) fn new(sndr: S) -> Self {
        WithError { sndr, _e: PhantomData }
    }
}
impl<S, F> MapError<S, F> {
    pub(crate) fn new(sndr: S, f: F) -> Self {
        MapError { sndr, f }
    }
}

/// An error-mapping function; implemented for every `FnOnce(E) -> E2`.
pub trait MapErrorFn<E> {
    /// The new error type.
    type Output;
    /// Maps the error.
    ///
    /// ```
    /// use senders::adaptors::MapErrorFn;
    /// assert_eq!(MapErrorFn::call(|e: &str| e.len(), "four"), 4);
    /// ```
    fn call(self, error: E) -> Self::Output;
}
impl<E, E2, F: FnOnce(E) -> E2> MapErrorFn<E> for F {
    type Output = E2;
    fn call(self, error: E) -> E2 {
        self(error)
    }
}

/// The receiver methods that forward a channel unchanged.
macro_rules! forward {
    (env) => {
        fn env(&self) -> &R::Env {
            self.rcvr.env()
        }
    };
    (value) => {
        fn set_value(self, value: V) {
            self.rcvr.set_value(value)
        }
    };
    (error) => {
        fn set_error(self, error: E) {
            self.rcvr.set_error(error)
        }
    };
    (stopped) => {
        fn set_stopped(self) {
            self.rcvr.set_stopped()
        }
    };
    (panic) => {
        fn set_panic(self, panic: Panic) {
            self.rcvr.set_panic(panic)
        }
    };
    // The same, for a receiver that carries user data (`field`): it is dropped first,
    // and a panic in its `Drop` becomes the completion (see `panic::discard`).
    (value; $field:ident) => {
        fn set_value(self, value: V) {
            let Self { rcvr, $field, .. } = self;
            match discard($field) {
                Ok(()) => rcvr.set_value(value),
                Err(p) => {
                    // DROP ORDER: what the panic replaces is dropped before the completion.
                    let _ = discard(value);
                    rcvr.set_panic(p)
                }
            }
        }
    };
    (error; $field:ident) => {
        fn set_error(self, error: E) {
            let Self { rcvr, $field, .. } = self;
            match discard($field) {
                Ok(()) => rcvr.set_error(error),
                Err(p) => {
                    // DROP ORDER: what the panic replaces is dropped before the completion.
                    let _ = discard(error);
                    rcvr.set_panic(p)
                }
            }
        }
    };
    (stopped; $field:ident) => {
        fn set_stopped(self) {
            let Self { rcvr, $field, .. } = self;
            match discard($field) {
                Ok(()) => rcvr.set_stopped(),
                Err(p) => rcvr.set_panic(p),
            }
        }
    };
    (panic; $field:ident) => {
        fn set_panic(self, panic: Panic) {
            let Self { rcvr, $field, .. } = self;
            let _ = discard($field);
            rcvr.set_panic(panic)
        }
    };
}

impl<V, E, R: Receiver<V, E>> Receiver<V, E> for IntoVariantReceiver<V, E, R> {
    type Env = R::Env;
    forward!(env);
    forward!(value);
    forward!(error);
    forward!(stopped);
    forward!(panic);
}

impl<V, E, R: Receiver<Option<V>, E>> Receiver<V, E> for StoppedAsOptionalReceiver<V, E, R> {
    type Env = R::Env;
    forward!(env);
    fn set_value(self, value: V) {
        self.rcvr.set_value(Some(value))
    }
    forward!(error);
    fn set_stopped(self) {
        self.rcvr.set_value(None)
    }
    forward!(panic);
}

impl<V, E, R: Receiver<V, E>> Receiver<V, E> for StoppedAsErrorReceiver<V, E, E, R> {
    type Env = R::Env;
    forward!(env);
    forward!(value; error);
    fn set_error(self, error: E) {
        let StoppedAsErrorReceiver { rcvr, error: unused, .. } = self;
        match discard(unused) {
            Ok(()) => rcvr.set_error(error),
            Err(p) => {
                // DROP ORDER: what the panic replaces is dropped before the completion.
                let _ = discard(error);
                rcvr.set_panic(p)
            }
        }
    }
    fn set_stopped(self) {
        self.rcvr.set_error(self.error)
    }
    forward!(panic; error);
}

impl<V, E2, R: Receiver<V, E2>> Receiver<V, Infallible> for WithErrorReceiver<V, Infallible, E2, R> {
    type Env = R::Env;
    forward!(env);
    forward!(value);
    fn set_error(self, error: Infallible) {
        match error {}
    }
    forward!(stopped);
    forward!(panic);
}

impl<V, E, F: MapErrorFn<E>, R: Receiver<V, F::Output>> Receiver<V, E> for MapErrorReceiver<V, E, F, R> {
    type Env = R::Env;
    forward!(env);
    forward!(value; f);
    fn set_error(self, error: E) {
        let f = self.f;
        match catch(move || f.call(error)) {
            Ok(e) => self.rcvr.set_error(e),
            Err(p) => self.rcvr.set_panic(p),
        }
    }
    forward!(stopped; f);
    forward!(panic; f);
}
