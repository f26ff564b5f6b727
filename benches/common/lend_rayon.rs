//! The divide-and-conquer programs of `examples/mergesort.rs`, `examples/matmul.rs` and
//! `examples/strassen.rs` written with `rayon::join`, step for step (same grain, same
//! scratch allocations, same sequential leaves and merges): rayon's side of
//! `benches/lend.rs` and of the report (`examples/report.rs`). The including crate
//! declares the three examples as the modules `mergesort`, `matmul` and `strassen` at
//! its root.

use std::borrow::Cow;

use crate::{matmul, mergesort, strassen};

/// Sorts `v` with `buf` as scratch, as `mergesort::sort` does.
pub fn rayon_sort(v: &mut [u32], buf: &mut [u32]) {
    if v.len() <= mergesort::GRAIN {
        v.sort_unstable();
        return;
    }
    let mid = v.len() / 2;
    {
        let (v1, v2) = v.split_at_mut(mid);
        let (b1, b2) = buf.split_at_mut(mid);
        rayon::join(|| rayon_sort(v1, b1), || rayon_sort(v2, b2));
    }
    mergesort::merge(&v[..mid], &v[mid..], buf);
    v.copy_from_slice(buf);
}

/// `dest += a × b` in z-order, as `matmul::mul_add` does.
pub fn rayon_mul_add(a: &[f32], b: &[f32], dest: &mut [f32], n: usize) {
    use matmul::{block_mul_add, quadrants, quadrants_mut};
    if n <= matmul::BLOCK {
        block_mul_add(a, b, dest);
        return;
    }
    let h = n / 2;
    let [a00, a01, a10, a11] = quadrants(a);
    let [b00, b01, b10, b11] = quadrants(b);
    let mut tmp = vec![0.0f32; n * n];
    {
        let [d00, d01, d10, d11] = quadrants_mut(dest);
        let [t00, t01, t10, t11] = quadrants_mut(&mut tmp);
        rayon::join(
            || {
                rayon::join(
                    || rayon::join(|| rayon_mul_add(a00, b00, d00, h), || rayon_mul_add(a00, b01, d01, h)),
                    || rayon::join(|| rayon_mul_add(a10, b00, d10, h), || rayon_mul_add(a10, b01, d11, h)),
                )
            },
            || {
                rayon::join(
                    || rayon::join(|| rayon_mul_add(a01, b10, t00, h), || rayon_mul_add(a01, b11, t01, h)),
                    || rayon::join(|| rayon_mul_add(a11, b10, t10, h), || rayon_mul_add(a11, b11, t11, h)),
                )
            },
        );
    }
    dest.iter_mut().zip(&tmp).for_each(|(d, t)| *d += t);
}

/// One of Strassen's seven products: its operands made, then multiplied.
fn rayon_product<'a>(operands: impl FnOnce() -> (strassen::Operand<'a>, strassen::Operand<'a>), n: usize) -> Vec<f32> {
    let (x, y) = operands();
    rayon_strassen(&x, &y, n)
}

/// `a × b` by Strassen's algorithm, as `strassen::multiply` does.
pub fn rayon_strassen(a: &[f32], b: &[f32], n: usize) -> Vec<f32> {
    use strassen::{add, quadrants, sub};
    if n <= strassen::BLOCK {
        return strassen::block_mul(a, b);
    }
    let h = n / 2;
    let [a11, a12, a21, a22] = quadrants(a);
    let [b11, b12, b21, b22] = quadrants(b);
    let (add, sub) = (|x, y| Cow::Owned(add(x, y)), |x, y| Cow::Owned(sub(x, y)));
    let (((m1, m2), (m3, m4)), ((m5, m6), m7)) = rayon::join(
        || {
            rayon::join(
                || {
                    rayon::join(
                        || rayon_product(|| (add(a11, a22), add(b11, b22)), h),
                        || rayon_product(|| (add(a21, a22), Cow::Borrowed(b11)), h),
                    )
                },
                || {
                    rayon::join(
                        || rayon_product(|| (Cow::Borrowed(a11), sub(b12, b22)), h),
                        || rayon_product(|| (Cow::Borrowed(a22), sub(b21, b11)), h),
                    )
                },
            )
        },
        || {
            rayon::join(
                || {
                    rayon::join(
                        || rayon_product(|| (add(a11, a12), Cow::Borrowed(b22)), h),
                        || rayon_product(|| (sub(a21, a11), add(b11, b12)), h),
                    )
                },
                || rayon_product(|| (sub(a12, a22), add(b21, b22)), h),
            )
        },
    );
    strassen::combine((m1, m2, m3, m4, m5, m6, m7))
}
