//! The `let_async_scope` protocols under loom, on the module's real pieces: the
//! first-error slot (`LetScopeShared::record_error`), `record_panic`, `associate` and
//! the association's drop (the dissociation), the scope core's counter (`start_join`
//! and its waiting job), its stop source, and the outer stop request forwarded by a
//! `RawStopCallback<ForwardStop>`.
//!
//! `LetScopeFirst::set_value` and `LetTail::finish` are re-enacted step by step, in
//! their order: they need a whole operation, and `finish` hands the core to the
//! process-wide free list, which must not keep loom objects from one execution to the
//! next. The core's first panic sits behind a `parking_lot` mutex, which loom does not
//! see (it is never held across a loom operation, so it cannot deadlock a model).
use super::*;
use crate::env::EmptyEnv;
use crate::scheduler::NoScheduler;
use crate::scope::token::Association;
use crate::stop::{InplaceStopSource, Invoke};
use crate::sync::Ordering;
use crate::sync::thread;
use loom::sync::atomic::AtomicUsize as Count;

/// One scope, the outer receiver's stop source, and what the models observe. Leaked
/// while a model runs (associations and the join's waiter point to it, from any
/// thread) and freed by [`free`] at its end.
struct Model {
    shared: LetScopeShared<NoScheduler, u32>,
    /// The outer receiver's stop source.
    outer: InplaceStopSource,
    /// Set once `outer.request_stop()` has returned.
    outer_stopped: AtomicBool,
    /// `LetTail::stop_cb`: forwards the outer stop request to the scope's source.
    stop_cb: UnsafeCell<Option<RawStopCallback<'static, ForwardStop>>>,
    /// The stop callback of spawned work that waits for the scope's stop request.
    work_cb: UnsafeCell<Option<RawStopCallback<'static, CompleteWork>>>,
    /// Associations alive, as the model counts them: up after each `associate`, down
    /// just before each drop.
    live: Count,
    /// How many times the join completed (notified, or inline in `start_join`).
    joins: Count,
    /// The error the join's completion read from the slot (0: none).
    kept: Count,
    /// How many panics the join's completion found.
    panics: Count,
    /// Whether stop was requested on the scope when the join completed.
    stopped: Count,
}

// SAFETY: the shared state is `Sync` (its own impl); `stop_cb` is written before any
// association exists, and taken once by the join's completion, which the counter
// orders after every association (as `LetTail::stop_cb`); `work_cb` is written before
// the threads that may run it start, and dropped by its own callback.
unsafe impl Sync for Model {}

/// Spawned work that completes when the scope's stop is requested, inside the stop
/// callback (as a timer or an I/O wait would): its completion destroys its operation,
/// and with it the callback's own registration, then dissociates (`SpawnReceiver`).
struct CompleteWork {
    m: &'static Model,
    work: LetAssociation<'static, NoScheduler, u32>,
}

impl Invoke for CompleteWork {
    fn invoke(self) {
        // SAFETY: the callback runs once; dropping its own registration from inside it
        // is allowed, and nothing else touches the cell.
        unsafe { *self.m.work_cb.get() = None };
        dissociate(self.m, self.work);
    }
}

fn open() -> &'static Model {
    let core: &'static ScopeCore = Box::leak(Box::new(ScopeCore::new_for_model(2, 0)));
    let props: *const (dyn Props + Sync) = &EmptyEnv;
    Box::leak(Box::new(Model {
        shared: LetScopeShared {
            core,
            generation: core.counter.generation(),
            sched: NoScheduler,
            props,
            error_claimed: AtomicBool::new(false),
            error: sync::UnsafeCell::new(None),
        },
        outer: InplaceStopSource::new(),
        outer_stopped: AtomicBool::new(false),
        stop_cb: UnsafeCell::new(None),
        work_cb: UnsafeCell::new(None),
        live: Count::new(0),
        joins: Count::new(0),
        kept: Count::new(0),
        panics: Count::new(0),
        stopped: Count::new(0),
    }))
}

/// Frees the model and its core.
///
/// # Safety
///
/// Every thread of the model has ended, and nothing refers to `m` any more.
unsafe fn free(m: &'static Model) {
    let core = m.shared.core;
    // SAFETY: both come from `Box::leak` in `open`, and the caller's contract.
    unsafe {
        drop(Box::from_raw(std::ptr::from_ref(m).cast_mut()));
        drop(Box::from_raw(std::ptr::from_ref(core).cast_mut()));
    }
}

