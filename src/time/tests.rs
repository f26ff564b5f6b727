//! Tests of the timer service (`timers.rs`, `firing.rs`), from the inside.
//!
//! - `unit` (not under loom): the heaps' order through cancellations, every state
//!   transition of a node, the earliest deadline across shards, heaps giving memory
//!   back as timers leave, and the firing threads (a blocked job holds up no other, an
//!   idle thread is reused).
//! - `models` (under `--cfg loom`, run by `tools/loom.sh`): firing racing a cancel,
//!   insertion racing a cancel, the timer thread's sleep racing an insertion (no
//!   lost wake-up), and the firing threads' hand-off: a job never waits behind a blocked
//!   one, and a job submitted while its thread is ending is run.

use super::firing::Firing;
use super::timers::{Cancel, Inserted, TimerNode, Timers};
use crate::job::JobRef;
use crate::sync::{self, Arc, AtomicUsize, Condvar, Mutex, Ordering, thread};

/// A node's `fire`: counts the firing in the counter `op` points to.
///
/// # Safety
///
/// `op` points to a live `AtomicUsize`.
unsafe fn count(op: *const ()) {
    // SAFETY: the caller's contract.
    unsafe { &*op.cast::<AtomicUsize>() }.fetch_add(1, Ordering::SeqCst);
}

/// What the firing threads' jobs share: whether the gate is open, and the threads the
/// finished jobs ran on.
struct Gate {
    state: Mutex<(bool, Vec<thread::ThreadId>)>,
    cv: Condvar,
}

impl Gate {
    fn new() -> Arc<Self> {
        Arc::new(Gate { state: Mutex::new((false, Vec::new())), cv: Condvar::new() })
    }

    /// Waits until `n` jobs have finished, and returns the threads they ran on.
    fn wait_done(&self, n: usize) -> Vec<thread::ThreadId> {
        let mut state = sync::lock(&self.state);
        while state.1.len() < n {
            state = self.cv.wait(state).unwrap();
        }
        state.1.clone()
    }
}

/// A firing job: waits for the gate to open (if it `blocks`), or opens it; then counts
/// itself finished.
struct GateJob {
    gate: Arc<Gate>,
    blocks: bool,
}

impl GateJob {
    /// The job, boxed: the job owns its box and frees it.
    fn job(gate: &Arc<Gate>, blocks: bool) -> JobRef {
        let job = Box::into_raw(Box::new(GateJob { gate: gate.clone(), blocks }));
        // SAFETY: the box is leaked until `run` takes it back, once; what it holds may
        // go to any thread.
        unsafe { JobRef::new(job.cast_const(), Self::run) }
    }

    /// # Safety
    ///
    /// `job` is a box from [`GateJob::job`]; called once.
    unsafe fn run(job: *const (), (): ()) {
        // SAFETY: the caller's contract.
        let job = unsafe { Box::from_raw(job.cast_mut().cast::<GateJob>()) };
        let mut state = sync::lock(&job.gate.state);
        if job.blocks {
            while !state.0 {
                state = job.gate.cv.wait(state).unwrap();
            }
        } else {
            state.0 = true;
        }
        state.1.push(thread::current().id());
        job.gate.cv.notify_all();
    }
}

#[cfg(not(loom))]
mod unit {
    use std::collections::HashMap;

    use super::*;

    /// An hour, in nanoseconds: a deadline this far from the service's epoch is pending
    /// when a test inserts it.
    const HOUR: u64 = 3_600 * 1_000_000_000;

    /// Nodes at fixed addresses (a boxed slice, allocated before any is inserted and
    /// never moved), each with its own firing counter.
    struct Nodes {
        nodes: Box<[TimerNode]>,
        fired: Box<[AtomicUsize]>,
    }

