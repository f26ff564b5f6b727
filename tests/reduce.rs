//! Reductions (`bulk_reduce`, `bulk_map_reduce`), the mutable chunked bulk
//! (`bulk_chunks_mut`) and grain control (`Grain`, the `*_with` forms), on the default
//! domain and on pools of 1, 2 and 4 workers: results against a sequential reference
//! (with combines that are not commutative), which threads run the chunks, the
//! predecessor's error, stop and panic, stop requests, panics in user code, empty
//! input, the grain's bounds, and the drop-order rule.

mod common;

use common::{Live, QUIET, Tracked, panic_message, quiet_panics, serial, spin, with_stop};
use senders::*;
use std::collections::HashSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A pool of exactly `n` workers named `{prefix}-{i}`.
fn named_pool(n: usize, prefix: &'static str) -> StaticThreadPool {
    StaticThreadPool::builder().num_threads(n).thread_name(move |i| format!("{prefix}-{i}")).build().unwrap()
}

/// Where a test runs its bulk: the default domain (`None`) and pools of 1, 2, 4 workers.
fn places() -> Vec<(String, Option<StaticThreadPool>)> {
    let mut v = vec![("default domain".to_owned(), None)];
    for n in [1, 2, 4] {
        v.push((format!("pool of {n}"), Some(named_pool(n, "red"))));
    }
    v
}

/// Runs `$body` (an expression of the sender `$s`, which completes with `$value`) to
/// completion with `sync_wait`: on the default domain (`just`), or on the pool's worker.
macro_rules! on {
    ($place:expr, $value:expr, |$s:ident| $body:expr) => {{
        match $place {
            None => {
                let $s = just($value);
                sync_wait($body)
            }
            Some(pool) => {
                let value = $value;
                let $s = schedule(&pool.scheduler()).then(move |()| value);
                sync_wait($body)
            }
        }
    }};
}

/// A 2×2 matrix modulo a prime: its product is associative but not commutative.
type M2 = [[u64; 2]; 2];
const P: u64 = 1_000_000_007;

fn mul(a: M2, b: M2) -> M2 {
    let mut c = [[0; 2]; 2];
    for (i, row) in c.iter_mut().enumerate() {
        for (j, x) in row.iter_mut().enumerate() {
            *x = (a[i][0] * b[0][j] + a[i][1] * b[1][j]) % P;
        }
    }
    c
}

fn m_of(i: usize) -> M2 {
    let i = i as u64;
    [[i % 7 + 1, i % 5], [i % 3, i % 11 + 2]]
}

const ID: M2 = [[1, 0], [0, 1]];

#[test]
fn a_sum_matches_the_sequential_one_everywhere() {
    let data: Vec<u64> = (0..100_003).map(|i| i * 3 + 1).collect();
    let expected: u64 = data.iter().sum();
    for (name, place) in places() {
        let sum = on!(place.as_ref(), data.clone(), |s| s.bulk_reduce(
            100_003,
            || 0u64,
            |acc, b, e, v: &Vec<u64>| acc + v[b..e].iter().sum::<u64>(),
            |a, b| a + b,
        ));
        assert_eq!(sum, Ok(Some(expected)), "{name}");
        let sum =
            on!(place.as_ref(), data.clone(), |s| s.bulk_map_reduce(100_003, |i, v: &Vec<u64>| v[i], |a, b| a + b));
        assert_eq!(sum, Ok(Some(Some(expected))), "{name}: map-reduce");
    }
}

