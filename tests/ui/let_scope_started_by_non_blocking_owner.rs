//! A `let_async_scope` sender that borrows (here its function captures `data` by
//! reference, for the work it spawns) is sound only if whoever starts it waits for it:
//! a blocking root such as `sync_wait`, or a `let_async_scope` that joins it. Owners that
//! do not wait require `'static`: `spawn` and `spawn_future` into a `CountingScope`
//! (whose work is detached) and `into_awaitable` (whose future may be leaked).
use senders::{CountingScope, SenderExt, into_awaitable, just, spawn, spawn_future};

fn via_spawn(counting: &CountingScope) {
    let data = vec![1, 2, 3];
    let data = &data;
    spawn(
        just(()).let_async_scope(move |tk, ()| {
            spawn(just(()).then(move |()| drop(std::hint::black_box(data))), tk);
        }),
        counting.token(),
    );
}

fn via_spawn_future(counting: &CountingScope) {
    let data = vec![1, 2, 3];
    let data = &data;
    let fut = spawn_future(
        just(()).let_async_scope(move |tk, ()| {
            spawn(just(()).then(move |()| drop(std::hint::black_box(data))), tk);
        }),
        counting.token(),
    );
    drop(fut);
}

fn via_into_awaitable() {
    let data = vec![1, 2, 3];
    let data = &data;
    let awaitable = into_awaitable(just(()).let_async_scope(move |tk, ()| {
        spawn(just(()).then(move |()| drop(std::hint::black_box(data))), tk);
    }));
    drop(awaitable);
}

fn main() {
    let counting = CountingScope::new();
    via_spawn(&counting);
    via_spawn_future(&counting);
    via_into_awaitable();
}
