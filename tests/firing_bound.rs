//! The bound on the timer service's firing threads (issue 46), in a binary of its own
//! since it sets the process's bound: 10,000 timers of the inline scheduler, each of
//! whose continuations blocks its firing thread for 1 ms, all fire, and no more firing
//! threads than the bound run at any time.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use senders::time::{DEFAULT_MAX_FIRING_THREADS, ScheduleAt, max_firing_threads, set_max_firing_threads};
use senders::{InlineScheduler, SenderExt, sync_wait, when_all_iter};

/// The live threads of this process named `senders-firing` (Linux: from /proc).
#[cfg(target_os = "linux")]
fn firing_threads() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
        .filter(|name| name.trim_end() == "senders-firing")
        .count()
}

#[test]
fn blocking_inline_continuations_stay_within_the_bound_and_every_timer_fires() {
    assert_eq!(max_firing_threads(), DEFAULT_MAX_FIRING_THREADS);
    const BOUND: usize = 8;
    const TIMERS: usize = 10_000;
    set_max_firing_threads(BOUND);
    let (running, most_running, fired) =
        (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let most_threads = Arc::new(AtomicUsize::new(0));
    let timers = (0..TIMERS).map(|i| {
        let (running, most_running, fired, most_threads) =
            (running.clone(), most_running.clone(), fired.clone(), most_threads.clone());
        // Deadlines late enough that every timer is set before the first is due.
        ScheduleAt::after(InlineScheduler, Duration::from_millis(200)).then(move |()| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most_running.fetch_max(now, Ordering::SeqCst);
            #[cfg(target_os = "linux")]
            if i % 16 == 0 {
                most_threads.fetch_max(firing_threads(), Ordering::SeqCst);
            }
            std::thread::sleep(Duration::from_millis(1));
            running.fetch_sub(1, Ordering::SeqCst);
            fired.fetch_add(1, Ordering::SeqCst);
            i
        })
    });
    let values = sync_wait(when_all_iter(timers.collect::<Vec<_>>())).unwrap().unwrap();
    assert_eq!(values.into_iter().collect::<Vec<_>>(), (0..TIMERS).collect::<Vec<_>>());
    assert_eq!(fired.load(Ordering::SeqCst), TIMERS, "a timer never fired");
    let most = most_running.load(Ordering::SeqCst);
    assert!(most <= BOUND, "{most} continuations ran at once, above the bound of {BOUND}");
    assert!(most > 1, "the continuations never overlapped: the test tested nothing");
    let threads = most_threads.load(Ordering::SeqCst);
    assert!(threads <= BOUND, "{threads} firing threads alive at once, above the bound of {BOUND}");
}

#[test]
#[should_panic(expected = "at least one thread")]
fn a_bound_of_zero_is_refused() {
    set_max_firing_threads(0);
}