/// Combines that are not commutative see the ranges in order: a product of matrices, a
/// string concatenation and a collect, with many small chunks so that they finish in
/// any order.
#[test]
fn a_combine_that_is_not_commutative_sees_the_ranges_in_order() {
    const N: usize = 5_000;
    let product = (0..N).map(m_of).fold(ID, mul);
    let text: String = (0..N).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let squares: Vec<usize> = (0..N).map(|i| i * i).collect();
    for (name, place) in places() {
        for grain in [Grain::new(), Grain::new().max_len(7), Grain::new().min_len(100).max_len(300)] {
            let got = on!(place.as_ref(), (), |s| s.bulk_reduce_with(
                grain,
                N,
                || ID,
                |acc, b, e, _: &()| (b..e).map(m_of).fold(acc, mul),
                mul,
            ));
            assert_eq!(got, Ok(Some(product)), "{name} {grain:?}: matrix product");

            let got = on!(place.as_ref(), text.clone(), |s| s.bulk_reduce_with(
                grain,
                N,
                String::new,
                |mut acc, b, e, t: &String| {
                    acc.push_str(&t[b..e]);
                    acc
                },
                |l, r| l + &r,
            ));
            assert_eq!(got.unwrap().unwrap(), text, "{name} {grain:?}: concatenation");

            let got = on!(place.as_ref(), (), |s| s.bulk_reduce_with(
                grain,
                N,
                Vec::new,
                |mut acc: Vec<usize>, b, e, _: &()| {
                    acc.extend((b..e).map(|i| i * i));
                    acc
                },
                |mut l, mut r| {
                    l.append(&mut r);
                    l
                },
            ));
            assert_eq!(got.unwrap().unwrap(), squares, "{name} {grain:?}: collect");
        }
        let got = on!(place.as_ref(), (), |s| s.bulk_map_reduce(N, |i, _| m_of(i), mul));
        assert_eq!(got, Ok(Some(Some(product))), "{name}: map-reduce of matrices");
    }
}

#[test]
fn a_shape_of_zero_completes_with_the_identity() {
    for (name, place) in places() {
        let calls = AtomicUsize::new(0);
        let got = on!(place.as_ref(), (), |s| s.bulk_reduce(
            0,
            || 42,
            |acc, _, _, _: &()| {
                calls.fetch_add(1, Ordering::Relaxed);
                acc
            },
            |a, b| a + b
        ));
        assert_eq!(got, Ok(Some(42)), "{name}");
        let got = on!(place.as_ref(), (), |s| s.bulk_map_reduce(0, |i, _| i, |a, b| a + b));
        assert_eq!(got, Ok(Some(None)), "{name}: map-reduce");
        let got = on!(place.as_ref(), Vec::<u8>::new(), |s| s.bulk_chunks_mut(3, |_, _: &mut [u8]| {
            calls.fetch_add(1, Ordering::Relaxed);
        }));
        assert_eq!(got, Ok(Some(Vec::new())), "{name}: chunks of an empty slice");
        let got = on!(place.as_ref(), (), |s| s.bulk_chunked_with(Grain::new().max_len(2), 0, |_, _, _: &()| {
            calls.fetch_add(1, Ordering::Relaxed);
        }));
        assert_eq!(got, Ok(Some(())), "{name}: bulk_chunked of no index");
        assert_eq!(calls.load(Ordering::Relaxed), 0, "{name}: no call for no index");
    }
}

/// On the default domain the reduction is one fold on the thread that delivered the
/// value; on a pool of two, chunks of expensive indices run on both workers, and the
/// result is delivered on a worker.
#[test]
fn chunks_run_on_the_calling_thread_by_default_and_on_the_workers_of_a_pool() {
    let _serial = serial();
    let names = Mutex::new(HashSet::new());
    let note = || names.lock().unwrap().insert(common::thread_name().unwrap_or_default());
    let calls = AtomicUsize::new(0);
    let got = sync_wait(just(()).bulk_reduce(
        64,
        || 0,
        |acc, b, e, _: &()| {
            note();
            calls.fetch_add(1, Ordering::Relaxed);
            acc + (e - b)
        },
        |a, b| a + b,
    ));
    assert_eq!(got, Ok(Some(64)));
    assert_eq!(calls.load(Ordering::Relaxed), 1, "one fold on the default domain");
    let me = common::thread_name().unwrap_or_default();
    assert_eq!(*names.lock().unwrap(), HashSet::from([me]));

    let pool = named_pool(2, "two");
    names.lock().unwrap().clear();
    let got = sync_wait(
        schedule(&pool.scheduler())
            .bulk_reduce_with(
                Grain::new().max_len(1),
                64,
                || 0,
                |acc, b, e, _: &()| {
                    note();
                    spin(500);
                    acc + (e - b)
                },
                |a, b| a + b,
            )
            .then(|n| (n, common::thread_name().unwrap_or_default())),
    );
    let (n, completed_on) = got.unwrap().unwrap();
    assert_eq!(n, 64);
    assert!(completed_on.starts_with("two-"), "completed on {completed_on}");
    assert_eq!(*names.lock().unwrap(), HashSet::from(["two-0".to_owned(), "two-1".to_owned()]));
}

