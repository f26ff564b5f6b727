//! Data-parallel programs as rayon users write them, ours and rayon's idiomatic form side
//! by side (`benches/data.rs`, `examples/report.rs`): each [`DataCase`] is two routines
//! that return a digest of their output, and the digest of the sequential program, which
//! both must match; [`cases`] also checks each side's whole output against the
//! sequential one once, when it builds the case.
//!
//! | case | ours | rayon |
//! |---|---|---|
//! | `sieve` | segments of odd numbers, `bulk_chunks_mut_with(Grain::new().max_len(1), ..)` | `par_chunks_mut(..).enumerate().for_each(..)` |
//! | `wordcount` | `bulk_reduce` over the text's bytes, a `HashMap<&str, usize>` per accumulator, default grain | `par_split_whitespace().fold(HashMap::new, ..).reduce(HashMap::new, ..)` |
//! | `dot` | `bulk_map_reduce` of `a[i] * b[i]` | `par_iter().zip(..).map(..).sum()` |
//! | `sumsq` | `bulk_map_reduce` of `a[i] * a[i]` | `par_iter().map(..).sum()` |
//! | `mandel_rows` | `bulk_chunks_mut` by rows | `par_chunks_mut(side).enumerate().for_each(..)` |
//! | `mandel_px` | `bulk_each` by pixels | `par_iter_mut().enumerate().for_each(..)` |
//!
//! Further cases (another file's) are `DataCase`s too: a bench lists them after these.

use std::collections::HashMap;

use rayon::prelude::*;
use senders::{Grain, PoolScheduler, SenderExt, schedule, sync_wait};

/// How big the inputs are.
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    /// The sieve finds the primes below this.
    pub sieve_below: usize,
    /// Bytes of generated text the word count reads.
    pub text_bytes: usize,
    /// Elements of the dot product and the sum of squares.
    pub dot_len: usize,
    /// Pixels on a side of the mandelbrot image.
    pub mandel_side: usize,
}

impl Sizes {
    /// The bench's sizes: primes below 10^8, 26 MB of text, 2^22 elements, 2048².
    pub const BENCH: Sizes =
        Sizes { sieve_below: 100_000_000, text_bytes: 26 << 20, dot_len: 1 << 22, mandel_side: 2048 };
    /// The quick report's sizes.
    pub const QUICK: Sizes = Sizes { sieve_below: 10_000_000, text_bytes: 4 << 20, dot_len: 1 << 20, mandel_side: 512 };
}

/// What the routines run on: our pool's scheduler and rayon's pool.
#[derive(Clone, Copy)]
pub struct Ctx<'a> {
    pub sch: &'a PoolScheduler,
    pub rayon: &'a rayon::ThreadPool,
}

/// A routine of one side: runs the program once and returns its output's digest.
pub type Routine<'a> = Box<dyn FnMut() -> u64 + 'a>;

/// One program: ours and rayon's routine, and the sequential program's digest.
pub struct DataCase<'a> {
    /// A short name (`wordcount`).
    pub name: &'static str,
    /// What it is, for a report's row.
    pub title: String,
    /// Rayon's form, for a report's row.
    pub baseline: &'static str,
    pub ours: Routine<'a>,
    pub rayon: Routine<'a>,
    /// The sequential program's digest, which both routines return.
    pub expected: u64,
}

/// The cases of this file that `wanted` names, sized by `sizes` (only those are built).
pub fn cases<'a>(ctx: Ctx<'a>, sizes: Sizes, wanted: &dyn Fn(&str) -> bool) -> Vec<DataCase<'a>> {
    type Build<'a> = fn(Ctx<'a>, Sizes) -> DataCase<'a>;
    let all: [(&str, Build<'a>); 6] = [
        ("sieve", |c, s| sieve(c, s.sieve_below)),
        ("wordcount", |c, s| wordcount(c, s.text_bytes)),
        ("dot", |c, s| dot(c, s.dot_len)),
        ("sumsq", |c, s| sumsq(c, s.dot_len)),
        ("mandel_rows", |c, s| mandel_rows(c, s.mandel_side)),
        ("mandel_px", |c, s| mandel_px(c, s.mandel_side)),
    ];
    all.into_iter().filter(|(name, _)| wanted(name)).map(|(_, build)| build(ctx, sizes)).collect()
}

