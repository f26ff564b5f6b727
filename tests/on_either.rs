//! `on(sch, sndr)` and `EitherSender`.
//!
//! `on`: the child runs on `sch` (it sees `sch` as its scheduler) and every channel
//! (value, error, stopped, panic) completes back on the receiver's scheduler (sync_wait's
//! thread, another context, a `let_value` predecessor's); stop requests reach the child,
//! also before start; a dropped pool refuses the hop (stopped); panicking or refusing
//! user schedulers on either hop, and a panic reading the scheduler to come back to.
//!
//! `EitherSender`: `if`/`else` branches of different types on every channel, a recursive
//! tree on the pool choosing a branch per node, the environment reaching the chosen side,
//! and pinning (pointer-based children under an `EitherOp`, which is `!Unpin` itself).

mod common;

use common::{
    Tree, WaitProbe, all_visited_once, make_tree, panic_message, stop_probe, thread_name, wait_for_stop, with_stop,
};
use senders::adaptors::EitherOp;
use senders::domain::NoDomain;
use senders::pool::PoolDomain;
use senders::scope::Spawnable;
use senders::*;
use std::convert::Infallible;
use std::marker::PhantomPinned;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::{self, ThreadId};
use std::time::Duration;

/// A pool of one thread named `name`.
fn named_pool(name: &'static str) -> StaticThreadPool {
    StaticThreadPool::builder().num_threads(1).thread_name(move |_| name.to_owned()).build().unwrap()
}

fn here() -> ThreadId {
    thread::current().id()
}

// ---------------------------------------------------------------------------------------
// on: where things run, on every channel.

#[test]
fn on_runs_the_child_on_sch_and_completes_on_the_receivers_scheduler() {
    let pool = named_pool("on-worker");
    let caller = here();
    let (ran_on, back) =
        sync_wait(on(pool.scheduler(), just(()).then(|()| thread_name())).then(|n| (n, here()))).unwrap().unwrap();
    assert_eq!(ran_on.as_deref(), Some("on-worker"));
    assert_eq!(back, caller, "on completes on sync_wait's run loop thread");
}

/// The environment of [`Recorder`]: a context's scheduler, a never-stop token.
struct HomeEnv(SingleThreadScheduler<NoDomain>);

impl Env for HomeEnv {
    type Scheduler = SingleThreadScheduler<NoDomain>;
    type Domain = NoDomain;
    fn scheduler(&self) -> SingleThreadScheduler<NoDomain> {
        self.0.clone()
    }
    fn stop_token(&self) -> StopToken<'_> {
        StopToken::never()
    }
}

/// A receiver whose env's scheduler is `home`'s; it sends its channel and thread name.
struct Recorder {
    env: HomeEnv,
    done: mpsc::Sender<(&'static str, Option<String>)>,
}

impl Receiver<i32, &'static str> for Recorder {
    type Env = HomeEnv;
    fn env(&self) -> &HomeEnv {
        &self.env
    }
    fn set_value(self, _: i32) {
        self.done.send(("value", thread_name())).unwrap()
    }
    fn set_error(self, _: &'static str) {
        self.done.send(("error", thread_name())).unwrap()
    }
    fn set_stopped(self) {
        self.done.send(("stopped", thread_name())).unwrap()
    }
    fn set_panic(self, _: Panic) {
        self.done.send(("panic", thread_name())).unwrap()
    }
}

/// Runs `on(pool, sndr)` under a [`Recorder`] whose scheduler is a context's, and gives
/// the channel it completed on and the thread it completed on. (A macro: a generic
/// function would need a bound the trait solver does not normalize.)
macro_rules! completion_of {
    ($sndr:expr) => {{
        let pool = named_pool("on-rec-pool");
        let home = SingleThreadContext::with_name("on-rec-home");
        let (done, rx) = mpsc::channel();
        let rcvr = Recorder { env: HomeEnv(home.scheduler()), done };
        let mut op = std::pin::pin!(on(pool.scheduler(), $sndr).connect(rcvr));
        // SAFETY: started once; `op` is not dropped before the completion, which `recv`
        // waits for (if it never comes, the process aborts rather than unwind past `op`);
        // the sender borrows nothing.
        unsafe { op.as_mut().start() };
        rx.recv_timeout(Duration::from_secs(5)).unwrap_or_else(|_| {
            eprintln!("on did not complete: aborting, since its operation may still run");
            std::process::abort()
        })
    }};
}

