//! Merge sort as a sender graph: each node lends the two halves of its slice (and of a
//! scratch buffer) to its children with `let_value_ref`, and merges once they are done,
//! with the whole slice back in hand. No `Task`, no `unsafe`, no `Arc`: the children
//! borrow the caller's vector, and the pool's `when_all` forks them.
//!
//! It shows how `let_value_ref` lends; to sort, use the crate's own parallel sorts,
//! `SenderExt::bulk_sort` and `bulk_sort_unstable` (a merge sort with parallel merges
//! and a quicksort, both with the std sorts at their leaves).
//!
//! `cargo run --release --example mergesort` sorts 2^16 numbers on a 2-worker pool and
//! checks the result; an argument sets the length, e.g. `-- 1000000`. `benches/lend.rs`
//! times the same code against `rayon::join`.

use senders::{AnySender, SenderExt, StaticThreadPool, just, starts_on, sync_wait_value, when_all};

/// Slices this long or shorter are sorted sequentially.
pub const GRAIN: usize = 2048;

/// Sorts `v`, using `buf` (as long as `v`) as scratch: the halves in parallel, then a
/// merge into `buf`, copied back.
pub fn sort<'a>(v: &'a mut [u32], buf: &'a mut [u32]) -> AnySender<'a, ()> {
    if v.len() <= GRAIN {
        // Lazy: the leaf sorts when its operation runs, on the worker that runs it.
        return just(v).then(|v| v.sort_unstable()).boxed();
    }
    just((v, buf))
        .let_value_ref(|(v, buf), _| {
            let mid = v.len() / 2;
            let (v1, v2) = v.split_at_mut(mid);
            let (b1, b2) = buf.split_at_mut(mid);
            when_all((sort(v1, b1), sort(v2, b2))).boxed()
        })
        .then(|((v, buf), ((), ()))| {
            let mid = v.len() / 2;
            merge(&v[..mid], &v[mid..], buf);
            v.copy_from_slice(buf);
        })
        .boxed()
}

/// Merges the sorted `left` and `right` into `out` (`left.len() + right.len()` long).
pub fn merge(left: &[u32], right: &[u32], out: &mut [u32]) {
    let (mut i, mut j) = (0, 0);
    for slot in out.iter_mut() {
        if j == right.len() || (i < left.len() && left[i] <= right[j]) {
            *slot = left[i];
            i += 1;
        } else {
            *slot = right[j];
            j += 1;
        }
    }
}

/// `n` pseudo-random numbers (a fixed seed).
pub fn input(n: usize) -> Vec<u32> {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u32
        })
        .collect()
}

#[allow(dead_code)]
fn main() {
    let n = std::env::args().nth(1).map_or(1 << 16, |s| s.parse().expect("a length"));
    let pool = StaticThreadPool::new(2).expect("a pool");
    let mut v = input(n);
    let mut expected = v.clone();
    expected.sort_unstable();
    let mut buf = vec![0; n];
    let start = std::time::Instant::now();
    sync_wait_value(starts_on(pool.scheduler(), sort(&mut v, &mut buf)));
    let took = start.elapsed();
    assert_eq!(v, expected, "sorted");
    println!("sorted {n} numbers in {took:?} on 2 workers");
}
