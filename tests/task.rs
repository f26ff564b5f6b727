//! `Task` (P3552): laziness, the value/error/stopped/panic paths of the task and of the
//! senders it awaits, scheduler affinity (and no needless reschedule), change_scheduler,
//! the environment awaited senders see, constant stack over inline awaits, recursion on
//! the pool, and the deferred start that keeps borrowing awaits sound.

mod common;

use common::{DropCounter, PanicsInConnect, WaitProbe, panic_message, thread_name, wait_for_stop, with_stop};
use senders::domain::NoDomain;
use senders::schedulers::SingleThreadSender;
use senders::task::TaskScheduler;
use senders::*;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

type T<'a, V> = Task<'a, V, Infallible>;

#[test]
fn nothing_runs_until_the_task_is_started() {
    let ran = AtomicBool::new(false);
    let ran_ref = &ran;
    let task = T::new(async move {
        ran_ref.store(true, Ordering::SeqCst);
        Ok(1)
    });
    std::thread::sleep(Duration::from_millis(5));
    assert!(!ran.load(Ordering::SeqCst));
    drop(task); // dropping an unstarted task drops its future unrun
    assert!(!ran.load(Ordering::SeqCst));
    let task = T::new(async move {
        ran_ref.store(true, Ordering::SeqCst);
        Ok(2)
    });
    assert_eq!(sync_wait(task).unwrap(), Some(2));
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn the_task_completes_with_value_error_and_panic() {
    assert_eq!(sync_wait(T::new(async { Ok(5) })).unwrap(), Some(5));
    let failing: Task<i32, String> = Task::new(async { Err("nope".to_owned()) });
    assert_eq!(sync_wait(failing).unwrap_err(), "nope");
    let msg = panic_message(|| sync_wait(T::<i32>::new(async { panic!("task panicked") })));
    assert_eq!(msg, "task panicked");
}

#[test]
fn awaiting_a_value_an_error_and_question_mark() {
    let t: Task<i32, &str> = Task::new(async {
        let a = just(20).with_error::<&str>().await?;
        let b = just(1).then(|x| x * 2).with_error::<&str>().await?;
        Ok(a + b)
    });
    assert_eq!(sync_wait(t).unwrap(), Some(22));
    let after_error = Arc::new(AtomicBool::new(false));
    let a = after_error.clone();
    let t: Task<i32, &str> = Task::new(async move {
        let x = just_error::<i32, &str>("failed").await?;
        a.store(true, Ordering::SeqCst);
        Ok(x)
    });
    assert_eq!(sync_wait(t).unwrap_err(), "failed");
    assert!(!after_error.load(Ordering::SeqCst), "`?` returned the error");
}

#[test]
fn awaiting_a_stopped_sender_completes_the_task_stopped_without_resuming_it() {
    let resumed = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let (r, d) = (resumed.clone(), dropped.clone());
    let t = T::new(async move {
        let _local = SetOnDrop(d);
        let _ = just_stopped::<(), Infallible>().await;
        r.store(true, Ordering::SeqCst);
        Ok(())
    });
    assert_eq!(sync_wait(t).unwrap(), None);
    assert!(!resumed.load(Ordering::SeqCst), "never resumed after the stop");
    assert!(dropped.load(Ordering::SeqCst), "its frame was dropped");
}

#[test]
fn a_panic_in_an_awaited_sender_completes_the_task_with_it() {
    let msg = panic_message(|| {
        sync_wait(T::<i32>::new(async {
            let v = just(1).then(|_: i32| -> i32 { panic!("awaited panicked") }).await?;
            Ok(v)
        }))
    });
    assert_eq!(msg, "awaited panicked");
}

#[test]
fn nested_tasks_and_user_senders_through_awaited() {
    fn inner(x: i32) -> T<'static, i32> {
        T::new(async move { Ok(x * 2) })
    }
    let t = T::new(async {
        let a = inner(10).await?;
        let b = inner(a).awaited().await?; // the explicit adaptor works too
        Ok(a + b)
    });
    assert_eq!(sync_wait(t).unwrap(), Some(60));
}

#[test]
fn a_task_borrows_from_its_creator_and_awaits_senders_borrowing_its_locals() {
    let data = vec![1, 2, 3, 4];
    let data_ref = &data;
    let t = T::new(async move {
        let local = 10;
        let local_ref = &local;
        // The awaited sender borrows a local of the task's frame: sound, because the
        // frame is not resumed (so cannot drop `local`) before the operation completes.
        let s = just(()).then(move |()| data_ref.iter().sum::<i32>() + *local_ref).await?;
        Ok(s)
    });
    assert_eq!(sync_wait(t).unwrap(), Some(20));
}