/// A digest of a slice: its length and every 4093rd element, mixed.
fn digest<T: Copy + Into<u64>>(v: &[T]) -> u64 {
    v.iter().step_by(4093).fold(v.len() as u64, |h, &x| h.rotate_left(5) ^ x.into().wrapping_mul(0x9e37_79b9))
}

// --- sieve ---------------------------------------------------------------------------

/// Odd numbers per segment of the sieve (64 KiB of flags: fits the L2 cache).
const SEGMENT: usize = 1 << 16;

/// The primes up to `n`, by a plain sieve.
fn small_primes(n: usize) -> Vec<usize> {
    let mut composite = vec![false; n + 1];
    let mut primes = Vec::new();
    for i in 2..=n {
        if !composite[i] {
            primes.push(i);
            (i * i..=n).step_by(i).for_each(|j| composite[j] = true);
        }
    }
    primes
}

/// Sieves segment `s` of the odd numbers: `flags[k]` becomes whether `2 (s SEGMENT + k)
/// + 1` is prime (1 is not), with the odd primes up to √n in `base`.
fn sieve_segment(s: usize, flags: &mut [u8], base: &[usize]) {
    flags.fill(1);
    let lo = 2 * s * SEGMENT + 1;
    let hi = lo + 2 * flags.len();
    if s == 0 {
        flags[0] = 0;
    }
    for &p in base {
        if p * p >= hi {
            break;
        }
        // The first odd multiple of p at or above max(p², lo).
        let mut m = (p * p).max(lo.div_ceil(p) * p);
        if m % 2 == 0 {
            m += p;
        }
        (((m - lo) / 2)..flags.len()).step_by(p).for_each(|k| flags[k] = 0);
    }
}

/// The number of primes below `n` and the digest of the flags.
fn sieve_digest(flags: &[u8]) -> u64 {
    let primes = 1 + flags.iter().map(|&f| u64::from(f)).sum::<u64>();
    primes ^ (digest(flags) << 32)
}

