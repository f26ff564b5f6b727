//! Test-only senders, receivers and helpers shared by the behavioural test suites.
//!
//! - [`stop_probe`]: completes with whether its environment's stop token was requested.
//! - [`wait_for_stop`]: blocks the thread it starts on until its environment's stop
//!   token is requested (or a safety timeout passes), then completes stopped.
//! - [`with_stop`]: runs a sender under an environment whose stop token is the given
//!   source's, everything else forwarded.
//! - [`cancel_on_stop`]: a cancellable sender in the style of a timer: it registers a
//!   stop callback and completes stopped from inside that callback.
//! - [`panic_message`]: runs a closure that must panic and returns the message.
//! - [`Meeting`]: a two-party barrier with a timeout.
//! - [`DropCounter`]: counts its drops.
//! - [`Live`] and [`Tracked`]: values that borrow a count from the waiter's frame and
//!   take a moment to die, so that a drop after the completion shows.
//! - [`serial`]: a lock for the tests of one binary that must not run beside each other.
//! - [`pool`]: a pool of `n` workers, or of `SENDERS_TEST_WORKERS` when that is set (to
//!   run the suite with many workers on few cores: `SENDERS_TEST_WORKERS=64 cargo test`),
//!   with latent forks when `SENDERS_TEST_LATENT_FORKS=1`.

#![allow(dead_code)]

use std::any::{Any, TypeId};
use std::convert::Infallible;
use std::marker::{PhantomData, PhantomPinned};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use senders::{
    EmptyEnv, Env, InplaceStopSource, OperationState, Panic, Receiver, Sender, SenderTo, StaticThreadPool,
    StopCallback, StopToken, domain::NoDomain, schedulers::NoScheduler,
};

/// A pool of `n` workers for a test that needs some pool, not a number of workers: with
/// `SENDERS_TEST_WORKERS` set, of that many workers instead, and with latent forks
/// (`PoolBuilder::latent_forks`) when `SENDERS_TEST_LATENT_FORKS` is `1`. Tests that
/// assert on the number of workers build their pools themselves.
pub fn pool(n: usize) -> StaticThreadPool {
    let n = std::env::var("SENDERS_TEST_WORKERS").ok().and_then(|s| s.parse().ok()).unwrap_or(n);
    let latent = std::env::var("SENDERS_TEST_LATENT_FORKS").is_ok_and(|v| v == "1");
    StaticThreadPool::builder().num_threads(n).latent_forks(latent).build().expect("a test pool")
}

/// How long a test-only sender waits for something that should happen promptly before
/// giving up (so that a bug makes the test fail instead of hang).
pub const SAFETY_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs `f`, which must panic, and returns the panic's message.
pub fn panic_message<T>(f: impl FnOnce() -> T) -> String {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(_) => panic!("expected a panic, but the call returned normally"),
        Err(payload) => payload_message(&*payload),
    }
}

/// The message of a panic payload (`&str` or `String`), or a marker for other payloads.
pub fn payload_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string payload>".to_owned()
    }
}

/// Serializes the tests of one binary that take it: those that measure time, keep
/// every core busy, or need a pool's workers free (a poisoned lock is taken anyway).
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The name of the current thread, owned.
pub fn thread_name() -> Option<String> {
    std::thread::current().name().map(str::to_owned)
}

/// A two-party meeting point with a timeout: `meet` returns `true` iff the other party
/// arrived within the timeout.
#[derive(Default)]
pub struct Meeting {
    arrived: Mutex<usize>,
    cv: Condvar,
}

impl Meeting {
    /// Arrives and waits (up to `timeout`) for the other party.
    pub fn meet(&self, timeout: Duration) -> bool {
        let mut n = self.arrived.lock().unwrap();
        *n += 1;
        self.cv.notify_all();
        let (n, _) = self.cv.wait_timeout_while(n, timeout, |n| *n < 2).unwrap();
        *n >= 2
    }
}

// ---------------------------------------------------------------------------------------
// stop_probe

