//! The collect workloads (issue 48): a map-collect and a filter-collect of 4 Mi `u64`s
//! into a `Vec`, ours and rayon's idiomatic form, each checked against the sequential
//! result ([`check`]).
//!
//! | case | ours | rayon |
//! |---|---|---|
//! | `map_collect` | `bulk_map_collect(n, \|i, v\| mix(v[i]))` | `par_iter().map(\|&x\| mix(x)).collect()` |
//! | `filter_collect` | `bulk_filter_map_collect(n, \|i, v\| keep(v[i]).then_some(v[i]))` | `par_iter().filter(\|&&x\| keep(x)).copied().collect()` |

use rayon::prelude::*;
use senders::{PoolScheduler, SenderExt, schedule, sync_wait};

/// Elements of each workload.
pub const N: usize = 4 << 20;

/// The input: `N` pseudo-random `u64`s.
pub fn data() -> Vec<u64> {
    (0..N as u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 11).collect()
}

/// The map of `map_collect`: a few cheap operations, as a real map is.
#[inline]
pub fn mix(x: u64) -> u64 {
    (x ^ (x >> 17)).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

/// The predicate of `filter_collect`: keeps about half.
#[inline]
pub fn keep(x: u64) -> bool {
    x % 1000 < 500
}

/// Ours: `bulk_map_collect` on the pool.
pub fn map_collect(sch: &PoolScheduler, data: &[u64]) -> Vec<u64> {
    sync_wait(schedule(sch).then(move |()| data).bulk_map_collect(data.len(), |i, v: &&[u64]| mix(v[i])))
        .unwrap()
        .unwrap()
}

/// Rayon's `par_iter().map(..).collect()`.
pub fn rayon_map_collect(data: &[u64]) -> Vec<u64> {
    data.par_iter().map(|&x| mix(x)).collect()
}

/// Ours: `bulk_filter_map_collect` on the pool.
pub fn filter_collect(sch: &PoolScheduler, data: &[u64]) -> Vec<u64> {
    sync_wait(
        schedule(sch)
            .then(move |()| data)
            .bulk_filter_map_collect(data.len(), |i, v: &&[u64]| keep(v[i]).then_some(v[i])),
    )
    .unwrap()
    .unwrap()
}

/// Rayon's `par_iter().filter(..).copied().collect()`.
pub fn rayon_filter_collect(data: &[u64]) -> Vec<u64> {
    data.par_iter().filter(|&&x| keep(x)).copied().collect()
}

/// Panics unless both sides of both workloads equal the sequential results.
pub fn check(sch: &PoolScheduler, rayon_pool: &rayon::ThreadPool, data: &[u64]) {
    let mapped: Vec<u64> = data.iter().map(|&x| mix(x)).collect();
    assert!(map_collect(sch, data) == mapped, "map_collect: ours differs from the sequential result");
    assert!(rayon_pool.install(|| rayon_map_collect(data)) == mapped, "map_collect: rayon's differs");
    let kept: Vec<u64> = data.iter().copied().filter(|&x| keep(x)).collect();
    assert!(filter_collect(sch, data) == kept, "filter_collect: ours differs from the sequential result");
    assert!(rayon_pool.install(|| rayon_filter_collect(data)) == kept, "filter_collect: rayon's differs");
}