    impl Nodes {
        /// One node per `(deadline, shard)`, set to count its firings.
        fn new(spec: &[(u64, usize)]) -> Self {
            let fired: Box<[AtomicUsize]> = spec.iter().map(|_| AtomicUsize::new(0)).collect();
            let nodes = spec
                .iter()
                .zip(fired.iter())
                .map(|(&(at, shard), counter)| {
                    let mut node = TimerNode::new();
                    // SAFETY: the counter lives in `fired`, a boxed slice dropped with
                    // the nodes, and `count` may run on any thread; the node is not
                    // shared yet.
                    unsafe { node.set(at, shard, std::ptr::from_ref(counter).cast(), count) };
                    node
                })
                .collect();
            Nodes { nodes, fired }
        }

        fn ptr(&self, i: usize) -> *const TimerNode {
            &self.nodes[i]
        }

        /// Each node's address, to its index.
        fn index(&self) -> HashMap<*const TimerNode, usize> {
            (0..self.nodes.len()).map(|i| (self.ptr(i), i)).collect()
        }

        fn fired(&self, i: usize) -> usize {
            self.fired[i].load(Ordering::SeqCst)
        }

        /// Inserts node `i`.
        fn insert(&self, timers: &Timers, i: usize) -> Inserted {
            // SAFETY: the node stays in place in the boxed slice and outlives the service's
            // use of it (each test empties the service before dropping the nodes); each
            // test inserts a node once.
            unsafe { timers.insert(self.ptr(i)) }
        }

        /// Cancels node `i`.
        fn cancel(&self, timers: &Timers, i: usize) -> Cancel {
            // SAFETY: the node is alive and was set up by `new`.
            unsafe { timers.cancel(self.ptr(i)) }
        }
    }

    /// A small deterministic generator (xorshift64).
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// With 1000 pending nodes in one shard (deadlines drawn with many ties) and every
    /// third one cancelled from wherever it sits in the heap, `take_due` pops exactly the
    /// nodes left, each once, in nondecreasing deadline order, stopping at `now` and
    /// returning the earliest deadline left; `fire` runs every popped node once and no
    /// cancelled one, and the service is empty afterwards.
    #[test]
    fn the_heap_pops_in_deadline_order_after_cancellations_from_anywhere() {
        const N: usize = 1000;
        let mut rng = 0x9E37_79B9_7F4A_7C15;
        // 400 distinct deadlines for 1000 nodes: ties are certain.
        let deadlines: Vec<u64> = (0..N).map(|_| HOUR + next(&mut rng) % 400 * 1_000).collect();
        let spec: Vec<(u64, usize)> = deadlines.iter().map(|&at| (at, 0)).collect();
        let nodes = Nodes::new(&spec);
        let timers = Timers::new(1);
        for i in 0..N {
            assert_eq!(nodes.insert(&timers, i), Inserted::Pending);
        }
        assert_eq!(timers.pending(), N);
        let cancelled = |i: usize| i.is_multiple_of(3);
        for i in (0..N).filter(|&i| cancelled(i)) {
            assert_eq!(nodes.cancel(&timers, i), Cancel::Removed);
        }
        let left = (0..N).filter(|&i| !cancelled(i)).count();
        assert_eq!(timers.pending(), left);

        // Half the deadlines are due at `now`; the earliest of the rest comes back.
        let now = HOUR + 200 * 1_000;
        let mut due = Vec::new();
        let next_at = timers.take_due(now, &mut due);
        let want_next = (0..N).filter(|&i| !cancelled(i) && deadlines[i] > now).map(|i| deadlines[i]).min();
        assert_eq!(next_at, want_next);
        let first_batch = due.len();
        assert_eq!(first_batch, (0..N).filter(|&i| !cancelled(i) && deadlines[i] <= now).count());
        assert_eq!(timers.take_due(u64::MAX, &mut due), None, "nothing is left after popping everything");
        assert_eq!(timers.pending(), 0);

        let index = nodes.index();
        let popped: Vec<usize> = due.iter().map(|p| index[p]).collect();
        assert_eq!(popped.len(), left);
        let mut seen = vec![false; N];
        for &i in &popped {
            assert!(!cancelled(i), "node {i} was cancelled but popped");
            assert!(!seen[i], "node {i} popped twice");
            seen[i] = true;
        }
        for w in popped.windows(2) {
            assert!(
                deadlines[w[0]] <= deadlines[w[1]],
                "popped out of order: {} then {}",
                deadlines[w[0]],
                deadlines[w[1]]
            );
        }
        assert!(popped[..first_batch].iter().all(|&i| deadlines[i] <= now));

        // SAFETY: every node was popped by `take_due` and not run yet; their counters
        // are alive.
        unsafe { Timers::fire(&mut due) };
        assert!(due.is_empty(), "fire drains what it runs");
        for i in 0..N {
            assert_eq!(nodes.fired(i), usize::from(!cancelled(i)), "node {i}");
        }
    }