#[test]
fn the_predecessors_error_stop_and_panic_pass_through() {
    quiet_panics();
    let pool = named_pool(2, "pass");
    let r = sync_wait(just_error::<Vec<u64>, _>("no").bulk_reduce(3, || 0, |a, _, _, _: &Vec<u64>| a, |a, b| a + b));
    assert_eq!(r, Err("no"));
    let r = sync_wait(schedule(&pool.scheduler()).then(|()| vec![1u8]).with_error::<&str>().bulk_map_reduce(
        1,
        |i, _| i,
        |a, b| a + b,
    ));
    assert_eq!(r, Ok(Some(Some(0))));
    let r = sync_wait(just_stopped::<(), std::convert::Infallible>().bulk_map_reduce(3, |i, _| i, |a, b| a + b));
    assert_eq!(r, Ok(None));
    let r =
        sync_wait(starts_on(pool.scheduler(), just_error::<Vec<u8>, _>(7).bulk_chunks_mut(2, |_, _: &mut [u8]| ())));
    assert_eq!(r, Err(7));
    let message = panic_message(|| {
        sync_wait(schedule(&pool.scheduler()).then(|()| -> Vec<u8> { panic!("{QUIET}: upstream") }).bulk_reduce(
            4,
            || 0,
            |a, _, _, _: &Vec<u8>| a,
            |a, b| a + b,
        ))
    });
    assert_eq!(message, format!("{QUIET}: upstream"));
}

/// A stop requested before the value arrives runs no chunk; one requested by a chunk
/// stops the chunks not yet started, and the reduction completes stopped.
#[test]
fn a_stop_request_ends_the_reduction_stopped() {
    for (name, place) in places() {
        let before = InplaceStopSource::new();
        before.request_stop();
        let calls = AtomicUsize::new(0);
        let r = on!(place.as_ref(), (), |s| with_stop(
            &before,
            s.bulk_reduce(100, || 0, |a, _, _, _: &()| a + calls.fetch_add(1, Ordering::Relaxed), |a, b| a + b)
        ));
        assert_eq!(r, Ok(None), "{name}: stopped before");
        assert_eq!(calls.load(Ordering::Relaxed), 0, "{name}: no chunk ran");

        let during = InplaceStopSource::new();
        let r = on!(place.as_ref(), (), |s| with_stop(
            &during,
            s.bulk_reduce_with(
                Grain::new().max_len(1),
                10_000,
                || 0,
                |a, b, _, _: &()| {
                    calls.fetch_add(1, Ordering::Relaxed);
                    if b == 0 {
                        during.request_stop();
                    }
                    a + 1
                },
                |a, b| a + b
            )
        ));
        assert_eq!(r, Ok(None), "{name}: stopped during");
        assert!(calls.load(Ordering::Relaxed) < 10_000, "{name}: every chunk ran despite the stop");

        let rows = AtomicUsize::new(0);
        let r = on!(place.as_ref(), vec![0u8; 10_000], |s| with_stop(
            &during,
            s.bulk_chunks_mut(1, |_, _: &mut [u8]| {
                rows.fetch_add(1, Ordering::Relaxed);
            })
        ));
        assert_eq!(r, Ok(None), "{name}: chunks_mut under a stopped token");
        assert_eq!(rows.load(Ordering::Relaxed), 0, "{name}: no chunk ran");
    }
}