#[test]
fn on_completes_every_channel_on_the_receivers_scheduler() {
    let home = Some("on-rec-home".to_owned());
    assert_eq!(completion_of!(just(1).with_error()), ("value", home.clone()));
    assert_eq!(completion_of!(just_error("no")), ("error", home.clone()));
    assert_eq!(completion_of!(just_stopped()), ("stopped", home.clone()));
    assert_eq!(completion_of!(just(()).with_error().then(|()| -> i32 { panic!("boom") })), ("panic", home));
}

#[test]
fn on_shows_sch_as_the_childs_scheduler() {
    let pool = named_pool("on-env");
    let seen = sync_wait(on(pool.scheduler(), read_env(GetScheduler))).unwrap().unwrap();
    assert!(seen == pool.scheduler());
}

#[test]
fn on_completes_errors_on_the_receivers_scheduler() {
    let pool = named_pool("on-err");
    let caller = here();
    let failing = just(()).with_error().let_value(|()| just_error::<(Option<String>, ThreadId), _>(thread_name()));
    let out = sync_wait(on(pool.scheduler(), failing).upon_error(|e| (e, here())));
    let (e, t) = out.unwrap().unwrap();
    assert_eq!(e.as_deref(), Some("on-err"));
    assert_eq!(t, caller);
}

#[test]
fn on_completes_stopped_on_the_receivers_scheduler() {
    let pool = named_pool("on-stop");
    let caller = here();
    let out = sync_wait(
        on(pool.scheduler(), just_stopped::<ThreadId, Infallible>()).upon_stopped(here).then(move |t| t == caller),
    );
    assert_eq!(out, Ok(Some(true)));
}

#[test]
fn on_delivers_a_panic_of_the_child() {
    let pool = named_pool("on-panic");
    let msg =
        panic_message(|| sync_wait(on(pool.scheduler(), just(()).then(|()| -> i32 { panic!("child panicked") }))));
    assert_eq!(msg, "child panicked");
}

#[test]
fn on_comes_back_to_another_context_not_to_the_caller() {
    let pool = named_pool("on-there");
    let home = SingleThreadContext::with_name("on-home");
    let out = sync_wait(starts_on(
        home.scheduler(),
        on(pool.scheduler(), just(()).then(|()| thread_name())).then(|there| (there, thread_name())),
    ));
    let (there, back) = out.unwrap().unwrap();
    assert_eq!(there.as_deref(), Some("on-there"));
    assert_eq!(back.as_deref(), Some("on-home"));
}

#[test]
fn on_inside_let_value_comes_back_to_the_predecessors_scheduler() {
    let pool = named_pool("on-let-pool");
    let ctx = SingleThreadContext::with_name("on-let-ctx");
    let sch = pool.scheduler();
    let out = sync_wait(
        schedule(&ctx.scheduler())
            .let_value(move |()| on(sch, just(()).then(|()| thread_name())).then(|there| (there, thread_name()))),
    );
    let (there, back) = out.unwrap().unwrap();
    assert_eq!(there.as_deref(), Some("on-let-pool"));
    assert_eq!(back.as_deref(), Some("on-let-ctx"));
}

#[test]
fn on_with_an_inline_receiver_scheduler_completes_where_the_child_completed() {
    let pool = named_pool("on-inline");
    let out = sync_wait(starts_on(InlineScheduler, on(pool.scheduler(), just(())).then(|()| thread_name())));
    assert_eq!(out.unwrap().unwrap().as_deref(), Some("on-inline"));
}

// ---------------------------------------------------------------------------------------
// on: stop requests and refused hops.

#[test]
fn on_forwards_the_stop_token_to_the_child() {
    let pool = named_pool("on-token");
    let source = InplaceStopSource::new();
    assert_eq!(sync_wait(with_stop(&source, on(pool.scheduler(), stop_probe::<Infallible>()))), Ok(Some(false)));
}