    /// A node cancelled before it is inserted reports `BeforeInsert` (and `TooLate` on a
    /// second cancel); its insertion is then refused as `Cancelled`, enters no heap and
    /// never fires.
    #[test]
    fn a_cancel_before_insertion_refuses_the_insertion() {
        let nodes = Nodes::new(&[(HOUR, 0)]);
        let timers = Timers::new(1);
        assert_eq!(nodes.cancel(&timers, 0), Cancel::BeforeInsert);
        assert_eq!(nodes.cancel(&timers, 0), Cancel::TooLate);
        assert_eq!(nodes.insert(&timers, 0), Inserted::Cancelled);
        assert_eq!(timers.pending(), 0);
        let mut due = Vec::new();
        assert_eq!(timers.take_due(u64::MAX, &mut due), None);
        assert!(due.is_empty());
        assert_eq!(nodes.fired(0), 0);
    }

    /// Cancelling a pending node removes it (`Removed`) once: a second cancel is
    /// `TooLate`, and the node is never popped or fired.
    #[test]
    fn cancelling_a_pending_node_removes_it_once() {
        let nodes = Nodes::new(&[(HOUR, 0), (2 * HOUR, 0)]);
        let timers = Timers::new(1);
        assert_eq!(nodes.insert(&timers, 0), Inserted::Pending);
        assert_eq!(nodes.insert(&timers, 1), Inserted::Pending);
        assert_eq!(timers.pending(), 2);
        assert_eq!(nodes.cancel(&timers, 0), Cancel::Removed);
        assert_eq!(timers.pending(), 1);
        assert_eq!(nodes.cancel(&timers, 0), Cancel::TooLate);
        assert_eq!(timers.pending(), 1);
        let mut due = Vec::new();
        assert_eq!(timers.take_due(u64::MAX, &mut due), None);
        assert_eq!(due, [nodes.ptr(1)], "only the other node is popped");
        // SAFETY: popped just now, not run yet.
        unsafe { Timers::fire(&mut due) };
        assert_eq!((nodes.fired(0), nodes.fired(1)), (0, 1));
    }

    /// A node that `take_due` popped (`Fired`) can no longer be cancelled: `TooLate`,
    /// before and after it runs, and it runs once.
    #[test]
    fn a_fired_node_cannot_be_cancelled() {
        let nodes = Nodes::new(&[(HOUR, 0)]);
        let timers = Timers::new(1);
        assert_eq!(nodes.insert(&timers, 0), Inserted::Pending);
        let mut due = Vec::new();
        assert_eq!(timers.take_due(HOUR, &mut due), None);
        assert_eq!(due, [nodes.ptr(0)]);
        assert_eq!(nodes.cancel(&timers, 0), Cancel::TooLate);
        // SAFETY: popped just now, not run yet.
        unsafe { Timers::fire(&mut due) };
        assert_eq!(nodes.cancel(&timers, 0), Cancel::TooLate);
        assert_eq!(nodes.fired(0), 1);
    }

