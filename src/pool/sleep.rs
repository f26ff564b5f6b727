//! Sleep and wake-up of idle workers. The protocol and its argument are in
//! `src/pool/README.md`.

use crate::sync::{AtomicUsize, Ordering, fence, heavy_fence, light_fence};

#[cfg(not(loom))]
type Flag = parking_lot::Mutex<bool>;
#[cfg(not(loom))]
type Signal = parking_lot::Condvar;
#[cfg(loom)]
type Flag = loom::sync::Mutex<bool>;
#[cfg(loom)]
type Signal = loom::sync::Condvar;

const BITS: usize = usize::BITS as usize;

/// One worker's sleeping place, on its own cache line.
#[repr(align(128))]
struct Sleeper {
    woken: Flag,
    signal: Signal,
}

/// The sleep state of a pool's workers.
///
/// A worker is asleep exactly when its bit is set in `sleeping`. Setting the bit
/// (going to sleep), clearing it (waking up, by the worker itself or by a waker that
/// claims it) and reading the words (deciding whether anyone sleeps) are all RMWs of the
/// same words, so they are totally ordered; the argument is in `README.md`.
pub(crate) struct Sleep {
    sleeping: Box<[AtomicUsize]>,
    sleepers: Box<[Sleeper]>,
    /// Where the next wake-up starts looking, so wake-ups spread over the workers.
    next: AtomicUsize,
}

impl Sleep {
    pub(crate) fn new(workers: usize) -> Self {
        crate::sync::prepare_fences();
        Sleep {
            sleeping: (0..workers.div_ceil(BITS)).map(|_| AtomicUsize::new(0)).collect(),
            sleepers: (0..workers).map(|_| Sleeper { woken: Flag::new(false), signal: Signal::new() }).collect(),
            next: AtomicUsize::new(0),
        }
    }

    /// Puts worker `index` to sleep unless `has_work` (checked after announcing the
    /// sleep) says there is something to do. Returns when woken or when work appeared.
    pub(crate) fn sleep(&self, index: usize, has_work: impl Fn() -> bool) {
        let (word, bit) = (&self.sleeping[index / BITS], 1usize << (index % BITS));
        // Announce, then fence. With the pusher's fence between its push and its load of
        // this word, either the pusher sees the bit, or `has_work` below sees the push.
        word.fetch_or(bit, Ordering::AcqRel);
        // The slow side of the asymmetric pair: going to sleep is rare, pushing is not.
        heavy_fence();
        if has_work() {
            // Take the bit back, unless a waker already claimed us: then its signal is
            // on the way and must be consumed.
            if word.fetch_and(!bit, Ordering::AcqRel) & bit != 0 {
                return;
            }
        }
        let sleeper = &self.sleepers[index];
        let mut woken = lock(&sleeper.woken);
        while !*woken {
            woken = wait(&sleeper.signal, woken);
        }
        *woken = false;
    }

    /// Wakes one sleeping worker, if any sleeps. Called after work was pushed.
    #[inline]
    pub(crate) fn wake_one(&self) {
        // The push path: the light side of the fence pair (a compiler fence on Linux) and
        // plain loads of words that stay shared in every core's cache while nobody
        // sleeps. See `sleep` and README.md for the argument.
        light_fence();
        if self.sleeping.iter().all(|w| w.load(Ordering::Relaxed) == 0) {
            return;
        }
        self.wake_a_sleeper();
    }

    /// The rest of `wake_one`, out of the push path: some bit was set.
    #[cold]
    fn wake_a_sleeper(&self) {
        let words = self.sleeping.len();
        let start = if words == 1 { 0 } else { self.next.fetch_add(1, Ordering::Relaxed) % words };
        for w in (start..words).chain(0..start) {
            let mut bits = self.sleeping[w].load(Ordering::Acquire);
            while bits != 0 {
                let bit = 1usize << bits.trailing_zeros();
                if self.claim(w, bit) {
                    return;
                }
                bits &= !bit;
            }
        }
    }

    /// Wakes worker `index` if it sleeps: after something it waits for in particular
    /// was published (a worker waiting by working, README.md, *Waiting on a worker*). The
    /// same fence pair as `wake_one`'s, so either this sees its bit or its re-check sees
    /// what was published before this call.
    pub(crate) fn wake_worker(&self, index: usize) {
        light_fence();
        let (w, bit) = (index / BITS, 1usize << (index % BITS));
        if self.sleeping[w].load(Ordering::Relaxed) & bit != 0 {
            self.claim(w, bit);
        }
    }

    /// Wakes every sleeping worker (shutdown).
    pub(crate) fn wake_all(&self) {
        fence(Ordering::SeqCst);
        for w in 0..self.sleeping.len() {
            let mut bits = self.sleeping[w].load(Ordering::Acquire);
            while bits != 0 {
                let bit = 1usize << bits.trailing_zeros();
                self.claim(w, bit);
                bits &= !bit;
            }
        }
    }

    /// Wakes the worker with `bit` in word `w` if it still sleeps; true if this call did.
    fn claim(&self, w: usize, bit: usize) -> bool {
        if self.sleeping[w].fetch_and(!bit, Ordering::AcqRel) & bit == 0 {
            return false;
        }
        let sleeper = &self.sleepers[w * BITS + bit.trailing_zeros() as usize];
        *lock(&sleeper.woken) = true;
        sleeper.signal.notify_one();
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
                    if j.swap(false, Ordering::Acquire) {
                        return;
                    }
                    s.sleep(0, || j.fetch_or(false, Ordering::Relaxed));
                }
            });
            // An RMW, not a plain store: loom 0.7 can let a later RMW in another thread
            // read past a plain store even when the store happens-before it.
            job.swap(true, Ordering::Release);
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
                        // RMWs only, for the loom limitation described in the test above.
                        if j.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok() {
                            d.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        s.sleep(index, || j.fetch_add(0, Ordering::Relaxed) > 0);
                    }
                }));
            }
            for _ in 0..2 {
                jobs.fetch_add(1, Ordering::Release);
                sleep.wake_one();
            }
            for h in handles {
                h.join().unwrap();
            }
            assert_eq!(done.load(Ordering::Relaxed), 2);
        });
    }
}
