//! Tests of the in-place stop tokens through the public API only.

use std::marker::PhantomPinned;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

mod common;

use common::DropCounter;
use senders::stop::MergedStopSource;
use senders::*;

/// A boxed, pinned callback of a nameable type (so a callback can own or find it).
type BoxedCallback = Pin<Box<StopCallback<'static, Box<dyn FnOnce() + Send>>>>;

/// Where a callback can find (and take) a boxed callback.
type Slot = Arc<Mutex<Option<BoxedCallback>>>;

/// A counter shared with callbacks.
fn counter() -> Arc<AtomicUsize> {
    Arc::new(AtomicUsize::new(0))
}

/// A callback that bumps `count`.
fn bump(count: &Arc<AtomicUsize>) -> impl FnOnce() + Send + 'static {
    let count = count.clone();
    move || {
        count.fetch_add(1, Ordering::SeqCst);
    }
}

/// A source that lives forever, so callbacks owning other callbacks are `'static`.
fn leaked_source() -> &'static InplaceStopSource {
    Box::leak(Box::new(InplaceStopSource::new()))
}

#[test]
fn request_runs_every_callback_exactly_once() {
    let source = InplaceStopSource::new();
    let counts: Vec<_> = (0..3).map(|_| counter()).collect();
    let mut a = pin!(StopCallback::new(source.token(), bump(&counts[0])));
    let mut b = pin!(StopCallback::new(source.token(), bump(&counts[1])));
    let mut c = pin!(StopCallback::new(source.token(), bump(&counts[2])));
    a.as_mut().register();
    b.as_mut().register();
    c.as_mut().register();
    // Registering twice is a no-op.
    b.as_mut().register();
    assert!(counts.iter().all(|c| c.load(Ordering::SeqCst) == 0));

    assert!(source.request_stop());
    assert!(counts.iter().all(|c| c.load(Ordering::SeqCst) == 1));
    assert!(!source.request_stop());
    assert!(counts.iter().all(|c| c.load(Ordering::SeqCst) == 1));
}

#[test]
fn request_stop_returns_true_only_the_first_time() {
    let source = InplaceStopSource::default();
    let token = source.token();
    assert!(!source.stop_requested());
    assert!(!token.stop_requested());
    assert!(token.stop_possible());
    assert!(source.request_stop());
    assert!(source.stop_requested());
    assert!(token.stop_requested());
    assert!(!source.request_stop());
    assert!(!source.request_stop());
}

#[test]
fn callback_registered_after_stop_runs_inline() {
    let source = InplaceStopSource::new();
    source.request_stop();
    let count = counter();
    let mut cb = pin!(StopCallback::new(source.token(), bump(&count)));
    assert_eq!(count.load(Ordering::SeqCst), 0, "new does not register");
    cb.as_mut().register();
    assert_eq!(count.load(Ordering::SeqCst), 1);
    cb.as_mut().register();
    assert_eq!(count.load(Ordering::SeqCst), 1);
}

#[test]
fn never_token_never_stops_and_never_runs_its_callback() {
    let token = StopToken::never();
    assert!(!token.stop_possible());
    assert!(!token.stop_requested());
    assert_eq!(token, StopToken::default());

    let ran = counter();
    let dropped = counter();
    {
        let guard = DropCounter(dropped.clone());
        let ran = ran.clone();
        let mut cb = pin!(StopCallback::new(token, move || {
            let _guard = guard;
            ran.fetch_add(1, Ordering::SeqCst);
        }));
        cb.as_mut().register();
        cb.as_mut().register();
    }
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(dropped.load(Ordering::SeqCst), 1, "the callback is dropped unrun");
}