    /// A deadline that has passed is `Due` at insertion: the node enters no heap, is not
    /// run by `insert` (its caller runs it on), and a later cancel is `TooLate`.
    #[test]
    fn a_passed_deadline_is_due_at_insertion() {
        let nodes = Nodes::new(&[(0, 0)]);
        let timers = Timers::new(1);
        assert_eq!(nodes.insert(&timers, 0), Inserted::Due);
        assert_eq!(timers.pending(), 0);
        assert_eq!(nodes.fired(0), 0, "insert does not run the node");
        assert_eq!(nodes.cancel(&timers, 0), Cancel::TooLate);
        // The service's own clock: a deadline at the epoch has passed too.
        let at_epoch = Nodes::new(&[(timers.nanos(std::time::Instant::now()) / 2, 0)]);
        assert_eq!(at_epoch.insert(&timers, 0), Inserted::Due);
    }

    /// `take_due` pops due nodes from every shard and returns the earliest deadline left
    /// over all shards (whichever shard holds it, empty shards included), or `None`
    /// when nothing is pending; cancelling the earliest node moves that answer on.
    #[test]
    fn take_due_returns_the_earliest_deadline_across_shards() {
        let spec = [(5 * HOUR, 0), (3 * HOUR, 0), (4 * HOUR, 1), (2 * HOUR + 7, 2), (6 * HOUR, 2)];
        let nodes = Nodes::new(&spec);
        let timers = Timers::new(4);
        for i in 0..spec.len() {
            assert_eq!(nodes.insert(&timers, i), Inserted::Pending);
        }
        let mut due = Vec::new();
        assert_eq!(timers.take_due(HOUR, &mut due), Some(2 * HOUR + 7), "the earliest is in shard 2");
        assert!(due.is_empty());
        assert_eq!(timers.take_due(2 * HOUR + 7, &mut due), Some(3 * HOUR), "then shard 0's");
        assert_eq!(due, [nodes.ptr(3)]);
        // SAFETY: popped just now, not run yet.
        unsafe { Timers::fire(&mut due) };
        assert_eq!(nodes.fired(3), 1);
        assert_eq!(nodes.cancel(&timers, 1), Cancel::Removed);
        assert_eq!(timers.take_due(3 * HOUR, &mut due), Some(4 * HOUR), "then shard 1's, the 3-hour one cancelled");
        assert!(due.is_empty());
        assert_eq!(timers.take_due(5 * HOUR, &mut due), Some(6 * HOUR));
        assert_eq!(due, [nodes.ptr(0), nodes.ptr(2)], "shards are scanned in order: 0, then 1");
        assert_eq!(timers.take_due(u64::MAX, &mut due), None);
        assert_eq!(due.len(), 3);
        assert_eq!(timers.pending(), 0);
        // SAFETY: popped above, not run yet.
        unsafe { Timers::fire(&mut due) };
        let fired: Vec<usize> = (0..spec.len()).map(|i| nodes.fired(i)).collect();
        assert_eq!(fired, [1, 0, 1, 1, 1]);
    }

    /// A heap that held 10 000 timers gives its memory back as they leave, by cancels
    /// from all over the heap or by pops from its top: its capacity falls back to at
    /// most 128 entries; the other shard's heap never allocates.
    #[test]
    fn heaps_shrink_back_as_timers_leave() {
        const N: usize = 10_000;
        let mut rng = 0x2545_F491_4F6C_DD1D;
        let spec: Vec<(u64, usize)> = (0..N).map(|_| (HOUR + next(&mut rng) % HOUR, 0)).collect();
        let timers = Timers::new(2);

        // Cancelled in a scattered order (7919 is prime, so the stride visits each once).
        let cancelled = Nodes::new(&spec);
        for i in 0..N {
            assert_eq!(cancelled.insert(&timers, i), Inserted::Pending);
        }
        assert!(timers.capacity(0) >= N);
        for k in 0..N {
            assert_eq!(cancelled.cancel(&timers, k * 7919 % N), Cancel::Removed);
        }
        assert_eq!(timers.pending(), 0);
        assert!(timers.capacity(0) <= 128, "capacity {} after cancelling every timer", timers.capacity(0));

        // Popped, all at once.
        let popped = Nodes::new(&spec);
        for i in 0..N {
            assert_eq!(popped.insert(&timers, i), Inserted::Pending);
        }
        assert!(timers.capacity(0) >= N);
        let mut due = Vec::new();
        assert_eq!(timers.take_due(u64::MAX, &mut due), None);
        assert_eq!(due.len(), N);
        assert!(timers.capacity(0) <= 128, "capacity {} after popping every timer", timers.capacity(0));
        assert_eq!(timers.capacity(1), 0);
    }

