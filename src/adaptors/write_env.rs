//! `write_env`: give a sender's operation an environment with an extra user query.

use std::any::{Any, TypeId};
use std::marker::PhantomData;

use crate::env::{Env, Query};
use crate::panic::{Panic, discard};
use crate::receiver::Receiver;
use crate::sender::{Sender, SenderTo, adaptor_sender};
use crate::stop::StopToken;

/// An answer to the user query `Q`, to be written into an environment with
/// [`SenderExt::write_env`](crate::SenderExt::write_env).
pub struct Prop<Q: Query> {
    value: Q::Value,
}

/// The answer `value` to the user query `Q`.
///
/// ```
/// use senders::{Query, SenderExt, prop, read_env, sync_wait};
/// struct Level;
/// impl Query for Level { type Value = u8; }
/// assert_eq!(sync_wait(read_env(Level).write_env(prop::<Level>(3))).unwrap(), Some(Some(3)));
/// ```
pub fn prop<Q: Query>(value: Q::Value) -> Prop<Q> {
    Prop { value }
}

/// The sender of [`write_env(sndr, prop)`](crate::SenderExt::write_env).
#[must_use = "senders do nothing unless connected and started"]
pub struct WriteEnv<S, Q: Query> {
    sndr: S,
    prop: Prop<Q>,
}

impl<S, Q: Query> WriteEnv<S, Q> {
    pub(crate) fn new(sndr: S, prop: Prop<Q>) -> Self {
        WriteEnv { sndr, prop }
    }
}

adaptor_sender!([S: Sender, Q: Query] WriteEnv<S, Q> where [] {
    value = S::Value, error = S::Error, stopped = S::SENDS_STOPPED
});

impl<S, Q: Query, R> SenderTo<R> for WriteEnv<S, Q>
where
    S: Sender + SenderTo<WriteEnvReceiver<<S as Sender>::Value, <S as Sender>::Error, Q, R>>,
    R: Receiver<S::Value, S::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(WriteEnvReceiver { rcvr: receiver, value: self.prop.value, _t: PhantomData })
    }
}

/// The receiver of `write_env`; it is also the environment it writes: the parent's
/// with `Q` answered (an inner `write_env` of the same query wins).
pub struct WriteEnvReceiver<V, E, Q: Query, R> {
    rcvr: R,
    value: Q::Value,
    _t: PhantomData<fn() -> (V, E)>,
}

// SAFETY: a shared reference only reaches the environment: the written answer (`Sync`
// by `Query::Value`) and the parent env, through `R::env(&R)` (`R: Sync`, `R::Env: Sync`),
// never the inner receiver's completion.
unsafe impl<V, E, Q: Query, R: Receiver<V, E> + Sync> Sync for WriteEnvReceiver<V, E, Q, R> where R::Env: Sync {}

impl<V, E, Q: Query, R: Receiver<V, E>> Env for WriteEnvReceiver<V, E, Q, R> {
    type Scheduler = <R::Env as Env>::Scheduler;
    type Domain = <R::Env as Env>::Domain;
    fn scheduler(&self) -> Self::Scheduler {
        self.rcvr.env().scheduler()
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.rcvr.env().stop_token()
    }
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        if key == TypeId::of::<Q>() { Some(&self.value) } else { self.rcvr.env().prop(key) }
    }
}

impl<V, E, Q: Query, R: Receiver<V, E>> Receiver<V, E> for WriteEnvReceiver<V, E, Q, R> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    // The written answer is dropped first (see `panic::discard`).
    fn set_value(self, value: V) {
        let WriteEnvReceiver { rcvr, value: answer, .. } = self;
        match discard(answer) {
            Ok(()) => rcvr.set_value(value),
            Err(p) => {
                // DROP ORDER: what the panic replaces is dropped before the completion.
                let _ = discard(value);
                rcvr.set_panic(p)
            }
        }
    }
    fn set_error(self, error: E) {
        let WriteEnvReceiver { rcvr, value, .. } = self;
        match discard(value) {
            Ok(()) => rcvr.set_error(error),
            Err(p) => {
                // DROP ORDER: what the panic replaces is dropped before the completion.
                let _ = discard(error);
                rcvr.set_panic(p)
            }
        }
    }
    fn set_stopped(self) {
        let WriteEnvReceiver { rcvr, value, .. } = self;
        match discard(value) {
            Ok(()) => rcvr.set_stopped(),
            Err(p) => rcvr.set_panic(p),
        }
    }
    fn set_panic(self, panic: Panic) {
        let WriteEnvReceiver { rcvr, value, .. } = self;
        let _ = discard(value);
        rcvr.set_panic(panic)
    }
}
