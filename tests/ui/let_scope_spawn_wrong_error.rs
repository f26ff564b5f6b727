//! A `let_async_scope` keeps the first error of its spawned work as its own completion,
//! so it accepts only spawned senders whose error converts into the scope's error type
//! (here `u32`, chosen with `with_error`): a `&str` error has nowhere to go.
use senders::{SenderExt, just, just_error, spawn, sync_wait};

fn main() {
    let _ = sync_wait(just(()).with_error::<u32>().let_async_scope(|tk, ()| {
        spawn(just_error::<(), &'static str>("boom"), tk);
    }));
}
