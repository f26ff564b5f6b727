//! Smoke test for the pool while it is being built.
use senders::*;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

fn spin(us: u64) {
    let t = Instant::now();
    while t.elapsed() < Duration::from_micros(us) {}
}

struct Seen(Mutex<HashSet<String>>);
impl Seen {
    fn note(&self) {
        let name = std::thread::current().name().unwrap_or("?").to_owned();
        self.0.lock().unwrap().insert(name);
    }
}

#[test]
fn schedules_run_on_workers_and_shutdown_is_clean() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("w{i}")).build().unwrap();
    let sch = pool.scheduler();
    for _ in 0..10_000 {
        let name = sync_wait(sch.schedule().then(|()| std::thread::current().name().map(str::to_owned)));
        assert!(name.unwrap().unwrap().unwrap().starts_with('w'));
    }
    drop(pool);
    assert_eq!(sync_wait(sch.schedule()), Ok(None));
    assert!(matches!(StaticThreadPool::new(0), Err(BuildError::ZeroThreads)));
}

#[test]
fn bulk_early_and_late_run_on_several_workers() {
    let pool = StaticThreadPool::builder().num_threads(2).thread_name(|i| format!("w{i}")).build().unwrap();
    let early = pool.scheduler().schedule().then(|()| Seen(Mutex::new(HashSet::new()))).bulk(20_000, |i, s: &Seen| {
        spin(2);
        if i % 512 == 0 {
            s.note();
        }
    });
    let seen = sync_wait(early).unwrap().unwrap();
    assert_eq!(seen.0.into_inner().unwrap().len(), 2, "early bulk on both workers");

    let late = starts_on(
        pool.scheduler(),
        just(Seen(Mutex::new(HashSet::new()))).bulk(20_000, |i, s: &Seen| {
            spin(2);
            if i % 512 == 0 {
                s.note();
            }
        }),
    );
    let seen = sync_wait(late).unwrap().unwrap();
    assert_eq!(seen.0.into_inner().unwrap().len(), 2, "late bulk on both workers");
}

#[test]
fn when_all_children_overlap_on_the_pool() {
    let pool = StaticThreadPool::new(2).unwrap();
    let t = Instant::now();
    let r = sync_wait(starts_on(
        pool.scheduler(),
        when_all((
            just(()).then(|()| std::thread::sleep(Duration::from_millis(200))),
            just(()).then(|()| std::thread::sleep(Duration::from_millis(200))),
        )),
    ));
    assert!(r.unwrap().is_some());
    assert!(t.elapsed() < Duration::from_millis(380), "{:?}", t.elapsed());
}