#[test]
fn drop_before_stop_deregisters() {
    let source = InplaceStopSource::new();
    let ran = counter();
    let dropped = counter();
    let kept = counter();
    let mut before = pin!(StopCallback::new(source.token(), bump(&kept)));
    before.as_mut().register();
    {
        let guard = DropCounter(dropped.clone());
        let ran = ran.clone();
        let mut cb = pin!(StopCallback::new(source.token(), move || {
            let _guard = guard;
            ran.fetch_add(1, Ordering::SeqCst);
        }));
        cb.as_mut().register();
    }
    let mut after = pin!(StopCallback::new(source.token(), bump(&kept)));
    after.as_mut().register();
    assert_eq!(dropped.load(Ordering::SeqCst), 1);
    assert!(source.request_stop());
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    assert_eq!(kept.load(Ordering::SeqCst), 2, "its neighbours still run");
}

#[test]
fn unregistered_callback_is_just_dropped() {
    let source = InplaceStopSource::new();
    let ran = counter();
    drop(StopCallback::new(source.token(), bump(&ran)));
    source.request_stop();
    assert_eq!(ran.load(Ordering::SeqCst), 0);
}

#[test]
fn callback_dropping_a_not_yet_run_callback_prevents_it() {
    let source = leaked_source();
    let victim_ran = counter();
    let victim_dropped = counter();
    let killer_ran = counter();

    let guard = DropCounter(victim_dropped.clone());
    let ran = victim_ran.clone();
    let mut victim = Box::pin(StopCallback::new(source.token(), move || {
        let _guard = guard;
        ran.fetch_add(1, Ordering::SeqCst);
    }));
    victim.as_mut().register();
    // Registered later, so it runs first: the list runs newest first.
    let killer_count = killer_ran.clone();
    let mut killer = pin!(StopCallback::new(source.token(), move || {
        killer_count.fetch_add(1, Ordering::SeqCst);
        drop(victim);
    }));
    killer.as_mut().register();

    assert!(source.request_stop());
    assert_eq!(killer_ran.load(Ordering::SeqCst), 1);
    assert_eq!(victim_ran.load(Ordering::SeqCst), 0);
    assert_eq!(victim_dropped.load(Ordering::SeqCst), 1);
}

#[test]
fn callback_dropping_a_callback_that_already_ran() {
    let source = leaked_source();
    let ran = counter();
    // `victim` runs first (registered last); `killer` then drops it, after it completed.
    let slot: Slot = Arc::new(Mutex::new(None));
    let killer_slot = slot.clone();
    let killer_ran = ran.clone();
    let mut killer = pin!(StopCallback::new(source.token(), move || {
        let victim = killer_slot.lock().unwrap().take();
        assert!(victim.is_some());
        drop(victim);
        killer_ran.fetch_add(10, Ordering::SeqCst);
    }));
    killer.as_mut().register();
    let mut victim: BoxedCallback = Box::pin(StopCallback::new(source.token(), Box::new(bump(&ran))));
    victim.as_mut().register();
    *slot.lock().unwrap() = Some(victim);

    assert!(source.request_stop());
    assert_eq!(ran.load(Ordering::SeqCst), 11);
}

#[test]
fn callback_that_drops_itself() {
    let source = leaked_source();
    let before = counter();
    let after = counter();
    // Registered first: runs last, after the self-dropping one.
    let mut later = pin!(StopCallback::new(source.token(), bump(&after)));
    later.as_mut().register();

    let slot: Slot = Arc::new(Mutex::new(None));
    let own_slot = slot.clone();
    let count = before.clone();
    let mut me: BoxedCallback = Box::pin(StopCallback::new(
        source.token(),
        Box::new(move || {
            let me = own_slot.lock().unwrap().take();
            assert!(me.is_some());
            // Deregisters itself while running: must neither wait nor be touched again.
            drop(me);
            count.fetch_add(1, Ordering::SeqCst);
        }),
    ));
    me.as_mut().register();
    *slot.lock().unwrap() = Some(me);

    assert!(source.request_stop());
    assert_eq!(before.load(Ordering::SeqCst), 1);
    assert_eq!(after.load(Ordering::SeqCst), 1);
    assert!(slot.lock().unwrap().is_none());
}