/// The sender of [`stop_probe`].
pub struct StopProbe<E>(PhantomData<fn() -> E>);

/// A sender that completes inline with `env.stop_token().stop_requested()`. Its error type
/// is free so that it fits next to fallible siblings.
pub fn stop_probe<E>() -> StopProbe<E> {
    StopProbe(PhantomData)
}

impl<E> Sender for StopProbe<E> {
    type Value = bool;
    type Error = E;
    const SENDS_STOPPED: bool = false;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

impl<E, R: Receiver<bool, E>> SenderTo<R> for StopProbe<E> {
    type Operation = ProbeOp<E, R>;
    fn connect(self, receiver: R) -> ProbeOp<E, R> {
        ProbeOp { rcvr: Some(receiver), _e: PhantomData, _pin: PhantomPinned }
    }
}

/// The operation state of [`stop_probe`].
pub struct ProbeOp<E, R> {
    rcvr: Option<R>,
    _e: PhantomData<fn() -> E>,
    _pin: PhantomPinned,
}

impl<E, R: Receiver<bool, E>> OperationState for ProbeOp<E, R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `rcvr` is not structurally pinned; it is moved out, never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(rcvr) = this.rcvr.take() {
            let requested = rcvr.env().stop_token().stop_requested();
            rcvr.set_value(requested);
        }
    }
}

// ---------------------------------------------------------------------------------------
// wait_for_stop

/// What a [`wait_for_stop`] sender reports: whether it started, and whether it saw the
/// stop request it waits for.
#[derive(Debug, Default)]
pub struct WaitProbe {
    started: AtomicBool,
    saw_stop: AtomicBool,
}

impl WaitProbe {
    /// Waits (up to [`SAFETY_TIMEOUT`]) until the sender has started; returns whether it did.
    pub fn wait_started(&self) -> bool {
        let deadline = Instant::now() + SAFETY_TIMEOUT;
        while !self.started.load(Ordering::SeqCst) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// Whether the sender has started.
    pub fn started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// Whether the sender saw a stop request while it was running.
    pub fn saw_stop(&self) -> bool {
        self.saw_stop.load(Ordering::SeqCst)
    }
}

/// The sender of [`wait_for_stop`].
pub struct WaitForStop<'a, E> {
    probe: &'a WaitProbe,
    _e: PhantomData<fn() -> E>,
}

/// A sender that, when started, marks `probe` started and blocks the starting thread
/// polling its environment's stop token. When stop is requested it records that in
/// `probe` and completes stopped; if [`SAFETY_TIMEOUT`] passes first, it completes with
/// `()` and the probe shows no stop.
///
/// Wrap it in `starts_on(ctx.scheduler(), ..)` so that it blocks a context's thread.
pub fn wait_for_stop<E>(probe: &WaitProbe) -> WaitForStop<'_, E> {
    WaitForStop { probe, _e: PhantomData }
}

impl<E> Sender for WaitForStop<'_, E> {
    type Value = ();
    type Error = E;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

impl<'a, E, R: Receiver<(), E>> SenderTo<R> for WaitForStop<'a, E> {
    type Operation = WaitOp<'a, E, R>;
    fn connect(self, receiver: R) -> WaitOp<'a, E, R> {
        WaitOp { probe: self.probe, rcvr: Some(receiver), _e: PhantomData, _pin: PhantomPinned }
    }
}

/// The operation state of [`wait_for_stop`].
pub struct WaitOp<'a, E, R> {
    probe: &'a WaitProbe,
    rcvr: Option<R>,
    _e: PhantomData<fn() -> E>,
    _pin: PhantomPinned,
}