/// An association, as `spawn` (or `set_value`, for the returned sender) takes one.
fn associate(m: &'static Model) -> LetAssociation<'static, NoScheduler, u32> {
    let a = m.shared.associate().expect("the scope is open");
    m.live.fetch_add(1, Ordering::AcqRel);
    a
}

/// Ends an association, as a spawned operation's completion does.
fn dissociate(m: &Model, a: LetAssociation<'_, NoScheduler, u32>) {
    m.live.fetch_sub(1, Ordering::AcqRel);
    drop(a);
}

/// The join's completion: `LetScopeFirst::joined` without a scheduler, that is
/// `LetTail::finish`, then `ScopeCore::release` without the free list.
///
/// # Safety
///
/// `data` is a model from `open`; called once, when the count reached zero under the
/// join.
unsafe fn joined(data: *const (), (): ()) {
    if std::thread::panicking() {
        // The model already failed; its unwinding dropped the last association.
        return;
    }
    // SAFETY: the caller's contract; the model lives until `free`.
    let m = unsafe { &*data.cast::<Model>() };
    let core = m.shared.core;
    assert_eq!(m.live.load(Ordering::Acquire), 0, "the join completed with a live association");
    assert!(core.counter.droppable(), "the join completed before the counter released the core");
    if core.stop.stop_requested() {
        m.stopped.fetch_add(1, Ordering::AcqRel);
    }
    // `finish`: the stop callback first (its drop waits for it if it runs on another
    // thread), then the panic and the error slot.
    // SAFETY: the join is complete: nothing else touches the cell (`LetTail::finish`).
    // The callback is dropped in place: it is pinned there while registered.
    unsafe { *m.stop_cb.get() = None };
    if core.take_panic().is_some() {
        m.panics.fetch_add(1, Ordering::AcqRel);
    }
    // SAFETY: the join ordered every write of the slot before this read.
    let error = m.shared.error.with_mut(|e| unsafe { (*e).take() });
    m.kept.store(error.map_or(0, |e| e as usize), Ordering::Release);
    // `release`: the next generation, and a clean stop source.
    core.counter.recycle();
    // SAFETY: the scope is joined and its stop callback is gone: no callback is
    // registered on the sources and no other thread uses them (`release`'s argument).
    unsafe { core.reset_stop() };
    m.joins.fetch_add(1, Ordering::AcqRel);
}

/// `set_value`'s first step: forward the outer stop request to the scope's source
/// (inline, if it was already requested).
fn forward_outer_stop(m: &'static Model) {
    // SAFETY: written before any association exists; the model does not move until
    // `free`, and the join's completion drops the callback before the scope's source
    // is reset.
    unsafe {
        let forward = ForwardStop::new(&m.shared);
        let cb = (*m.stop_cb.get()).insert(RawStopCallback::new(m.outer.token(), forward));
        Pin::new_unchecked(cb).register();
    }
}

/// Starts the join as `set_value` does: queue the waiter, or complete inline.
fn start_join(m: &'static Model) {
    // SAFETY: the model outlives every thread that may notify the waiter.
    let waiter = unsafe { JobRef::new(std::ptr::from_ref(m), joined) };
    if m.shared.core.counter.start_join(waiter) == JoinStart::Done {
        // SAFETY: the count was zero: this is the one completion.
        unsafe { joined(std::ptr::from_ref(m).cast(), ()) };
    }
}

#[test]
fn the_first_error_is_kept_against_a_second_error_and_the_join() {
    loom::model(|| {
        let m = open();
        // The function spawned two pieces of work; each fails, on its own worker.
        let workers: Vec<_> = [1u32, 2]
            .into_iter()
            .map(|error| {
                let a = associate(m);
                thread::spawn(move || {
                    // `SpawnReceiver::set_error`: report the error, then dissociate.
                    a.report_error(error);
                    dissociate(m, a);
                })
            })
            .collect();
        // The function's own sender is done: the join starts.
        start_join(m);
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(m.joins.load(Ordering::Acquire), 1, "the join completes exactly once");
        let kept = m.kept.load(Ordering::Acquire);
        assert!(kept == 1 || kept == 2, "one of the two errors is kept (got {kept})");
        assert_eq!(m.stopped.load(Ordering::Acquire), 1, "the error requested stop before the join");
        assert_eq!(m.panics.load(Ordering::Acquire), 0);
        // SAFETY: every thread has ended.
        unsafe { free(m) };
    });
}

#[test]
fn a_panicking_function_joins_the_work_it_spawned_before_the_panic_completes() {
    loom::model(|| {
        let m = open();
        let function = thread::spawn(move || {
            // `set_value`: the returned sender's association is taken before `f` runs.
            let result = associate(m);
            // `f` spawns work, which completes on another worker...
            let work = associate(m);
            let worker = thread::spawn(move || dissociate(m, work));
            // ...then panics: the unwind drops the returned sender's association, and
            // `set_value` records the panic, then starts the join.
            dissociate(m, result);
            m.shared.record_panic(Panic::new(Box::new("f panicked")));
            start_join(m);
            worker
        });
        function.join().unwrap().join().unwrap();
        assert_eq!(m.joins.load(Ordering::Acquire), 1, "the join completes exactly once");
        assert_eq!(m.panics.load(Ordering::Acquire), 1, "the join's completion finds the panic");
        assert_eq!(m.stopped.load(Ordering::Acquire), 1, "the panic requested stop before the join");
        assert_eq!(m.kept.load(Ordering::Acquire), 0);
        // SAFETY: every thread has ended.
        unsafe { free(m) };
    });
}

#[test]
fn an_outer_stop_request_racing_a_spawn_reaches_it_and_is_gone_after_the_join() {
    loom::model(|| {
        let m = open();
        // The outer receiver's stop request may come at any time.
        let stopper = thread::spawn(move || {
            m.outer.request_stop();
            m.outer_stopped.store(true, Ordering::Release);
        });
        // `set_value`: forward the outer stop request to the scope's source...
        forward_outer_stop(m);
        // ...take the returned sender's association, and run `f`, which spawns work
        // onto another worker.
        let result = associate(m);
        let work = associate(m);
        let worker = thread::spawn(move || {
            // The spawned work spawns more work.
            let after = m.outer_stopped.load(Ordering::Acquire);
            let nested = associate(m);
            let stopped = nested.env().stop_token().stop_requested();
            assert!(!after || stopped, "work spawned after the outer stop request returned did not see it");
            dissociate(m, nested);
            dissociate(m, work);
        });
        start_join(m);
        // The returned sender completes.
        dissociate(m, result);
        worker.join().unwrap();
        stopper.join().unwrap();
        assert_eq!(m.joins.load(Ordering::Acquire), 1, "the join completes exactly once");
        // The forwarding callback was deregistered before the core was reset, so an
        // outer request that came later never reached the reset source.
        assert!(!m.shared.core.stop.stop_requested(), "a stop callback outlived the join");
        // SAFETY: the join's completion took it; every thread has ended.
        assert!(unsafe { (*m.stop_cb.get()).is_none() });
        // SAFETY: every thread has ended.
        unsafe { free(m) };
    });
}

/// The outer stop request, forwarded into the scope, completes the last spawned work
/// inside the scope's own `request_stop`, so the join completes (and, without a
/// scheduler, `finish` releases the core) while that `request_stop` is still running
/// on this thread: when it returns into its loop it relocks the released source and
/// leaves it "stop requested", and a recycled core would start its next scope
/// stopped (or, if another thread took the core meanwhile, run that scope's
/// callbacks).
#[test]
fn a_join_completing_inside_the_forwarded_stop_request_leaves_the_core_clean() {
    loom::model(|| {
        let m = open();
        let stopper = thread::spawn(move || {
            m.outer.request_stop();
        });
        forward_outer_stop(m);
        let result = associate(m);
        let work = associate(m);
        // SAFETY: the token's source is the scope's core, which outlives the model; the
        // callback is dropped (by itself) before the association it holds.
        unsafe {
            let token = work.env().stop_token().detach();
            let cb = (*m.work_cb.get()).insert(RawStopCallback::new(token, CompleteWork { m, work }));
            Pin::new_unchecked(cb).register();
        }
        start_join(m);
        dissociate(m, result);
        stopper.join().unwrap();
        assert_eq!(m.joins.load(Ordering::Acquire), 1, "the join completes exactly once");
        assert!(!m.shared.core.stop.stop_requested(), "the released core was left stopped");
        // SAFETY: every thread has ended.
        unsafe { free(m) };
    });
}
