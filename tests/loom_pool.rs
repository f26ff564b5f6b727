//! Loom models of the whole pool: a real `StaticThreadPool` with two workers (their
//! find-work loop, the sleep protocol, shutdown) together with a counting scope's spawn,
//! stop and join, rather than each protocol alone; (T) a drop of the pool from one of its
//! own jobs while the other worker waits for that job.
//!
//! Under `--cfg loom` the pool's queues are a loom-mutex model of the crossbeam subset
//! it uses (`src/pool/deque.rs`), workers do not spin before sleeping, and the
//! per-thread and process-wide tables (current worker, shard slots, recycled scope
//! cores) are per loom thread or per execution.
//!
//! Run with `tools/loom.sh whole_pool` (`LOOM_MAX_PREEMPTIONS=2`, release).
#![cfg(loom)]

mod whole_pool {
    use loom::sync::Arc;
    use loom::sync::atomic::{AtomicUsize, Ordering};
    use loom::thread;

    use senders::{
        AnySender, CountingScope, CountingToken, GetScheduler, PoolScheduler, RunLoopScheduler, SenderExt,
        StaticThreadPool, just, read_env, schedule, spawn, starts_on, sync_wait, when_all,
    };

    /// What the jobs of a model did: ran their body, or completed stopped.
    #[derive(Clone, Default)]
    struct Tally {
        ran: Arc<AtomicUsize>,
        stopped: Arc<AtomicUsize>,
    }

    impl Tally {
        fn ran(&self) -> usize {
            self.ran.load(Ordering::Relaxed)
        }
        fn stopped(&self) -> usize {
            self.stopped.load(Ordering::Relaxed)
        }
    }

    /// Spawns a `schedule()` on `pool` that counts into `tally` whichever way it
    /// completes; returns whether the scope took it.
    fn spawn_counted(sch: &PoolScheduler, scope: &CountingScope, tally: &Tally) -> bool {
        let (ran, stopped) = (tally.ran.clone(), tally.stopped.clone());
        spawn(
            schedule(sch)
                .then(move |()| {
                    ran.fetch_add(1, Ordering::Relaxed);
                })
                .upon_stopped(move || {
                    stopped.fetch_add(1, Ordering::Relaxed);
                }),
            scope.token(),
        )
    }

