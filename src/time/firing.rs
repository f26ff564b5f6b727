//! Firing threads: where the timer service runs what it must not run on its own thread.
//!
//! The timer thread runs no user code: a continuation that blocked it would stop every
//! timer of the process. What it cannot do itself (start the hop onto a scheduler that is
//! not one of the crate's queueing schedulers, or deliver a completion that such a hop made
//! inline) it hands as a job to [`Firing::submit`], which gives the job to a firing thread
//! that waits for work, or to a new one when none waits. A firing thread runs one job at a
//! time, so a job that blocks holds its own thread and no other job: the next one goes
//! elsewhere. A firing thread that waits [`KEEP_ALIVE`] without a job ends.
//!
//! **The hand-off.** A waiting thread is on the `idle` list with an empty slot. `submit`
//! pops a thread off the list (under the list's lock), then fills its slot and notifies
//! it. A thread whose wait times out takes itself off the list, under the same lock, and
//! ends, unless `submit` popped it first: then a job is on its way, and it waits for it
//! without a timeout. So a job goes to a thread that will take it, or to a new thread;
//! never to a busy one.
//!
//! **The bound.** At most [`max_firing_threads`] firing threads live at once (counted in
//! `threads`, under the list's lock). With none waiting and the bound reached, the job
//! waits in `backlog` for the next firing thread that finishes a job. A thread puts
//! itself on the idle list only with the backlog empty, and `submit` adds to the
//! backlog only with the idle list empty, so a job never waits in the backlog beside an
//! idle thread. If the operating system refuses a new thread, the job waits in the
//! backlog the same way (or for the next `submit`, which tries again to start one).

use std::collections::VecDeque;
use std::time::Duration;

use crate::job::JobRef;
use crate::sync::{self, Arc, Condvar, Mutex, thread};

/// How long a firing thread waits for a job before it ends.
pub(crate) const KEEP_ALIVE: Duration = Duration::from_secs(5);

/// The name of the firing threads.
pub(crate) const NAME: &str = "senders-firing";

/// The default of [`max_firing_threads`].
pub const DEFAULT_MAX_FIRING_THREADS: usize = 64;

/// The bound of the process's firing threads (see [`set_max_firing_threads`]).
static MAX_FIRING_THREADS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(DEFAULT_MAX_FIRING_THREADS);