/// A raw pointer that may cross threads (tests only).
struct SendPtr<T>(*mut T);
// SAFETY: the tests only dereference it on the thread that runs the stop callbacks, while
// nobody else uses the pointee.
unsafe impl<T> Send for SendPtr<T> {}

#[test]
fn callback_that_drops_itself_through_a_raw_pointer() {
    type Cb = StopCallback<'static, Box<dyn FnOnce() + Send>>;
    let source = leaked_source();
    let ran = counter();
    let me: Arc<AtomicPtr<Cb>> = Arc::new(AtomicPtr::new(std::ptr::null_mut()));
    let own = SendPtr(Arc::as_ptr(&me).cast_mut());
    let count = ran.clone();
    let boxed: Pin<Box<Cb>> = Box::pin(StopCallback::new(
        source.token(),
        Box::new(move || {
            let own = own;
            // SAFETY: `me` (kept alive by the test) holds the pointer leaked below.
            let raw = unsafe { (*own.0).load(Ordering::SeqCst) };
            // SAFETY: `raw` came from `Box::into_raw` of a pinned box and is freed only
            // here, once, in place: it is never moved.
            drop(unsafe { Pin::new_unchecked(Box::from_raw(raw)) });
            count.fetch_add(1, Ordering::SeqCst);
        }),
    ));
    // SAFETY: the box is turned back into a `Pin<Box<_>>` before it is freed.
    let raw = Box::into_raw(unsafe { Pin::into_inner_unchecked(boxed) });
    me.store(raw, Ordering::SeqCst);
    // SAFETY: `raw` is valid and stays put (it is only freed in place, by the callback).
    unsafe { Pin::new_unchecked(&mut *raw) }.register();

    assert!(source.request_stop());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn callback_registering_on_the_stopping_source_runs_inline() {
    let source = leaked_source();
    let inner_ran = counter();
    let inner_count = inner_ran.clone();
    let mut outer = pin!(StopCallback::new(source.token(), move || {
        let mut inner = pin!(StopCallback::new(source.token(), bump(&inner_count)));
        inner.as_mut().register();
        assert_eq!(inner_count.load(Ordering::SeqCst), 1);
    }));
    outer.as_mut().register();
    assert!(source.request_stop());
    assert_eq!(inner_ran.load(Ordering::SeqCst), 1);
}

#[test]
fn panicking_callback_does_not_stop_the_others() {
    let source = InplaceStopSource::new();
    let ran = counter();
    let mut a = pin!(StopCallback::new(source.token(), bump(&ran)));
    a.as_mut().register();
    let mut boom = pin!(StopCallback::new(source.token(), || panic!("boom")));
    boom.as_mut().register();
    let mut b = pin!(StopCallback::new(source.token(), bump(&ran)));
    b.as_mut().register();

    let result = catch_unwind(AssertUnwindSafe(|| source.request_stop()));
    let payload = result.expect_err("the panic is resumed");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"boom"));
    assert_eq!(ran.load(Ordering::SeqCst), 2);
    assert!(source.stop_requested());
    assert!(!source.request_stop());
}

#[test]
fn drop_waits_for_a_callback_running_on_another_thread() {
    for _ in 0..5 {
        let source = InplaceStopSource::new();
        let started = Arc::new(AtomicBool::new(false));
        let finished = Arc::new(AtomicBool::new(false));
        let (s, f) = (started.clone(), finished.clone());
        let mut cb = Box::pin(StopCallback::new(source.token(), move || {
            s.store(true, Ordering::SeqCst);
            thread::sleep(Duration::from_millis(30));
            f.store(true, Ordering::SeqCst);
        }));
        cb.as_mut().register();

        thread::scope(|scope| {
            let requester = scope.spawn(|| source.request_stop());
            let dropper = scope.spawn(move || {
                while !started.load(Ordering::SeqCst) {
                    thread::yield_now();
                }
                drop(cb);
                // Drop returned: the callback must have completely finished.
                finished.load(Ordering::SeqCst)
            });
            assert!(dropper.join().unwrap(), "drop returned before the callback finished");
            assert!(requester.join().unwrap());
        });
    }
}

