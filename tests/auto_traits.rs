//! Compile-time assertions on the auto traits (`Send`, `Sync`) and the `Clone`/`Copy`
//! guarantees of the public types, and that senders and operation states are `Send`
//! whenever their data and receiver are. Each assertion is checked when this file
//! compiles; the `#[test]` functions only give them a name in the test report.
//!
//! The negative cases (`!Send` data must not cross threads) live in the compile-fail
//! suite, `tests/ui/` (see `tests/compile_fail.rs`).

use std::convert::Infallible;

use senders::{
    CountingScope, CountingToken, EmptyEnv, InlineScheduler, InplaceStopSource, Panic, Receiver, RunLoop,
    RunLoopScheduler, Scheduler, SenderExt, SenderTo, SimpleCountingScope, SimpleCountingToken, SingleThreadContext,
    SingleThreadScheduler, StopToken, consumers::SyncWaitReceiver, domain::NoDomain, factories::Just, just, nest, on,
    scope::ScopeAssociation, scope::SpawnFuture, spawn_future, starts_on, when_all,
};

fn assert_send<T: Send>() {}
fn assert_sync<T: Sync>() {}
fn assert_clone<T: Clone>() {}
fn assert_copy<T: Copy>() {}
/// For values whose type cannot be named (closures inside).
fn assert_send_val<T: Send>(_: &T) {}

/// A receiver that accepts any completion; `Send + Sync`, with an `EmptyEnv`.
struct Probe;

impl<V, E> Receiver<V, E> for Probe {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, _: V) {}
    fn set_error(self, _: E) {}
    fn set_stopped(self) {}
    fn set_panic(self, _: Panic) {}
}

#[test]
fn schedulers_are_send_sync_clone() {
    assert_send::<RunLoopScheduler>();
    assert_sync::<RunLoopScheduler>();
    assert_clone::<RunLoopScheduler>();

    assert_send::<InlineScheduler>();
    assert_sync::<InlineScheduler>();
    assert_clone::<InlineScheduler>();

    assert_send::<SingleThreadScheduler<NoDomain>>();
    assert_sync::<SingleThreadScheduler<NoDomain>>();
    assert_clone::<SingleThreadScheduler<NoDomain>>();
}

#[test]
fn execution_contexts_are_send_sync() {
    // The context owns its worker's `JoinHandle`; moving it to (and dropping it on)
    // another thread finishes the loop and joins the worker from there.
    assert_send::<SingleThreadContext>();
    assert_sync::<SingleThreadContext>();
    // `SingleThreadContext` moves its `RunLoop` onto the worker thread.
    assert_send::<RunLoop>();
}

#[test]
fn stop_types_are_send_sync() {
    assert_send::<InplaceStopSource>();
    assert_sync::<InplaceStopSource>();

    assert_send::<StopToken<'static>>();
    assert_sync::<StopToken<'static>>();
    assert_copy::<StopToken<'static>>();
}

#[test]
fn panic_is_send() {
    assert_send::<Panic>();
}

#[test]
fn senders_are_send_when_their_data_is() {
    assert_send::<Just<i32>>();
    assert_send::<Just<Vec<String>>>();

    let ctx = SingleThreadContext::new();
    let sch = ctx.scheduler();
    assert_send_val(&just(1).then(|x: i32| x));
    assert_send_val(&when_all((just(1), just(2))));
    assert_send_val(&just(1).continues_on(sch.clone()));
    assert_send_val(&starts_on(sch.clone(), just(1).then(|x: i32| x + 1)));
    assert_send_val(&just(1).let_value(|x: i32| just(x + 1)));
    assert_send_val(&on(sch.clone(), just(1).then(|x: i32| x + 1)));
    assert_send_val(&just(1).left_sender::<Just<i32>>());
    assert_send_val(&sch.schedule());
    assert_send_val(&InlineScheduler.schedule());
}

#[test]
fn receivers_are_send_when_their_values_are() {
    assert_send::<SyncWaitReceiver<i32, Infallible>>();
    assert_send::<SyncWaitReceiver<Vec<String>, String>>();
}

#[test]
fn operation_states_are_send_when_the_receiver_is() {
    assert_send::<Probe>();
    assert_sync::<EmptyEnv>();

    let ctx = SingleThreadContext::new();
    let sch = ctx.scheduler();
    assert_send_val(&just(1).connect(Probe));
    assert_send_val(&just(1).then(|x: i32| x + 1).connect(Probe));
    assert_send_val(&when_all((just(1), just(2))).connect(Probe));
    assert_send_val(&just(1).continues_on(sch.clone()).connect(Probe));
    assert_send_val(&starts_on(sch.clone(), just(1)).connect(Probe));
    assert_send_val(&just(1).let_value(|x: i32| just(x + 1)).connect(Probe));
    // `on` needs a scheduler in its receiver's env: `starts_on` provides one.
    assert_send_val(&starts_on(sch.clone(), on(InlineScheduler, just(1))).connect(Probe));
    assert_send_val(&just(1).left_sender::<Just<i32>>().connect(Probe));
    assert_send_val(&just(1).right_sender::<Just<i32>>().connect(Probe));
    assert_send_val(&sch.schedule().connect(Probe));
    assert_send_val(&InlineScheduler.schedule().connect(Probe));
}

#[test]
fn scope_handles_tokens_and_futures_cross_threads() {
    fn assert_copy<T: Copy + Send + Sync + 'static>() {}
    assert_copy::<SimpleCountingToken>();
    assert_copy::<CountingToken>();
    assert_send::<CountingScope>();
    assert_sync::<CountingScope>();
    assert_send::<SimpleCountingScope>();
    assert_sync::<SimpleCountingScope>();
    assert_send::<ScopeAssociation>();
    assert_send::<SpawnFuture<i32, String>>();
    let scope = CountingScope::new();
    assert_send_val(&nest(just(1), scope.token()));
    assert_send_val(&nest(just(1), scope.token()).connect(Probe));
    let fut = spawn_future(just(1), scope.token());
    assert_send_val(&fut);
    drop(fut);
    senders::sync_wait(scope.join()).unwrap();
}

#[test]
fn let_scope_tokens_senders_and_operations_cross_threads() {
    fn assert_copy_send_sync<T: Copy + Send + Sync>(_: &T) {}
    let pool = senders::StaticThreadPool::new(1).unwrap();
    let sch = pool.scheduler();
    let data = vec![1, 2, 3];
    let data = &data;
    let work = just(5).let_async_scope(|tk, five| {
        assert_copy_send_sync(&tk);
        let five: &i32 = five;
        senders::spawn(senders::schedule(&sch).then(move |()| assert_eq!(data.len() as i32 + 2, *five)), tk);
        just(*five)
    });
    assert_send_val(&work);
    assert_send_val(&just(5).let_async_scope(|_, v: &mut i32| just(*v)).connect(Probe));
    assert_eq!(senders::sync_wait(work).unwrap(), Some(5));
}

#[test]
fn erased_senders_and_tasks_cross_threads() {
    let erased: senders::AnySender<'static, i32> = senders::SenderExt::boxed(just(1));
    assert_send_val(&erased);
    assert_send_val(&senders::SenderExt::boxed(just(1)).connect(Probe));
    let task = senders::Task::<i32, std::convert::Infallible>::new(async { Ok(1) });
    assert_send_val(&task);
    assert_send_val(&task.connect(Probe));
    assert_send::<senders::task::TaskScheduler>();
    assert_sync::<senders::task::TaskScheduler>();
}
