//! `SingleThreadContext`: one dedicated thread running a [`RunLoop`].

use std::convert::Infallible;
use std::marker::PhantomData;

use crate::domain::{MaybeDomain, NoDomain};
use crate::receiver::Receiver;
use crate::scheduler::Scheduler;
use crate::schedulers::run_loop::{RunLoop, RunLoopOp, RunLoopScheduler, RunLoopSender};
use crate::sender::{SenderTo, sender};
use crate::sync::thread;

/// An execution context with one worker thread, whose scheduler reports the domain `D`.
///
/// Dropping the context finishes its run loop and joins the thread: work already
/// queued still runs; work scheduled afterwards completes stopped. Dropped on its own
/// thread, it finishes the loop without joining.
///
/// ```
/// use senders::{SingleThreadContext, Scheduler, SenderExt, sync_wait};
/// let ctx = SingleThreadContext::with_name("worker");
/// let name = sync_wait(ctx.scheduler().schedule().then(|()| {
///     std::thread::current().name().map(str::to_owned)
/// }));
/// assert_eq!(name.unwrap(), Some(Some("worker".to_owned())));
/// ```
pub struct SingleThreadContext<D: MaybeDomain = NoDomain> {
    sch: RunLoopScheduler,
    thread: Option<thread::JoinHandle<()>>,
    _d: PhantomData<D>,
}

impl SingleThreadContext<NoDomain> {
    /// A context with an unnamed thread and the default domain.
    ///
    /// ```
    /// use senders::{Scheduler, SenderExt, SingleThreadContext, sync_wait_value};
    /// let ctx = SingleThreadContext::new();
    /// let there = sync_wait_value(ctx.scheduler().schedule().then(|()| std::thread::current().id()));
    /// assert_ne!(there, std::thread::current().id());
    /// ```
    pub fn new() -> Self {
        Self::start(None)
    }
    /// A context whose thread is called `name`.
    ///
    /// ```
    /// use senders::{Scheduler, SenderExt, SingleThreadContext, sync_wait_value};
    /// let ctx = SingleThreadContext::with_name("ui");
    /// let name = sync_wait_value(ctx.scheduler().schedule().then(|()| std::thread::current().name().map(String::from)));
    /// assert_eq!(name.as_deref(), Some("ui"));
    /// ```
    pub fn with_name(name: &str) -> Self {
        Self::start(Some(name))
    }
}

impl Default for SingleThreadContext<NoDomain> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: MaybeDomain> SingleThreadContext<D> {
    /// A context whose thread is called `name` and whose scheduler's domain is `D`.
    ///
    /// ```
    /// use senders::{Scheduler, SingleThreadContext, domain::DefaultDomain, sync_wait};
    /// // `DefaultDomain` here; a domain of your own customizes the algorithms whose
    /// // work starts on this context.
    /// let ctx = SingleThreadContext::<DefaultDomain>::with_domain("custom");
    /// assert_eq!(sync_wait(ctx.scheduler().schedule()).unwrap(), Some(()));
    /// ```
    pub fn with_domain(name: &str) -> Self {
        Self::start(Some(name))
    }

    fn start(name: Option<&str>) -> Self {
        let run_loop = RunLoop::new();
        let sch = run_loop.scheduler();
        let mut builder = thread::Builder::new();
        if let Some(name) = name {
            builder = builder.name(name.to_owned());
        }
        let handle = builder.spawn(move || run_loop.run()).expect("SingleThreadContext: failed to spawn its thread");
        SingleThreadContext { sch, thread: Some(handle), _d: PhantomData }
    }

    /// The context's scheduler.
    ///
    /// ```
    /// use senders::{SenderExt, SingleThreadContext, schedule, sync_wait_value, when_all};
    /// let ctx = SingleThreadContext::new();
    /// let sch = ctx.scheduler();
    /// // Both run on the context's one thread, one after the other.
    /// let ids = when_all((schedule(&sch).then(|()| std::thread::current().id()), schedule(&sch).then(|()| std::thread::current().id())));
    /// let (a, b) = sync_wait_value(ids);
    /// assert_eq!(a, b);
    /// ```
    pub fn scheduler(&self) -> SingleThreadScheduler<D> {
        SingleThreadScheduler { sch: self.sch.clone(), _d: PhantomData }
    }
}

impl<D: MaybeDomain> Drop for SingleThreadContext<D> {
    fn drop(&mut self) {
        self.sch.finish();
        if let Some(handle) = self.thread.take() {
            // Dropped on its own thread (by work it runs): joining would deadlock; the
            // loop returns once this work item and the queue are done.
            if handle.thread().id() != thread::current().id() {
                // The thread only runs the loop, whose work items cannot unwind.
                let _ = handle.join();
            }
        }
    }
}

/// The scheduler of a [`SingleThreadContext`].
///
/// ```
/// use senders::{Scheduler, SenderExt, SingleThreadContext, just, starts_on, sync_wait};
/// let ctx = SingleThreadContext::new();
/// let sch = ctx.scheduler();
/// let there = starts_on(sch.clone(), just(()).then(move |()| sch.is_current()));
/// assert_eq!(sync_wait(there).unwrap(), Some(true));
/// ```
pub struct SingleThreadScheduler<D> {
    sch: RunLoopScheduler,
    _d: PhantomData<fn() -> D>,
}

impl<D> Clone for SingleThreadScheduler<D> {
    fn clone(&self) -> Self {
        SingleThreadScheduler { sch: self.sch.clone(), _d: PhantomData }
    }
}

impl<D> PartialEq for SingleThreadScheduler<D> {
    fn eq(&self, other: &Self) -> bool {
        self.sch == other.sch
    }
}

impl<D> std::fmt::Debug for SingleThreadScheduler<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SingleThreadScheduler")
    }
}

impl<D: MaybeDomain> Scheduler for SingleThreadScheduler<D> {
    type Domain = D;
    type Sender = SingleThreadSender<D>;
    fn schedule(&self) -> SingleThreadSender<D> {
        SingleThreadSender { inner: self.sch.schedule(), sch: self.clone() }
    }
    fn is_current(&self) -> bool {
        self.sch.is_current()
    }
}

/// The sender of `SingleThreadScheduler::schedule()`.
#[must_use = "senders do nothing unless connected and started"]
pub struct SingleThreadSender<D> {
    inner: RunLoopSender,
    sch: SingleThreadScheduler<D>,
}

sender!(impl [D: MaybeDomain] SingleThreadSender<D> {
    type Value = ();
    type Error = Infallible;
    const SENDS_STOPPED: bool = true;
    type Domain = D;
    type CompletionScheduler = SingleThreadScheduler<D>;
    fn completion_scheduler(&self) -> SingleThreadScheduler<D> {
        self.sch.clone()
    }
});

impl<D: MaybeDomain, R: Receiver<(), Infallible> + Send> SenderTo<R> for SingleThreadSender<D> {
    type Operation = RunLoopOp<R>;
    fn connect(self, receiver: R) -> RunLoopOp<R> {
        self.inner.connect(receiver)
    }
}