/// A panic in a fold, a combine, or an identity is delivered to whoever waits; when
/// several chunks panic, one of their panics is delivered (the first one caught) and
/// the others are dropped; the workers survive and run the next bulk.
#[test]
fn a_panic_in_user_code_is_delivered_and_the_workers_survive() {
    quiet_panics();
    for (name, place) in places() {
        let message = panic_message(|| {
            on!(place.as_ref(), (), |s| s.bulk_reduce_with(
                Grain::new().max_len(10),
                1000,
                || 0,
                |a, b, _, _: &()| if b == 500 { panic!("{QUIET}: fold") } else { a + 1 },
                |a, b| a + b
            ))
        });
        assert_eq!(message, format!("{QUIET}: fold"), "{name}");

        let message = panic_message(|| {
            on!(place.as_ref(), (), |s| s.bulk_reduce_with(
                Grain::new().max_len(10),
                1000,
                || 0,
                |_, b, _, _: &()| -> usize { panic!("{QUIET}: chunk {b}") },
                |a, b| a + b
            ))
        });
        assert!(message.starts_with(&format!("{QUIET}: chunk ")), "{name}: {message}");

        let message = panic_message(|| {
            on!(place.as_ref(), (), |s| s.bulk_reduce_with(
                Grain::new().max_len(10),
                1000,
                || 0usize,
                |a, _, _, _: &()| a + 1,
                |_, _| -> usize { panic!("{QUIET}: combine") }
            ))
        });
        assert_eq!(message, format!("{QUIET}: combine"), "{name}");

        let message = panic_message(|| {
            on!(place.as_ref(), (), |s| s.bulk_reduce(
                0,
                || -> u8 { panic!("{QUIET}: identity") },
                |a, _, _, _: &()| a,
                |a, _| a
            ))
        });
        assert_eq!(message, format!("{QUIET}: identity"), "{name}");

        let message = panic_message(|| {
            on!(place.as_ref(), vec![0u8; 100], |s| s.bulk_chunks_mut(10, |c, _: &mut [u8]| if c == 3 {
                panic!("{QUIET}: row")
            }))
        });
        assert_eq!(message, format!("{QUIET}: row"), "{name}");

        let after = on!(place.as_ref(), (), |s| s.bulk_map_reduce(1000, |i, _| i, |a, b| a + b));
        assert_eq!(after, Ok(Some(Some(499_500))), "{name}: the next reduction");
    }
}

#[test]
fn chunks_mut_visits_every_chunk_once_with_its_index() {
    const COLS: usize = 7;
    const ROWS: usize = 1001;
    let expected: Vec<u64> = (0..ROWS * COLS + 3).map(|k| (k / COLS) as u64 * 1000 + (k % COLS) as u64 + 1).collect();
    for (name, place) in places() {
        for grain in [Grain::new(), Grain::new().max_len(1), Grain::new().min_len(64)] {
            let lens = Mutex::new(Vec::new());
            let m = on!(place.as_ref(), vec![1u64; ROWS * COLS + 3], |s| s.bulk_chunks_mut_with(
                grain,
                COLS,
                |r, row: &mut [u64]| {
                    lens.lock().unwrap().push((r, row.len()));
                    for (j, x) in row.iter_mut().enumerate() {
                        *x += r as u64 * 1000 + j as u64;
                    }
                }
            ));
            assert_eq!(m.unwrap().unwrap(), expected, "{name} {grain:?}");
            let mut lens = lens.into_inner().unwrap();
            lens.sort_unstable();
            let want: Vec<_> = (0..=ROWS).map(|r| (r, if r == ROWS { 3 } else { COLS })).collect();
            assert_eq!(lens, want, "{name} {grain:?}: each chunk once, the last one short");
        }
    }
}

#[test]
#[should_panic(expected = "chunk_len is zero")]
fn chunks_mut_of_length_zero_panics_where_it_is_built() {
    let _ = just(vec![1u8]).bulk_chunks_mut(0, |_, _: &mut [u8]| ());
}

#[test]
fn grain_bounds_that_cannot_hold_panic_and_a_zero_minimum_is_one() {
    assert_eq!(Grain::new().min_len(0), Grain::new());
    assert_eq!(Grain::new().min(), 1);
    assert_eq!(Grain::new().max(), None);
    assert_eq!(Grain::new().min_len(3).max_len(3).max(), Some(3));
    assert_eq!(panic_message(|| Grain::new().max_len(0)), "Grain: max_len is zero");
    assert_eq!(panic_message(|| Grain::new().min_len(5).max_len(4)), "Grain: max_len is less than min_len");
    assert_eq!(panic_message(|| Grain::new().max_len(4).min_len(5)), "Grain: min_len is greater than max_len");
}

