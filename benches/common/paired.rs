//! Interleaved timing shared by the benches: on this shared 2-core machine criterion
//! medians drift between runs, so ours and the baseline are also timed in alternating
//! rounds and compared round by round.

use std::time::Instant;

/// Nanoseconds a timed batch should last.
pub const PAIRED_BATCH_NS: f64 = 5e6;

/// How many calls of a routine taking `ns` fill one batch.
pub fn batch(ns: f64) -> u32 {
    (PAIRED_BATCH_NS / ns).ceil().max(1.0) as u32
}

/// Times `rounds` alternating batches of `ours` (`n_ours` calls) and `base` (`n_base`
/// calls), the first one first on even rounds; returns per-call nanoseconds
/// `(ours, base)` for each round.
pub fn paired_rounds(
    rounds: usize,
    (ours, n_ours): (&mut dyn FnMut(), u32),
    (base, n_base): (&mut dyn FnMut(), u32),
) -> Vec<(f64, f64)> {
    let time = |f: &mut dyn FnMut(), n: u32| {
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        start.elapsed().as_nanos() as f64 / f64::from(n)
    };
    (0..rounds)
        .map(|round| {
            if round % 2 == 0 {
                let o = time(ours, n_ours);
                (o, time(base, n_base))
            } else {
                let b = time(base, n_base);
                (time(ours, n_ours), b)
            }
        })
        .collect()
}

/// Mutable references to two different elements of `v`.
pub fn two_mut<T>(v: &mut [T], i: usize, j: usize) -> (&mut T, &mut T) {
    assert_ne!(i, j);
    if i < j {
        let (a, b) = v.split_at_mut(j);
        (&mut a[i], &mut b[0])
    } else {
        let (a, b) = v.split_at_mut(i);
        (&mut b[0], &mut a[j])
    }
}

/// The median of `v` (NaN if empty).
pub fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// A duration in nanoseconds, in the unit that reads best.
pub fn format_ns(ns: f64) -> String {
    match ns {
        ns if ns >= 1e6 => format!("{:.2} ms", ns / 1e6),
        ns if ns >= 1e3 => format!("{:.2} µs", ns / 1e3),
        ns => format!("{ns:.1} ns"),
    }
}

/// The workers of the pools: `default`, or `SENDERS_PROFILE_THREADS` when set (a
/// one-worker pool makes callgrind's instruction counts exact: no idle worker spins).
pub fn threads(default: usize) -> usize {
    std::env::var("SENDERS_PROFILE_THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(default)
}