fn sieve(ctx: Ctx<'_>, below: usize) -> DataCase<'_> {
    let odds = below / 2;
    let base: Vec<usize> = small_primes(below.isqrt() + 1).into_iter().skip(1).collect();
    let mut seq = vec![0u8; odds];
    seq.chunks_mut(SEGMENT).enumerate().for_each(|(s, f)| sieve_segment(s, f, &base));
    let expected = sieve_digest(&seq);
    let (base_ours, base_rayon) = (base.clone(), base);
    let (mut mine, mut theirs) = (vec![0u8; odds], vec![0u8; odds]);
    let mut ours = move || {
        let base = &base_ours;
        let flags = &mut mine[..];
        let done = sync_wait(schedule(ctx.sch).then(move |()| flags).bulk_chunks_mut_with(
            Grain::new().max_len(1),
            SEGMENT,
            move |s, f: &mut [u8]| sieve_segment(s, f, base),
        ));
        sieve_digest(done.expect("sieve").expect("a value"))
    };
    let mut rayon = move || {
        let base = &base_rayon;
        ctx.rayon.install(|| theirs.par_chunks_mut(SEGMENT).enumerate().for_each(|(s, f)| sieve_segment(s, f, base)));
        sieve_digest(&theirs)
    };
    assert_eq!(ours(), expected, "sieve: ours against the sequential sieve");
    assert_eq!(rayon(), expected, "sieve: rayon's against the sequential sieve");
    DataCase {
        name: "sieve",
        title: format!("primes below {below} by segments (`bulk_chunks_mut_with`)"),
        baseline: "`par_chunks_mut`",
        ours: Box::new(ours),
        rayon: Box::new(rayon),
        expected,
    }
}

// --- word count ------------------------------------------------------------------------

/// A deterministic text of at least `bytes` bytes: lines of a dozen words drawn, skewed
/// towards the first ones, from a vocabulary of 20,000 made-up words.
pub fn text(bytes: usize) -> String {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let vocabulary: Vec<String> = (0..20_000)
        .map(|_| {
            let len = 2 + next() % 9;
            (0..len).map(|_| char::from(b'a' + (next() % 26) as u8)).collect()
        })
        .collect();
    let mut text = String::with_capacity(bytes + 128);
    let mut words = 0;
    while text.len() < bytes {
        let bound = 1 + next() % vocabulary.len() as u64;
        text.push_str(&vocabulary[(next() % bound) as usize]);
        words += 1;
        text.push(if words % 12 == 0 { '\n' } else { ' ' });
    }
    text
}

/// Word counts.
pub type Counts<'t> = HashMap<&'t str, usize>;

/// Adds the words of `text` to `counts`.
fn count_into<'t>(mut counts: Counts<'t>, text: &'t str) -> Counts<'t> {
    for w in text.split_whitespace() {
        *counts.entry(w).or_insert(0) += 1;
    }
    counts
}

/// The two maps' counts in one (the smaller added into the larger).
fn merge<'t>(a: Counts<'t>, b: Counts<'t>) -> Counts<'t> {
    let (mut big, small) = if a.len() >= b.len() { (a, b) } else { (b, a) };
    for (w, n) in small {
        *big.entry(w).or_insert(0) += n;
    }
    big
}

/// The first byte at or after `i` where a word starts or the text ends (the text is
/// ASCII, so every byte is a char boundary).
fn word_start(bytes: &[u8], mut i: usize) -> usize {
    if i == 0 {
        return 0;
    }
    while i < bytes.len() && !bytes[i - 1].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// An order-independent digest of the counts.
fn counts_digest(counts: &Counts<'_>) -> u64 {
    counts.iter().fold(counts.len() as u64, |h, (w, &n)| {
        let k = w.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
        h.wrapping_add(k.wrapping_mul(n as u64 | 1))
    })
}

fn wordcount(ctx: Ctx<'_>, bytes: usize) -> DataCase<'_> {
    let text: &'static str = Box::leak(text(bytes).into_boxed_str());
    let seq = count_into(Counts::new(), text);
    let expected = counts_digest(&seq);
    let ours = move || -> Counts<'static> {
        let counted = sync_wait(schedule(ctx.sch).then(move |()| text.as_bytes()).bulk_reduce(
            text.len(),
            Counts::new,
            |counts, b, e, bytes: &&[u8]| count_into(counts, &text[word_start(bytes, b)..word_start(bytes, e)]),
            merge,
        ));
        counted.expect("word count").expect("a value")
    };
    let rayon = move || -> Counts<'static> {
        ctx.rayon.install(|| {
            text.par_split_whitespace()
                .fold(Counts::new, |mut m, w| {
                    *m.entry(w).or_insert(0) += 1;
                    m
                })
                .reduce(Counts::new, merge)
        })
    };
    assert!(ours() == seq, "word count: ours against the sequential count");
    assert!(rayon() == seq, "word count: rayon's against the sequential count");
    DataCase {
        name: "wordcount",
        title: format!("word count of {} MB of text (`bulk_reduce`, default grain)", bytes >> 20),
        baseline: "`fold(HashMap::new, ..).reduce(..)`",
        ours: Box::new(move || counts_digest(&ours())),
        rayon: Box::new(move || counts_digest(&rayon())),
        expected,
    }
}

// --- dot product and sum of squares ------------------------------------------------------

/// `n` pseudo-random numbers below 2^20 (so no product or sum overflows).
fn numbers(n: usize, seed: u64) -> Vec<u64> {
    (0..n as u64).map(|i| (i ^ seed).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 44).collect()
}

fn dot(ctx: Ctx<'_>, n: usize) -> DataCase<'_> {
    let (a, b) = (numbers(n, 1), numbers(n, 2));
    let expected: u64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
    let (a, b): (&'static [u64], &'static [u64]) = (a.leak(), b.leak());
    let ours = move || {
        let dot = sync_wait(schedule(ctx.sch).then(move |()| (a, b)).bulk_map_reduce(
            a.len(),
            |i, (a, b): &(&[u64], &[u64])| a[i] * b[i],
            |x, y| x + y,
        ));
        dot.expect("dot").expect("a value").unwrap_or(0)
    };
    let rayon = move || ctx.rayon.install(|| a.par_iter().zip(b).map(|(x, y)| x * y).sum::<u64>());
    assert_eq!(ours(), expected, "dot: ours against the sequential sum");
    assert_eq!(rayon(), expected, "dot: rayon's against the sequential sum");
    DataCase {
        name: "dot",
        title: format!("dot product of 2 × {} Mi `u64` (`bulk_map_reduce`)", n >> 20),
        baseline: "`par_iter().zip(..).map(..).sum()`",
        ours: Box::new(ours),
        rayon: Box::new(rayon),
        expected,
    }
}

fn sumsq(ctx: Ctx<'_>, n: usize) -> DataCase<'_> {
    let a = numbers(n, 3);
    let expected: u64 = a.iter().map(|x| x * x).sum();
    let a: &'static [u64] = a.leak();
    let ours = move || {
        let sum = sync_wait(schedule(ctx.sch).then(move |()| a).bulk_map_reduce(
            a.len(),
            |i, a: &&[u64]| a[i] * a[i],
            |x, y| x + y,
        ));
        sum.expect("sum of squares").expect("a value").unwrap_or(0)
    };
    let rayon = move || ctx.rayon.install(|| a.par_iter().map(|x| x * x).sum::<u64>());
    assert_eq!(ours(), expected, "sum of squares: ours against the sequential sum");
    assert_eq!(rayon(), expected, "sum of squares: rayon's against the sequential sum");
    DataCase {
        name: "sumsq",
        title: format!("sum of squares of {} Mi `u64` (`bulk_map_reduce`)", n >> 20),
        baseline: "`par_iter().map(..).sum()`",
        ours: Box::new(ours),
        rayon: Box::new(rayon),
        expected,
    }
}

// --- mandelbrot -------------------------------------------------------------------------

/// Iterations at most per pixel.
const MAX_ITER: u32 = 128;

/// The escape time of pixel `(x, y)` of a `side`² view of `[-2, 1] × [-1.5, 1.5]`.
#[inline]
fn escape(x: usize, y: usize, side: usize) -> u32 {
    let scale = 3.0 / side as f64;
    let (cr, ci) = (x as f64 * scale - 2.0, y as f64 * scale - 1.5);
    let (mut zr, mut zi) = (0.0f64, 0.0f64);
    let mut n = 0;
    while n < MAX_ITER && zr * zr + zi * zi <= 4.0 {
        (zr, zi) = (zr * zr - zi * zi + cr, 2.0 * zr * zi + ci);
        n += 1;
    }
    n
}

/// The image, sequentially.
fn mandel_seq(side: usize) -> Vec<u32> {
    (0..side * side).map(|i| escape(i % side, i / side, side)).collect()
}

fn mandel_rows(ctx: Ctx<'_>, side: usize) -> DataCase<'_> {
    let seq = mandel_seq(side);
    let expected = digest(&seq);
    let (mut mine, mut theirs) = (vec![0u32; side * side], vec![0u32; side * side]);
    let mut ours = move || {
        let image = &mut mine[..];
        let done =
            sync_wait(schedule(ctx.sch).then(move |()| image).bulk_chunks_mut(side, move |y, row: &mut [u32]| {
                row.iter_mut().enumerate().for_each(|(x, p)| *p = escape(x, y, side));
            }));
        digest(done.expect("mandelbrot").expect("a value"))
    };
    let mut rayon = move || {
        ctx.rayon.install(|| {
            theirs.par_chunks_mut(side).enumerate().for_each(|(y, row)| {
                row.iter_mut().enumerate().for_each(|(x, p)| *p = escape(x, y, side));
            })
        });
        digest(&theirs)
    };
    assert_eq!(ours(), expected, "mandelbrot by rows: ours");
    assert_eq!(rayon(), expected, "mandelbrot by rows: rayon's");
    DataCase {
        name: "mandel_rows",
        title: format!("mandelbrot {side}² by rows (`bulk_chunks_mut`)"),
        baseline: "`par_chunks_mut`",
        ours: Box::new(ours),
        rayon: Box::new(rayon),
        expected,
    }
}

fn mandel_px(ctx: Ctx<'_>, side: usize) -> DataCase<'_> {
    let expected = digest(&mandel_seq(side));
    let (mut mine, mut theirs) = (vec![0u32; side * side], vec![0u32; side * side]);
    let mut ours = move || {
        let image = &mut mine[..];
        let done = sync_wait(
            schedule(ctx.sch)
                .then(move |()| image)
                .bulk_each(move |i, p: &mut u32| *p = escape(i % side, i / side, side)),
        );
        digest(done.expect("mandelbrot").expect("a value"))
    };
    let mut rayon = move || {
        ctx.rayon.install(|| {
            theirs.par_iter_mut().enumerate().for_each(|(i, p)| *p = escape(i % side, i / side, side));
        });
        digest(&theirs)
    };
    assert_eq!(ours(), expected, "mandelbrot by pixels: ours");
    assert_eq!(rayon(), expected, "mandelbrot by pixels: rayon's");
    DataCase {
        name: "mandel_px",
        title: format!("mandelbrot {side}² by pixels (`bulk_each`)"),
        baseline: "`par_iter_mut().enumerate().for_each(..)`",
        ours: Box::new(ours),
        rayon: Box::new(rayon),
        expected,
    }
}
