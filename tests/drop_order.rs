//! A completion is the last thing an operation does: every value, error and capture the
//! operation owns is dropped before the call that releases whoever waits. The values
//! here borrow a count from the waiter's frame ([`Live`]) and take a moment to die, so a
//! drop that comes after the completion leaves the count above zero when the waiter
//! looks.

mod common;

use common::{Live, Tracked};
use senders::domain::NoDomain;
use senders::time::ScheduleAt;
use senders::*;
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

/// `continues_on`'s hop completing stopped drops the value it carried before the
/// waiter is released (the value died on the worker after `sync_wait` returned).
#[test]
fn a_stopped_hop_drops_the_carried_value_before_completing() {
    let pool = common::pool(2);
    for _ in 0..4 {
        let live = Live::new();
        let source = InplaceStopSource::new();
        source.request_stop();
        let r = sync_wait(stop_when(just(live.track(5)).continues_on(pool.scheduler()), source.token()));
        assert!(matches!(r, Ok(None)), "the hop under a stopped token completes stopped");
        live.assert_none_alive("after sync_wait returned");
    }
}

/// The same hop on a stopped token after a panic upstream: the panic is delivered, and
/// nothing is left alive.
#[test]
fn a_hop_that_panics_upstream_drops_everything_before_completing() {
    let pool = common::pool(2);
    let live = Live::new();
    let tracked = live.track(());
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        sync_wait(
            just(tracked)
                .then(|t| -> u32 {
                    drop(t);
                    panic!("upstream")
                })
                .continues_on(pool.scheduler()),
        )
    }));
    assert!(r.is_err());
    live.assert_none_alive("after the panic resumed");
}

/// A `spawn_future` whose future is dropped while the work runs: the work's result,
/// which borrows the caller's frame, dies before `let_async_scope` completes.
#[test]
fn an_abandoned_spawn_future_drops_its_result_before_the_scope_completes() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    for _ in 0..4 {
        let live = Live::new();
        let running = Barrier::new(2);
        let (live_ref, sch_ref, running_ref) = (&live, &sch, &running);
        sync_wait(just(()).let_async_scope(|tk, ()| {
            let fut = spawn_future(
                schedule(sch_ref).then(move |()| {
                    running_ref.wait();
                    std::thread::sleep(Duration::from_millis(30));
                    live_ref.track(7)
                }),
                tk,
            );
            running.wait();
            drop(fut);
        }))
        .unwrap();
        live.assert_none_alive("after let_async_scope completed");
    }
}

/// The same when the future's consumer is stopped instead of dropped.
#[test]
fn a_stopped_spawn_future_drops_its_result_before_the_scope_completes() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    for _ in 0..4 {
        let live = Live::new();
        let source = InplaceStopSource::new();
        let (live_ref, sch_ref, source_ref) = (&live, &sch, &source);
        sync_wait(just(()).let_async_scope(|tk, ()| {
            let fut = spawn_future(
                schedule(sch_ref).then(move |()| {
                    std::thread::sleep(Duration::from_millis(30));
                    live_ref.track(7)
                }),
                tk,
            );
            spawn(stop_when(fut, source_ref.token()).then(|_| ()).with_error::<Infallible>(), tk);
            spawn(
                schedule(sch_ref).then(move |()| {
                    std::thread::sleep(Duration::from_millis(5));
                    source_ref.request_stop();
                }),
                tk,
            );
        }))
        .unwrap();
        live.assert_none_alive("after let_async_scope completed");
    }
}

/// A `spawn_future` whose result is ready before its future is dropped: the consumer
/// drops the result, in the scope.
#[test]
fn a_future_dropped_after_its_work_completed_drops_the_result_in_the_scope() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let live = Live::new();
    let (live_ref, sch_ref) = (&live, &sch);
    sync_wait(just(()).let_async_scope(|tk, ()| {
        let fut = spawn_future(schedule(sch_ref).then(move |()| live_ref.track(7)), tk);
        std::thread::sleep(Duration::from_millis(20));
        drop(fut);
    }))
    .unwrap();
    live.assert_none_alive("after let_async_scope completed");
}

/// A `let_async_scope` whose spawned work fails: the returned sender's value, which
/// the completion does not deliver, dies before the error is delivered (the scope
/// completes on the pool, where its join hops back to).
#[test]
fn a_failed_scope_drops_the_returned_value_before_completing() {
    let pool = common::pool(2);
    for _ in 0..4 {
        let live = Live::new();
        let live_ref = &live;
        let r = sync_wait(starts_on(
            pool.scheduler(),
            just(()).with_error::<u32>().let_async_scope(move |tk, ()| {
                spawn(just_error::<(), u32>(7), tk);
                just(live_ref.track(1)).with_error::<u32>()
            }),
        ));
        assert!(matches!(r, Err(7)), "the spawned work's error is the completion");
        live.assert_none_alive("after sync_wait returned");
    }
}

/// The same when spawned work panics: the returned value dies before the panic is
/// delivered.
#[test]
fn a_panicked_scope_drops_the_returned_value_before_completing() {
    let pool = common::pool(2);
    for _ in 0..4 {
        let live = Live::new();
        let live_ref = &live;
        let message = common::panic_message(|| {
            sync_wait(starts_on(
                pool.scheduler(),
                just(()).let_async_scope(move |tk, ()| {
                    spawn(just(()).then(|()| panic!("spawned work")), tk);
                    just(live_ref.track(1))
                }),
            ))
        });
        assert_eq!(message, "spawned work");
        live.assert_none_alive("after the panic resumed");
    }
}

/// A value whose drop panics.
struct PanicsOnDrop;

impl Drop for PanicsOnDrop {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            panic!("the value's drop");
        }
    }
}