#[test]
fn on_stop_requested_before_start_never_runs_the_child() {
    let pool = named_pool("on-early-stop");
    let ran = AtomicBool::new(false);
    let source = InplaceStopSource::new();
    source.request_stop();
    let out =
        sync_wait(with_stop(&source, on(pool.scheduler(), just(()).then(|()| ran.store(true, Ordering::SeqCst)))));
    assert_eq!(out, Ok(None));
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn on_stop_requested_while_the_child_runs_reaches_it() {
    let pool = named_pool("on-late-stop");
    let probe = WaitProbe::default();
    let source = InplaceStopSource::new();
    let out = thread::scope(|s| {
        s.spawn(|| {
            assert!(probe.wait_started());
            source.request_stop();
        });
        sync_wait(with_stop(&source, on(pool.scheduler(), wait_for_stop::<Infallible>(&probe))))
    });
    assert_eq!(out, Ok(None));
    assert!(probe.saw_stop());
}

#[test]
fn on_a_dropped_pool_completes_stopped() {
    let pool = named_pool("on-dropped");
    let sch = pool.scheduler();
    drop(pool);
    let ran = AtomicBool::new(false);
    assert_eq!(sync_wait(on(sch, just(()).then(|()| ran.store(true, Ordering::SeqCst)))), Ok(None));
    assert!(!ran.load(Ordering::SeqCst));
}

/// What a [`Flaky`] scheduler does once `after` schedules have succeeded.
#[derive(Clone, Copy, PartialEq)]
enum Flake {
    /// `schedule()` panics.
    Panic,
    /// The hop completes `set_stopped`, as a scheduler shutting down does.
    Refuse,
    /// Once a hop has completed, cloning the scheduler panics (`after` is unused).
    PanicInClone,
}

/// A user scheduler that completes inline, and fails as its [`Flake`] says once `after`
/// schedules have succeeded.
struct Flaky(Arc<(Flake, usize, AtomicUsize, AtomicBool)>);

impl Flaky {
    fn new(flake: Flake, after: usize) -> Self {
        Flaky(Arc::new((flake, after, AtomicUsize::new(0), AtomicBool::new(false))))
    }
}

impl Clone for Flaky {
    fn clone(&self) -> Self {
        if self.0.3.load(Ordering::SeqCst) {
            panic!("flaky clone");
        }
        Flaky(self.0.clone())
    }
}

impl PartialEq for Flaky {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Scheduler for Flaky {
    type Domain = NoDomain;
    type Sender = FlakySender;
    fn schedule(&self) -> FlakySender {
        let (flake, after, made, _) = &*self.0;
        let armed = made.fetch_add(1, Ordering::SeqCst) >= *after;
        if armed && *flake == Flake::Panic {
            panic!("flaky schedule");
        }
        FlakySender { sch: self.clone(), refuse: armed && *flake == Flake::Refuse }
    }
}

struct FlakySender {
    sch: Flaky,
    refuse: bool,
}

impl Sender for FlakySender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = Flaky;
    fn completion_scheduler(&self) -> Flaky {
        self.sch.clone()
    }
}

impl<R: Receiver<(), Infallible>> SenderTo<R> for FlakySender {
    type Operation = FlakyOp<R>;
    fn connect(self, receiver: R) -> FlakyOp<R> {
        let arm_clone = (self.sch.0.0 == Flake::PanicInClone).then_some(self.sch.0);
        FlakyOp { rcvr: Some(receiver), refuse: self.refuse, arm_clone, _pin: PhantomPinned }
    }
}

struct FlakyOp<R> {
    rcvr: Option<R>,
    refuse: bool,
    /// Set before completing, for [`Flake::PanicInClone`].
    arm_clone: Option<Arc<(Flake, usize, AtomicUsize, AtomicBool)>>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible>> OperationState for FlakyOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: no field is structurally pinned; the receiver is moved out.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(arm) = this.arm_clone.take() {
            arm.3.store(true, Ordering::SeqCst);
        }
        if let Some(rcvr) = this.rcvr.take() {
            if this.refuse { rcvr.set_stopped() } else { rcvr.set_value(()) }
        }
    }
}

#[test]
fn on_a_panicking_target_scheduler_delivers_the_panic_without_running_the_child() {
    let ran = AtomicBool::new(false);
    let msg = panic_message(|| {
        sync_wait(on(Flaky::new(Flake::Panic, 0), just(()).then(|()| ran.store(true, Ordering::SeqCst))))
    });
    assert_eq!(msg, "flaky schedule");
    assert!(!ran.load(Ordering::SeqCst));
}

