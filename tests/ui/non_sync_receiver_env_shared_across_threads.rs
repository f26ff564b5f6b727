//! A receiver that is `Send` but not `Sync` (its `env()` mutates a `Cell`) must not be
//! the final receiver of work whose children on two threads read its environment at the
//! same time: `when_all`'s child receivers require `R: Sync`.
use std::cell::Cell;
use senders::*;

struct Counting<S>(S);
impl<S: Sender> Sender for Counting<S> {
    type Value = S::Value;
    type Error = S::Error;
    const SENDS_STOPPED: bool = S::SENDS_STOPPED;
    type Domain = S::Domain;
    type CompletionScheduler = S::CompletionScheduler;
    fn completion_scheduler(&self) -> S::CompletionScheduler { self.0.completion_scheduler() }
}
impl<S, R> SenderTo<R> for Counting<S>
where S: Sender + SenderTo<CountingRcvr<R>>, R: Receiver<S::Value, S::Error> {
    type Operation = S::Operation;
    fn connect(self, r: R) -> S::Operation { self.0.connect(CountingRcvr { inner: r, calls: Cell::new(0) }) }
}
/// Send (Cell is Send) but !Sync; its env() mutates the Cell.
struct CountingRcvr<R> { inner: R, calls: Cell<usize> }
impl<V, E, R: Receiver<V, E>> Receiver<V, E> for CountingRcvr<R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env { self.calls.set(self.calls.get() + 1); self.inner.env() }
    fn set_value(self, v: V) { println!("env() calls: {}", self.calls.get()); self.inner.set_value(v) }
    fn set_error(self, e: E) { self.inner.set_error(e) }
    fn set_stopped(self) { self.inner.set_stopped() }
    fn set_panic(self, p: Panic) { self.inner.set_panic(p) }
}
struct Q;
impl Query for Q { type Value = u32; }

fn main() {
    let a = SingleThreadContext::with_name("a");
    let b = SingleThreadContext::with_name("b");
    let r = sync_wait(Counting(when_all((
        starts_on(a.scheduler(), read_env(Q)),
        starts_on(b.scheduler(), read_env(Q)),
    ))));
    assert!(r.is_ok());
}