#[test]
fn concurrent_register_drop_and_request() {
    for _ in 0..50 {
        let source = InplaceStopSource::new();
        let ran = counter();
        let registered = counter();
        thread::scope(|scope| {
            for _ in 0..2 {
                scope.spawn(|| {
                    for i in 0..50 {
                        let mut cb = pin!(StopCallback::new(source.token(), bump(&ran)));
                        cb.as_mut().register();
                        registered.fetch_add(1, Ordering::SeqCst);
                        if i % 2 == 0 {
                            thread::yield_now();
                        }
                    }
                });
            }
            scope.spawn(|| {
                thread::yield_now();
                source.request_stop()
            });
        });
        // Every callback ran at most once; those registered after the stop ran inline.
        assert!(ran.load(Ordering::SeqCst) <= registered.load(Ordering::SeqCst));
        let mut late = pin!(StopCallback::new(source.token(), bump(&ran)));
        let before = ran.load(Ordering::SeqCst);
        late.as_mut().register();
        assert_eq!(ran.load(Ordering::SeqCst), before + 1);
    }
}

#[test]
fn tokens_compare_by_source() {
    let a = InplaceStopSource::new();
    let b = InplaceStopSource::new();
    assert_eq!(a.token(), a.token());
    assert_ne!(a.token(), b.token());
    assert_ne!(a.token(), StopToken::never());
    assert_eq!(StopToken::never(), StopToken::never());
    assert!(format!("{:?}", StopToken::never()).contains("never"));
    assert!(format!("{:?}", a.token()).contains("stop_requested: false"));
    // SAFETY: `a` outlives every use of the detached token (this statement).
    let detached = unsafe { a.token().detach() };
    assert_eq!(detached, a.token());
}

/// An operation-state-like struct: the callback is stored unregistered in an `Option`
/// with a detached token, and registered once the struct is pinned.
struct OpState<F: FnOnce() + Send> {
    callback: Option<StopCallback<'static, F>>,
    _pin: PhantomPinned,
}

impl<F: FnOnce() + Send + 'static> OpState<F> {
    fn start(self: Pin<&mut Self>) {
        // SAFETY: structural pinning of `callback`: it is never moved out.
        let callback = unsafe { self.map_unchecked_mut(|s| &mut s.callback) };
        if let Some(callback) = callback.as_pin_mut() {
            callback.register();
        }
    }
}

