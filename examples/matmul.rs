//! Matrix multiplication in z-order as a sender graph: `dest += a × b` splits each
//! matrix into quadrants and runs the 8 quadrant products in parallel, 4 into `dest`'s
//! quadrants and 4 into a scratch matrix, then adds the scratch matrix into `dest`. The
//! node keeps `dest` and the scratch matrix in a `let_value_ref`, lends their quadrants
//! to the children, and has both back for the sum. No `Task`, no `unsafe`.
//!
//! Layout ("z-order" by quadrants): a matrix of side `n > BLOCK` is its four quadrants
//! (top left, top right, bottom left, bottom right), each of side `n / 2` and laid out
//! the same way, one after another; a matrix of side `BLOCK` is row-major.
//!
//! `cargo run --release --example matmul` multiplies two 128 × 128 matrices on a
//! 2-worker pool and checks the product against a plain loop; an argument sets the side
//! (a power of two, at least `BLOCK`). `benches/lend.rs` times the same code against
//! `rayon::join`.

use senders::{AnySender, SenderExt, StaticThreadPool, just, starts_on, sync_wait_value, when_all};

/// The side of the row-major blocks at the leaves.
pub const BLOCK: usize = 32;

/// The four quadrants of a z-order matrix.
pub fn quadrants(m: &[f32]) -> [&[f32]; 4] {
    let q = m.len() / 4;
    let (top, bottom) = m.split_at(2 * q);
    let (q0, q1) = top.split_at(q);
    let (q2, q3) = bottom.split_at(q);
    [q0, q1, q2, q3]
}

/// The four quadrants of a z-order matrix, mutable.
pub fn quadrants_mut(m: &mut [f32]) -> [&mut [f32]; 4] {
    let q = m.len() / 4;
    let (top, bottom) = m.split_at_mut(2 * q);
    let (q0, q1) = top.split_at_mut(q);
    let (q2, q3) = bottom.split_at_mut(q);
    [q0, q1, q2, q3]
}

/// `dest += a × b` for row-major `BLOCK × BLOCK` blocks.
pub fn block_mul_add(a: &[f32], b: &[f32], dest: &mut [f32]) {
    for i in 0..BLOCK {
        for k in 0..BLOCK {
            let aik = a[i * BLOCK + k];
            let row = &b[k * BLOCK..(k + 1) * BLOCK];
            for (d, &bkj) in dest[i * BLOCK..(i + 1) * BLOCK].iter_mut().zip(row) {
                *d += aik * bkj;
            }
        }
    }
}

/// `dest += a × b` for z-order matrices of side `n`.
pub fn mul_add<'a>(a: &'a [f32], b: &'a [f32], dest: &'a mut [f32], n: usize) -> AnySender<'a, ()> {
    if n <= BLOCK {
        return just(dest).then(move |dest| block_mul_add(a, b, dest)).boxed();
    }
    let h = n / 2;
    let [a00, a01, a10, a11] = quadrants(a);
    let [b00, b01, b10, b11] = quadrants(b);
    // The scratch matrix is made when the node runs, in the `then`, not when its sender
    // is built: a node builds its 8 children's senders before the first one runs, so a
    // `vec!` in `just(..)` would zero 8 scratch matrices at once on the parent's worker,
    // long before and far from their use (callgrind: 2.4 times rayon's last-level misses).
    just(dest)
        .then(move |dest| (dest, vec![0.0f32; n * n]))
        .let_value_ref(move |(dest, tmp), _| {
            let [d00, d01, d10, d11] = quadrants_mut(dest);
            let [t00, t01, t10, t11] = quadrants_mut(tmp);
            when_all((
                mul_add(a00, b00, d00, h),
                mul_add(a00, b01, d01, h),
                mul_add(a10, b00, d10, h),
                mul_add(a10, b01, d11, h),
                mul_add(a01, b10, t00, h),
                mul_add(a01, b11, t01, h),
                mul_add(a11, b10, t10, h),
                mul_add(a11, b11, t11, h),
            ))
            .boxed()
        })
        .then(|((dest, tmp), _)| dest.iter_mut().zip(&tmp).for_each(|(d, t)| *d += t))
        .boxed()
}

/// The index in a z-order matrix of side `n` of row `i`, column `j`.
pub fn z_index(n: usize, i: usize, j: usize) -> usize {
    if n <= BLOCK {
        return i * n + j;
    }
    let h = n / 2;
    let quadrant = 2 * (i / h) + j / h;
    quadrant * h * h + z_index(h, i % h, j % h)
}

/// A z-order matrix of side `n` with pseudo-random entries in `[-1, 1)` (a fixed seed).
pub fn input(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed | 1;
    (0..n * n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// `a × b` by the plain triple loop over z-order matrices of side `n`.
pub fn reference(a: &[f32], b: &[f32], n: usize) -> Vec<f32> {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for j in 0..n {
            c[z_index(n, i, j)] = (0..n).map(|k| a[z_index(n, i, k)] * b[z_index(n, k, j)]).sum();
        }
    }
    c
}

#[allow(dead_code)]
fn main() {
    let n: usize = std::env::args().nth(1).map_or(128, |s| s.parse().expect("a side"));
    assert!(n.is_power_of_two() && n >= BLOCK, "the side is a power of two, at least {BLOCK}");
    let pool = StaticThreadPool::new(2).expect("a pool");
    let (a, b) = (input(n, 1), input(n, 2));
    let mut c = vec![0.0f32; n * n];
    let start = std::time::Instant::now();
    sync_wait_value(starts_on(pool.scheduler(), mul_add(&a, &b, &mut c, n)));
    let took = start.elapsed();
    let expected = reference(&a, &b, n);
    let worst = c.iter().zip(&expected).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
    assert!(worst < 1e-3 * n as f32, "the product matches the plain loop (worst error {worst})");
    println!("multiplied two {n} x {n} matrices in {took:?} on 2 workers (worst error {worst:.2e})");
}