#[test]
fn a_leaked_awaited_operation_completes_before_the_task_resumes() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let t = T::new(async move {
        let mut local = 0u64;
        {
            let local_ref = &mut local;
            let d2 = d.clone();
            let fut = schedule(&sch).then(move |()| {
                std::thread::sleep(Duration::from_millis(20));
                *local_ref += 1;
                d2.fetch_add(1, Ordering::SeqCst);
            });
            let mut fut = Box::pin(fut.into_future());
            // Poll it once (registers it), then leak it.
            let _ = std::future::poll_fn(|cx| {
                let _ = fut.as_mut().poll(cx);
                std::task::Poll::Ready(())
            })
            .await;
            std::mem::forget(fut);
        }
        // Suspend: the leaked operation starts now, and the task is not resumed before
        // it completed, so it never touches `local` after the frame lets it go.
        just(()).await?;
        let seen = d.load(Ordering::SeqCst);
        Ok((seen, local))
    });
    assert_eq!(sync_wait(t).unwrap(), Some((1, 1)));
    assert_eq!(done.load(Ordering::SeqCst), 1);
}

#[test]
fn an_await_registered_in_the_final_poll_is_never_started() {
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    let t = T::new(async move {
        let mut fut = Box::pin(just(()).then(move |()| r.store(true, Ordering::SeqCst)).into_future());
        let _ = std::future::poll_fn(|cx| {
            let _ = fut.as_mut().poll(cx);
            std::task::Poll::Ready(())
        })
        .await;
        std::mem::forget(fut);
        Ok(()) // returns in the same poll: the registered operation is discarded
    });
    assert_eq!(sync_wait(t).unwrap(), Some(()));
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn awaits_joined_in_one_poll_run_concurrently() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let meeting = common::Meeting::default();
    let m = &meeting;
    let t = T::new(async move {
        // Both operations must be running at once to meet.
        let a = schedule(&sch).then(move |()| m.meet(Duration::from_secs(10))).into_future();
        let b = schedule(&sch).then(move |()| m.meet(Duration::from_secs(10))).into_future();
        let (a, b) = join(a, b).await;
        Ok(a.unwrap() && b.unwrap())
    });
    assert_eq!(sync_wait(t).unwrap(), Some(true));
}

/// Polls two futures to completion together (a minimal `join`).
async fn join<A: std::future::Future, B: std::future::Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (Box::pin(a), Box::pin(b));
    let (mut ra, mut rb) = (None, None);
    std::future::poll_fn(move |cx| {
        if ra.is_none()
            && let std::task::Poll::Ready(v) = a.as_mut().poll(cx)
        {
            ra = Some(v);
        }
        if rb.is_none()
            && let std::task::Poll::Ready(v) = b.as_mut().poll(cx)
        {
            rb = Some(v);
        }
        if ra.is_some() && rb.is_some() {
            std::task::Poll::Ready((ra.take().unwrap(), rb.take().unwrap()))
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------
// Scheduler affinity.

#[test]
fn the_task_resumes_on_its_scheduler_after_work_elsewhere() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("t-pool-{i}")).build().unwrap();
    let ctx = SingleThreadContext::with_name("t-home");
    let sch = pool.scheduler();
    let t = T::new(async move {
        let mut seen = vec![thread_name()];
        for _ in 0..3 {
            let on_pool = schedule(&sch).then(|()| thread_name()).await?;
            seen.push(on_pool);
            seen.push(thread_name()); // back home
        }
        Ok(seen)
    });
    let seen = sync_wait(starts_on(ctx.scheduler(), t)).unwrap().unwrap();
    for (i, name) in seen.iter().enumerate() {
        let name = name.as_deref().unwrap();
        if i % 2 == 1 {
            assert!(name.starts_with("t-pool-"), "{i}: {name}");
        } else {
            assert_eq!(name, "t-home", "{i}");
        }
    }
}

#[test]
fn under_sync_wait_the_task_resumes_on_the_waiting_thread() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let me = std::thread::current().id();
    let t = T::new(async move {
        schedule(&sch).await?;
        Ok(std::thread::current().id() == me)
    });
    assert_eq!(sync_wait(t).unwrap(), Some(true));
}

