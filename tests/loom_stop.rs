//! Loom models of the stop-token protocol. Run with
//! `RUSTFLAGS="--cfg loom" LOOM_MAX_PREEMPTIONS=2 cargo test --test loom_stop --release`.
#![cfg(loom)]

use std::pin::pin;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::thread;

use senders::stop::MergedStopSource;
use senders::*;

/// A callback that adds `by` to `count` (Relaxed: any visibility must come from the
/// stop source's own synchronization).
fn add(count: &Arc<AtomicUsize>, by: usize) -> impl FnOnce() + Send + 'static {
    let count = count.clone();
    move || {
        count.fetch_add(by, Ordering::Relaxed);
    }
}

/// Register races with request_stop: the callback runs exactly once, either inline in
/// `register` or in `request_stop`.
#[test]
fn register_races_request_stop() {
    loom::model(|| {
        let source = Arc::new(InplaceStopSource::new());
        let count = Arc::new(AtomicUsize::new(0));
        // Already in the list, so the request has a node to pop while we insert.
        let mut first = pin!(StopCallback::new(source.token(), add(&count, 10)));
        first.as_mut().register();

        let requester = {
            let source = source.clone();
            thread::spawn(move || source.request_stop())
        };

        let mut callback = Box::pin(StopCallback::new(source.token(), add(&count, 1)));
        callback.as_mut().register();

        assert!(requester.join().unwrap());
        assert_eq!(count.load(Ordering::Relaxed), 11);
        drop(callback);
        assert_eq!(count.load(Ordering::Relaxed), 11);
    });
}

/// Drop (deregistration) races with request_stop: when drop returns, the callback either
/// never ran (and never will) or has completely finished.
#[test]
fn drop_races_request_stop() {
    loom::model(|| {
        let source = Arc::new(InplaceStopSource::new());
        let count = Arc::new(AtomicUsize::new(0));

        let counter = count.clone();
        let mut callback = Box::pin(StopCallback::new(source.token(), move || {
            // Two steps: a drop that returns between them would see 1.
            counter.fetch_add(1, Ordering::Relaxed);
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        callback.as_mut().register();

        let requester = {
            let source = source.clone();
            thread::spawn(move || source.request_stop())
        };

        drop(callback);
        let seen = count.load(Ordering::Relaxed);
        assert!(seen == 0 || seen == 2, "drop returned mid-callback: {seen}");

        assert!(requester.join().unwrap());
        assert_eq!(count.load(Ordering::Relaxed), seen, "ran after drop returned");
    });
}

/// A node in the middle of the list is dropped on one thread while another requests
/// stop: its neighbours run exactly once, and it either never runs or has finished when
/// its drop returns.
#[test]
fn drop_middle_node_races_request_stop() {
    loom::model(|| {
        let source = Arc::new(InplaceStopSource::new());
        let outer = Arc::new(AtomicUsize::new(0));
        let middle = Arc::new(AtomicUsize::new(0));
        // SAFETY: `source` is kept alive (by this frame's `Arc`) until both threads have
        // been joined and every callback registered through this token dropped.
        let token = unsafe { source.token().detach() };

        let mut last = Box::pin(StopCallback::new(token, add(&outer, 1)));
        last.as_mut().register();
        let counter = middle.clone();
        let mut victim = Box::pin(StopCallback::new(token, move || {
            counter.fetch_add(1, Ordering::Relaxed);
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        victim.as_mut().register();
        let mut first = Box::pin(StopCallback::new(token, add(&outer, 1)));
        first.as_mut().register();

        let dropper = {
            let middle = middle.clone();
            thread::spawn(move || {
                drop(victim);
                middle.load(Ordering::Relaxed)
            })
        };
        assert!(source.request_stop());
        assert_eq!(outer.load(Ordering::Relaxed), 2);

        let seen = dropper.join().unwrap();
        assert!(seen == 0 || seen == 2, "drop returned mid-callback: {seen}");
        assert_eq!(middle.load(Ordering::Relaxed), seen, "ran after drop returned");
        drop(first);
        drop(last);
    });
}

/// Two threads request stop at once: exactly one wins, and the callback runs once.
#[test]
fn concurrent_request_stop() {
    loom::model(|| {
        let source = Arc::new(InplaceStopSource::new());
        let count = Arc::new(AtomicUsize::new(0));

        let mut callback = Box::pin(StopCallback::new(source.token(), add(&count, 1)));
        callback.as_mut().register();

        let other = {
            let source = source.clone();
            thread::spawn(move || source.request_stop())
        };
        let mine = source.request_stop();
        let theirs = other.join().unwrap();

        assert!(mine != theirs, "exactly one request wins");
        if mine {
            // The winner returns after running the callback.
            assert_eq!(count.load(Ordering::Relaxed), 1);
        }
        assert!(source.stop_requested());
        drop(callback);
        assert_eq!(count.load(Ordering::Relaxed), 1);
    });
}

/// Both inputs of a merged source stop concurrently: the merged source stops once, and a
/// callback on it runs exactly once.
#[test]
fn merged_inputs_stop_concurrently() {
    loom::model(|| {
        let a = Arc::new(InplaceStopSource::new());
        let b = Arc::new(InplaceStopSource::new());
        let count = Arc::new(AtomicUsize::new(0));

        let mut merged = Box::pin(MergedStopSource::new(a.token(), b.token()));
        merged.as_mut().register();
        let mut callback = pin!(StopCallback::new(merged.as_ref().token(), add(&count, 1)));
        callback.as_mut().register();

        let stop_a = {
            let a = a.clone();
            thread::spawn(move || a.request_stop())
        };
        let stop_b = {
            let b = b.clone();
            thread::spawn(move || b.request_stop())
        };
        assert!(stop_a.join().unwrap());
        assert!(stop_b.join().unwrap());

        assert!(merged.as_ref().token().stop_requested());
        assert_eq!(count.load(Ordering::Relaxed), 1);
        assert!(!merged.as_ref().request_stop());
    });
}
