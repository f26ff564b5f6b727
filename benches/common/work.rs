//! The per-node work of the tree workloads, shared by `benches/scope.rs` and
//! `examples/report.rs`: a spin loop the compiler cannot remove, calibrated to a
//! duration on this machine.

use std::hint::black_box;
use std::time::Instant;

/// `iters` rounds of dependent integer arithmetic the compiler cannot remove.
#[inline(never)]
pub fn spin(iters: u64) -> u64 {
    let mut x = black_box(0x9E37_79B9_7F4A_7C15_u64);
    for i in 0..iters {
        x = x.rotate_left(7).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ i;
    }
    black_box(x)
}

/// The number of [`spin`] iterations that take about `ns` nanoseconds on this machine:
/// the fastest of a few long timed runs (so that background load does not inflate it),
/// then corrected once by timing calls of the size actually used.
pub fn calibrate(ns: f64) -> u64 {
    const PROBE: u64 = 2_000_000;
    let best_ns = |iters: u64, calls: u32| {
        (0..7)
            .map(|_| {
                let start = Instant::now();
                for _ in 0..calls {
                    spin(iters);
                }
                start.elapsed().as_nanos() as f64 / f64::from(calls)
            })
            .fold(f64::INFINITY, f64::min)
    };
    let iters = ((ns * PROBE as f64 / best_ns(PROBE, 1)).round() as u64).max(1);
    ((ns * iters as f64 / best_ns(iters, 10_000)).round() as u64).max(1)
}