/// The chunks a `bulk_chunked_with` runs: each within the bounds, together covering the
/// shape once.
#[test]
fn bulk_chunked_chunks_respect_the_grain() {
    const N: usize = 100_000;
    for (name, place) in places() {
        for (min, max) in
            [(1, 1), (1, 10), (100, 1000), (1000, 2000), (3000, usize::MAX), (1, 70_000), (40_000, 80_000)]
        {
            let grain =
                if max == usize::MAX { Grain::new().min_len(min) } else { Grain::new().min_len(min).max_len(max) };
            let chunks = on!(place.as_ref(), Mutex::new(Vec::new()), |s| s.bulk_chunked_with(
                grain,
                N,
                |b, e, seen: &Mutex<Vec<(usize, usize)>>| seen.lock().unwrap().push((b, e))
            ));
            let mut chunks = chunks.unwrap().unwrap().into_inner().unwrap();
            chunks.sort_unstable();
            let mut next = 0;
            for &(b, e) in &chunks {
                assert_eq!(b, next, "{name} {grain:?}: chunks cover the shape once");
                assert!(e - b <= max, "{name} {grain:?}: chunk {b}..{e} longer than max");
                assert!(e - b >= min, "{name} {grain:?}: chunk {b}..{e} shorter than min");
                next = e;
            }
            assert_eq!(next, N, "{name} {grain:?}");
        }
        // A shape shorter than the minimum is one chunk.
        let chunks = on!(place.as_ref(), Mutex::new(Vec::new()), |s| s.bulk_chunked_with(
            Grain::new().min_len(50),
            30,
            |b, e, seen: &Mutex<Vec<(usize, usize)>>| seen.lock().unwrap().push((b, e))
        ));
        assert_eq!(chunks.unwrap().unwrap().into_inner().unwrap(), [(0, 30)], "{name}");
    }
}

/// The folds of a reduction see chunks within the grain too (they are `bulk_chunked`'s).
#[test]
fn reduction_chunks_respect_the_grain() {
    for (name, place) in places() {
        let grain = Grain::new().min_len(64).max_len(256);
        let lens = on!(place.as_ref(), (), |s| s.bulk_reduce_with(
            grain,
            100_000,
            Vec::new,
            |mut acc: Vec<usize>, b, e, _: &()| {
                acc.push(e - b);
                acc
            },
            |mut l, mut r| {
                l.append(&mut r);
                l
            }
        ));
        let lens = lens.unwrap().unwrap();
        assert_eq!(lens.iter().sum::<usize>(), 100_000, "{name}");
        assert!(lens.iter().all(|&n| (64..=256).contains(&n)), "{name}: {lens:?}");
    }
}

/// On a pool, `min_len` keeps a bulk of expensive indices in one piece (one worker runs
/// them all), and `max_len` spreads a bulk of cheap indices over the workers.
#[test]
fn the_grain_decides_how_the_pool_spreads_per_index_bulks() {
    let _serial = serial();
    let pool = named_pool(2, "grain");
    for min in [16, 1000] {
        let names = Mutex::new(HashSet::new());
        let r = sync_wait(schedule(&pool.scheduler()).then(|()| vec![0u8; 16]).bulk_each_with(
            Grain::new().min_len(min),
            |_, _: &mut u8| {
                names.lock().unwrap().insert(common::thread_name().unwrap_or_default());
                spin(300);
            },
        ));
        assert!(r.is_ok());
        assert_eq!(names.lock().unwrap().len(), 1, "min_len {min}: one piece, one worker");
    }
    let started = AtomicUsize::new(0);
    // Two indices that wait for each other: only a split of the pair lets them meet.
    let r = sync_wait(schedule(&pool.scheduler()).bulk_with(Grain::new().min_len(1).max_len(1), 2, |_, _: &()| {
        started.fetch_add(1, Ordering::SeqCst);
        let t = std::time::Instant::now();
        while started.load(Ordering::SeqCst) < 2 {
            assert!(t.elapsed() < common::SAFETY_TIMEOUT, "the two indices never ran together");
            std::thread::yield_now();
        }
    }));
    assert_eq!(r, Ok(Some(())));
}