    /// A job that blocks until a later job runs holds up nothing: the later job gets a
    /// thread of its own and opens the gate. Once both are done the two threads wait
    /// for work, and the next job runs on one of them.
    #[test]
    fn a_blocked_firing_job_holds_up_no_other_and_idle_threads_are_reused() {
        let firing = Arc::new(Firing::new());
        let gate = Gate::new();
        Firing::submit(&firing, GateJob::job(&gate, true));
        Firing::submit(&firing, GateJob::job(&gate, false));
        let two = gate.wait_done(2);
        assert_ne!(two[0], two[1], "the jobs ran on two threads");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while firing.idle() < 2 {
            assert!(std::time::Instant::now() < deadline, "the firing threads never went idle");
            std::thread::yield_now();
        }
        Firing::submit(&firing, GateJob::job(&gate, false));
        let three = gate.wait_done(3);
        assert!(two.contains(&three[2]), "a waiting firing thread took the third job");
    }
}

#[cfg(loom)]
mod models {
    use super::*;
    use crate::sync::{Arc, thread};

    /// A deadline no test reaches: the node is pending when inserted.
    const FAR: u64 = u64::MAX / 2;

    /// A service with `shards` shards and one node set at `at` in shard 0, counting its
    /// firings in the returned counter. The node is boxed in an `Arc` before it is
    /// inserted, so it stays in place; the counter outlives every firing (each model
    /// joins its threads before dropping it).
    fn service(shards: usize, at: u64) -> (Arc<Timers>, Arc<TimerNode>, Arc<AtomicUsize>) {
        let fired = Arc::new(AtomicUsize::new(0));
        let mut node = TimerNode::new();
        // SAFETY: the counter is kept alive by the model until every thread is joined,
        // and `count` may run on any thread; the node is not shared yet.
        unsafe { node.set(at, 0, std::ptr::from_ref(&*fired).cast(), count) };
        (Arc::new(Timers::new(shards)), Arc::new(node), fired)
    }

    /// A pending node popped and fired by one thread while another cancels it: exactly one
    /// side wins: it fires once and the cancel is `TooLate`, or the cancel is `Removed`
    /// and it never fires; the service ends empty.
    #[test]
    fn firing_and_cancelling_a_pending_node_never_both_win() {
        loom::model(|| {
            let (timers, node, fired) = service(1, FAR);
            // SAFETY: the node stays alive (an `Arc` held here) until the end.
            assert_eq!(unsafe { timers.insert(&*node) }, Inserted::Pending);
            let t = timers.clone();
            let firing = thread::spawn(move || {
                let mut due = Vec::new();
                assert_eq!(t.take_due(u64::MAX, &mut due), None);
                // SAFETY: popped just now (if at all), not run yet; the counter is alive.
                unsafe { Timers::fire(&mut due) };
            });
            // SAFETY: alive, set up by `service`.
            let cancel = unsafe { timers.cancel(&*node) };
            firing.join().unwrap();
            let fired = fired.load(Ordering::SeqCst);
            match cancel {
                Cancel::Removed => assert_eq!(fired, 0, "removed, yet fired"),
                Cancel::TooLate => assert_eq!(fired, 1, "neither fired nor removed"),
                Cancel::BeforeInsert => panic!("the node was inserted"),
            }
            assert_eq!(timers.pending(), 0);
        });
    }