/// How many firing threads the timer service runs at most: [`DEFAULT_MAX_FIRING_THREADS`]
/// (64) unless [`set_max_firing_threads`] changed it.
///
/// A timer of a scheduler other than the crate's queueing ones (the pool, the run loop,
/// the single-thread context) — a user's scheduler, or the inline scheduler made timed
/// with [`ScheduleAt`](crate::time::ScheduleAt) — completes on a *firing thread*, since
/// the timer thread runs no user code; a continuation that runs inline there holds its
/// firing thread until it returns. A due timer goes to a firing thread that waits for
/// work, or to a new one while fewer than this many live. At the bound, it waits for the
/// next firing thread that finishes its job, and fires then, late: a due timer is never
/// lost, but while every firing thread is held by a blocking continuation, no such
/// timer fires. (A continuation that blocks until another such timer fires therefore
/// deadlocks once all the firing threads do so.) Timers of the queueing schedulers
/// never wait for a firing thread to start their hop.
///
/// ```
/// assert_eq!(senders::time::max_firing_threads(), senders::time::DEFAULT_MAX_FIRING_THREADS);
/// ```
pub fn max_firing_threads() -> usize {
    MAX_FIRING_THREADS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets [`max_firing_threads`], the bound on the timer service's firing threads, for
/// the whole process. It applies from the next timer that needs a thread: threads
/// already running above a lowered bound finish their jobs and end when idle.
///
/// # Panics
///
/// If `max` is zero: no timer that needs a firing thread could ever fire.
///
/// ```
/// use senders::{SenderExt, InlineScheduler, sync_wait, time::ScheduleAt};
/// use std::time::Duration;
/// senders::time::set_max_firing_threads(4);
/// let late = ScheduleAt::after(InlineScheduler, Duration::from_millis(1)).then(|()| 7);
/// assert_eq!(sync_wait(late).unwrap(), Some(7));
/// ```
pub fn set_max_firing_threads(max: usize) {
    assert!(max > 0, "senders::time::set_max_firing_threads: the bound must be at least one thread");
    MAX_FIRING_THREADS.store(max, std::sync::atomic::Ordering::Relaxed);
}

/// The firing threads of a timer service.
pub(crate) struct Firing {
    state: Mutex<State>,
    /// The bound on its threads; `None` for the process's [`max_firing_threads`].
    limit: Option<usize>,
}

/// Who waits for work, and what could not be handed to anyone.
struct State {
    /// Threads waiting for a job, each with its empty slot; the latest last.
    idle: Vec<Arc<Slot>>,
    /// Jobs no thread could take (the bound was reached, or a new thread was refused).
    backlog: VecDeque<JobRef>,
    /// Firing threads alive (started and not ended), or being started.
    threads: usize,
}

/// One thread's mailbox: the job handed to it.
struct Slot {
    job: Mutex<Option<JobRef>>,
    cv: Condvar,
}

impl Slot {
    fn new(job: Option<JobRef>) -> Self {
        Slot { job: Mutex::new(job), cv: Condvar::new() }
    }

    /// Hands `job` to the slot's thread, which was taken off the idle list for it.
    fn give(&self, job: JobRef) {
        let mut slot = sync::lock(&self.job);
        debug_assert!(slot.is_none(), "firing: a slot holds one job");
        *slot = Some(job);
        self.cv.notify_one();
    }

    /// Waits up to [`KEEP_ALIVE`] for a job.
    fn wait_a_while(&self) -> Option<JobRef> {
        let mut slot = sync::lock(&self.job);
        #[cfg(not(loom))]
        {
            let deadline = std::time::Instant::now() + KEEP_ALIVE;
            while slot.is_none() {
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                // A poisoned lock only means a panic elsewhere: the guard comes back
                // either way.
                slot = match self.cv.wait_timeout(slot, left) {
                    Ok((g, _)) => g,
                    Err(poisoned) => poisoned.into_inner().0,
                };
            }
        }
        // Loom's timed wait never times out; a timeout may come at once, so the model
        // takes it at once: the race between ending and being handed a job is explored.
        slot.take()
    }

    /// Waits for the job that is on its way.
    fn wait(&self) -> JobRef {
        let mut slot = sync::lock(&self.job);
        loop {
            if let Some(job) = slot.take() {
                return job;
            }
            slot = match self.cv.wait(slot) {
                Ok(g) => g,
                Err(poisoned) => poisoned.into_inner(),
            };
        }
    }
}

impl Firing {
    /// Firing threads, none started yet, bounded by [`max_firing_threads`].
    pub(crate) fn new() -> Self {
        Self::with_limit(None)
    }

    /// Firing threads bounded by `limit`, or by [`max_firing_threads`] for `None`.
    pub(crate) fn with_limit(limit: Option<usize>) -> Self {
        let state = State { idle: Vec::new(), backlog: VecDeque::new(), threads: 0 };
        Firing { state: Mutex::new(state), limit }
    }

    fn limit(&self) -> usize {
        self.limit.unwrap_or_else(max_firing_threads)
    }

    /// The firing threads of the process's timer service.
    #[cfg(not(loom))]
    pub(crate) fn global() -> &'static Arc<Firing> {
        static GLOBAL: std::sync::OnceLock<Arc<Firing>> = std::sync::OnceLock::new();
        GLOBAL.get_or_init(|| Arc::new(Firing::new()))
    }

    /// Runs `job` on a firing thread that waits for work, or on a new one below the
    /// bound, or else on the next one that finishes its job.
    pub(crate) fn submit(this: &Arc<Self>, job: JobRef) {
        {
            let mut state = sync::lock(&this.state);
            if let Some(slot) = state.idle.pop() {
                drop(state);
                return slot.give(job);
            }
            if state.threads >= this.limit() {
                // Every thread is busy: the first to finish takes it.
                return state.backlog.push_back(job);
            }
            state.threads += 1;
        }
        if let Err(job) = Self::spawn(this, job) {
            // Refused a thread: a thread that went idle meanwhile takes the job, or the
            // next thread to finish a job does.
            let mut state = sync::lock(&this.state);
            state.threads -= 1;
            match state.idle.pop() {
                Some(slot) => {
                    drop(state);
                    slot.give(job);
                }
                None => state.backlog.push_back(job),
            }
        }
    }

    /// Starts a firing thread whose first job is `job`; gives the job back if the
    /// operating system refuses the thread.
    fn spawn(this: &Arc<Self>, job: JobRef) -> Result<(), JobRef> {
        // The job travels in the slot, so that a refused thread (whose closure is dropped)
        // does not lose it.
        let slot = Arc::new(Slot::new(Some(job)));
        let (firing, mine) = (this.clone(), slot.clone());
        match thread::Builder::new().name(NAME.into()).spawn(move || firing.work(&mine)) {
            Ok(_) => Ok(()),
            Err(_) => Err(sync::lock(&slot.job).take().expect("firing: a refused thread leaves its job")),
        }
    }

    /// A firing thread: runs its job, then the backlog's, then waits on the idle list
    /// for the next, and ends when none comes for [`KEEP_ALIVE`].
    fn work(&self, slot: &Arc<Slot>) {
        let mut job = sync::lock(&slot.job).take().expect("firing: a new thread has its first job");
        loop {
            job.execute();
            {
                let mut state = sync::lock(&self.state);
                if let Some(next) = state.backlog.pop_front() {
                    job = next;
                    continue;
                }
                state.idle.push(slot.clone());
            }
            if let Some(next) = slot.wait_a_while() {
                job = next;
                continue;
            }
            {
                let mut state = sync::lock(&self.state);
                if let Some(i) = state.idle.iter().position(|s| Arc::ptr_eq(s, slot)) {
                    state.idle.remove(i);
                    state.threads -= 1;
                    return;
                }
            }
            // `submit` took this thread off the list: its job is on the way.
            job = slot.wait();
        }
    }

    /// The number of firing threads waiting for work (for tests).
    #[cfg(test)]
    pub(crate) fn idle(&self) -> usize {
        sync::lock(&self.state).idle.len()
    }
}
