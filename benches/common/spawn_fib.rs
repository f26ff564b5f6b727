//! fib through `spawn_future` + `when_all` (issue 26's row), shared by `benches/pool.rs`
//! and `examples/report.rs`, so that both time the same program.

use senders::{
    AnySender, CountingScope, CountingToken, PoolScheduler, SenderExt, defer, just, spawn_future, starts_on, sync_wait,
    when_all,
};

/// `fib(n)` as a user writes it with `spawn_future`: each node spawns its two children
/// into the scope of `tk`, onto the pool (`starts_on`: the erased node's own domain has
/// no scheduler, and would start a spawn inline), built when they run (`defer`), and
/// joins their futures with `when_all`.
pub fn fib_spawn_future(sch: PoolScheduler, tk: CountingToken, n: u64) -> AnySender<'static, u64> {
    if n < 2 {
        return just(n).boxed();
    }
    let child = |m: u64| {
        let s = sch.clone();
        spawn_future(starts_on(sch.clone(), defer(move || fib_spawn_future(s, tk, m))), tk)
    };
    when_all((child(n - 1), child(n - 2))).then(|(a, b)| a + b).boxed()
}

/// [`fib_spawn_future`] from the calling thread in a fresh `CountingScope`, then the
/// scope's join.
pub fn fib_spawned(sch: &PoolScheduler, n: u64) -> u64 {
    let scope = CountingScope::new();
    let fib = sync_wait(fib_spawn_future(sch.clone(), scope.token(), n)).expect("fib").expect("a value");
    sync_wait(scope.join()).expect("join");
    fib
}
