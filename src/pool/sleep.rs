//! Sleep and wake-up of idle workers. The protocol and its argument are in
//! `src/pool/README.md`.

use crate::sync::{AtomicU8, AtomicUsize, Ordering, fence};

#[cfg(not(loom))]
type Flag = parking_lot::Mutex<bool>;
#[cfg(not(loom))]
type Signal = parking_lot::Condvar;
#[cfg(loom)]
type Flag = loom::sync::Mutex<bool>;
#[cfg(loom)]
type Signal = loom::sync::Condvar;

const AWAKE: u8 = 0;
const SLEEPING: u8 = 1;

/// One worker's sleeping place, on its own cache line.
#[repr(align(128))]
struct Slot {
    state: AtomicU8,
    woken: Flag,
    signal: Signal,
}

/// The sleep state of a pool's workers.
pub(crate) struct Sleep {
    /// Workers that have announced they are going to sleep and were not woken yet.
    sleepers: AtomicUsize,
    slots: Box<[Slot]>,
    /// Where the next wake-up starts looking, so wake-ups spread over the workers.
    next: AtomicUsize,
}

impl Sleep {
    pub(crate) fn new(workers: usize) -> Self {
        Sleep {
            sleepers: AtomicUsize::new(0),
            slots: (0..workers)
                .map(|_| Slot { state: AtomicU8::new(AWAKE), woken: Flag::new(false), signal: Signal::new() })
                .collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Puts worker `index` to sleep unless `has_work` (checked after announcing the
    /// sleep) says there is something to do. Returns when woken or when work appeared.
    pub(crate) fn sleep(&self, index: usize, has_work: impl Fn() -> bool) {
        let slot = &self.slots[index];
        slot.state.store(SLEEPING, Ordering::SeqCst);
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        // Pairs with the fence in `wake_one`: either the pusher sees us in `sleepers`, or
        // we see its job in `has_work`.
        fence(Ordering::SeqCst);
        if has_work() {
            // Take ourselves back, unless a waker already claimed us; then its signal is
            // on the way and must be consumed.
            if slot.state.compare_exchange(SLEEPING, AWAKE, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return;
            }
        }
        let mut woken = lock(&slot.woken);
        while !*woken {
            woken = wait(&slot.signal, woken);
        }
        *woken = false;
    }

    /// Wakes one sleeping worker, if any is sleeping. Called after work was pushed.
    pub(crate) fn wake_one(&self) {
        // Pairs with the fence in `sleep`.
        fence(Ordering::SeqCst);
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            return;
        }
        let n = self.slots.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed) % n;
        for i in (start..n).chain(0..start) {
            if self.claim(i) {
                return;
            }
        }
    }

    /// Wakes every sleeping worker (shutdown).
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        for i in 0..self.slots.len() {
            self.claim(i);
        }
    }

    /// Wakes worker `i` if it is sleeping; true if this call did.
    fn claim(&self, i: usize) -> bool {
        let slot = &self.slots[i];
        if slot.state.compare_exchange(SLEEPING, AWAKE, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return false;
        }
        self.sleepers.fetch_sub(1, Ordering::SeqCst);
        *lock(&slot.woken) = true;
        slot.signal.notify_one();
        true
    }
}

#[cfg(not(loom))]
fn lock(flag: &Flag) -> parking_lot::MutexGuard<'_, bool> {
    flag.lock()
}
#[cfg(not(loom))]
fn wait<'a>(signal: &Signal, mut guard: parking_lot::MutexGuard<'a, bool>) -> parking_lot::MutexGuard<'a, bool> {
    signal.wait(&mut guard);
    guard
}
#[cfg(loom)]
fn lock(flag: &Flag) -> loom::sync::MutexGuard<'_, bool> {
    flag.lock().unwrap()
}
#[cfg(loom)]
fn wait<'a>(signal: &Signal, guard: loom::sync::MutexGuard<'a, bool>) -> loom::sync::MutexGuard<'a, bool> {
    signal.wait(guard).unwrap()
}

#[cfg(all(test, loom))]
mod loom_tests {
    //! The sleep/wake protocol under loom: a pushed job is never left with every worker
    //! asleep.
    use super::*;
    use loom::sync::Arc;
    use loom::sync::atomic::AtomicBool;

    #[test]
    fn a_push_racing_a_worker_going_to_sleep_is_never_lost() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(1));
            let job = Arc::new(AtomicBool::new(false));
            let (s, j) = (sleep.clone(), job.clone());
            let worker = loom::thread::spawn(move || {
                // The worker's loop: look for work, otherwise sleep, until it ran the job.
                loop {
                    if j.swap(false, Ordering::SeqCst) {
                        return;
                    }
                    s.sleep(0, || j.load(Ordering::SeqCst));
                }
            });
            job.store(true, Ordering::SeqCst);
            sleep.wake_one();
            worker.join().unwrap();
        });
    }

    #[test]
    fn two_workers_two_pushes_both_jobs_run() {
        loom::model(|| {
            let sleep = Arc::new(Sleep::new(2));
            let jobs = Arc::new(AtomicUsize::new(0));
            let done = Arc::new(AtomicUsize::new(0));
            let mut handles = Vec::new();
            for index in 0..2 {
                let (s, j, d) = (sleep.clone(), jobs.clone(), done.clone());
                handles.push(loom::thread::spawn(move || {
                    loop {
                        let n = j.load(Ordering::SeqCst);
                        if n > 0 && j.compare_exchange(n, n - 1, Ordering::SeqCst, Ordering::SeqCst).is_ok() {
                            d.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        s.sleep(index, || j.load(Ordering::SeqCst) > 0);
                    }
                }));
            }
            for _ in 0..2 {
                jobs.fetch_add(1, Ordering::SeqCst);
                sleep.wake_one();
            }
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(done.load(Ordering::SeqCst), 2);
        });
    }
}
