//! `spawn` takes only senders that cannot fail: errors must be handled explicitly.
use senders::{SimpleCountingScope, just_error, spawn};

fn main() {
    let scope = SimpleCountingScope::new();
    spawn(just_error::<(), &'static str>("boom"), scope.token());
}
