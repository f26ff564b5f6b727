//! `on(sch, sndr)`: go to `sch`, run `sndr` there, come back to the receiver's scheduler.
//!
//! It is composed of the crate's own pieces, as P2300 specifies it:
//! `continues_on(starts_on(sch, sndr), back)`, where `back` is the scheduler of the
//! receiver's environment. `back` is read when the operation starts (inside `catch`, so a
//! panicking user env or scheduler `clone` becomes `set_panic`), and the composed operation
//! is then connected in place inside the pinned `on` operation.

use std::marker::PhantomPinned;
use std::pin::Pin;

use crate::adaptors::continues_on::{
    ContinuesOnHopReceiver, ContinuesOnReceiver, ScheduleFromOp, StartsOn, StartsOnHopReceiver, StartsOnReceiver,
    schedule_from, starts_on,
};
use crate::domain::NoDomain;
use crate::env::Env;
use crate::panic::{catch, discard};
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::sender::{OperationState, Sender, SenderTo, sender};

/// The sender of [`on(sch, sndr)`](on()): starts `sndr` on `sch`, then completes on the
/// scheduler of the receiver's environment.
///
/// It has no domain and no completion scheduler of its own: it completes on the
/// receiver's scheduler, which is known only at `connect`, so a following `then` is
/// customized late by that scheduler's domain (P2999 §2.4 item 4).
#[must_use = "senders do nothing unless connected and started"]
pub struct On<Sch, S> {
    sch: Sch,
    sndr: S,
}

/// `on(sch, sndr)` (P2300): starts `sndr` on `sch` (which `sndr` sees as its current
/// scheduler, as with [`starts_on`]), then hops back to the scheduler of the receiver's
/// environment and completes there, whatever the channel (value, error, stopped or
/// panic).
///
/// **The receiver's environment must have a scheduler.** Connecting `on` to a receiver
/// whose environment has [`NoScheduler`](crate::schedulers::NoScheduler) (the receiver of [`spawn`](crate::spawn()), for
/// instance) does not compile: there is nowhere to come back to, and silently completing
/// where `sndr` completed would break the one promise `on` makes. Use [`starts_on`] there
/// (the P3149 and P3296 examples' `on` is P2999's name for `starts_on`; under a
/// `let_async_scope` token, whose work sees the outer scheduler, `on` compiles but adds a
/// hop back to it). Under
/// [`sync_wait`](crate::sync_wait()) the scheduler is the waiting thread's run loop; under
/// `starts_on(other, ..)` it is `other`; inside a `let_value` it is the predecessor's
/// completion scheduler.
///
/// **Stops and refusals.** Stop requests reach `sndr` through its environment. If `sch`
/// or the scheduler to come back to refuses the hop (a pool that was dropped), the
/// operation completes `set_stopped`; a panic already carried by `sndr` is delivered
/// instead. A panic in either scheduler's `schedule()` or its sender's `connect`, or in
/// reading the receiver's scheduler, becomes `set_panic`.
///
/// ```
/// use senders::{SenderExt, StaticThreadPool, just, on, sync_wait};
/// let pool = StaticThreadPool::builder().num_threads(1).thread_name(|_| "worker".into()).build().unwrap();
/// let here = std::thread::current().id();
/// let name = || std::thread::current().name().map(str::to_owned);
/// let (ran_on, back_home) = sync_wait(
///     on(pool.scheduler(), just(()).then(move |()| name()))
///         .then(move |ran_on| (ran_on, std::thread::current().id() == here)),
/// )
/// .unwrap()
/// .unwrap();
/// assert_eq!(ran_on.as_deref(), Some("worker"));
/// assert!(back_home); // the `then` after `on` runs on sync_wait's thread
/// ```
pub fn on<Sch: Scheduler, S: Sender>(sch: Sch, sndr: S) -> On<Sch, S> {
    On { sch, sndr }
}

sender!([Sch: Scheduler, S: Sender] On<Sch, S> { value = S::Value, error = S::Error, stopped = true, domain = NoDomain });

