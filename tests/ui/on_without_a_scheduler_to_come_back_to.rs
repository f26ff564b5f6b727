//! `on(sch, sndr)` must come back to the receiver's scheduler: spawned work has none
//! (its environment has `NoScheduler`), so `on` does not compile there. `starts_on` does.
use senders::{SimpleCountingScope, StaticThreadPool, just, on, spawn};

fn main() {
    let pool = StaticThreadPool::new(1).unwrap();
    let scope = SimpleCountingScope::new();
    spawn(on(pool.scheduler(), just(())), scope.token());
}