impl<E, R: Receiver<(), E>> OperationState for WaitOp<'_, E, R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: no field is structurally pinned; `rcvr` is moved out, never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        let Some(rcvr) = this.rcvr.take() else { return };
        this.probe.started.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + SAFETY_TIMEOUT;
        loop {
            if rcvr.env().stop_token().stop_requested() {
                this.probe.saw_stop.store(true, Ordering::SeqCst);
                rcvr.set_stopped();
                return;
            }
            if Instant::now() >= deadline {
                rcvr.set_value(());
                return;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

// ---------------------------------------------------------------------------------------
// with_stop

/// The sender of [`with_stop`].
pub struct WithStop<'a, S> {
    sndr: S,
    token: StopToken<'a>,
}

/// Runs `sndr` with `source`'s token as the stop token of its environment; the scheduler,
/// domain and user queries are the parent's.
pub fn with_stop<S: Sender>(source: &InplaceStopSource, sndr: S) -> WithStop<'_, S> {
    WithStop { sndr, token: source.token() }
}

impl<S: Sender> Sender for WithStop<'_, S> {
    type Value = S::Value;
    type Error = S::Error;
    const SENDS_STOPPED: bool = S::SENDS_STOPPED;
    type Domain = S::Domain;
    type CompletionScheduler = S::CompletionScheduler;
    fn completion_scheduler(&self) -> S::CompletionScheduler {
        self.sndr.completion_scheduler()
    }
}

impl<'a, S, R> SenderTo<R> for WithStop<'a, S>
where
    S: Sender + SenderTo<StopEnvReceiver<'a, <S as Sender>::Value, <S as Sender>::Error, R>>,
    R: Receiver<<S as Sender>::Value, <S as Sender>::Error>,
{
    type Operation = S::Operation;
    fn connect(self, receiver: R) -> S::Operation {
        self.sndr.connect(StopEnvReceiver { rcvr: receiver, token: self.token, _t: PhantomData })
    }
}

/// The receiver of [`with_stop`]; it is its own environment.
pub struct StopEnvReceiver<'a, V, E, R> {
    rcvr: R,
    token: StopToken<'a>,
    _t: PhantomData<fn() -> (V, E)>,
}

// SAFETY: a shared reference only reaches the environment: the token (a shared borrow of a
// `Sync` source) and the parent's env (`Sync`), never the parent receiver's completions.
unsafe impl<V, E, R: Receiver<V, E>> Sync for StopEnvReceiver<'_, V, E, R> where R::Env: Sync {}

impl<V, E, R: Receiver<V, E>> Env for StopEnvReceiver<'_, V, E, R> {
    type Scheduler = <R::Env as Env>::Scheduler;
    type Domain = <R::Env as Env>::Domain;
    fn scheduler(&self) -> Self::Scheduler {
        self.rcvr.env().scheduler()
    }
    fn stop_token(&self) -> StopToken<'_> {
        self.token
    }
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        self.rcvr.env().prop(key)
    }
}

impl<V, E, R: Receiver<V, E>> Receiver<V, E> for StopEnvReceiver<'_, V, E, R> {
    type Env = Self;
    fn env(&self) -> &Self {
        self
    }
    fn set_value(self, value: V) {
        self.rcvr.set_value(value)
    }
    fn set_error(self, error: E) {
        self.rcvr.set_error(error)
    }
    fn set_stopped(self) {
        self.rcvr.set_stopped()
    }
    fn set_panic(self, panic: Panic) {
        self.rcvr.set_panic(panic)
    }
}

// ---------------------------------------------------------------------------------------
// cancel_on_stop

/// The sender of [`cancel_on_stop`].
pub struct CancelOnStop<'a, E> {
    registered: &'a AtomicBool,
    panics: bool,
    _e: PhantomData<fn() -> E>,
}

/// A sender that never completes on its own: when started it registers a stop callback
/// on its environment's token (then sets `registered`), and that callback completes it
/// stopped, inline, on the thread that requested stop.
///
/// Only use it where stop is requested after `registered` is set (it never completes
/// under a token that cannot stop).
pub fn cancel_on_stop<E>(registered: &AtomicBool) -> CancelOnStop<'_, E> {
    CancelOnStop { registered, panics: false, _e: PhantomData }
}

