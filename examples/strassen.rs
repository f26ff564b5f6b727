//! Strassen's matrix multiplication as a sender graph: a node computes its 7 products
//! in parallel and combines the matrices they return. Each product first makes the sums
//! of quadrants it multiplies (on the worker that runs it), keeps them in a
//! `let_value_ref` and lends them to the recursion; the quadrants of the inputs are
//! borrowed from the caller all the way down. No `Task`, no `unsafe`.
//!
//! The layout is `matmul`'s z-order by quadrants (see `examples/matmul.rs`): a matrix of
//! side `n > BLOCK` is its four quadrants one after another, a `BLOCK` one row-major.
//!
//! `cargo run --release --example strassen` multiplies two 128 × 128 matrices on a
//! 2-worker pool and checks the product against a plain loop; an argument sets the side
//! (a power of two, at least `BLOCK`). `benches/lend.rs` times the same code against
//! `rayon::join`.

use std::borrow::Cow;

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

/// `a × b` for row-major `BLOCK × BLOCK` blocks.
pub fn block_mul(a: &[f32], b: &[f32]) -> Vec<f32> {
    let mut c = vec![0.0f32; BLOCK * BLOCK];
    for i in 0..BLOCK {
        for k in 0..BLOCK {
            let aik = a[i * BLOCK + k];
            for (d, &bkj) in c[i * BLOCK..(i + 1) * BLOCK].iter_mut().zip(&b[k * BLOCK..(k + 1) * BLOCK]) {
                *d += aik * bkj;
            }
        }
    }
    c
}

/// `x + y`, element by element.
pub fn add(x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| x + y).collect()
}

/// `x - y`, element by element.
pub fn sub(x: &[f32], y: &[f32]) -> Vec<f32> {
    x.iter().zip(y).map(|(x, y)| x - y).collect()
}

/// An operand of a product: a quadrant, borrowed, or a sum of two, made by the product.
pub type Operand<'a> = Cow<'a, [f32]>;

/// A product of Strassen's: makes its two operands when it runs, keeps them in the
/// operation, and multiplies them by the recursion, which borrows them.
fn product<'a>(operands: impl FnOnce() -> (Operand<'a>, Operand<'a>) + Send + 'a, n: usize) -> AnySender<'a, Vec<f32>> {
    just(())
        .then(move |()| operands())
        .let_value_ref(move |(x, y), _| multiply(x, y, n))
        .then(|(_operands, m)| m)
        .boxed()
}

/// `a × b` for z-order matrices of side `n`, as a new matrix.
pub fn multiply<'a>(a: &'a [f32], b: &'a [f32], n: usize) -> AnySender<'a, Vec<f32>> {
    if n <= BLOCK {
        return just(()).then(move |()| block_mul(a, b)).boxed();
    }
    let h = n / 2;
    let [a11, a12, a21, a22] = quadrants(a);
    let [b11, b12, b21, b22] = quadrants(b);
    let (add, sub) = (|x, y| Cow::Owned(add(x, y)), |x, y| Cow::Owned(sub(x, y)));
    when_all((
        product(move || (add(a11, a22), add(b11, b22)), h),
        product(move || (add(a21, a22), Cow::Borrowed(b11)), h),
        product(move || (Cow::Borrowed(a11), sub(b12, b22)), h),
        product(move || (Cow::Borrowed(a22), sub(b21, b11)), h),
        product(move || (add(a11, a12), Cow::Borrowed(b22)), h),
        product(move || (sub(a21, a11), add(b11, b12)), h),
        product(move || (sub(a12, a22), add(b21, b22)), h),
    ))
    .then(combine)
    .boxed()
}

/// Strassen's seven products, in order.
pub type Products = (Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>, Vec<f32>);

/// The product's quadrants from Strassen's seven products, in z-order.
pub fn combine((m1, m2, m3, m4, m5, m6, m7): Products) -> Vec<f32> {
    let q = m1.len();
    let mut c = Vec::with_capacity(4 * q);
    c.extend((0..q).map(|i| m1[i] + m4[i] - m5[i] + m7[i]));
    c.extend((0..q).map(|i| m3[i] + m5[i]));
    c.extend((0..q).map(|i| m2[i] + m4[i]));
    c.extend((0..q).map(|i| m1[i] - m2[i] + m3[i] + m6[i]));
    c
}

/// The index in a z-order matrix of side `n` of row `i`, column `j`.
pub fn z_index(n: usize, i: usize, j: usize) -> usize {
    if n <= BLOCK {
        return i * n + j;
    }
    let h = n / 2;
    (2 * (i / h) + j / h) * h * h + z_index(h, i % h, j % h)
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

#[allow(dead_code)]
fn main() {
    let n: usize = std::env::args().nth(1).map_or(128, |s| s.parse().expect("a side"));
    assert!(n.is_power_of_two() && n >= BLOCK, "the side is a power of two, at least {BLOCK}");
    let pool = StaticThreadPool::new(2).expect("a pool");
    let (a, b) = (input(n, 1), input(n, 2));
    let start = std::time::Instant::now();
    let c = sync_wait_value(starts_on(pool.scheduler(), multiply(&a, &b, n)));
    let took = start.elapsed();
    let mut worst = 0.0f32;
    for i in 0..n {
        for j in 0..n {
            let exact: f32 = (0..n).map(|k| a[z_index(n, i, k)] * b[z_index(n, k, j)]).sum();
            worst = worst.max((c[z_index(n, i, j)] - exact).abs());
        }
    }
    assert!(worst < 1e-2 * n as f32, "the product matches the plain loop (worst error {worst})");
    println!(
        "multiplied two {n} x {n} matrices by Strassen's method in {took:?} on 2 workers (worst error {worst:.2e})"
    );
}
