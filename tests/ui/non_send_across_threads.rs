//! An `Rc` cannot hop to a `SingleThreadContext`'s thread with `continues_on`.
use std::rc::Rc;

use senders::{SenderExt, SingleThreadContext, just, sync_wait};

fn main() {
    let ctx = SingleThreadContext::new();
    let _ = sync_wait(just(Rc::new(1)).continues_on(ctx.scheduler()));
}
