//! The safe `StopCallback::register` requires `F: 'static`: a registered callback may be
//! leaked and still be called, so it cannot borrow a local.
use std::pin::pin;
use std::sync::atomic::{AtomicBool, Ordering};

use senders::{InplaceStopSource, StopCallback};

fn main() {
    let source = InplaceStopSource::new();
    let stopped = AtomicBool::new(false);
    let mut callback = pin!(StopCallback::new(source.token(), || {
        stopped.store(true, Ordering::Relaxed);
    }));
    callback.as_mut().register();
    source.request_stop();
}