/// A scheduler that counts its `schedule()` calls.
#[derive(Clone)]
struct Counting(SingleThreadScheduler<NoDomain>, Arc<AtomicUsize>);
impl PartialEq for Counting {
    fn eq(&self, o: &Self) -> bool {
        self.0 == o.0
    }
}
struct CountingSender(SingleThreadSender<NoDomain>, Counting);
impl Sender for CountingSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = Counting;
    fn completion_scheduler(&self) -> Counting {
        self.1.clone()
    }
}
impl<R: Receiver<(), Infallible> + Send> SenderTo<R> for CountingSender {
    type Operation = <SingleThreadSender<NoDomain> as SenderTo<R>>::Operation;
    fn connect(self, r: R) -> Self::Operation {
        self.0.connect(r)
    }
}
impl Scheduler for Counting {
    type Domain = NoDomain;
    type Sender = CountingSender;
    fn schedule(&self) -> CountingSender {
        self.1.fetch_add(1, Ordering::SeqCst);
        CountingSender(self.0.schedule(), self.clone())
    }
    fn is_current(&self) -> bool {
        self.0.is_current()
    }
}

#[test]
fn no_reschedule_when_an_awaited_sender_completes_on_the_tasks_scheduler_already() {
    let ctx = SingleThreadContext::with_name("t-same");
    let count = Arc::new(AtomicUsize::new(0));
    let home = Counting(ctx.scheduler(), count.clone());
    let sch = ctx.scheduler();
    let t = T::new(async move {
        for _ in 0..10 {
            // Completes on the task's own thread: the task continues there, inline.
            schedule(&sch).await?;
        }
        Ok(thread_name())
    });
    // The task's receiver environment has `home` as its scheduler.
    let name = sync_wait(starts_on(home.clone(), t)).unwrap().unwrap();
    assert_eq!(name.as_deref(), Some("t-same"));
    assert_eq!(count.load(Ordering::SeqCst), 1, "only starts_on's own hop: no reschedule after the awaits");
}

#[test]
fn change_scheduler_moves_the_task_for_good_and_returns_the_previous_one() {
    let a = SingleThreadContext::with_name("t-a");
    let b = SingleThreadContext::with_name("t-b");
    let pool = common::pool(2);
    let (bs, ps, asch) = (b.scheduler(), pool.scheduler(), a.scheduler());
    let t = T::new(async move {
        let mut seen = vec![thread_name()];
        let previous = change_scheduler(bs).await;
        seen.push(thread_name());
        schedule(&ps).await?; // affinity now brings it back to b
        seen.push(thread_name());
        Ok((seen, previous == TaskScheduler::new(asch)))
    });
    let (seen, prev_ok) = sync_wait(starts_on(a.scheduler(), t)).unwrap().unwrap();
    let seen: Vec<_> = seen.into_iter().map(Option::unwrap).collect();
    assert_eq!(seen, ["t-a", "t-b", "t-b"]);
    assert!(prev_ok, "change_scheduler returned the previous scheduler");
}

// ---------------------------------------------------------------------------------------
// Environment.

#[test]
fn awaited_senders_see_the_tasks_scheduler_user_queries_and_stop_token() {
    struct Tenant;
    impl Query for Tenant {
        type Value = u32;
    }
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let s2 = sch.clone();
    let t = T::new(async move {
        let seen_sch: TaskScheduler = read_env(GetScheduler).await?;
        let tenant = read_env(Tenant).await?;
        Ok((seen_sch == TaskScheduler::new(s2), tenant))
    });
    let r = sync_wait(starts_on(sch, t).write_env(prop::<Tenant>(7))).unwrap().unwrap();
    assert_eq!(r, (true, Some(7)));
}

#[test]
fn a_stop_request_on_the_tasks_receiver_reaches_awaited_work() {
    let ctx = SingleThreadContext::new();
    let source = InplaceStopSource::new();
    let probe = WaitProbe::default();
    let (probe_ref, source_ref) = (&probe, &source);
    let sch = ctx.scheduler();
    let r = std::thread::scope(|s| {
        let waiter = s.spawn(move || {
            sync_wait(with_stop(
                source_ref,
                T::new(async move {
                    starts_on(sch, wait_for_stop::<Infallible>(probe_ref)).await?;
                    Ok("not stopped")
                }),
            ))
        });
        assert!(probe.wait_started());
        source.request_stop();
        waiter.join().unwrap()
    });
    assert_eq!(r.unwrap(), None, "the awaited sender stopped, so the task did");
    assert!(probe.saw_stop());
}

// ---------------------------------------------------------------------------------------
// Stack depth and recursion.

