//! The scoped-task trilemma: a "fire and forget" helper that starts an operation
//! borrowing a local, leaks it and returns would let the worker thread read freed
//! stack memory. It cannot be written in safe code: `start` requires `unsafe`.
use std::convert::Infallible;

use senders::{
    EmptyEnv, OperationState, Panic, Receiver, SenderExt, SenderTo, SingleThreadContext, just,
    starts_on,
};

struct Sink;

impl Receiver<usize, Infallible> for Sink {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, _: usize) {}
    fn set_error(self, e: Infallible) {
        match e {}
    }
    fn set_stopped(self) {}
    fn set_panic(self, _: Panic) {}
}

fn fire_and_forget(ctx: &SingleThreadContext) {
    let data = vec![1, 2, 3];
    let work = starts_on(ctx.scheduler(), just(()).then(|()| data.len()));
    let mut op = Box::pin(work.connect(Sink));
    op.as_mut().start();
    std::mem::forget(op); // never waits for the worker...
} // ...which may still be reading `data` here

fn main() {
    let ctx = SingleThreadContext::new();
    fire_and_forget(&ctx);
}
