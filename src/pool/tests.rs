//! White-box tests of the pool: where `Registry::push` and `WorkerThread::push_local`
//! queue a job (a worker's own deque when pushed from one of this pool's workers, the
//! calling thread's lane otherwise, the shared injector once every lane is taken, and
//! nowhere once shutdown began, for outside submissions); the registry's reference count
//! after the pool is dropped from a job; and the spawn hook's tag (the job of a spawned
//! operation is queued once, and its first `schedule()` completes inline; with latent
//! forks, spawns made while the deque holds a job are held on the worker's ring).
//!
//! A file of its own, above the pool's modules, so that those modules do not import the
//! crate's higher layers for their tests.
//!
//! Jobs here must not panic (an unwinding job aborts the process), so they report
//! what they observed over a channel and the test thread asserts.

use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use super::StaticThreadPool;
use super::lane::LANES;
use super::registry::{Registry, RegistryRef, WorkerThread};
use crate::adaptors::then::Then;
use crate::consumers::sync_wait::sync_wait;
use crate::job::JobRef;
use crate::scheduler::Scheduler;
use crate::scope::{SimpleCountingScope, SimpleCountingToken, spawn};
use std::sync::atomic::Ordering;

const TIMEOUT: Duration = Duration::from_secs(5);

type Thunk = Box<dyn FnOnce() + Send>;

/// Runs the boxed thunk that `data` points to, once.
///
/// # Safety
///
/// `data` comes from `Box::into_raw(Box<Thunk>)` in [`job`]; called once.
unsafe fn run_thunk(data: *const (), (): ()) {
    // SAFETY: the caller's contract: we own the box and free it here.
    let f = unsafe { Box::from_raw(data.cast_mut().cast::<Thunk>()) };
    f();
}

/// A heap-allocated job that runs `f` once (and leaks if never run).
fn job(f: impl FnOnce() + Send + 'static) -> JobRef {
    let boxed: Box<Thunk> = Box::new(Box::new(f));
    // SAFETY: `run_thunk` frees exactly this box, once; the thunk is `Send`, so it
    // may run on any thread.
    unsafe { JobRef::new(Box::into_raw(boxed), run_thunk) }
}

/// The registry of `pool`.
fn registry_of(pool: &StaticThreadPool) -> RegistryRef {
    pool.registry.clone()
}

/// Blocks the only worker of a one-thread pool until the returned sender is dropped
/// or sent to; returns once the worker is inside the blocking job.
fn block_worker(registry: &Registry) -> mpsc::Sender<()> {
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let (started_tx, started_rx) = mpsc::channel::<()>();
    assert!(registry.push(job(move || {
        let _ = started_tx.send(());
        let _ = release_rx.recv_timeout(TIMEOUT);
    })));
    started_rx.recv_timeout(TIMEOUT).expect("the blocking job did not start");
    release_tx
}

/// Queue lengths seen from inside a job: (own deque, own stealer, injector).
type Lens = (usize, usize, usize);

#[test]
fn push_from_a_worker_goes_to_its_own_deque() {
    let pool = StaticThreadPool::new(1).unwrap();
    let registry = registry_of(&pool);
    let (tx, rx) = mpsc::channel::<(Option<usize>, Lens, bool, Lens)>();
    let (ran_tx, ran_rx) = mpsc::channel::<Option<usize>>();
    let r = registry.clone();
    assert!(registry.push(job(move || {
        let lens = |w: &WorkerThread| (w.queued(), r.queued_on_worker(w.index()), r.queued_in_injector());
        let Some(worker) = WorkerThread::current_of(&r) else {
            let _ = tx.send((None, (0, 0, 0), false, (0, 0, 0)));
            return;
        };
        let before = lens(worker);
        let r2 = r.clone();
        let pushed = r.push(job(move || {
            let _ = ran_tx.send(WorkerThread::current_of(&r2).map(WorkerThread::index));
        }));
        let after = lens(worker);
        let _ = tx.send((Some(worker.index()), before, pushed, after));
    })));
    let (index, before, pushed, after) = rx.recv_timeout(TIMEOUT).expect("the job did not run");
    assert_eq!(index, Some(0), "the job must run on worker 0");
    assert_eq!(before, (0, 0, 0));
    assert!(pushed, "a push from a worker is accepted");
    assert_eq!(after, (1, 1, 0), "the job must be on the worker's own deque, not the injector");
    assert_eq!(ran_rx.recv_timeout(TIMEOUT).expect("the pushed job did not run"), Some(0));
}