/// [`cancel_on_stop`] whose stop callback, once it has completed the operation, panics
/// with the message `"stop callback"`.
pub fn cancel_on_stop_then_panic<E>(registered: &AtomicBool) -> CancelOnStop<'_, E> {
    CancelOnStop { registered, panics: true, _e: PhantomData }
}

impl<E> Sender for CancelOnStop<'_, E> {
    type Value = ();
    type Error = E;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

impl<'a, E, R: Receiver<(), E>> SenderTo<R> for CancelOnStop<'a, E> {
    type Operation = CancelOp<'a, E, R>;
    fn connect(self, receiver: R) -> CancelOp<'a, E, R> {
        CancelOp {
            rcvr: std::cell::UnsafeCell::new(Some(receiver)),
            callback: None,
            registered: self.registered,
            panics: self.panics,
            _e: PhantomData,
            _pin: PhantomPinned,
        }
    }
}

/// A pointer to a pinned [`CancelOp`], erased so that the callback is `'static`.
struct OpPtr(*const ());
// SAFETY: the callback that carries it runs on the stop-requesting thread; the operation
// it points to is pinned and alive until its receiver completes, which only the callback
// does, and the receiver it completes is `Send` (the operation is only started under
// roots that move it across threads when it is).
unsafe impl Send for OpPtr {}
impl OpPtr {
    fn get(&self) -> *const () {
        self.0
    }
}

/// The operation state of [`cancel_on_stop`].
pub struct CancelOp<'a, E, R> {
    rcvr: std::cell::UnsafeCell<Option<R>>,
    callback: Option<StopCallback<'static, Box<dyn FnOnce() + Send>>>,
    registered: &'a AtomicBool,
    panics: bool,
    _e: PhantomData<fn() -> E>,
    _pin: PhantomPinned,
}

impl<E, R: Receiver<(), E>> CancelOp<'_, E, R> {
    /// The stop callback: completes the operation stopped.
    ///
    /// # Safety
    ///
    /// `this` points to a started, pinned `CancelOp<E, R>`; called once.
    unsafe fn fire(this: *const ()) {
        // SAFETY: per the contract, the operation is alive; only this call takes the
        // receiver (`start` no longer touches it once the callback is registered).
        let rcvr = unsafe { (*(*this.cast::<Self>()).rcvr.get()).take() };
        if let Some(rcvr) = rcvr {
            // The callback node is no longer linked (it is running); its owner's drop
            // waits for this call to return if it happens on another thread.
            rcvr.set_stopped();
        }
    }
}

