//! Nested fork-join: recursive functions that `sync_wait` a `when_all` of
//! their two children on the pool, as a user writes `rayon::join` recursions with
//! senders; and the big-integer product of rayon-demo's factorial, the same for both
//! sides. Shared by `benches/pool.rs` and `tests/nested_alloc.rs`, so that the
//! allocation test checks the benchmarked code.

#![allow(dead_code)]

use senders::{PoolScheduler, SenderExt, schedule, sync_wait, when_all};

/// `fib(n)`: each call waits for `fib(n - 1)` and `fib(n - 2)`, both scheduled on the
/// pool. On a worker the wait runs the children (one inline, the other taken back
/// unless a thief took it first).
pub fn nested_fib(n: u64, sch: &PoolScheduler) -> u64 {
    if n < 2 {
        return n;
    }
    let both =
        when_all((schedule(sch).then(|()| nested_fib(n - 1, sch)), schedule(sch).then(|()| nested_fib(n - 2, sch))));
    let (a, b) = sync_wait(both).unwrap().unwrap();
    a + b
}

/// The node count of a complete binary tree of depth `d` (`2^d - 1`), the same way.
pub fn nested_tree(d: u32, sch: &PoolScheduler) -> u64 {
    if d <= 1 {
        return 1;
    }
    let both =
        when_all((schedule(sch).then(|()| nested_tree(d - 1, sch)), schedule(sch).then(|()| nested_tree(d - 1, sch))));
    let (a, b) = sync_wait(both).unwrap().unwrap();
    a + b + 1
}

/// A natural number in base 2^32, least significant limb first, without high zero
/// limbs: just enough of a big integer for rayon-demo's factorial, the same on both
/// sides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nat(Vec<u32>);

impl Nat {
    pub fn from_u32(v: u32) -> Nat {
        Nat(if v == 0 { Vec::new() } else { vec![v] })
    }

    /// Schoolbook multiplication.
    pub fn mul(&self, other: &Nat) -> Nat {
        if self.0.is_empty() || other.0.is_empty() {
            return Nat(Vec::new());
        }
        let mut out = vec![0u32; self.0.len() + other.0.len()];
        for (i, &a) in self.0.iter().enumerate() {
            let mut carry = 0u64;
            for (j, &b) in other.0.iter().enumerate() {
                let t = u64::from(a) * u64::from(b) + u64::from(out[i + j]) + carry;
                out[i + j] = t as u32;
                carry = t >> 32;
            }
            out[i + other.0.len()] = carry as u32;
        }
        while out.last() == Some(&0) {
            out.pop();
        }
        Nat(out)
    }

    /// The number of trailing zero bits (the exponent of 2), for checks.
    pub fn trailing_zeros(&self) -> u64 {
        let zero_limbs = self.0.iter().take_while(|&&l| l == 0).count();
        zero_limbs as u64 * 32 + self.0.get(zero_limbs).map_or(0, |l| u64::from(l.trailing_zeros()))
    }

    /// The number of significant bits.
    pub fn bits(&self) -> u64 {
        self.0.last().map_or(0, |&l| (self.0.len() as u64 - 1) * 32 + u64::from(32 - l.leading_zeros()))
    }
}

/// `a * (a + 1) * ... * b` by divide and conquer, each split waited for with
/// `sync_wait(when_all(..))` on the pool (rayon-demo's `factorial::join`).
pub fn nested_product(a: u32, b: u32, sch: &PoolScheduler) -> Nat {
    if a == b {
        return Nat::from_u32(a);
    }
    let mid = (a + b) / 2;
    let both = when_all((
        schedule(sch).then(|()| nested_product(a, mid, sch)),
        schedule(sch).then(|()| nested_product(mid + 1, b, sch)),
    ));
    let (x, y) = sync_wait(both).unwrap().unwrap();
    x.mul(&y)
}

/// The same product with `rayon::join`.
pub fn rayon_product(a: u32, b: u32) -> Nat {
    if a == b {
        return Nat::from_u32(a);
    }
    let mid = (a + b) / 2;
    let (x, y) = rayon::join(|| rayon_product(a, mid), || rayon_product(mid + 1, b));
    x.mul(&y)
}

/// The same product, sequentially.
pub fn seq_product(a: u32, b: u32) -> Nat {
    if a == b {
        return Nat::from_u32(a);
    }
    let mid = (a + b) / 2;
    seq_product(a, mid).mul(&seq_product(mid + 1, b))
}
