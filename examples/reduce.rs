//! Reductions and mutable chunks on the static thread pool, next to rayon's code for the
//! same thing and a plain loop:
//!
//! | row | ours | rayon |
//! |---|---|---|
//! | sum | `bulk_reduce`: each chunk summed, the sums added | `par_iter().fold(..).reduce(..)` |
//! | factorial | `bulk_reduce` of big integers: each chunk's product, the products multiplied in order | the same with `fold` + `reduce` (rayon-demo's `factorial`) |
//! | collect | `bulk_reduce` into a `Vec`, appended in order | the same with `fold` + `reduce` |
//! | collect in place | `bulk_chunks_mut` over a `Vec` of the right length | `par_iter().map(..).collect()` (rayon writes an indexed collect in place too) |
//! | rows | `bulk_chunks_mut`: each row of a matrix scaled to a sum of one | `par_chunks_mut(..).for_each(..)` |
//!
//! Run it with `cargo run --release --example reduce`. Each row is the best of 5 runs on
//! 2 workers each side; every result is checked against the sequential one.

use std::time::{Duration, Instant};

use rayon::prelude::*;
use senders::{Grain, PoolScheduler, SenderExt, StaticThreadPool, schedule, sync_wait};

/// Workers on both sides.
const THREADS: usize = 2;
/// Timed runs per row; the best is shown.
const RUNS: usize = 5;
/// Numbers summed and collected.
const LEN: usize = 1 << 22;
/// The factorial computed.
const FACT: u32 = 12_000;
/// The side of the matrix whose rows are scaled.
const SIDE: usize = 2048;

/// A natural number in base 2^32, least significant limb first, no trailing zero limb.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Big(Vec<u32>);

impl Big {
    fn one() -> Big {
        Big(vec![1])
    }

    /// `self * k`, in place.
    fn mul_small(mut self, k: u32) -> Big {
        let mut carry = 0u64;
        for limb in &mut self.0 {
            let x = u64::from(*limb) * u64::from(k) + carry;
            *limb = x as u32;
            carry = x >> 32;
        }
        if carry != 0 {
            self.0.push(carry as u32);
        }
        self
    }

    /// `self * other`, schoolbook.
    fn mul(&self, other: &Big) -> Big {
        let mut out = vec![0u32; self.0.len() + other.0.len()];
        for (i, &a) in self.0.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &b) in other.0.iter().enumerate() {
                let x = u64::from(a) * u64::from(b) + u64::from(out[i + j]) + carry;
                out[i + j] = x as u32;
                carry = x >> 32;
            }
            out[i + other.0.len()] = carry as u32;
        }
        while out.len() > 1 && out.last() == Some(&0) {
            out.pop();
        }
        Big(out)
    }

    /// The number of bits.
    fn bits(&self) -> u64 {
        let top = *self.0.last().expect("at least one limb");
        (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros())
    }
}

/// The product of `lo..hi` (as `u32`s) into `acc`.
fn product(acc: Big, lo: usize, hi: usize) -> Big {
    (lo..hi).fold(acc, |acc, k| acc.mul_small(k as u32))
}

/// `FACT!` on our pool: the indices `0..FACT` stand for the factors `1..=FACT`.
fn factorial(sch: &PoolScheduler) -> Big {
    let n = FACT as usize;
    sync_wait(schedule(sch).bulk_reduce_with(
        // Chunks of at most 512 factors: small products, multiplied together as the
        // chunks finish.
        Grain::new().max_len(512),
        n,
        Big::one,
        |acc, b, e, _: &()| product(acc, b + 1, e + 1),
        |l, r| l.mul(&r),
    ))
    .expect("no error")
    .expect("not stopped")
}

fn rayon_factorial() -> Big {
    (1..FACT as usize + 1)
        .into_par_iter()
        .with_max_len(512)
        .fold(Big::one, |acc, k| acc.mul_small(k as u32))
        .reduce(Big::one, |l, r| l.mul(&r))
}

fn sum(sch: &PoolScheduler, data: &[u64]) -> u64 {
    sync_wait(schedule(sch).then(move |()| data).bulk_reduce(
        data.len(),
        || 0,
        |acc, b, e, v: &&[u64]| acc + v[b..e].iter().sum::<u64>(),
        |a, b| a + b,
    ))
    .expect("no error")
    .expect("not stopped")
}

/// `i * i mod 1000` for every index, collected in order.
fn collect(sch: &PoolScheduler) -> Vec<u64> {
    sync_wait(schedule(sch).bulk_reduce(
        LEN,
        Vec::new,
        |mut acc: Vec<u64>, b, e, _: &()| {
            acc.extend((b as u64..e as u64).map(|i| i * i % 1000));
            acc
        },
        |mut l, mut r| {
            l.append(&mut r);
            l
        },
    ))
    .expect("no error")
    .expect("not stopped")
}