    /// An insertion racing a cancel of the same idle node: either the insertion comes
    /// first (`Pending`, then the cancel removes it: `Removed`) or the cancel does
    /// (`BeforeInsert`, then the insertion is refused: `Cancelled`); the node is never
    /// left in a heap and never fires.
    #[test]
    fn inserting_and_cancelling_an_idle_node_agree_on_the_order() {
        loom::model(|| {
            let (timers, node, fired) = service(1, FAR);
            let (t, n) = (timers.clone(), node.clone());
            // SAFETY: the node stays alive (an `Arc` held by the thread and by the
            // model), and is inserted once.
            let inserting = thread::spawn(move || unsafe { t.insert(&*n) });
            // SAFETY: alive, set up by `service`.
            let cancel = unsafe { timers.cancel(&*node) };
            let inserted = inserting.join().unwrap();
            match (inserted, cancel) {
                (Inserted::Pending, Cancel::Removed) | (Inserted::Cancelled, Cancel::BeforeInsert) => {}
                other => panic!("inconsistent outcome {other:?}"),
            }
            assert_eq!(timers.pending(), 0);
            assert_eq!(fired.load(Ordering::SeqCst), 0);
        });
    }

    /// The sleep protocol loses no insertion: the timer thread runs one round with nothing
    /// pending (so, unless it sees a timer or a notification, it waits without a timeout,
    /// and loom would report the model deadlocked) while another thread inserts a timer;
    /// whether the round's scan sees the node or not, the round returns. The node lands
    /// in the first of two shards, so it can also arrive behind the scan. It does not
    /// fire (its deadline is far), and is cancelled at the end.
    #[test]
    fn an_insertion_racing_the_timer_threads_sleep_always_wakes_it() {
        loom::model(|| {
            let (timers, node, fired) = service(2, FAR);
            let t = timers.clone();
            let timer = thread::spawn(move || {
                let mut due = Vec::new();
                t.round(&mut due, None);
                assert!(due.is_empty());
            });
            // SAFETY: the node stays alive (an `Arc` held here) and is cancelled below,
            // before it is dropped; it is inserted once.
            assert_eq!(unsafe { timers.insert(&*node) }, Inserted::Pending);
            timer.join().unwrap();
            // SAFETY: alive, set up by `service`.
            assert_eq!(unsafe { timers.cancel(&*node) }, Cancel::Removed);
            assert_eq!(fired.load(Ordering::SeqCst), 0);
        });
    }

    /// A job that blocks until the next job runs, then that job, both submitted from one
    /// thread (as the timer thread does): the second never waits behind the first (loom
    /// would report the model deadlocked), and each runs once. Loom takes every firing
    /// thread's keep-alive timeout at once, so threads end as soon as they are idle.
    #[test]
    fn a_firing_job_never_waits_behind_a_blocked_one() {
        loom::model(|| {
            let firing = Arc::new(Firing::new());
            let gate = Gate::new();
            Firing::submit(&firing, GateJob::job(&gate, true));
            Firing::submit(&firing, GateJob::job(&gate, false));
            let ran_on = gate.wait_done(2);
            assert_ne!(ran_on[0], ran_on[1], "the jobs ran on two threads");
        });
    }

    /// A job submitted after the first has finished races its thread going idle and
    /// ending (at once, under loom): the submission either hands it to that thread
    /// (which then waits for it rather than ending) or starts another; either way it
    /// runs.
    #[test]
    fn a_job_submitted_while_its_thread_ends_is_run() {
        loom::model(|| {
            let firing = Arc::new(Firing::new());
            let gate = Gate::new();
            Firing::submit(&firing, GateJob::job(&gate, false));
            gate.wait_done(1);
            Firing::submit(&firing, GateJob::job(&gate, false));
            gate.wait_done(2);
        });
    }
}