/// The scheduler of `R`'s environment, which `on` comes back to.
type Back<R, V, E> = <<R as Receiver<V, E>>::Env as Env>::Scheduler;

/// The receiver `starts_on(sch, sndr)` completes to: `continues_on`'s, hopping to `back`.
type Mid<S, R> = ContinuesOnReceiver<
    Back<R, <S as Sender>::Value, <S as Sender>::Error>,
    <S as Sender>::Value,
    <S as Sender>::Error,
    R,
>;

/// The operation of the composition `continues_on(starts_on(sch, sndr), back)`.
type ComposedOp<Sch, S, R> = ScheduleFromOp<Back<R, <S as Sender>::Value, <S as Sender>::Error>, StartsOn<Sch, S>, R>;

/// The operation state of [`on`](on()): the scheduler, the sender and the receiver until
/// it starts, then the composed operation, pinned in place.
pub struct OnOp<Sch: Scheduler, S: Sender, R>
where
    R: Receiver<S::Value, S::Error>,
    Back<R, S::Value, S::Error>: Scheduler,
    S: SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, Mid<S, R>>>,
    Sch::Sender: SenderTo<StartsOnHopReceiver<Sch, S, Mid<S, R>>>,
    <Back<R, S::Value, S::Error> as Scheduler>::Sender: SenderTo<ContinuesOnHopReceiver<S::Value, S::Error, R>>,
{
    pending: Option<(Sch, S, R)>,
    op: Option<ComposedOp<Sch, S, R>>,
    _pin: PhantomPinned,
}

impl<Sch: Scheduler, S: Sender, R> SenderTo<R> for On<Sch, S>
where
    R: Receiver<S::Value, S::Error>,
    Back<R, S::Value, S::Error>: Scheduler,
    S: SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, Mid<S, R>>>,
    Sch::Sender: SenderTo<StartsOnHopReceiver<Sch, S, Mid<S, R>>>,
    <Back<R, S::Value, S::Error> as Scheduler>::Sender: SenderTo<ContinuesOnHopReceiver<S::Value, S::Error, R>>,
{
    type Operation = OnOp<Sch, S, R>;
    fn connect(self, receiver: R) -> OnOp<Sch, S, R> {
        OnOp { pending: Some((self.sch, self.sndr, receiver)), op: None, _pin: PhantomPinned }
    }
}

impl<Sch: Scheduler, S: Sender, R> OperationState for OnOp<Sch, S, R>
where
    R: Receiver<S::Value, S::Error>,
    Back<R, S::Value, S::Error>: Scheduler,
    S: SenderTo<StartsOnReceiver<Sch, <S as Sender>::Value, <S as Sender>::Error, Mid<S, R>>>,
    Sch::Sender: SenderTo<StartsOnHopReceiver<Sch, S, Mid<S, R>>>,
    <Back<R, S::Value, S::Error> as Scheduler>::Sender: SenderTo<ContinuesOnHopReceiver<S::Value, S::Error, R>>,
{
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `pending` is not structurally pinned (it is moved out); `op` is written
        // once, here, and then only addressed in place.
        let this = unsafe { self.get_unchecked_mut() };
        let Some((sch, sndr, rcvr)) = this.pending.take() else { return };
        match catch(|| rcvr.env().scheduler()) {
            Ok(back) => {
                // `connect` of the composition only stores its parts: the user code it
                // reaches (schedulers, `sndr`'s connect) runs later, under its own catch.
                let op = this.op.insert(schedule_from(back, starts_on(sch, sndr)).connect(rcvr));
                // SAFETY: the operation lives in the pinned `OnOp` and is started once.
                unsafe { Pin::new_unchecked(op).start() };
            }
            Err(p) => {
                // Nothing ran: the parts are dropped before the completion (a panic in
                // their drop loses to the first panic).
                let _ = discard((sch, sndr));
                rcvr.set_panic(p)
            }
        }
    }
}
