//! A reducing scope's `spawn` takes senders of its value type: `()` work into a scope
//! that folds `u64`s must go through the plain token (`tk.token()`).
use senders::{ReducingScope, just, spawn};

fn main() {
    let scope = ReducingScope::new(|| 0u64, |a: &mut u64, v: u64| *a += v, |a, b| a + b);
    spawn(just(()), scope.token());
}