/// The default domain's `bulk_chunked` cuts its one call to fit `max_len`, in order.
#[test]
fn the_default_bulk_chunked_makes_calls_of_at_most_max_len_in_order() {
    let chunks = sync_wait(just(Mutex::new(Vec::new())).bulk_chunked_with(
        Grain::new().min_len(3).max_len(4),
        13,
        |b, e, seen: &Mutex<Vec<(usize, usize)>>| seen.lock().unwrap().push((b, e)),
    ));
    // 0..4, 4..8, then 8..13 (5 left): 4 would leave 1 < min, so two halves.
    assert_eq!(chunks.unwrap().unwrap().into_inner().unwrap(), [(0, 4), (4, 8), (8, 10), (10, 13)]);
}

/// The drop-order rule: partial results, the value and the functions of a reduction
/// are dropped before it completes, whether it succeeds, a chunk panics, or it stops.
#[test]
fn a_reduction_drops_its_partial_results_and_value_before_completing() {
    quiet_panics();
    for (name, place) in places() {
        for _ in 0..2 {
            let live = Live::new();
            let live_ref = &live;
            let held = live.track(());
            let got = on!(place.as_ref(), live.track(3usize), |s| s.bulk_reduce_with(
                Grain::new().max_len(16),
                256,
                move || {
                    let _ = &held;
                    live_ref.track(0usize)
                },
                |mut acc: Tracked<'_, usize>, b, e, v: &Tracked<'_, usize>| {
                    acc.value += (e - b) * v.value;
                    acc
                },
                |mut l, r| {
                    l.value += r.value;
                    l
                }
            ));
            let got = got.unwrap().unwrap();
            assert_eq!(got.value, 768, "{name}");
            drop(got);
            live.assert_none_alive(&format!("{name}: after a reduction returned"));

            let message = panic_message(|| {
                on!(place.as_ref(), live.track(1usize), |s| s.bulk_reduce_with(
                    Grain::new().max_len(8),
                    256,
                    || live_ref.track(0usize),
                    |mut acc: Tracked<'_, usize>, b, e, _: &Tracked<'_, usize>| {
                        if b == 128 {
                            panic!("{QUIET}: half way");
                        }
                        acc.value += e - b;
                        acc
                    },
                    |mut l, r| {
                        l.value += r.value;
                        l
                    }
                ))
            });
            assert_eq!(message, format!("{QUIET}: half way"), "{name}");
            live.assert_none_alive(&format!("{name}: after a panicked reduction"));

            let stop = InplaceStopSource::new();
            let r = on!(place.as_ref(), live.track(1usize), |s| with_stop(
                &stop,
                s.bulk_reduce_with(
                    Grain::new().max_len(8),
                    256,
                    || live_ref.track(0usize),
                    |mut acc: Tracked<'_, usize>, b, e, _: &Tracked<'_, usize>| {
                        if b == 64 {
                            stop.request_stop();
                        }
                        acc.value += e - b;
                        acc
                    },
                    |mut l, r| {
                        l.value += r.value;
                        l
                    }
                )
            ));
            assert!(matches!(r, Ok(None)), "{name}: stopped");
            live.assert_none_alive(&format!("{name}: after a stopped reduction"));
        }
    }
}

/// A `bulk_chunks_mut` whose chunk panics drops its value before the panic is delivered.
#[test]
fn a_failed_chunks_mut_drops_its_value_before_completing() {
    quiet_panics();
    for (name, place) in places() {
        let live = Live::new();
        let message = panic_message(|| {
            on!(place.as_ref(), vec![live.track(0u8), live.track(0), live.track(0), live.track(0)], |s| s
                .bulk_chunks_mut(1, |c, _: &mut [Tracked<'_, u8>]| if c == 2 {
                    panic!("{QUIET}: chunk")
                }))
        });
        assert_eq!(message, format!("{QUIET}: chunk"), "{name}");
        live.assert_none_alive(&format!("{name}: after the panic resumed"));
    }
}