#[test]
fn callback_in_a_pinned_option_field() {
    let source = InplaceStopSource::new();
    let ran = counter();
    {
        // SAFETY: `source` outlives the operation state, dropped at the end of this block.
        let token = unsafe { source.token().detach() };
        let mut op = pin!(OpState { callback: Some(StopCallback::new(token, bump(&ran))), _pin: PhantomPinned });
        op.as_mut().start();
        source.request_stop();
        assert_eq!(ran.load(Ordering::SeqCst), 1);
    }
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn merged_stops_from_a() {
    let a = InplaceStopSource::new();
    let b = InplaceStopSource::new();
    let mut merged = pin!(MergedStopSource::new(a.token(), b.token()));
    merged.as_mut().register();
    let ran = counter();
    let mut cb = pin!(StopCallback::new(merged.as_ref().token(), bump(&ran)));
    cb.as_mut().register();
    assert!(!merged.as_ref().token().stop_requested());
    assert!(a.request_stop());
    assert!(merged.as_ref().token().stop_requested());
    assert!(!b.stop_requested());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(!merged.as_ref().request_stop());
    assert!(b.request_stop());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn merged_stops_from_b() {
    let a = InplaceStopSource::new();
    let b = InplaceStopSource::new();
    let mut merged = pin!(MergedStopSource::new(a.token(), b.token()));
    merged.as_mut().register();
    let ran = counter();
    let mut cb = pin!(StopCallback::new(merged.as_ref().token(), bump(&ran)));
    cb.as_mut().register();
    assert!(b.request_stop());
    assert!(merged.as_ref().token().stop_requested());
    assert!(merged.stop_requested());
    assert!(!a.stop_requested());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn merged_stops_from_itself_without_stopping_inputs() {
    let a = InplaceStopSource::new();
    let b = InplaceStopSource::new();
    let mut merged = pin!(MergedStopSource::new(a.token(), b.token()));
    merged.as_mut().register();
    let ran = counter();
    let mut cb = pin!(StopCallback::new(merged.as_ref().token(), bump(&ran)));
    cb.as_mut().register();
    assert!(merged.as_ref().request_stop());
    assert!(!merged.as_ref().request_stop());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert!(!a.stop_requested() && !b.stop_requested());
    // The inputs stopping later is harmless.
    assert!(a.request_stop());
    assert!(b.request_stop());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
}

#[test]
fn merged_with_a_never_token() {
    let a = InplaceStopSource::new();
    let mut merged = pin!(MergedStopSource::new(StopToken::never(), a.token()));
    merged.as_mut().register();
    assert!(merged.as_ref().token().stop_possible());
    assert!(!merged.as_ref().token().stop_requested());
    a.request_stop();
    assert!(merged.as_ref().token().stop_requested());

    let mut both_never = pin!(MergedStopSource::new(StopToken::never(), StopToken::never()));
    both_never.as_mut().register();
    assert!(!both_never.as_ref().token().stop_requested());
    assert!(both_never.as_ref().request_stop());
    assert!(both_never.as_ref().token().stop_requested());
}

#[test]
fn merged_registered_after_an_input_stopped() {
    let a = InplaceStopSource::new();
    let b = InplaceStopSource::new();
    b.request_stop();
    let mut merged = pin!(MergedStopSource::new(a.token(), b.token()));
    assert!(!merged.stop_requested(), "new does not register");
    merged.as_mut().register();
    assert!(merged.as_ref().token().stop_requested());
    merged.as_mut().register();
    let ran = counter();
    let mut cb = pin!(StopCallback::new(merged.as_ref().token(), bump(&ran)));
    cb.as_mut().register();
    assert_eq!(ran.load(Ordering::SeqCst), 1, "ran inline");
    assert!(!a.stop_requested());
    assert!(format!("{merged:?}").contains("stop_requested: true"));
}

#[test]
fn merged_dropped_before_its_inputs_stop() {
    let a = InplaceStopSource::new();
    let b = InplaceStopSource::new();
    {
        let mut merged = pin!(MergedStopSource::new(a.token(), b.token()));
        merged.as_mut().register();
    }
    assert!(a.request_stop());
    assert!(b.request_stop());
}

#[test]
fn merged_inputs_stopped_concurrently() {
    for _ in 0..50 {
        let a = InplaceStopSource::new();
        let b = InplaceStopSource::new();
        let ran = counter();
        let mut merged = pin!(MergedStopSource::new(a.token(), b.token()));
        merged.as_mut().register();
        let mut cb = pin!(StopCallback::new(merged.as_ref().token(), bump(&ran)));
        cb.as_mut().register();
        thread::scope(|scope| {
            scope.spawn(|| a.request_stop());
            scope.spawn(|| b.request_stop());
        });
        assert_eq!(ran.load(Ordering::SeqCst), 1);
        assert!(merged.as_ref().token().stop_requested());
    }
}

#[test]
fn types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<InplaceStopSource>();
    send_sync::<StopToken<'static>>();
    send_sync::<StopCallback<'static, fn()>>();
    send_sync::<MergedStopSource<'static>>();
}
