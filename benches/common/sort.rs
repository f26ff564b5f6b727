//! The sort workloads (`benches/sort.rs`; the lead may wire them into other benches):
//! `bulk_sort` and `bulk_sort_unstable` against rayon's `par_sort` and
//! `par_sort_unstable`, on 4 Mi `u32`s, random, sorted and reversed, each output checked
//! against the sequential `sort`.
//!
//! A sort changes its input, so every call sorts a fresh copy; the copy is made outside
//! the timed span, which covers the sort alone (its hop onto the pool and back
//! included, on both sides).

use std::time::Instant;

use rayon::prelude::*;
use senders::{PoolScheduler, SenderExt, schedule, sync_wait};

/// Elements sorted.
pub const N: usize = 4 << 20;

/// The inputs: `(name, data)`.
pub fn inputs() -> Vec<(&'static str, Vec<u32>)> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let random = (0..N)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        })
        .collect();
    vec![("random", random), ("sorted", (0..N as u32).collect()), ("reversed", (0..N as u32).rev().collect())]
}

/// Our sort of `v`, stable or not, on `sch`'s pool.
pub fn ours(sch: &PoolScheduler, v: &mut [u32], stable: bool) {
    let s = schedule(sch).then(move |()| v);
    if stable {
        sync_wait(s.bulk_sort()).unwrap().unwrap();
    } else {
        sync_wait(s.bulk_sort_unstable()).unwrap().unwrap();
    }
}

/// Rayon's sort of `v`, stable or not, on `pool`.
pub fn rayon(pool: &rayon::ThreadPool, v: &mut [u32], stable: bool) {
    pool.install(|| if stable { v.par_sort() } else { v.par_sort_unstable() });
}

/// Checks both sides against the sequential sort of `input`.
pub fn check(sch: &PoolScheduler, pool: &rayon::ThreadPool, input: &[u32], stable: bool) {
    let mut want = input.to_vec();
    want.sort();
    let mut v = input.to_vec();
    ours(sch, &mut v, stable);
    assert!(v == want, "ours, stable: {stable}: the sequential sort's output");
    let mut v = input.to_vec();
    rayon(pool, &mut v, stable);
    assert!(v == want, "rayon, stable: {stable}: the sequential sort's output");
}

/// Per-call nanoseconds `(ours, rayon)` of `rounds` interleaved rounds (ours first on
/// even rounds) of `calls` sorts a side, each of a fresh copy of `input`.
pub fn paired(
    sch: &PoolScheduler,
    pool: &rayon::ThreadPool,
    input: &[u32],
    stable: bool,
    rounds: usize,
    calls: u32,
) -> Vec<(f64, f64)> {
    let mut buf = input.to_vec();
    let mut time = |ours_side: bool| {
        let mut ns = 0.0;
        for _ in 0..calls {
            buf.copy_from_slice(input);
            let start = Instant::now();
            if ours_side {
                ours(sch, &mut buf, stable)
            } else {
                rayon(pool, &mut buf, stable)
            }
            ns += start.elapsed().as_nanos() as f64;
        }
        ns / f64::from(calls)
    };
    (0..rounds)
        .map(|round| {
            if round % 2 == 0 {
                let o = time(true);
                (o, time(false))
            } else {
                let r = time(false);
                (time(true), r)
            }
        })
        .collect()
}
