//! `spawn` takes only senders of `()`: a value would be dropped silently.
use senders::{SimpleCountingScope, just, spawn};

fn main() {
    let scope = SimpleCountingScope::new();
    spawn(just(42), scope.token());
}