/// The chunks' results are combined as a balanced tree, as rayon's `reduce` does: on
/// the default domain and on a pool of one worker, 16 chunks of one index run in order,
/// and every combine joins two ranges of equal length (a chain would join a growing
/// result with single chunks, twice the work for a product of big integers).
#[test]
fn the_combines_form_a_balanced_tree() {
    let one = named_pool(1, "tree");
    for place in [None, Some(&one)] {
        let joins = Mutex::new(Vec::new());
        let got = on!(place, (), |s| s.bulk_reduce_with(
            Grain::new().max_len(1),
            16,
            || 0usize,
            |acc, b, e, _: &()| acc + (e - b),
            |l, r| {
                joins.lock().unwrap().push((l, r));
                l + r
            }
        ));
        assert_eq!(got, Ok(Some(16)));
        let joins = joins.into_inner().unwrap();
        assert_eq!(joins.len(), 15, "{joins:?}");
        assert!(joins.iter().all(|(l, r)| l == r), "{joins:?}");
    }
}

/// A reduction folds each piece of the work into one accumulator, as rayon's `fold`: on
/// the default domain one for the whole shape (in one call); on a pool one per piece, not
/// one per call of at most 65,536 indices (1,024 calls here). An accumulator sees the calls of its
/// piece in order, each starting where the last ended. How many pieces a pool makes
/// depends on how often idle workers steal (each steal splits again), so on more than
/// one worker the test asserts only that pieces fold several calls: for every call to get
/// an accumulator of its own, every piece of two or more calls would have to be stolen
/// before its owner ran it, the root worker's own piece included. One worker never
/// steals: it splits the shape once (two pieces), plus one piece each time it yields the
/// rest of a piece to work from outside the pool (the thread that waits).
#[test]
fn a_reduction_makes_one_accumulator_per_piece_not_per_call() {
    const N: usize = 1 << 26;
    /// An accumulator: the calls it folded and the range they covered.
    #[derive(Clone, Copy)]
    struct Acc {
        calls: usize,
        lo: usize,
        hi: usize,
    }
    for (name, place) in places() {
        let (made, calls) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let got = on!(place.as_ref(), (), |s| s.bulk_reduce(
            N,
            || {
                made.fetch_add(1, Ordering::Relaxed);
                Acc { calls: 0, lo: 0, hi: 0 }
            },
            |acc: Acc, b, e, _: &()| {
                calls.fetch_add(1, Ordering::Relaxed);
                assert!(acc.calls == 0 || acc.hi == b, "a call of {b}..{e} after {}..{}", acc.lo, acc.hi);
                let lo = if acc.calls == 0 { b } else { acc.lo };
                Acc { calls: acc.calls + 1, lo, hi: e }
            },
            |l, r| {
                assert!(l.calls == 0 || r.calls == 0 || l.hi == r.lo, "{}..{} then {}..{}", l.lo, l.hi, r.lo, r.hi);
                match (l.calls, r.calls) {
                    (0, _) => r,
                    (_, 0) => l,
                    _ => Acc { calls: l.calls + r.calls, lo: l.lo, hi: r.hi },
                }
            },
        ));
        let Ok(Some(all)) = got else { panic!("{name}: stopped") };
        assert_eq!((all.lo, all.hi), (0, N), "{name}");
        let (made, calls) = (made.into_inner(), calls.into_inner());
        assert_eq!(all.calls, calls, "{name}");
        if place.is_some() {
            assert!(calls >= N >> 16, "{name}: {calls} calls");
        }
        match place.as_ref().map(StaticThreadPool::num_threads) {
            None => assert_eq!(made, 1, "{name}"),
            Some(1) => assert!((1..=4).contains(&made), "{name}: {made} accumulators"),
            Some(_) => assert!((1..calls).contains(&made), "{name}: {made} accumulators for {calls} calls"),
        }
    }
}
