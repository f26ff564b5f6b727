//! Both sides of an `EitherSender` complete with one value type: a sender has a single
//! completion signature, so an `i32` side and a `String` side do not make a sender.
use senders::{SenderExt, just, sync_wait};

fn main() {
    let s = if std::env::args().count() > 1 { just(1).left_sender() } else { just(String::new()).right_sender() };
    let _ = sync_wait(s);
}
