//! A sender whose closure captures an `Rc` cannot be started on a
//! `SingleThreadContext`'s thread (the closure itself would move there). The closure
//! returns a plain `i32`, so only the capture is at fault.
use std::rc::Rc;

use senders::{SenderExt, SingleThreadContext, just, starts_on, sync_wait};

fn main() {
    let ctx = SingleThreadContext::new();
    let rc = Rc::new(1);
    let _ = sync_wait(starts_on(ctx.scheduler(), just(()).then(move |()| *rc + 1)));
}
