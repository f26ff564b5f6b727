// The typed form: a function item whose sender completes with a borrow of the value
// does not fit (`U` of `LendFn<'a, V, U, E>` cannot depend on `'a`).
use senders::factories::Just;
use senders::{SenderExt, just, sync_wait};

fn first<'a>(v: &'a mut Vec<i32>) -> Just<&'a i32> {
    just(&v[0])
}

fn main() {
    let r = sync_wait(just(vec![1, 2, 3]).let_value_ref_with(first));
    drop(r);
}
