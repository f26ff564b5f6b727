//! Spawned work must be `'static`: a scope may be leaked, so it cannot hold a borrow back.
use senders::{SenderExt, SimpleCountingScope, just, spawn};

fn main() {
    let scope = SimpleCountingScope::new();
    let local = vec![1, 2, 3];
    spawn(just(()).then(|()| println!("{}", local.len())), scope.token());
}