/// A pool `bulk` that fails with an error, whose value then panics in its drop: the
/// panic replaces the error, and the error dies before the panic is delivered.
#[test]
fn a_pool_bulk_drops_its_error_before_delivering_a_panic_that_replaced_it() {
    let pool = common::pool(2);
    for _ in 0..4 {
        let live = Live::new();
        let live_ref = &live;
        let message = common::panic_message(|| {
            sync_wait(starts_on(
                pool.scheduler(),
                just(PanicsOnDrop)
                    .with_error::<Tracked<'_, u32>>()
                    .bulk(4, move |i, _: &PanicsOnDrop| if i == 0 { Err(live_ref.track(1)) } else { Ok(()) }),
            ))
        });
        assert_eq!(message, "the value's drop");
        live.assert_none_alive("after the panic resumed");
    }
}

/// An inline scheduler whose handles share a tracked value: it dies with the last one.
#[derive(Clone)]
struct TrackedInline(Arc<Tracked<'static, ()>>);

impl PartialEq for TrackedInline {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The sender of [`TrackedInline`]'s `schedule()`.
struct TrackedInlineSender(TrackedInline);

impl Sender for TrackedInlineSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = TrackedInline;
    fn completion_scheduler(&self) -> TrackedInline {
        self.0.clone()
    }
}

impl<R: Receiver<(), Infallible>> SenderTo<R> for TrackedInlineSender {
    type Operation = <<InlineScheduler as Scheduler>::Sender as SenderTo<R>>::Operation;
    fn connect(self, receiver: R) -> Self::Operation {
        InlineScheduler.schedule().connect(receiver)
    }
}

impl Scheduler for TrackedInline {
    type Domain = NoDomain;
    type Sender = TrackedInlineSender;
    fn schedule(&self) -> TrackedInlineSender {
        TrackedInlineSender(self.clone())
    }
}

/// A timer that is due when it starts, on a pool worker, completes inline through its
/// scheduler: the operation's handle of the scheduler dies before the completion.
#[test]
fn a_due_timer_drops_its_scheduler_before_completing() {
    let pool = common::pool(2);
    for _ in 0..4 {
        // Values that must be `'static` (a scheduler, a query key, a panic payload)
        // count in a `static`.
        static LIVE: Live = Live::new();
        let live = &LIVE;
        let sch = TrackedInline(Arc::new(live.track(())));
        let timer = ScheduleAt::new(sch, Some(Instant::now()));
        assert_eq!(sync_wait(starts_on(pool.scheduler(), timer)), Ok(Some(())));
        live.assert_none_alive("after sync_wait returned");
    }
}

/// A query key with a tracked value.
struct TrackedKey {
    _alive: Tracked<'static, ()>,
}

impl Query for TrackedKey {
    type Value = u32;
}

/// `read_env` started on a pool worker: its query key dies before the completion.
#[test]
fn read_env_drops_its_query_before_completing() {
    let pool = common::pool(2);
    for _ in 0..4 {
        // Values that must be `'static` (a scheduler, a query key, a panic payload)
        // count in a `static`.
        static LIVE: Live = Live::new();
        let live = &LIVE;
        let r = sync_wait(starts_on(pool.scheduler(), read_env(TrackedKey { _alive: live.track(()) })));
        assert_eq!(r, Ok(Some(None)), "no answer written");
        live.assert_none_alive("after sync_wait returned");
    }
}

/// A scheduler whose `schedule()` completes with a panic inline, and whose operation
/// then panics in its drop with a tracked payload.
#[derive(Clone, Copy)]
struct PanickySched(&'static Live);

impl PartialEq for PanickySched {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

/// The sender of [`PanickySched`]'s `schedule()`.
struct PanickySender(PanickySched);

impl Sender for PanickySender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = PanickySched;
    fn completion_scheduler(&self) -> PanickySched {
        self.0
    }
}

impl<R: Receiver<(), Infallible>> SenderTo<R> for PanickySender {
    type Operation = PanickyOp<R>;
    fn connect(self, receiver: R) -> PanickyOp<R> {
        PanickyOp { rcvr: Some(receiver), live: (self.0).0 }
    }
}

impl Scheduler for PanickySched {
    type Domain = NoDomain;
    type Sender = PanickySender;
    fn schedule(&self) -> PanickySender {
        PanickySender(*self)
    }
}

/// The operation of [`PanickySender`].
struct PanickyOp<R> {
    rcvr: Option<R>,
    live: &'static Live,
}

impl<R: Receiver<(), Infallible>> OperationState for PanickyOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `rcvr` is not structurally pinned: it is moved out, never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(rcvr) = this.rcvr.take() {
            rcvr.set_panic(Panic::new(Box::new("the scheduler")));
        }
    }
}

impl<R> Drop for PanickyOp<R> {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            std::panic::panic_any(self.live.track(()));
        }
    }
}

/// A task that moves to a scheduler whose `schedule()` panics, and whose operation
/// panics again in its drop: the second panic's payload dies before the first
/// completes the task (on the pool worker the task started on).
#[test]
fn a_task_hop_drops_a_second_panic_before_resuming_the_task() {
    let pool = common::pool(2);
    for _ in 0..4 {
        // Values that must be `'static` (a scheduler, a query key, a panic payload)
        // count in a `static`.
        static LIVE: Live = Live::new();
        let live = &LIVE;
        let task = Task::<(), Infallible>::new(async move {
            change_scheduler(PanickySched(live)).await;
            Ok(())
        });
        let message = common::panic_message(|| sync_wait(starts_on(pool.scheduler(), task)));
        assert_eq!(message, "the scheduler");
        live.assert_none_alive("after the panic resumed");
    }
}