/// The same collect, written in place: chunks of a `Vec` of the right length, each
/// filled where it runs (no combine, no copy).
fn collect_in_place(sch: &PoolScheduler) -> Vec<u64> {
    sync_wait(schedule(sch).then(|()| vec![0u64; LEN]).bulk_chunks_mut(1 << 14, |c, out: &mut [u64]| {
        let first = (c << 14) as u64;
        for (k, x) in out.iter_mut().enumerate() {
            let i = first + k as u64;
            *x = i * i % 1000;
        }
    }))
    .expect("no error")
    .expect("not stopped")
}

/// Scales a row to a sum of one.
fn normalise(row: &mut [f64]) {
    let s: f64 = row.iter().sum();
    row.iter_mut().for_each(|x| *x /= s);
}

fn rows(sch: &PoolScheduler, m: Vec<f64>) -> Vec<f64> {
    sync_wait(schedule(sch).then(move |()| m).bulk_chunks_mut(SIDE, |_, row: &mut [f64]| normalise(row)))
        .expect("no error")
        .expect("not stopped")
}

/// The best of [`RUNS`] runs of `f`, and its last result.
fn best<T>(mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..RUNS {
        let t = Instant::now();
        out = Some(std::hint::black_box(f()));
        best = best.min(t.elapsed());
    }
    (best, out.expect("at least one run"))
}

fn main() {
    let threads = std::env::var("THREADS").ok().and_then(|s| s.parse().ok()).unwrap_or(THREADS);
    let pool = StaticThreadPool::new(threads).expect("a pool");
    let sch = pool.scheduler();
    let rayon_pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a rayon pool");
    let row = |name: &str, seq: Duration, ours: Duration, rayon: Duration| {
        println!(
            "{name:<10} sequential {seq:>10.2?}  senders {ours:>10.2?}  rayon {rayon:>10.2?}  senders ÷ rayon {:.2}",
            ours.as_secs_f64() / rayon.as_secs_f64()
        );
    };

    let data: Vec<u64> = (0..LEN as u64).map(|i| i % 1009).collect();
    let (seq, expected) = best(|| data.iter().sum::<u64>());
    let (ours, got) = best(|| sum(&sch, &data));
    let (rayon, theirs) =
        best(|| rayon_pool.install(|| data.par_iter().fold(|| 0, |a, &x| a + x).reduce(|| 0, |a, b| a + b)));
    assert_eq!((got, theirs), (expected, expected), "the sums agree");
    row("sum", seq, ours, rayon);

    let (seq, expected) = best(|| product(Big::one(), 1, FACT as usize + 1));
    let (ours, got) = best(|| factorial(&sch));
    let (rayon, theirs) = best(|| rayon_pool.install(rayon_factorial));
    assert!(got == expected && theirs == expected, "the factorials agree");
    row("factorial", seq, ours, rayon);
    println!("           {FACT}! has {} bits", expected.bits());

    let (seq, expected) = best(|| (0..LEN as u64).map(|i| i * i % 1000).collect::<Vec<_>>());
    let (ours, got) = best(|| collect(&sch));
    let (rayon, theirs) = best(|| {
        rayon_pool.install(|| {
            (0..LEN as u64)
                .into_par_iter()
                .fold(Vec::new, |mut acc, i| {
                    acc.push(i * i % 1000);
                    acc
                })
                .reduce(Vec::new, |mut l, mut r| {
                    l.append(&mut r);
                    l
                })
        })
    });
    assert!(got == expected && theirs == expected, "the collects agree, in order");
    row("collect", seq, ours, rayon);
    let (ours, got) = best(|| collect_in_place(&sch));
    let (rayon, theirs) =
        best(|| rayon_pool.install(|| (0..LEN as u64).into_par_iter().map(|i| i * i % 1000).collect::<Vec<_>>()));
    assert!(got == expected && theirs == expected, "the collects in place agree");
    row("in place", seq, ours, rayon);

    let matrix: Vec<f64> = (0..SIDE * SIDE).map(|i| (i % 89 + 1) as f64).collect();
    let (seq, expected) = best(|| {
        let mut m = matrix.clone();
        m.chunks_mut(SIDE).for_each(normalise);
        m
    });
    let (ours, got) = best(|| rows(&sch, matrix.clone()));
    let (rayon, theirs) = best(|| {
        let mut m = matrix.clone();
        rayon_pool.install(|| m.par_chunks_mut(SIDE).for_each(normalise));
        m
    });
    assert!(got == expected && theirs == expected, "the scaled matrices agree");
    row("rows", seq, ours, rayon);
}
