// A `Task` that borrows from its creator may run only under a blocking root
// (`sync_wait`) or an owner that outlives the borrow. Spawning it into a counting scope
// (whose work must be `'static`), turning it into a future for another executor
// (`'static`), or moving it to a detached thread must not compile: the scope, the future
// or the thread could outlive `local`.
use senders::{CountingScope, SenderExt, Task, spawn, spawn_future};
use std::convert::Infallible;

fn borrowing(x: &u64) -> Task<'_, u64, Infallible> {
    Task::new(async move { Ok(*x + 1) })
}

fn main() {
    let scope = CountingScope::new();
    let local = 41u64;
    spawn(borrowing(&local).then(|_| ()), scope.token());
    let _f = spawn_future(borrowing(&local), scope.token());
    let _g = borrowing(&local).into_awaitable();
    let t = borrowing(&local);
    std::thread::spawn(move || senders::sync_wait(t));
    senders::sync_wait(scope.join()).unwrap();
}