#[test]
fn on_a_panicking_scheduler_to_come_back_to_delivers_the_panic_after_the_child_ran() {
    let pool = named_pool("on-panic-back");
    let ran = AtomicBool::new(false);
    // The first schedule (starts_on's hop home) succeeds; on's hop back home panics.
    let home = Flaky::new(Flake::Panic, 1);
    let msg = panic_message(|| {
        sync_wait(starts_on(home, on(pool.scheduler(), just(()).then(|()| ran.store(true, Ordering::SeqCst)))))
    });
    assert_eq!(msg, "flaky schedule");
    assert!(ran.load(Ordering::SeqCst));
}

#[test]
fn on_a_refused_hop_back_completes_stopped_but_keeps_a_panic() {
    let pool = named_pool("on-refuse-back");
    let out = sync_wait(starts_on(Flaky::new(Flake::Refuse, 1), on(pool.scheduler(), just(5))));
    assert_eq!(out, Ok(None));
    let msg = panic_message(|| {
        sync_wait(starts_on(
            Flaky::new(Flake::Refuse, 1),
            on(pool.scheduler(), just(()).then(|()| -> i32 { panic!("kept") })),
        ))
    });
    assert_eq!(msg, "kept");
}

#[test]
fn on_a_panic_reading_the_receivers_scheduler_is_delivered_without_running_the_child() {
    let pool = named_pool("on-read-back");
    let ran = AtomicBool::new(false);
    // starts_on's hop home completes and arms the fault: on's `env().scheduler()` clones
    // the home scheduler, which panics.
    let home = Flaky::new(Flake::PanicInClone, 0);
    let msg = panic_message(|| {
        sync_wait(starts_on(home, on(pool.scheduler(), just(()).then(|()| ran.store(true, Ordering::SeqCst)))))
    });
    assert_eq!(msg, "flaky clone");
    assert!(!ran.load(Ordering::SeqCst));
}

// ---------------------------------------------------------------------------------------
// EitherSender: every channel, from either side.

#[test]
fn either_sender_completes_on_every_channel_from_either_side() {
    // Returns `EitherSender<A, B>` for either side, each side a different type.
    let pick = |left: bool, what: &str| {
        let (fail, stop, boom) = (what == "error", what == "stopped", what == "panic");
        let fail_or = move |v: i32| {
            if fail { just_error("failed".to_owned()).left_sender() } else { just(v).with_error().right_sender() }
        };
        let stop_or =
            move |v: i32| if stop { just_stopped().left_sender() } else { just(v).with_error().right_sender() };
        if left {
            just(1)
                .with_error::<String>()
                .let_value(fail_or)
                .let_value(stop_or)
                .then(move |v| if boom { panic!("left panicked") } else { v })
                .left_sender()
        } else {
            just(())
                .with_error::<String>()
                .then(|()| 2)
                .let_value(fail_or)
                .let_value(stop_or)
                .then(move |v| if boom { panic!("right panicked") } else { v * 10 })
                .right_sender()
        }
    };
    for (left, side) in [(true, "left"), (false, "right")] {
        assert_eq!(sync_wait(pick(left, "value")), Ok(Some(if left { 1 } else { 20 })));
        assert_eq!(sync_wait(pick(left, "error")), Err("failed".to_owned()));
        assert_eq!(sync_wait(pick(left, "stopped")), Ok(None));
        assert_eq!(panic_message(|| sync_wait(pick(left, "panic"))), format!("{side} panicked"));
    }
}

#[test]
fn either_sender_sides_see_the_receivers_environment() {
    let pool = named_pool("either-env");
    let source = InplaceStopSource::new();
    source.request_stop();
    for left in [true, false] {
        let s = if left { stop_probe::<Infallible>().left_sender() } else { stop_probe().then(|b| b).right_sender() };
        assert_eq!(sync_wait(with_stop(&source, s)), Ok(Some(true)));
        let s =
            if left { read_env(GetScheduler).left_sender() } else { read_env(GetScheduler).then(|s| s).right_sender() };
        assert!(sync_wait(starts_on(pool.scheduler(), s)).unwrap().unwrap() == pool.scheduler());
    }
}

