//! `spawn` takes only senders of `()` into a counting scope: a value would be dropped silently (a value goes into a `ReducingScope`, through its `ReduceToken`).
use senders::{SimpleCountingScope, just, spawn};

fn main() {
    let scope = SimpleCountingScope::new();
    spawn(just(42), scope.token());
}