    /// (A) Two jobs spawned from outside, joined from outside: both run exactly once
    /// and the join returns (a lost wake-up would leave loom with every thread blocked).
    #[test]
    fn outside_spawns_then_join() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let scope = CountingScope::new();
            let tally = Tally::default();
            for _ in 0..2 {
                assert!(spawn_counted(&pool.scheduler(), &scope, &tally));
            }
            sync_wait(scope.join()).unwrap();
            assert_eq!((tally.ran(), tally.stopped()), (2, 0));
            drop(pool);
        });
    }

    /// A job spawned from outside spawns `children` children from its worker, and the
    /// outside join waits for all of them: each runs once.
    fn a_job_spawns_children_from_its_worker(pool: StaticThreadPool, children: usize) {
        let scope = CountingScope::new();
        let tally = Tally::default();
        let (sch, token, child_tally) = (pool.scheduler(), scope.token(), tally.clone());
        let parent = schedule(&pool.scheduler()).then(move |()| {
            for _ in 0..children {
                let ran = child_tally.ran.clone();
                assert!(spawn(
                    schedule(&sch).then(move |()| {
                        ran.fetch_add(1, Ordering::Relaxed);
                    }),
                    token
                ));
            }
            child_tally.ran.fetch_add(1, Ordering::Relaxed);
        });
        assert!(spawn(parent, scope.token()));
        sync_wait(scope.join()).unwrap();
        assert_eq!((tally.ran(), tally.stopped()), (children + 1, 0));
        drop(pool);
    }

    /// (B) The recursive case: a job spawned from outside spawns a child from its
    /// worker (onto that worker's deque, where the other worker may steal it). Both run
    /// once and the outside join waits for the child too.
    #[test]
    fn a_job_spawns_a_child_from_its_worker() {
        loom::model(|| a_job_spawns_children_from_its_worker(StaticThreadPool::new(2).unwrap(), 1));
    }

    /// (M) Latent spawns: on a pool that holds its forks latent, a job spawns two
    /// children from its worker. The first goes on the deque (it was empty); the second
    /// is held on the worker's ring unless the other worker has gone hungry, when it is
    /// published. Each child runs once, whoever runs it, and the outside join waits for
    /// both (a spawn left on a ring when its worker sleeps would leave loom with every
    /// thread blocked).
    #[test]
    fn latent_spawns_from_a_worker_are_run_or_published_and_joined() {
        loom::model(|| {
            let pool = StaticThreadPool::builder().num_threads(2).latent_forks(true).build().unwrap();
            a_job_spawns_children_from_its_worker(pool, 2);
        });
    }

    /// (C) Another thread requests stop on the scope, or closes it, while this thread
    /// spawns and joins. A job the scope took completes exactly once, run or stopped;
    /// the join returns once it has; a refused spawn runs nothing. One spawn, and the
    /// stop and the close in separate models: together they take about 180 s at two
    /// preemptions (the outside spawn reserves a batch of credits and the join and
    /// `close` take them back, three more atomic steps than a plain root count).
    fn scope_call_racing_a_spawn_and_the_join(call: fn(&CountingScope)) {
        loom::model(move || {
            let pool = StaticThreadPool::new(2).unwrap();
            let scope = Arc::new(CountingScope::new());
            let tally = Tally::default();
            let other = {
                let scope = scope.clone();
                thread::spawn(move || call(&scope))
            };
            let taken = usize::from(spawn_counted(&pool.scheduler(), &scope, &tally));
            sync_wait(scope.join()).unwrap();
            assert_eq!(tally.ran() + tally.stopped(), taken);
            other.join().unwrap();
            drop(pool);
        });
    }

    #[test]
    fn stop_request_races_a_spawn_and_the_join() {
        scope_call_racing_a_spawn_and_the_join(CountingScope::request_stop);
    }

    #[test]
    fn close_races_a_spawn_and_the_join() {
        scope_call_racing_a_spawn_and_the_join(CountingScope::close);
    }

    /// (D) The pool is dropped with two jobs still queued (nobody joined yet): shutdown
    /// runs what was queued before it began, so both run (not stopped), exactly once,
    /// and a join afterwards returns.
    #[test]
    fn dropping_the_pool_runs_queued_work() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let scope = CountingScope::new();
            let tally = Tally::default();
            for _ in 0..2 {
                assert!(spawn_counted(&pool.scheduler(), &scope, &tally));
            }
            drop(pool);
            assert_eq!((tally.ran(), tally.stopped()), (2, 0));
            sync_wait(scope.join()).unwrap();
        });
    }

    /// (E) An outside thread submits while the pool is being dropped. The submission is
    /// either refused (shutdown had begun: it completes stopped, inline, on the
    /// submitting thread) or accepted, and then it runs. An accepted job must never be
    /// left for the dropping thread to complete stopped: a worker exiting on
    /// `terminating` has to see every push that was accepted before it left.
    #[test]
    fn a_submission_racing_shutdown_runs_or_is_refused_inline() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let scope = Arc::new(CountingScope::new());
            let stopped_elsewhere = Arc::new(AtomicUsize::new(0));
            let ran = Arc::new(AtomicUsize::new(0));
            let submitter = {
                let (sch, scope, ran, elsewhere) =
                    (pool.scheduler(), scope.clone(), ran.clone(), stopped_elsewhere.clone());
                thread::spawn(move || {
                    let me = thread::current().id();
                    let job = schedule(&sch)
                        .then(move |()| {
                            ran.fetch_add(1, Ordering::Relaxed);
                        })
                        .upon_stopped(move || {
                            if thread::current().id() != me {
                                elsewhere.fetch_add(1, Ordering::Relaxed);
                            }
                        });
                    assert!(spawn(job, scope.token()));
                })
            };
            drop(pool);
            submitter.join().unwrap();
            sync_wait(scope.join()).unwrap();
            assert_eq!(stopped_elsewhere.load(Ordering::Relaxed), 0, "an accepted job completed stopped");
            assert!(ran.load(Ordering::Relaxed) <= 1);
        });
    }

    /// (F) `when_all` of two children on a worker, the pool's join: the second child is
    /// forked and the first runs inline, with its arrival noted rather than counted; the
    /// worker then takes the second back unless the other worker stole it. Both values
    /// arrive exactly once, whoever ran the second child and in whichever order.
    #[test]
    fn when_all_on_a_worker_with_the_second_child_stolen_or_taken_back() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let both = when_all((just(1).then(|x: u32| x + 1), just(10u32)));
            assert_eq!(sync_wait(starts_on(pool.scheduler(), both)).unwrap(), Some((2, 10)));
            drop(pool);
        });
    }

    /// (K) Latent forks: `when_all`s nested three deep on a worker of a pool that holds
    /// its nested forks latent. The outermost fork is published; the nested ones are held
    /// on the worker's private ring or, whenever the other worker has gone hungry (it
    /// found nothing and may be asleep), published at a fork (the oldest held) or at a
    /// join, and the worker is woken. Every value arrives once, whoever runs each child,
    /// no fork is left behind when the operation completes, and the pool shuts down.
    #[test]
    fn latent_forks_nested_three_deep_are_run_or_published_to_a_hungry_worker() {
        loom::model(|| {
            let pool = StaticThreadPool::builder().num_threads(2).latent_forks(true).build().unwrap();
            let inner = when_all((just(1u32), just(2u32))).then(|(a, b)| a + b);
            let middle = when_all((inner, just(4u32))).then(|(a, b)| a + b);
            let outer = when_all((middle, just(8u32))).then(|(a, b)| a + b);
            assert_eq!(sync_wait(starts_on(pool.scheduler(), outer)).unwrap(), Some(15));
            drop(pool);
        });
    }

    /// (L) Latent forks left behind by a join that did not complete inline: a nested
    /// `when_all` whose first child hops (its `schedule()` goes on the deque), so its
    /// second child, held latent when the deque was not empty and nobody was hungry, is
    /// not taken back. The worker's loop must find it on the ring (or it was published),
    /// and every value arrives once.
    #[test]
    fn a_latent_fork_not_taken_back_is_run_from_the_loop() {
        loom::model(|| {
            let pool = StaticThreadPool::builder().num_threads(2).latent_forks(true).build().unwrap();
            let inner = when_all((schedule(&pool.scheduler()).then(|()| 1u32), just(2u32))).then(|(a, b)| a + b);
            let outer = when_all((inner, just(4u32))).then(|(a, b)| a + b);
            assert_eq!(sync_wait(starts_on(pool.scheduler(), outer)).unwrap(), Some(7));
            drop(pool);
        });
    }

    /// (I) `when_all` of a run-time number of children (a `Vec` of three) on a worker:
    /// children 2 and 1 are pushed one job each (a range job is for more than eight),
    /// while the first child runs inline; the count of three children and the starting
    /// worker's hold reaches zero once, and every value arrives in its place, in its
    /// child's slot of the one block of cells and operations.
    #[test]
    fn when_all_of_a_vec_hands_out_a_range_that_is_split_where_it_runs() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let three = when_all((1..=3u32).map(|i| just(i).then(move |x: u32| x * 10).boxed()).collect::<Vec<_>>());
            assert_eq!(sync_wait(starts_on(pool.scheduler(), three)).unwrap(), Some(vec![10, 20, 30]));
            drop(pool);
        });
    }

    /// (N) Children that are ready values start where the `when_all` runs, inside the
    /// window, instead of being pushed: of three, child 0 hops (its `schedule()` goes on
    /// the deque), child 1 is ready and child 2 is pushed, so the ready arrival is noted
    /// in the window while the other two arrive from either worker. Every value arrives
    /// once, in its place.
    #[test]
    fn a_ready_child_starts_in_the_window_beside_a_forked_and_a_hopping_one() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let sch = pool.scheduler();
            let three: Vec<AnySender<'static, u32>> =
                vec![schedule(&sch).then(|()| 1u32).boxed(), just(2u32).boxed(), just(3u32).then(|x: u32| x).boxed()];
            assert_eq!(sync_wait(starts_on(sch.clone(), when_all(three))).unwrap(), Some(vec![1, 2, 3]));
            drop(pool);
        });
    }

    /// (O) A pair whose first child hops and whose second is a ready value: nothing is
    /// pushed, so nothing is taken back, and the hop's arrival (from either worker) and
    /// the ready one (noted in the window) complete it once.
    #[test]
    fn a_pair_whose_second_child_is_ready_and_first_hops() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let sch = pool.scheduler();
            let both = when_all((schedule(&sch).then(|()| 1u32), just(10u32).boxed()));
            assert_eq!(sync_wait(starts_on(sch.clone(), both)).unwrap(), Some((1, 10)));
            drop(pool);
        });
    }

    /// (J) A `bulk` of three indices on a worker: split into pieces that both workers
    /// may run (a stolen piece is split again), every index once, one completion with the
    /// value after the last piece.
    #[test]
    fn a_bulk_split_across_both_workers_runs_every_index_once() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let hits = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)]);
            let h = hits.clone();
            let work = schedule(&pool.scheduler()).then(move |()| h).bulk(3, |i, h: &Arc<[AtomicUsize; 3]>| {
                h[i].fetch_add(1, Ordering::Relaxed);
            });
            let back = sync_wait(work).unwrap().unwrap();
            assert!(back.iter().all(|h| h.load(Ordering::Relaxed) == 1), "every index exactly once");
            drop(pool);
        });
    }

    /// (G) The same with a first child that hops (its `schedule()` goes onto the deque
    /// above the forked child), so it arrives outside the window, from either worker:
    /// the forked child is not taken back, and the count settles with atomics.
    #[test]
    fn when_all_on_a_worker_whose_first_child_hops() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let both = when_all((schedule(&pool.scheduler()).then(|()| 1u32), just(10u32)));
            assert_eq!(sync_wait(starts_on(pool.scheduler(), both)).unwrap(), Some((1, 10)));
            drop(pool);
        });
    }

    /// What the model of fairness (P) shares between its rounds and its outside job.
    #[derive(Default)]
    struct Fairness {
        /// The outside job has been queued (stored after its `spawn` returned).
        queued: loom::sync::atomic::AtomicBool,
        /// The outside job has run.
        ran: loom::sync::atomic::AtomicBool,
        /// The first round that saw `queued`.
        seen_at: AtomicUsize,
        /// Rounds that saw `queued` two or more rounds before and the job not yet run.
        late: AtomicUsize,
    }

    /// Rounds of the busy job of model P.
    const ROUNDS: usize = 4;

    /// Round `r` of model P's busy job: spawned from its worker, so every round is a job
    /// of that worker's own deque. Until the outside job has run, it notes whether it
    /// was queued, counts itself late if it was queued two rounds before (the pool looks
    /// outside first at one look in two under loom), and spawns the next round.
    fn busy_round(sch: PoolScheduler, token: CountingToken, f: Arc<Fairness>, r: usize) {
        let next = sch.clone();
        assert!(spawn(
            schedule(&sch).then(move |()| {
                if f.ran.load(Ordering::Acquire) {
                    return;
                }
                if f.queued.load(Ordering::Acquire) {
                    let seen = f.seen_at.load(Ordering::Relaxed);
                    if seen == 0 {
                        f.seen_at.store(r, Ordering::Relaxed);
                    } else if r >= seen + 2 {
                        f.late.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if r < ROUNDS {
                    busy_round(next, token, f, r + 1);
                }
            }),
            token
        ));
    }

    /// (P) Fairness: a job submitted from outside the pool runs while the only worker's
    /// own deque always holds the next round of a busy job. Once a round has seen the
    /// outside job queued, the job runs before the round two after it (one look in two
    /// takes outside work first under loom, one in 61 otherwise). Without the look
    /// outside first, it runs after the last round.
    #[test]
    fn outside_work_runs_while_the_workers_own_deque_stays_busy() {
        loom::model(|| {
            let pool = StaticThreadPool::new(1).unwrap();
            let scope = Arc::new(CountingScope::new());
            let f = Arc::new(Fairness::default());
            busy_round(pool.scheduler(), scope.token(), f.clone(), 1);
            let outside = {
                let (sch, scope, f) = (pool.scheduler(), scope.clone(), f.clone());
                thread::spawn(move || {
                    let g = f.clone();
                    assert!(spawn(schedule(&sch).then(move |()| g.ran.store(true, Ordering::Release)), scope.token()));
                    f.queued.store(true, Ordering::Release);
                })
            };
            outside.join().unwrap();
            sync_wait(scope.join()).unwrap();
            assert!(f.ran.load(Ordering::Relaxed));
            assert_eq!(f.late.load(Ordering::Relaxed), 0, "the outside job waited past its turn");
            drop(pool);
        });
    }

    /// (H) The join inside spawned work whose scope is stopped from another thread. The
    /// first child (a one-iteration `bulk`, which looks at its stop token) links the
    /// parent's token and completes inline, so its arrival is noted and the second child
    /// is taken back while a stop forwarder may hold a count: the count must then be
    /// settled with a read-modify-write. The spawned work completes exactly once, with
    /// both values or stopped, and the join returns.
    #[test]
    fn when_all_join_racing_a_stop_of_its_scope() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let scope = Arc::new(CountingScope::new());
            let tally = Tally::default();
            let (ran, stopped) = (tally.ran.clone(), tally.stopped.clone());
            let sch = pool.scheduler();
            let work = schedule(&sch)
                .let_value(|()| when_all((just(1u32).bulk(1, |_, _: &u32| {}), just(10u32))))
                .then(move |(a, b)| {
                    assert_eq!((a, b), (1, 10));
                    ran.fetch_add(1, Ordering::Relaxed);
                })
                .upon_stopped(move || {
                    stopped.fetch_add(1, Ordering::Relaxed);
                });
            assert!(spawn(work, scope.token()));
            let other = {
                let scope = scope.clone();
                thread::spawn(move || scope.request_stop())
            };
            sync_wait(scope.join()).unwrap();
            assert_eq!(tally.ran() + tally.stopped(), 1);
            other.join().unwrap();
            drop(pool);
        });
    }

    /// (R) A `sync_wait` nested in a job on a worker waits by working: its `when_all`'s
    /// first child completes inline (its hop onto the pool is the fresh one), the second
    /// is forked, and either the waiting worker takes it back or the other worker steals
    /// it. When it was stolen the waiter finds nothing to run and sleeps through the
    /// pool's sleep protocol while the thief completes the `when_all`, which sets the
    /// wait's flag from the other thread and wakes the waiter: the steal, the
    /// completion and the sleep race. A lost wake-up shows as a loom deadlock.
    #[test]
    fn a_nested_wait_on_a_worker_races_a_steal_and_the_completion() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let sch = pool.scheduler();
            let inner = sch.clone();
            let outer = schedule(&sch).then(move |()| {
                let both = when_all((schedule(&inner).then(|()| 1u32), schedule(&inner).then(|()| 10u32)));
                sync_wait(both).unwrap().unwrap()
            });
            assert_eq!(sync_wait(outer).unwrap(), Some((1, 10)));
            drop(pool);
        });
    }

    /// (S) Work for the nested wait's own scheduler: the waiting worker's sender hops
    /// onto the pool (its own deque, where the other worker may steal it) and back to
    /// the wait's run loop, which the wait makes when the scheduler is asked for. A push
    /// onto that loop from the other worker wakes the waiter through the pool's sleep
    /// protocol; from the waiter itself it needs none. The wait then finishes its loop.
    #[test]
    fn a_nested_wait_on_a_worker_runs_work_pushed_to_its_run_loop() {
        loom::model(|| {
            let pool = StaticThreadPool::new(2).unwrap();
            let sch = pool.scheduler();
            let inner = sch.clone();
            let outer = schedule(&sch).then(move |()| {
                let back = read_env(GetScheduler)
                    .let_value(move |home: RunLoopScheduler| schedule(&inner).then(|()| 5u32).continues_on(home))
                    .then(|v| (v, true));
                sync_wait(back).unwrap().unwrap()
            });
            assert_eq!(sync_wait(outer).unwrap(), Some((5, true)));
            drop(pool);
        });
    }

    /// (T) A job on a worker drops the pool (its last handle) while the job's own
    /// worker may wait for it: a nested `sync_wait` of a `when_all` whose second child
    /// is the dropper, which the other worker may steal. The drop must not join a
    /// worker (the waiter never exits until the dropper returns); it hands the end of
    /// shutdown to the workers, and the last loop to end joins the other thread, drains
    /// and folds the count. Loom reports a deadlock if any thread is left blocked, and
    /// the value arrives exactly once, whoever ran the dropper.
    #[test]
    fn a_drop_from_a_worker_returns_while_the_other_worker_waits_for_it() {
        loom::model(|| {
            let pool = Arc::new(loom::sync::Mutex::new(Some(StaticThreadPool::new(2).unwrap())));
            let sch = pool.lock().unwrap().as_ref().unwrap().scheduler();
            let inner = sch.clone();
            let outer = schedule(&sch).then(move |()| {
                let dropper = schedule(&inner).then(move |()| drop(pool.lock().unwrap().take()));
                sync_wait(when_all((schedule(&inner).then(|()| 7u32), dropper))).unwrap().unwrap().0
            });
            assert_eq!(sync_wait(outer).unwrap(), Some(7));
            // The last worker ends shutdown on its own thread: the model joins it.
            senders::join_handed_over_teardown();
        });
    }
}
