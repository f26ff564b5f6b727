//! `OperationState::start` is `unsafe`: safe code cannot start a connected operation
//! by hand (the only safe root is `sync_wait`).
use std::convert::Infallible;
use std::pin::pin;

use senders::{EmptyEnv, OperationState, Panic, Receiver, SenderTo, just};

struct Sink;

impl Receiver<i32, Infallible> for Sink {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, _: i32) {}
    fn set_error(self, e: Infallible) {
        match e {}
    }
    fn set_stopped(self) {}
    fn set_panic(self, _: Panic) {}
}

fn main() {
    let mut op = pin!(just(1).connect(Sink));
    op.as_mut().start();
}