#[test]
fn either_sender_reports_the_common_domain() {
    let pool = named_pool("either-domain");
    fn domain_of<S: Sender>(_: &S) -> &'static str {
        std::any::type_name::<S::Domain>()
    }
    let s = if true { schedule(&pool.scheduler()).left_sender() } else { just(()).right_sender() };
    assert_eq!(domain_of(&s), std::any::type_name::<PoolDomain>());
    let s = if true { just(()).left_sender() } else { just(()).then(|()| ()).right_sender() };
    assert_eq!(domain_of(&s), std::any::type_name::<NoDomain>());
}

// ---------------------------------------------------------------------------------------
// EitherSender: a recursive tree on the pool, and pinning.

/// The token of a scope started under `sync_wait`.
type Token<'s, 'e> = LetScopeToken<'s, 'e, RunLoopScheduler>;

/// A leaf is visited inline where its parent runs; an inner node hops to the pool and
/// spawns its children: two sender types, one per branch, no box.
fn process<'s, 'e>(tk: Token<'s, 'e>, sch: &'s PoolScheduler, t: &'s Tree) -> impl Spawnable<Token<'s, 'e>> {
    if t.left.is_none() && t.right.is_none() {
        just(())
            .then(move |()| {
                t.visits.fetch_add(1, Ordering::Relaxed);
            })
            .left_sender()
    } else {
        schedule(sch)
            .then(move |()| {
                for child in [&t.left, &t.right].into_iter().flatten() {
                    spawn(process(tk, sch, child), tk);
                }
                t.visits.fetch_add(1, Ordering::Relaxed);
            })
            .right_sender()
    }
}

#[test]
fn either_sender_in_a_recursive_tree_on_the_pool_visits_each_node_once() {
    let pool = common::pool(2);
    let sch = pool.scheduler();
    let tree = make_tree(12);
    let (tree_ref, sch_ref) = (&tree, &sch);
    sync_wait(just(()).let_async_scope(|tk, ()| {
        spawn(process(tk, sch_ref, tree_ref), tk);
    }))
    .unwrap();
    assert_eq!(all_visited_once(&tree), (1 << 13) - 1);
}

#[test]
fn either_sender_keeps_pointer_based_children_pinned_in_place() {
    let pool = common::pool(2);
    let ctx = SingleThreadContext::with_name("either-pin");
    for i in 0..200u64 {
        // Both sides hold operations whose children point into them (`when_all`,
        // `starts_on`, `on`), completed from other threads while the owner holds the pin.
        let s = if i % 2 == 0 {
            when_all((starts_on(pool.scheduler(), just(i)), starts_on(ctx.scheduler(), just(1u64))))
                .then(|(a, b)| a + b)
                .left_sender()
        } else {
            let there = ctx.scheduler();
            on(pool.scheduler(), just(i).let_value(move |v| on(there, just(v + 1)))).right_sender()
        };
        assert_eq!(sync_wait(s), Ok(Some(i + 1)));
    }
}

/// Implemented for every type, and a second time for `Unpin` ones: naming the method
/// through an inferred parameter is ambiguous, hence an error, exactly for `Unpin` types.
trait AmbiguousIfUnpin<A> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfUnpin<()> for T {}
impl<T: ?Sized + Unpin> AmbiguousIfUnpin<u8> for T {}

#[test]
fn either_op_is_not_unpin_even_with_unpin_sides() {
    // Compiles only because `EitherOp` carries its own `PhantomPinned`.
    <EitherOp<u8, u8> as AmbiguousIfUnpin<_>>::check();
}

#[test]
fn on_in_work_spawned_under_a_let_async_scope_comes_back_to_the_outer_scheduler() {
    let pool = named_pool("on-scope-pool");
    let outer = SingleThreadContext::with_name("on-scope-outer");
    let seen = std::sync::Mutex::new(Vec::new());
    let (sch, seen_ref) = (pool.scheduler(), &seen);
    let work = just(()).let_async_scope(move |tk, ()| {
        let there = just(()).then(|()| thread_name());
        spawn(on(sch, there).then(move |t| seen_ref.lock().unwrap().push((t, thread_name()))), tk);
    });
    sync_wait(starts_on(outer.scheduler(), work)).unwrap();
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].0.as_deref(), Some("on-scope-pool"));
    assert_eq!(seen[0].1.as_deref(), Some("on-scope-outer"));
}