impl<E, R: Receiver<(), E>> OperationState for CancelOp<'_, E, R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `callback` is pinned in place below and never moved; the other fields
        // are not structurally pinned.
        let this = unsafe { self.get_unchecked_mut() };
        // SAFETY: the receiver is present until the callback takes it, after registration.
        let env_token = unsafe { (*this.rcvr.get()).as_ref() }.expect("started once").env().stop_token();
        // SAFETY: the source outlives the operation (it belongs to the parent's env), and
        // the callback is dropped with the operation, before the parent goes away.
        let token = unsafe { env_token.detach() };
        let ptr = OpPtr((this as *const Self).cast());
        let fire: unsafe fn(*const ()) = Self::fire;
        let panics = this.panics;
        let cb: Box<dyn FnOnce() + Send> = Box::new(move || {
            // SAFETY: `ptr` is this pinned, started operation; the callback runs once.
            unsafe { fire(ptr.get()) };
            if panics {
                panic!("stop callback");
            }
        });
        let registered = this.registered;
        let slot = this.callback.insert(StopCallback::new(token, cb));
        // SAFETY: the callback lives in the pinned operation and is never moved.
        unsafe { Pin::new_unchecked(slot) }.register();
        registered.store(true, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------------------
// A binary tree whose nodes count their visits (the P3149 recursive-tree tests).

/// A node of a full binary tree that counts its visits.
pub struct Tree {
    pub left: Option<Box<Tree>>,
    pub right: Option<Box<Tree>>,
    pub visits: AtomicUsize,
}

/// A full tree of `depth + 1` levels.
pub fn make_tree(depth: u32) -> Tree {
    let child = || (depth > 0).then(|| Box::new(make_tree(depth - 1)));
    Tree { left: child(), right: child(), visits: AtomicUsize::new(0) }
}

/// Asserts every node was visited exactly once; returns the node count.
pub fn all_visited_once(t: &Tree) -> usize {
    assert_eq!(t.visits.load(Ordering::SeqCst), 1);
    1 + t.left.as_deref().map_or(0, all_visited_once) + t.right.as_deref().map_or(0, all_visited_once)
}

// ---------------------------------------------------------------------------------------
// PanicsInConnect, Sink

/// A sender whose `connect` panics (its operation type is never built).
pub struct PanicsInConnect;

impl Sender for PanicsInConnect {
    type Value = i32;
    type Error = Infallible;
    const SENDS_STOPPED: bool = false;
    type Domain = NoDomain;
    type CompletionScheduler = NoScheduler;
    fn completion_scheduler(&self) -> NoScheduler {
        NoScheduler
    }
}

impl<R: Receiver<i32, Infallible>> SenderTo<R> for PanicsInConnect {
    type Operation = NeverOp;
    fn connect(self, _: R) -> NeverOp {
        panic!("connect panicked")
    }
}

/// The operation of [`PanicsInConnect`], never built.
pub struct NeverOp;

impl OperationState for NeverOp {
    unsafe fn start(self: Pin<&mut Self>) {}
}

/// A receiver that ignores its completion, with an empty environment.
pub struct Sink;

impl<V, E> Receiver<V, E> for Sink {
    type Env = EmptyEnv;
    fn env(&self) -> &EmptyEnv {
        &EmptyEnv
    }
    fn set_value(self, _: V) {}
    fn set_error(self, _: E) {}
    fn set_stopped(self) {}
    fn set_panic(self, _: Panic) {}
}

// ---------------------------------------------------------------------------------------
// Workers and panics

/// Busy-waits for `us` microseconds.
pub fn spin(us: u64) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(us) {
        std::hint::spin_loop();
    }
}

/// Panic messages starting with this are not printed (see [`quiet_panics`]).
pub const QUIET: &str = "expected test panic";

/// Installs (once) a panic hook that stays silent for panics whose message starts with
/// [`QUIET`] and defers to the previous hook for every other panic.
pub fn quiet_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !payload_message(info.payload()).starts_with(QUIET) {
                previous(info);
            }
        }));
    });
}

/// A set of thread names, noted from inside work.
#[derive(Default)]
pub struct Names(Mutex<std::collections::HashSet<String>>);

impl Names {
    /// Notes the calling thread's name.
    pub fn note(&self) {
        let name = thread_name().unwrap_or_else(|| "<unnamed>".to_owned());
        self.0.lock().unwrap().insert(name);
    }
    /// The names noted so far.
    pub fn get(&self) -> std::collections::HashSet<String> {
        self.0.lock().unwrap().clone()
    }
}

/// Counts its drops in the shared counter.
pub struct DropCounter(pub Arc<AtomicUsize>);

impl Drop for DropCounter {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A count of the [`Tracked`] values alive that borrow it. It lives in the waiter's
/// frame: a drop that comes after the completion released the waiter shows as a count
/// above zero when the waiter looks, and as a write into freed memory under memcheck
/// when the waiter frees the count right away (`Box<Live>`).
#[derive(Debug, Default)]
pub struct Live {
    alive: AtomicUsize,
    created: AtomicUsize,
}

impl Live {
    /// A count with nothing alive (`const`: a `static` one serves values that must be
    /// `'static`).
    pub const fn new() -> Self {
        Live { alive: AtomicUsize::new(0), created: AtomicUsize::new(0) }
    }

