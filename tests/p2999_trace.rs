//! Reproduces the domainA/domainB example of P2999R3 §2.3: early customization from
//! the predecessor's domain, late customization from the receiver's environment, and
//! each customized `then` running on its own domain's thread.

use std::convert::Infallible;
use std::sync::Mutex;

use senders::{
    Domain, Env, Panic, Receiver, Scheduler, Sender, SenderExt, SenderTo, SingleThreadContext, adaptors::Then,
    adaptors::ThenFn, default_transforms, just, starts_on, sync_wait,
};

static TRACE: Mutex<Vec<String>> = Mutex::new(Vec::new());

fn log(line: impl Into<String>) {
    TRACE.lock().unwrap().push(line.into());
}

fn thread_name() -> String {
    std::thread::current().name().unwrap_or("?").to_owned()
}

/// A `then` that announces which domain made it before running the function.
struct TraceThen<S, F> {
    sndr: S,
    f: F,
    name: &'static str,
}

impl<S: Sender, F: ThenFn<S::Value>> Sender for TraceThen<S, F> {
    type Value = F::Output;
    type Error = S::Error;
    const SENDS_STOPPED: bool = S::SENDS_STOPPED;
    type Domain = S::Domain;
    type CompletionScheduler = S::CompletionScheduler;
    fn completion_scheduler(&self) -> S::CompletionScheduler {
        self.sndr.completion_scheduler()
    }
}

struct TraceReceiver<F, R> {
    f: F,
    name: &'static str,
    rcvr: R,
}

impl<V, E, F: ThenFn<V>, R: Receiver<F::Output, E>> Receiver<V, E> for TraceReceiver<F, R> {
    type Env = R::Env;
    fn env(&self) -> &R::Env {
        self.rcvr.env()
    }
    fn set_value(self, value: V) {
        log(format!("then sender from domain {}", self.name));
        self.rcvr.set_value(self.f.call(value))
    }
    fn set_error(self, error: E) {
        self.rcvr.set_error(error)
    }
    fn set_stopped(self) {
        self.rcvr.set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.rcvr.set_panic(panic)
    }
}

impl<S, F, R> SenderTo<R> for TraceThen<S, F>
where
    S: Sender + SenderTo<TraceReceiver<F, R>>,
    F: ThenFn<<S as Sender>::Value>,
    R: Receiver<F::Output, <S as Sender>::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(TraceReceiver { f: self.f, name: self.name, rcvr: receiver })
    }
}

macro_rules! trace_domain {
    ($domain:ident, $name:literal) => {
        #[derive(Clone, Copy, Default, Debug)]
        struct $domain;
        impl Domain for $domain {
            type Then<S: Sender, F: ThenFn<S::Value>> = TraceThen<S, F>;
            fn transform_then<S: Sender, F: ThenFn<S::Value>, E: Env>(
                self,
                sndr: Then<S, F>,
                env: Option<&E>,
            ) -> TraceThen<S, F> {
                let when = if env.is_some() { "late" } else { "early" };
                log(format!("hello from domain {} transform_sender, {when}", $name));
                let (sndr, f) = sndr.into_parts();
                TraceThen { sndr, f, name: $name }
            }
            default_transforms!(except then);
        }
    };
}
trace_domain!(DomainA, "A");
trace_domain!(DomainB, "B");

#[test]
fn p2999_domain_trace_matches_the_paper() {
    let ctx_a = SingleThreadContext::<DomainA>::with_domain("A");
    let ctx_b = SingleThreadContext::<DomainB>::with_domain("B");
    let sched_a = ctx_a.scheduler();
    let sched_b = ctx_b.scheduler();

    let hello = |()| log(format!("  running on thread {}", thread_name()));

    let work = just(()) // no domain here
        .then(hello) // no domain here
        .continues_on(sched_a.clone()) // transition into domain A
        .then(hello); // "hello from domain A transform_sender, early"

    let result: Result<Option<()>, Infallible> = sync_wait(starts_on(sched_b, work));
    assert_eq!(result, Ok(Some(())));

    let trace = TRACE.lock().unwrap().clone();
    assert_eq!(
        trace,
        [
            "hello from domain A transform_sender, early",
            "hello from domain B transform_sender, late",
            "then sender from domain B",
            "  running on thread B",
            "then sender from domain A",
            "  running on thread A",
        ]
    );
    for line in &trace {
        println!("{line}");
    }
    drop((ctx_a, ctx_b, sched_a.schedule()));
}
