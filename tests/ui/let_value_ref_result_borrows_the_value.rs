// The value a `let_value_ref` function borrows lives in the operation and moves on when
// the lent sender completes: the lent sender's result cannot borrow it (its type is
// named outside the loan).
use senders::{SenderExt, just, sync_wait};

fn main() {
    let r = sync_wait(just(vec![1, 2, 3]).let_value_ref(|v, _| just(&v[0]).boxed()));
    drop(r);
}
