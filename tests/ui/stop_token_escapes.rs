//! A `StopToken` borrows its source, and a receiver's token borrows the receiver's env:
//! it can be kept neither after the source is gone nor after the receiver completed
//! (the completion may free the operation that owns the source).
use std::convert::Infallible;

use senders::consumers::SyncWaitReceiver;
use senders::{Env, InplaceStopSource, Receiver};

fn keep_token_after_completion<R: Receiver<(), Infallible>>(rcvr: R) -> bool {
    let token = rcvr.env().stop_token();
    rcvr.set_value(());
    token.stop_requested()
}

fn keep_token_after_source() -> bool {
    let token;
    {
        let source = InplaceStopSource::new();
        token = source.token();
    }
    token.stop_requested()
}

fn main() {
    keep_token_after_source();
    let _ = keep_token_after_completion::<SyncWaitReceiver<(), Infallible>>;
}