#[test]
fn a_loop_of_inline_awaits_runs_in_constant_stack() {
    let n: u64 = 10_000_000;
    // A small stack: recursion per await would overflow it long before the end.
    let r = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || {
            sync_wait(T::new(async move {
                let mut sum = 0u64;
                for i in 0..n {
                    sum += just(i).await?;
                }
                Ok(sum)
            }))
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(r.unwrap(), Some(n * (n - 1) / 2));
}

/// Leaves take a little time, so that the second worker steals work (as it does when
/// the recursion has real work) however fast the machine is.
fn fib(n: u32, seen: &'static std::sync::Mutex<Vec<String>>) -> T<'static, u64> {
    T::new(async move {
        if n < 2 {
            std::thread::sleep(Duration::from_micros(100));
        }
        if let Some(name) = thread_name() {
            let mut seen = seen.lock().unwrap();
            if !seen.contains(&name) {
                seen.push(name);
            }
        }
        if n < 2 {
            return Ok(n as u64);
        }
        let (a, b) = when_all((fib(n - 1, seen), fib(n - 2, seen))).await?;
        Ok(a + b)
    })
}

#[test]
fn recursive_fib_forks_on_the_pool() {
    static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("fib-{i}")).build().unwrap();
    let v = sync_wait(starts_on(pool.scheduler(), fib(13, &SEEN)));
    assert_eq!(v.unwrap(), Some(233));
    let seen = SEEN.lock().unwrap();
    assert!(seen.iter().any(|s| s == "fib-0") && seen.iter().any(|s| s == "fib-1"), "both workers ran tasks: {seen:?}");
}

#[test]
fn tasks_spawn_into_scopes() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let hits = AtomicUsize::new(0);
    let hits_ref = &hits;
    sync_wait(just(()).let_async_scope(|tk, ()| {
        for i in 0..100 {
            let s = sch.clone();
            spawn(
                T::new(async move {
                    schedule(&s).await?;
                    hits_ref.fetch_add(i, Ordering::Relaxed);
                    Ok(())
                }),
                tk,
            );
        }
    }))
    .unwrap();
    assert_eq!(hits.load(Ordering::Relaxed), (0..100).sum());
}

#[test]
fn a_task_awaits_foreign_futures_with_its_waker() {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let feeder = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        tx.send(41).unwrap();
    });
    let t = T::new(async move { Ok(rx.await.unwrap() + 1) });
    assert_eq!(sync_wait(t).unwrap(), Some(42));
    feeder.join().unwrap();
}

#[test]
#[should_panic(expected = "awaited outside a Task")]
fn awaiting_a_sender_outside_a_task_panics_with_a_pointer_to_into_awaitable() {
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let _ = rt.block_on(async { just(1).await });
}

#[test]
fn a_panic_in_an_awaited_senders_connect_completes_the_task_with_it() {
    let msg = panic_message(|| sync_wait(T::new(async { PanicsInConnect.awaited().await })));
    assert_eq!(msg, "connect panicked");
}

#[test]
fn an_awaited_operation_too_large_for_the_awaits_room_completes_and_drops_once() {
    // `just` of 512 bytes: its operation does not fit the room an await keeps for one, so
    // it lives in a block of its own.
    let t = T::new(async { Ok(just([7u64; 64]).await?.iter().sum::<u64>()) });
    assert_eq!(sync_wait(t).unwrap(), Some(448));

    // A large operation registered and then dropped unstarted (the task returns in the
    // same poll) drops what it holds exactly once, and never runs.
    let drops = Arc::new(AtomicUsize::new(0));
    let ran = Arc::new(AtomicBool::new(false));
    let (d, r) = (drops.clone(), ran.clone());
    let t = T::new(async move {
        let held = (DropCounter(d), [0u64; 64]);
        let mut fut = Box::pin(just(held).then(move |_| r.store(true, Ordering::SeqCst)).into_future());
        let _ = std::future::poll_fn(|cx| {
            let _ = fut.as_mut().poll(cx);
            std::task::Poll::Ready(())
        })
        .await;
        drop(fut);
        Ok(())
    });
    assert_eq!(sync_wait(t).unwrap(), Some(()));
    assert!(!ran.load(Ordering::SeqCst));
    assert_eq!(drops.load(Ordering::SeqCst), 1);

    // A panic in the connect of a large operation completes the task with it.
    let msg = panic_message(|| {
        sync_wait(T::new(async { when_all((just([1u64; 64]), PanicsInConnect)).await.map(|(a, b)| a[0] as i32 + b) }))
    });
    assert_eq!(msg, "connect panicked");
}

