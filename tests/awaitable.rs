//! Every sender of the crate can be `.await`ed inside a `Task`: each public sender type is
//! awaited here and its completion checked. The crate declares every sender with one
//! macro (`sender!`, in `src/sender.rs`) that also writes its `IntoFuture`, so a new
//! sender is awaitable without joining a list; the last test checks that no
//! `impl Sender for` in `src/` is written by hand.

use senders::adaptors::{Bulk, BulkEach, Then, WhenAll};
use senders::*;
use std::convert::Infallible;
use std::future::IntoFuture;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Awaits a sender in a task (through its `IntoFuture`: `.await` in an `async` block
/// desugars to exactly this), started on a scheduler's context by `sync_wait`.
macro_rules! awaited_on {
    ($sch:expr, $sndr:expr) => {
        sync_wait(starts_on($sch, Task::new(IntoFuture::into_future($sndr))))
    };
}

/// Awaits `sndr` in a task (as `awaited_on!`), started on the calling thread.
fn awaited<S, V, E>(sndr: S) -> Result<Option<V>, E>
where
    S: IntoFuture<Output = Result<V, E>>,
    S::IntoFuture: Send,
    V: Send,
    E: Send,
{
    sync_wait(Task::new(sndr.into_future()))
}

struct Tenant;
impl Query for Tenant {
    type Value = &'static str;
}

fn thread_name() -> Option<String> {
    std::thread::current().name().map(str::to_owned)
}

#[test]
fn the_factories_are_awaitable() {
    assert_eq!(awaited(just(1)), Ok(Some(1)));
    assert_eq!(awaited(just_error::<i32, &str>("e")), Err("e"));
    assert_eq!(awaited(just_stopped::<i32, Infallible>()), Ok(None), "a stopped await cancels the task");
    assert_eq!(awaited(read_env(Tenant).write_env(prop::<Tenant>("acme"))), Ok(Some(Some("acme"))));
    assert_eq!(awaited(defer(|| just(2))), Ok(Some(2)));
    assert_eq!(awaited(fork_join(|| just(3), || just(4))), Ok(Some((3, 4))));
}

#[test]
fn the_adaptors_are_awaitable() {
    assert_eq!(awaited(just(1).then(|x| x + 1)), Ok(Some(2)));
    assert_eq!(awaited(Then::new(just(2), |x: i32| x * 2).lower()), Ok(Some(4)));
    assert_eq!(awaited(just_error::<i32, i32>(3).upon_error(|e| e + 1)), Ok(Some(4)));
    assert_eq!(awaited(just_stopped::<i32, Infallible>().upon_stopped(|| 5)), Ok(Some(5)));
    assert_eq!(awaited(just(6).let_value(just)), Ok(Some(6)));
    assert_eq!(awaited(just_error::<i32, i32>(7).let_error(just)), Ok(Some(7)));
    assert_eq!(awaited(just_stopped::<i32, Infallible>().let_stopped(|| just(8))), Ok(Some(8)));
    assert_eq!(awaited(when_all((just(1), just(2)))), Ok(Some((1, 2))));
    assert_eq!(awaited(WhenAll::new((just(3), just(4))).lower()), Ok(Some((3, 4))));
    assert_eq!(awaited(just(1).into_variant()), Ok(Some(1)));
    assert_eq!(awaited(just_error::<i32, i32>(1).map_error(|e| e + 1)), Err(2));
    assert_eq!(awaited(just_stopped::<i32, i32>().stopped_as_error(9)), Err(9));
    assert_eq!(awaited(just_stopped::<i32, Infallible>().stopped_as_optional()), Ok(Some(None)));
    assert_eq!(awaited(just(1).with_error::<String>()), Ok(Some(1)));
    let source = InplaceStopSource::new();
    assert_eq!(awaited(stop_when(just(1), source.token())), Ok(Some(1)));
    assert_eq!(awaited(just(2).write_env(prop::<Tenant>("x"))), Ok(Some(2)));
    let pick = |left: bool| if left { just(1).left_sender() } else { just(2).right_sender() };
    assert_eq!(awaited(pick(true)), Ok(Some(1)));
    assert_eq!(awaited(pick(false)), Ok(Some(2)));
    assert_eq!(awaited(from_future(async { 10 })), Ok(Some(10)));
}

#[test]
fn the_bulk_forms_are_awaitable_also_on_the_pool() {
    let pool = StaticThreadPool::new(2).unwrap();
    let sch = pool.scheduler();
    let calls = AtomicUsize::new(0);
    let count = |i: usize, _: &()| {
        calls.fetch_add(i + 1, Ordering::Relaxed);
        Ok::<(), Infallible>(())
    };
    assert_eq!(awaited(just(()).bulk(2, count)), Ok(Some(())));
    assert_eq!(awaited(Bulk::new(just(()), 2, count).lower()), Ok(Some(())));
    // Customized by the pool's domain (early: the predecessor completes on the pool).
    assert_eq!(awaited_on!(sch.clone(), sch.schedule().bulk(2, count)), Ok(Some(())));
    assert_eq!(calls.load(Ordering::Relaxed), 9);
    let add = |i: usize, x: &mut usize| *x += i;
    assert_eq!(awaited(just(vec![1usize; 3]).bulk_each(add)), Ok(Some(vec![1, 2, 3])));
    assert_eq!(awaited(BulkEach::new(just(vec![0usize; 2]), add).lower()), Ok(Some(vec![0, 1])));
    let on_pool = sch.schedule().then(|()| vec![0usize; 2]).bulk_each(add);
    assert_eq!(awaited_on!(sch.clone(), on_pool), Ok(Some(vec![0, 1])));
}

#[test]
fn the_scheduler_adaptors_and_the_schedulers_senders_are_awaitable() {
    let pool = StaticThreadPool::new(1).unwrap();
    let ctx = SingleThreadContext::with_name("awaitable");
    let there = Some("awaitable".to_owned());
    assert_eq!(awaited(schedule_from(ctx.scheduler(), just(()).then(|()| 1))), Ok(Some(1)));
    assert_eq!(awaited(just(()).continues_on(ctx.scheduler()).then(|()| thread_name())), Ok(Some(there.clone())));
    assert_eq!(awaited(starts_on(ctx.scheduler(), just(()).then(|()| thread_name()))), Ok(Some(there.clone())));
    assert_eq!(awaited(on(ctx.scheduler(), just(()).then(|()| thread_name()))), Ok(Some(there)));
    let (sch, ctx_sch) = (pool.scheduler(), ctx.scheduler());
    assert_eq!(awaited(sch.schedule().then(move |()| sch.is_current())), Ok(Some(true)));
    assert_eq!(awaited(InlineScheduler.schedule()), Ok(Some(())));
    assert_eq!(awaited(ctx_sch.schedule().then(move |()| ctx_sch.is_current())), Ok(Some(true)));
    // The erased scheduler a task shows what it awaits.
    let own = read_env(GetScheduler).let_value(|s: senders::task::TaskScheduler| s.schedule());
    assert_eq!(awaited(own), Ok(Some(())));
    // A run loop, driven by another thread.
    let run_loop = RunLoop::new();
    let rs = run_loop.scheduler();
    std::thread::scope(|scope| {
        scope.spawn(|| run_loop.run());
        let again = rs.clone();
        assert_eq!(awaited(rs.schedule().then(move |()| again.is_current())), Ok(Some(true)));
        run_loop.finish();
    });
}

#[test]
fn the_scopes_senders_tasks_and_erased_senders_are_awaitable() {
    let pool = StaticThreadPool::new(2).unwrap();
    let sch = pool.scheduler();
    let scope = CountingScope::new();
    let token = scope.token();
    assert_eq!(awaited(nest(just(1), token)), Ok(Some(1)));
    assert_eq!(awaited(spawn_future(sch.schedule().then(|()| 2), token)), Ok(Some(2)));
    assert_eq!(awaited(Task::<_, Infallible>::new(async { Ok(3) })), Ok(Some(3)));
    assert_eq!(awaited(just(4).boxed()), Ok(Some(4)));
    let scoped = just(5).let_async_scope(|tk, v| {
        spawn(just(()), tk);
        just(*v)
    });
    assert_eq!(awaited_on!(sch, scoped), Ok(Some(5)));
    assert_eq!(awaited(scope.join()), Ok(Some(())));
}

#[test]
fn when_any_and_the_timed_senders_are_awaitable() {
    assert_eq!(awaited(when_any((just(1), just(2)))), Ok(Some(1)));
    assert_eq!(awaited(when_any_iter(vec![just(3), just(4)])), Ok(Some(3)));
    let pool = StaticThreadPool::new(1).unwrap();
    let sch = pool.scheduler();
    let ms = std::time::Duration::from_millis(1);
    let on_pool = schedule_after(&sch, ms).then(|()| thread_name().is_some_and(|n| n.starts_with("senders-worker")));
    assert_eq!(awaited(on_pool), Ok(Some(true)));
    assert_eq!(awaited(schedule_at(&sch, std::time::Instant::now())), Ok(Some(())));
    let ctx = SingleThreadContext::new();
    let timed = senders::time::ScheduleAt::new(ctx.scheduler(), None);
    let limited = timeout(timed.with_error::<()>(), &sch, ms);
    assert_eq!(awaited(limited), Err(senders::time::TimeoutError::Elapsed));
}

/// No `impl ... Sender for` in `src/` (outside test modules) is written by hand: each
/// goes through `sender!` (or `adaptor_sender!`, which uses it), which also makes the
/// sender awaitable.
#[test]
fn every_sender_impl_goes_through_the_sender_macro() {
    let mut hand_written = Vec::new();
    let mut stack = vec![std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                // A file's test modules, at its end, may declare senders of their own.
                let code_end = text.find("#[cfg(all(test").or_else(|| text.find("#[cfg(test)]")).unwrap_or(text.len());
                for (i, line) in text[..code_end].lines().enumerate() {
                    let code = line.split("//").next().unwrap_or("");
                    let is_impl = code.trim_start().starts_with("impl") && code.contains(" Sender for ");
                    // The macro's own expansion names `$crate::sender::Sender for $ty`.
                    if is_impl && !code.contains("$ty") {
                        hand_written.push(format!("{}:{}: {}", path.display(), i + 1, line.trim()));
                    }
                }
            }
        }
    }
    assert!(hand_written.is_empty(), "declare these with `sender!`:\n{}", hand_written.join("\n"));
}
