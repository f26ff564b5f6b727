//! The bridges to Rust futures: a `'static` sender awaited from foreign executors
//! (tokio here), and a future run as a sender on the receiver's scheduler.

mod common;

use common::{panic_message, thread_name, with_stop};
use senders::*;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

fn tokio_rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap()
}

// ---------------------------------------------------------------------------------------
// Sender → future

#[test]
fn an_awaited_sender_delivers_value_error_and_stopped() {
    let rt = tokio_rt();
    assert_eq!(rt.block_on(just(1).then(|x| x + 1).into_awaitable()), Some(Ok(2)));
    assert_eq!(rt.block_on(just_error::<i32, _>("bad").into_awaitable()), Some(Err("bad")));
    assert_eq!(rt.block_on(just_stopped::<i32, &str>().into_awaitable()), None);
}

#[test]
fn a_panic_in_an_awaited_sender_resumes_in_the_awaiting_task() {
    let rt = tokio_rt();
    let joined = rt.block_on(async {
        tokio::spawn(async { just(()).then(|()| -> i32 { panic!("sender panicked") }).into_awaitable().await }).await
    });
    let err = joined.unwrap_err();
    assert!(err.is_panic());
    assert_eq!(common::payload_message(&*err.into_panic()), "sender panicked");
}

#[test]
fn pool_work_is_awaited_from_tokio_tasks() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("bridge-pool-{i}")).build().unwrap();
    let sch = pool.scheduler();
    let rt = tokio_rt();
    let results = rt.block_on(async move {
        let mut handles = Vec::new();
        for i in 0..64u64 {
            let work = schedule(&sch).then(move |()| (i * 2, thread_name()));
            handles.push(tokio::spawn(work.into_awaitable()));
        }
        let mut out = Vec::new();
        for h in handles {
            out.push(h.await.unwrap().unwrap().unwrap());
        }
        out
    });
    for (i, (v, name)) in results.into_iter().enumerate() {
        assert_eq!(v, i as u64 * 2);
        assert!(name.unwrap().starts_with("bridge-pool-"), "ran on the pool");
    }
}

#[test]
fn dropping_the_future_requests_stop_and_the_operation_finishes_safely() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let started = Arc::new(AtomicBool::new(false));
    let saw_stop = Arc::new(AtomicUsize::new(0));
    let (s2, st2) = (started.clone(), saw_stop.clone());
    // A long bulk on the pool that checks its stop token between chunks.
    let work = schedule(&sch).then(move |()| s2.store(true, Ordering::SeqCst)).bulk(1 << 30, move |_, _| {
        std::thread::sleep(Duration::from_micros(1));
    });
    let mut fut = Box::pin(
        work.upon_stopped(move || {
            st2.fetch_add(1, Ordering::SeqCst);
        })
        .into_awaitable(),
    );
    let waker = Waker::noop();
    assert!(fut.as_mut().poll(&mut Context::from_waker(waker)).is_pending());
    while !started.load(Ordering::SeqCst) {
        std::thread::yield_now();
    }
    drop(fut); // requests stop; the operation keeps its memory until it completes
    let t = std::time::Instant::now();
    while saw_stop.load(Ordering::SeqCst) == 0 {
        assert!(t.elapsed() < Duration::from_secs(10), "the stop request reached the work");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn dropping_an_unpolled_future_never_starts_the_sender() {
    let ran = Arc::new(AtomicBool::new(false));
    let r = ran.clone();
    drop(just(()).then(move |()| r.store(true, Ordering::SeqCst)).into_awaitable());
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn a_leaked_future_leaks_memory_but_the_operation_completes() {
    let pool = common::pool(2);
    let done = Arc::new(AtomicBool::new(false));
    let d = done.clone();
    let mut fut =
        Box::pin(schedule(&pool.scheduler()).then(move |()| d.store(true, Ordering::SeqCst)).into_awaitable());
    let _ = fut.as_mut().poll(&mut Context::from_waker(Waker::noop()));
    std::mem::forget(fut);
    let t = std::time::Instant::now();
    while !done.load(Ordering::SeqCst) {
        assert!(t.elapsed() < Duration::from_secs(10));
        std::thread::yield_now();
    }
}

// ---------------------------------------------------------------------------------------
// Future → sender

#[test]
fn a_future_completes_a_sender_with_its_output() {
    assert_eq!(sync_wait(from_future(async { 41 + 1 })).unwrap(), Some(42));
    let v = sync_wait(from_future(async { "x".to_owned() }).then(|s| s.len()));
    assert_eq!(v.unwrap(), Some(1));
}

#[test]
fn a_future_is_polled_on_the_receivers_scheduler_and_its_waker_reschedules_there() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("ff-pool-{i}")).build().unwrap();
    let polled_on = Arc::new(Mutex::new(Vec::new()));
    let p = polled_on.clone();
    // A future woken from another thread (the sender of a channel): every poll must still
    // run on the pool.
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<u32>();
    let feeder = std::thread::spawn(move || {
        for i in 0..3 {
            std::thread::sleep(Duration::from_millis(2));
            tx.send(i).unwrap();
        }
    });
    let fut = async move {
        p.lock().unwrap().push(thread_name());
        let mut sum = 0;
        while let Some(i) = rx.recv().await {
            sum += i;
            p.lock().unwrap().push(thread_name());
        }
        sum
    };
    let v = sync_wait(starts_on(pool.scheduler(), from_future(fut)));
    feeder.join().unwrap();
    assert_eq!(v.unwrap(), Some(3));
    let names = polled_on.lock().unwrap();
    assert_eq!(names.len(), 4);
    for n in names.iter() {
        assert!(n.as_deref().unwrap_or("").starts_with("ff-pool-"), "polled on {n:?}");
    }
}

