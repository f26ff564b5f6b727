//! A `Task` is awaited by value (`IntoFuture` takes `self`), so it can be awaited, or
//! started, only once: a second `.await` is a use after move.
use senders::{Task, sync_wait};

fn main() {
    let inner: Task<i32, ()> = Task::new(async { Ok(1) });
    let outer: Task<i32, ()> = Task::new(async move {
        let a = inner.await?;
        let b = inner.await?;
        Ok(a + b)
    });
    let _ = sync_wait(outer);
}