    /// `value`, tracked: counted alive until its drop has finished.
    pub fn track<T>(&self, value: T) -> Tracked<'_, T> {
        self.alive.fetch_add(1, Ordering::SeqCst);
        self.created.fetch_add(1, Ordering::SeqCst);
        Tracked { value, live: self, delay: DROP_DELAY }
    }

    /// `value`, tracked, with a drop that takes `delay`.
    pub fn track_slow<T>(&self, value: T, delay: Duration) -> Tracked<'_, T> {
        let mut tracked = self.track(value);
        tracked.delay = delay;
        tracked
    }

    /// How many tracked values are alive.
    pub fn alive(&self) -> usize {
        self.alive.load(Ordering::SeqCst)
    }

    /// How many tracked values were made.
    pub fn created(&self) -> usize {
        self.created.load(Ordering::SeqCst)
    }

    /// Panics, naming `when`, if a tracked value is still alive.
    #[track_caller]
    pub fn assert_none_alive(&self, when: &str) {
        let alive = self.alive();
        assert_eq!(alive, 0, "{alive} tracked value(s) of {} still alive {when}", self.created());
    }
}

/// How long a [`Tracked`] value's drop takes by default: long against the time a
/// released waiter needs to wake up and look.
pub const DROP_DELAY: Duration = Duration::from_millis(20);

/// A value that borrows a [`Live`] count from the waiter's frame. Its drop waits a
/// moment, then counts itself dead through the borrow.
#[derive(Debug)]
pub struct Tracked<'a, T> {
    pub value: T,
    live: &'a Live,
    delay: Duration,
}

impl<T> Drop for Tracked<'_, T> {
    fn drop(&mut self) {
        std::thread::sleep(self.delay);
        self.live.alive.fetch_sub(1, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------------------
// FiringScheduler

/// A scheduler whose `schedule()` completes inline, on the thread that starts it, made
/// timed with the crate's timers ([`ScheduleAt`](senders::time::ScheduleAt)). A due
/// timer of a scheduler that does not only queue work is started on one of the timers'
/// firing threads, so a timed sender of this scheduler completes there (and what
/// follows it runs there), on the timer side of the process rather than in a context.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FiringScheduler;

impl senders::Scheduler for FiringScheduler {
    type Domain = NoDomain;
    type Sender = FiringSender;
    fn schedule(&self) -> FiringSender {
        FiringSender
    }
}

impl senders::TimedScheduler for FiringScheduler {
    type TimedSender = senders::time::ScheduleAt<Self>;
    fn schedule_at(&self, deadline: Instant) -> senders::time::ScheduleAt<Self> {
        senders::time::ScheduleAt::new(*self, Some(deadline))
    }
    fn schedule_after(&self, delay: Duration) -> senders::time::ScheduleAt<Self> {
        senders::time::ScheduleAt::after(*self, delay)
    }
}

/// The sender of `FiringScheduler::schedule()`: completes inline when started
/// (stopped if a stop was already requested).
pub struct FiringSender;

impl Sender for FiringSender {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = NoDomain;
    type CompletionScheduler = FiringScheduler;
    fn completion_scheduler(&self) -> FiringScheduler {
        FiringScheduler
    }
}

impl<R: Receiver<(), Infallible>> SenderTo<R> for FiringSender {
    type Operation = FiringOp<R>;
    fn connect(self, receiver: R) -> FiringOp<R> {
        FiringOp { rcvr: Some(receiver), _pin: PhantomPinned }
    }
}

/// The operation state of [`FiringSender`].
pub struct FiringOp<R> {
    rcvr: Option<R>,
    _pin: PhantomPinned,
}

impl<R: Receiver<(), Infallible>> OperationState for FiringOp<R> {
    unsafe fn start(self: Pin<&mut Self>) {
        // SAFETY: `rcvr` is not structurally pinned; it is moved out, never pinned.
        let this = unsafe { self.get_unchecked_mut() };
        if let Some(rcvr) = this.rcvr.take() {
            if rcvr.env().stop_token().stop_requested() {
                rcvr.set_stopped();
            } else {
                rcvr.set_value(());
            }
        }
    }
}
