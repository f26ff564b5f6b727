// The loan of a `let_value_ref` value ends when the lent sender completes: the function
// cannot keep the reference anywhere that outlives it.
use senders::{SenderExt, just, sync_wait};

fn main() {
    let mut kept: Option<&Vec<i32>> = None;
    let r = sync_wait(just(vec![1, 2, 3]).let_value_ref(|v, _| {
        kept = Some(v);
        just(()).boxed()
    }));
    drop(r);
    println!("{kept:?}");
}
