//! The run loop's state word under loom: `run` racing `push` and `finish`. Checked: a
//! node that `push` accepted runs exactly once before `run` returns, `run` returns
//! once finished (no lost wake-up: loom reports a deadlock otherwise), and a refused
//! node never runs.

use super::*;
use crate::sync::thread;
use loom::sync::atomic::AtomicUsize as Count;

#[repr(C)]
struct TestNode {
    node: Node,
    ran: Arc<Count>,
}

unsafe fn execute(node: *mut Node) {
    // SAFETY: the node heads a `TestNode` that outlives the model's threads.
    unsafe { (*node.cast::<TestNode>()).ran.fetch_add(1, Ordering::AcqRel) };
}

fn model(pushes: bool) {
    loom::model(move || {
        let run_loop = RunLoop::new();
        let inner = run_loop.inner.clone();
        let ran = Arc::new(Count::new(0));
        let mut node = Box::new(TestNode { node: Node { next: ptr::null_mut(), execute }, ran: ran.clone() });
        let node_ptr = SendNode(&mut node.node);
        let other = thread::spawn(move || {
            let node_ptr = node_ptr;
            let accepted = pushes && inner.push(node_ptr.0);
            inner.finish();
            accepted
        });
        run_loop.run();
        let accepted = other.join().unwrap();
        assert_eq!(
            ran.load(Ordering::Acquire),
            usize::from(accepted),
            "an accepted node runs once, a refused one never"
        );
        drop(node);
    });
}

/// `sync_wait`'s finish from another thread races the runner, which may return and
/// drop the loop as soon as it sees `FINISHED`, before the finisher's notification
/// (after a spurious wake-up of its wait, which loom's condition variable does not
/// produce: the runner here announces `SLEEPING` as `run` does, then returns on
/// seeing `FINISHED` without waiting). The finisher's own reference keeps the loop
/// alive through its notification; without it, the loop's drop (under loom) finds a
/// finish in progress.
#[test]
fn a_finisher_on_another_thread_outlives_the_runner_s_return() {
    loom::model(|| {
        let run_loop = RunLoop::new();
        run_loop.claim_current_thread();
        let finisher = run_loop.finisher();
        let other = thread::spawn(move || {
            // SAFETY: the loop is not finished, its runner keeps it until it is, and
            // this is its one finish.
            unsafe { finisher.finish() }
        });
        let inner = &run_loop.inner;
        let q = lock(&inner.queue);
        inner.state.fetch_or(SLEEPING, Ordering::AcqRel);
        drop(q);
        while inner.state.load(Ordering::Acquire) & FINISHED == 0 {
            thread::yield_now();
        }
        drop(run_loop);
        other.join().unwrap();
    });
}

#[test]
fn a_finisher_on_the_runner_s_thread_takes_no_reference() {
    loom::model(|| {
        let run_loop = RunLoop::new();
        run_loop.claim_current_thread();
        // SAFETY: as above, on the runner's own thread, before `run`.
        unsafe { run_loop.finisher().finish() };
        assert_eq!(Arc::strong_count(&run_loop.inner), 1);
        run_loop.run();
    });
}

struct SendNode(*mut Node);
// SAFETY: the node outlives the model's threads.
unsafe impl Send for SendNode {}

#[test]
fn finish_races_the_runner_going_to_sleep() {
    model(false);
}

#[test]
fn a_push_then_finish_race_the_runner() {
    model(true);
}

#[test]
fn a_push_races_a_finish_from_another_thread() {
    loom::model(|| {
        let run_loop = RunLoop::new();
        let (a, b) = (run_loop.inner.clone(), run_loop.inner.clone());
        let ran = Arc::new(Count::new(0));
        let mut node = Box::new(TestNode { node: Node { next: ptr::null_mut(), execute }, ran: ran.clone() });
        let node_ptr = SendNode(&mut node.node);
        let pusher = thread::spawn(move || {
            let node_ptr = node_ptr;
            a.push(node_ptr.0)
        });
        let finisher = thread::spawn(move || b.finish());
        run_loop.run();
        let accepted = pusher.join().unwrap();
        finisher.join().unwrap();
        assert_eq!(ran.load(Ordering::Acquire), usize::from(accepted));
        drop(node);
    });
}