#[test]
fn under_sync_wait_the_future_is_polled_on_the_waiting_thread() {
    let rt = tokio_rt();
    let _guard = rt.enter();
    let here = std::thread::current().id();
    let v = sync_wait(from_future(async move {
        tokio::time::sleep(Duration::from_millis(1)).await;
        std::thread::current().id() == here
    }));
    assert_eq!(v.unwrap(), Some(true));
}

/// A future that stays pending forever and records its drop.
struct Forever(Arc<AtomicBool>, Arc<AtomicUsize>);

impl Future for Forever {
    type Output = ();
    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<()> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Poll::Pending
    }
}

impl Drop for Forever {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn a_stop_request_drops_the_future_at_its_next_poll_and_completes_stopped() {
    let pool = common::pool(2);
    let source = InplaceStopSource::new();
    let dropped = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicUsize::new(0));
    let (d, p) = (dropped.clone(), polls.clone());
    let src = &source;
    let r = std::thread::scope(|s| {
        let waiter =
            s.spawn(move || sync_wait(with_stop(src, starts_on(pool.scheduler(), from_future(Forever(d, p))))));
        while polls.load(Ordering::SeqCst) == 0 {
            std::thread::yield_now();
        }
        source.request_stop();
        waiter.join().unwrap()
    });
    assert_eq!(r.unwrap(), None, "completed stopped");
    assert!(dropped.load(Ordering::SeqCst), "the future was dropped");
    assert_eq!(polls.load(Ordering::SeqCst), 1, "not polled again after the stop");
}

#[test]
fn a_stop_requested_before_start_never_polls_the_future() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let dropped = Arc::new(AtomicBool::new(false));
    let polls = Arc::new(AtomicUsize::new(0));
    let r = sync_wait(with_stop(&source, from_future(Forever(dropped.clone(), polls.clone()))));
    assert_eq!(r.unwrap(), None);
    assert_eq!(polls.load(Ordering::SeqCst), 0);
    assert!(dropped.load(Ordering::SeqCst));
}

#[test]
fn a_panic_in_poll_is_delivered_on_the_panic_channel() {
    let msg = panic_message(|| sync_wait(from_future(async { panic!("poll panicked") })));
    assert_eq!(msg, "poll panicked");
}

#[test]
fn a_future_that_wakes_itself_during_poll_is_polled_again_without_recursion() {
    struct SelfWaking(u32);
    impl Future for SelfWaking {
        type Output = u32;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
            if self.0 == 100_000 {
                return Poll::Ready(self.0);
            }
            self.0 += 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    // Inline (no scheduler in a spawned work's environment) and under sync_wait.
    assert_eq!(sync_wait(from_future(SelfWaking(0))).unwrap(), Some(100_000));
    let scope = CountingScope::new();
    let out = Arc::new(AtomicUsize::new(0));
    let o = out.clone();
    spawn(from_future(SelfWaking(0)).then(move |v| o.store(v as usize, Ordering::SeqCst)), scope.token());
    sync_wait(scope.join()).unwrap();
    assert_eq!(out.load(Ordering::SeqCst), 100_000);
}

#[test]
fn the_two_bridges_compose() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let rt = tokio_rt();
    let _guard = rt.enter();
    let inner = schedule(&sch).then(|()| 20);
    let v = sync_wait(from_future(async move { inner.into_awaitable().await.unwrap().unwrap() + 22 }));
    assert_eq!(v.unwrap(), Some(42));
}