/// Issue 40: a `let_async_scope` written inline in a task's body compiles (the awaited
/// sender's type no longer asks the compiler to prove the scope function's higher-ranked
/// bound again when it checks the body's `Send`), and so does a `let_value_ref`; both
/// borrow the body's locals, and spawned work sees the task's scheduler.
#[test]
fn let_async_scope_and_let_value_ref_written_inline_in_a_task_body() {
    let pool = common::pool(2);
    let hits = AtomicUsize::new(0);
    let hits_ref = &hits;
    let task = T::new(async move {
        let data = vec![1usize, 2, 3];
        let data_ref = &data;
        just(())
            .let_async_scope(|tk, ()| {
                for x in data_ref {
                    let on_the_tasks_scheduler = read_env(GetScheduler).let_value(|s: TaskScheduler| schedule(&s));
                    spawn(on_the_tasks_scheduler.then(move |()| _ = hits_ref.fetch_add(*x, Ordering::SeqCst)), tk);
                }
            })
            .await?;
        let (data, len) = just(data)
            .let_value_ref(|v, _| {
                v.push(4);
                just(v.len()).boxed()
            })
            .await?;
        Ok(len + data.iter().sum::<usize>())
    });
    assert_eq!(sync_wait(starts_on(pool.scheduler(), task)).unwrap(), Some(4 + 10));
    assert_eq!(hits.load(Ordering::SeqCst), 6);
}

/// Issue 40: a `Task` has no domain of its own. Spawned on a pool worker, it is queued
/// on that worker's deque (the pool's `apply_spawn`), not run inline: the first task
/// waits to meet the second, which is spawned only after the first `spawn` returned, and
/// they meet (run inline, the first would wait out the timeout alone).
#[test]
fn a_task_spawned_on_a_pool_worker_is_queued_there_not_run_inline() {
    let pool = common::pool(2);
    let meeting = common::Meeting::default();
    let met = AtomicUsize::new(0);
    let (meeting_ref, met_ref) = (&meeting, &met);
    let work = just(()).let_async_scope(|tk, ()| {
        for _ in 0..2 {
            spawn(
                T::new(async move {
                    if meeting_ref.meet(common::SAFETY_TIMEOUT) {
                        met_ref.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(())
                }),
                tk,
            );
        }
    });
    sync_wait(starts_on(pool.scheduler(), work)).unwrap();
    assert_eq!(met.load(Ordering::SeqCst), 2, "both tasks ran side by side");
    // `spawn_future` follows the same rule.
    let meeting = common::Meeting::default();
    let meeting_ref = &meeting;
    let work = just(()).let_async_scope(|tk, ()| {
        let first = spawn_future(T::new(async move { Ok(meeting_ref.meet(common::SAFETY_TIMEOUT)) }), tk);
        let second = spawn_future(T::new(async move { Ok(meeting_ref.meet(common::SAFETY_TIMEOUT)) }), tk);
        when_all((first, second))
    });
    assert_eq!(sync_wait(starts_on(pool.scheduler(), work)).unwrap(), Some((true, true)));
}

/// Off the pool, a spawned `Task` starts inline, as the default domain starts work:
/// its body has run up to its first `.await` when `spawn` returns.
#[test]
fn a_task_spawned_off_the_pool_starts_inline() {
    let scope = CountingScope::new();
    let here = std::thread::current().id();
    let ran_here = Arc::new(AtomicBool::new(false));
    let flag = ran_here.clone();
    spawn(
        T::new(async move {
            flag.store(std::thread::current().id() == here, Ordering::SeqCst);
            Ok(())
        }),
        scope.token(),
    );
    assert!(ran_here.load(Ordering::SeqCst), "ran on this thread, before spawn returned");
    sync_wait(scope.join()).unwrap();
}

/// Issue 40: a task that cannot fail is written without naming its error type, and its
/// block returns the value itself.
#[test]
fn an_infallible_task_returns_its_value_without_an_error_type() {
    let task = Task::infallible(async {
        let Ok(x) = just(20).then(|x| x * 2).await;
        x + 2
    });
    assert_eq!(sync_wait_value(task), 42);
    let stopped: Task<'_, i32> = Task::infallible(async {
        let Ok(()) = just_stopped::<(), Infallible>().await;
        1
    });
    assert_eq!(sync_wait(stopped), Ok(None), "a stopped await still stops the task");
}
