//! Work spawned through a `let_async_scope` token may borrow the predecessor's value and
//! whatever the function borrows from outside (both outlive the join), but not a local of
//! the function: the function returns, and drops its locals, before the join waits for
//! the spawned work.
use senders::{SenderExt, just, spawn, sync_wait};

fn main() {
    sync_wait(just(()).let_async_scope(|tk, ()| {
        let local = vec![1, 2, 3];
        let r = &local;
        spawn(
            just(()).then(move |()| {
                std::hint::black_box(r);
            }),
            tk,
        );
    }))
    .unwrap();
}
