//! `bulk_each`: every element visited once with exclusive access, in order by default,
//! in parallel on the pool (early and late customization), with the usual error,
//! panic and stop paths.

mod common;

use common::{panic_message, with_stop};
use senders::*;
use std::sync::atomic::{AtomicUsize, Ordering};

#[test]
fn bulk_each_mutates_every_element_in_parallel_early_and_late() {
    let pool = common::pool(2);
    let v: Vec<f64> = (0..100_000).map(|i| i as f64).collect();
    let out = sync_wait(pool.scheduler().schedule().then(move |()| v).bulk_each(|i, x: &mut f64| {
        assert_eq!(*x, i as f64);
        *x += 1.0;
    }))
    .unwrap()
    .unwrap();
    assert!(out.iter().enumerate().all(|(i, x)| *x == i as f64 + 1.0));
    let out = sync_wait(starts_on(pool.scheduler(), just(out).bulk_each(|_, x: &mut f64| *x *= 2.0))).unwrap().unwrap();
    assert!(out.iter().enumerate().all(|(i, x)| *x == (i as f64 + 1.0) * 2.0));
    let seq = sync_wait(just(vec![1, 2, 3]).bulk_each(|i, x: &mut i32| *x += i as i32)).unwrap().unwrap();
    assert_eq!(seq, [1, 3, 5]);
}

#[test]
fn bulk_each_error_panic_and_stop_paths() {
    let pool = common::pool(2);
    let v = vec![0u32; 50_000];
    let r = sync_wait(starts_on(
        pool.scheduler(),
        just(v.clone()).with_error::<usize>().bulk_each(|i, _: &mut u32| if i == 30_000 { Err(i) } else { Ok(()) }),
    ));
    assert_eq!(r, Err(30_000));
    let msg = panic_message(|| {
        sync_wait(starts_on(pool.scheduler(), just(v.clone()).bulk_each(|i, _: &mut u32| assert!(i != 7, "boom at 7"))))
    });
    assert!(msg.contains("boom at 7"), "{msg}");
    let source = InplaceStopSource::new();
    source.request_stop();
    let visited = AtomicUsize::new(0);
    let r = sync_wait(with_stop(
        &source,
        just(v).bulk_each(|_, _: &mut u32| {
            visited.fetch_add(1, Ordering::Relaxed);
        }),
    ));
    assert_eq!(r, Ok(None));
    assert_eq!(visited.load(Ordering::Relaxed), 0);
}