#[test]
fn push_local_goes_to_the_own_deque() {
    let pool = StaticThreadPool::new(1).unwrap();
    let registry = registry_of(&pool);
    let (tx, rx) = mpsc::channel::<Option<(Lens, Lens)>>();
    let (ran_tx, ran_rx) = mpsc::channel::<()>();
    let r = registry.clone();
    assert!(registry.push(job(move || {
        let sent = WorkerThread::current_of(&r).map(|w| {
            let before = (w.queued(), r.queued_on_worker(w.index()), r.queued_in_injector());
            w.push_local(job(move || {
                let _ = ran_tx.send(());
            }));
            (before, (w.queued(), r.queued_on_worker(w.index()), r.queued_in_injector()))
        });
        let _ = tx.send(sent);
    })));
    let (before, after) = rx.recv_timeout(TIMEOUT).expect("the job did not run").expect("not on a worker");
    assert_eq!(before, (0, 0, 0));
    assert_eq!(after, (1, 1, 0));
    ran_rx.recv_timeout(TIMEOUT).expect("the locally pushed job did not run");
}

/// A worker that drops its own pool from a job is still a worker after the drop: it
/// counts the references it takes on its shard, until its loop ends. The last loop to
/// end folds the count (the outside word holds the bias until then), and the fold is
/// exact: once every worker has ended, the one reference left, the test's, is the
/// whole count.
#[test]
fn after_a_drop_from_a_worker_the_last_loop_to_end_folds_the_count_exactly() {
    let pool = StaticThreadPool::new(2).unwrap();
    let registry = registry_of(&pool);
    let slot = Arc::new(Mutex::new(Some(pool)));
    let (tx, rx) = mpsc::channel::<(bool, usize, usize)>();
    let (s, held) = (slot.clone(), registry.clone());
    assert!(registry.push(job(move || {
        drop(s.lock().unwrap().take());
        let on_worker = WorkerThread::current_of(&held).is_some();
        let before = held.refs.outside();
        let taken = held.clone();
        let with = held.refs.outside();
        drop(taken);
        let _ = tx.send((on_worker, before, with));
    })));
    let (on_worker, before, with) = rx.recv_timeout(TIMEOUT).expect("the job did not run");
    assert!(on_worker, "after the drop, the job still runs as the pool's worker");
    assert_eq!(with, before, "a reference taken on the worker is counted on its shard");
    assert!(slot.lock().unwrap().is_none(), "the job dropped the pool");
    let deadline = std::time::Instant::now() + TIMEOUT;
    // The bias (far above any real count) leaves the outside word at the fold; the
    // last worker's own reference goes right after.
    while registry.refs.outside() != 1 {
        let now = registry.refs.outside();
        assert!(std::time::Instant::now() < deadline, "the count is {now:#x}, not the test's one handle");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Jobs queued on the registry's lanes.
fn in_lanes(registry: &Registry) -> usize {
    registry.queued_in_lanes().0
}

#[test]
fn push_from_outside_goes_to_the_threads_lane() {
    let pool = StaticThreadPool::new(1).unwrap();
    let registry = registry_of(&pool);
    assert!(WorkerThread::current_of(&registry).is_none(), "the test thread is no worker");
    let release = block_worker(&registry);
    let ran = Arc::new(AtomicUsize::new(0));
    for _ in 0..2 {
        let ran2 = ran.clone();
        assert!(registry.push(job(move || _ = ran2.fetch_add(1, Ordering::SeqCst))));
    }
    assert_eq!(in_lanes(&registry), 2, "an outside push goes to the thread's lane");
    assert_eq!(registry.queued_in_lanes().1, 1, "one lane");
    assert_eq!(registry.queued_in_injector(), 0, "not to the injector");
    assert_eq!(registry.queued_on_worker(0), 0, "and not to a worker's deque");
    assert_eq!(ran.load(Ordering::SeqCst), 0);
    drop(release);
    drop(pool);
    assert_eq!(ran.load(Ordering::SeqCst), 2, "the queued jobs ran before the pool was dropped");
}

#[test]
fn outside_threads_beyond_the_lanes_use_the_injector_and_exited_threads_jobs_run() {
    let pool = StaticThreadPool::new(1).unwrap();
    let registry = registry_of(&pool);
    let release = block_worker(&registry);
    let ran = Arc::new(AtomicUsize::new(0));
    // One thread after the other, each pushing once and exiting.
    for _ in 0..LANES + 1 {
        let (r, ran2) = (registry.clone(), ran.clone());
        std::thread::spawn(move || assert!(r.push(job(move || _ = ran2.fetch_add(1, Ordering::SeqCst)))))
            .join()
            .unwrap();
    }
    // The test thread holds a lane too (`block_worker` pushed from it).
    assert_eq!(in_lanes(&registry), LANES - 1, "one job in each other lane");
    assert_eq!(registry.queued_in_injector(), 2, "the threads that found no lane used the injector");
    drop(release);
    drop(pool);
    assert_eq!(ran.load(Ordering::SeqCst), LANES + 1, "every job ran, also those of exited threads");
}

#[test]
fn push_from_a_worker_of_another_pool_goes_to_a_lane_of_that_pool() {
    let a = StaticThreadPool::new(1).unwrap();
    let b = StaticThreadPool::new(1).unwrap();
    let (ra, rb) = (registry_of(&a), registry_of(&b));
    let release_b = block_worker(&rb);
    let (tx, rx) = mpsc::channel::<Option<(bool, usize, usize)>>();
    let (ran_tx, ran_rx) = mpsc::channel::<bool>();
    let (ra2, rb2) = (ra.clone(), rb.clone());
    assert!(ra.push(job(move || {
        let sent = WorkerThread::current_of(&ra2).map(|w| {
            // On a worker of `a`, but not of `b`.
            let foreign = WorkerThread::current_of(&rb2).is_none();
            let rb3 = rb2.clone();
            let pushed = rb2.push(job(move || {
                let _ = ran_tx.send(WorkerThread::current_of(&rb3).is_some());
            }));
            (foreign && pushed, w.queued(), in_lanes(&rb2))
        });
        let _ = tx.send(sent);
    })));
    let (ok, own_len, lane_len) = rx.recv_timeout(TIMEOUT).expect("job did not run").expect("not on a");
    assert!(ok);
    assert_eq!(own_len, 0, "a push to another pool must not land on this worker's deque");
    assert_eq!(lane_len, 1, "it goes to a lane of the other pool");
    drop(release_b);
    assert!(ran_rx.recv_timeout(TIMEOUT).expect("job did not run on b"), "it runs on a worker of b");
}

#[test]
fn after_shutdown_began_outside_pushes_are_refused_and_worker_pushes_still_run() {
    let pool = StaticThreadPool::new(1).unwrap();
    let registry = registry_of(&pool);
    let (tx, rx) = mpsc::channel::<(bool, bool)>();
    let r = registry.clone();
    let inner_ran = Arc::new(AtomicBool::new(false));
    let inner = inner_ran.clone();
    assert!(registry.push(job(move || {
        // Wait until the pool is being dropped.
        let deadline = std::time::Instant::now() + TIMEOUT;
        while !r.is_terminating() && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        let r2 = r.clone();
        // A push from the worker during shutdown is queued and runs, with workers
        // still alive (not `exited`).
        let pushed = r.push(job(move || inner.store(!r2.exited(), Ordering::SeqCst)));
        let _ = tx.send((r.is_terminating(), pushed));
    })));
    drop(pool);
    let (terminating, pushed) = rx.recv_timeout(TIMEOUT).unwrap();
    assert!(terminating && pushed);
    assert!(inner_ran.load(Ordering::SeqCst), "work queued by a worker during shutdown ran before drop returned");
    assert!(registry.exited());
    let refused = Arc::new(AtomicBool::new(true));
    let r = refused.clone();
    assert!(!registry.push(job(move || r.store(false, Ordering::SeqCst))), "an outside push after shutdown is refused");
    assert_eq!(registry.queued_in_injector(), 0);
    assert!(refused.load(Ordering::SeqCst));
}

/// The length of the calling worker's own deque (`usize::MAX` off the pool).
fn deque_len(r: &RegistryRef) -> usize {
    WorkerThread::current_of(r).map_or(usize::MAX, |w| w.queued())
}

/// What the jobs of [`record_spawns`] report: a label and the deque's length.
type Seen = mpsc::Sender<(&'static str, usize)>;

/// Spawns `body` onto a one-worker pool (holding its forks latent or not), passing it
/// the pool's registry and scheduler, the scope's token and a channel; joins the scope
/// and returns what was sent, in order.
fn record_spawns(
    latent: bool,
    body: impl FnOnce(RegistryRef, super::PoolScheduler, SimpleCountingToken, Seen) + Send + 'static,
) -> Vec<(&'static str, usize)> {
    let pool = StaticThreadPool::builder().num_threads(1).latent_forks(latent).build().unwrap();
    let (r, sch) = (registry_of(&pool), pool.scheduler());
    let scope = SimpleCountingScope::new();
    let tok = scope.token();
    let (tx, rx) = mpsc::channel();
    let s2 = sch.clone();
    spawn(Then::new(sch.schedule(), move |()| body(r, s2, tok, tx)), tok);
    sync_wait(scope.join()).unwrap();
    rx.try_iter().collect()
}

/// A spawned `schedule()` from a worker is queued once: when the worker takes the
/// spawned operation, its `schedule()` completes inline (nothing is pushed again) and
/// uses up the mark, and a spawn from inside it is queued as usual.
#[test]
fn a_spawned_schedule_is_queued_once_and_the_mark_does_not_outlive_it() {
    let seen = record_spawns(false, |r, s2, tok, tx| {
        let (r2, tx2, s3) = (r.clone(), tx.clone(), s2.clone());
        spawn(
            Then::new(s2.schedule(), move |()| {
                // Taken from the deque and completed inline: nothing queued.
                let _ = tx2.send(("spawned", deque_len(&r2)));
                // The mark was used up by that schedule().
                let mark = WorkerThread::current_of(&r2).is_none_or(|w| w.is_fresh());
                let _ = tx2.send(("mark", usize::from(mark)));
                // The spawn below is queued (it is not the one being started).
                let r3 = r2.clone();
                let tx3 = tx2.clone();
                spawn(
                    Then::new(s3.schedule(), move |()| {
                        let _ = tx3.send(("nested", deque_len(&r3)));
                    }),
                    tok,
                );
                let _ = tx2.send(("after nested spawn", deque_len(&r2)));
            }),
            tok,
        );
        let _ = tx.send(("after spawn", deque_len(&r)));
    });
    assert_eq!(
        seen,
        [("after spawn", 1), ("spawned", 0), ("mark", 0), ("after nested spawn", 1), ("nested", 0)],
        "one deque entry per spawn, none for the schedule() it starts with"
    );
}

/// `when_all` of a thousand children started on a worker hands them out by halves: the
/// worker's deque never holds more than a few of their jobs (about `log2(1000)` at the
/// start), where pushing every child would put 999 there.
#[test]
fn a_thousand_children_are_handed_out_by_halves() {
    use crate::adaptors::continues_on::starts_on;
    use crate::adaptors::when_all::when_all;
    use crate::factories::just::just;
    let pool = StaticThreadPool::new(1).unwrap();
    let registry = registry_of(&pool);
    let deepest = Arc::new(AtomicUsize::new(0));
    let children: Vec<_> = (0..1000usize)
        .map(|i| {
            let (r, deepest) = (registry.clone(), deepest.clone());
            Then::new(just(i), move |i| {
                if let Some(w) = WorkerThread::current_of(&r) {
                    deepest.fetch_max(w.queued(), Ordering::Relaxed);
                }
                i
            })
        })
        .collect();
    let values = sync_wait(starts_on(pool.scheduler(), when_all(children))).unwrap().unwrap();
    assert_eq!(values, (0..1000).collect::<Vec<_>>());
    let deepest = deepest.load(Ordering::Relaxed);
    assert!((1..=20).contains(&deepest), "at most {deepest} jobs queued at once");
}

/// With latent forks, a spawn from a worker is a fork like `when_all`'s: the first, made
/// while the worker's deque is empty, is queued there for thieves; the next ones are
/// held on the worker's ring (nobody is hungry on a one-worker pool). All of them run,
/// newest first, each starting with its `schedule()` completing inline. Without the
/// option every spawn is queued.
#[test]
fn spawns_from_a_worker_are_held_latent_while_its_deque_holds_a_job() {
    for latent in [false, true] {
        let seen = record_spawns(latent, |r, s2, tok, tx| {
            for (name, after) in [("first", "after first"), ("second", "after second"), ("third", "after third")] {
                let (r2, tx2) = (r.clone(), tx.clone());
                let on_pool = Then::new(s2.schedule(), move |()| {
                    let _ = tx2.send((name, deque_len(&r2)));
                });
                spawn(on_pool, tok);
                let _ = tx.send((after, deque_len(&r)));
            }
        });
        let expected = if latent {
            [("after first", 1), ("after second", 1), ("after third", 1), ("third", 1), ("second", 1), ("first", 0)]
        } else {
            [("after first", 1), ("after second", 2), ("after third", 3), ("third", 2), ("second", 1), ("first", 0)]
        };
        assert_eq!(seen, expected, "latent {latent}");
    }
}

/// A `when_all` started on a worker starts the children that complete at once (ready
/// `AnySender`s) where it runs, in the window, instead of pushing a job for each: when
/// its first child runs, the worker's deque holds only the other children that do work.
#[test]
fn ready_children_of_a_when_all_are_started_in_place_not_pushed() {
    use crate::adaptors::continues_on::starts_on;
    use crate::adaptors::when_all::when_all;
    use crate::any::AnySender;
    use crate::ext::SenderExt;
    use crate::factories::just::just;
    let pool = StaticThreadPool::new(1).unwrap();
    let registry = registry_of(&pool);
    let seen = Arc::new(AtomicUsize::new(usize::MAX));
    // Children 0, 3 and 6 do work (they record what the deque holds); the rest are ready.
    let children: Vec<AnySender<'static, usize>> = (0..8usize)
        .map(|i| {
            if i % 3 == 0 {
                let (r, seen) = (registry.clone(), seen.clone());
                just(i)
                    .then(move |i| {
                        if i == 0 {
                            seen.store(deque_len(&r), Ordering::SeqCst);
                        }
                        i
                    })
                    .boxed()
            } else {
                just(i).boxed()
            }
        })
        .collect();
    let values = sync_wait(starts_on(pool.scheduler(), when_all(children))).unwrap().unwrap();
    assert_eq!(values, (0..8).collect::<Vec<_>>());
    assert_eq!(seen.load(Ordering::SeqCst), 2, "only children 3 and 6 were pushed");
}
