//! Trees as users write them, against rayon, 2 workers a side, in one process: UTS's
//! standard trees T1 (geometric, 4.1 M nodes) and T3 (binomial, 4.1 M nodes, depth
//! 1572), drawn from its SHA-1 splittable generator (`common/uts.rs`), and BOTS's
//! nqueens(12) (`common/nqueens.rs`). The forms (`common/tree_forms.rs`): sequential
//! recursion; rayon's `scope` with a `spawn` per child, `par_iter` over the children,
//! `join` over halves of the child list; ours, with the public API and no `unsafe`: a
//! `spawn` per child into `let_async_scope` and into a `CountingScope`, nested
//! `sync_wait(when_all_iter(..))`, a `Task` per node awaiting `when_all_iter`,
//! `AnySender` + `defer(when_all_iter(..))`, and the `CountingScope` spawn form on a
//! pool with latent forks. Every run of every form checks the tree's counts (nodes,
//! leaves or solutions, depth).
//!
//! After criterion (one group per tree, one benchmark per form), every form is timed in
//! interleaved rounds (each round runs every form once, in an order rotated from round
//! to round), and the binary prints each form's median and its ratio to the median of
//! rayon's best form, with the range of the rounds' ratios.
//!
//! ```text
//! cargo bench --bench trees
//! SENDERS_TREES_PAIRED_ONLY=1 cargo bench --bench trees
//! ```
//!
//! `SENDERS_TREES_PAIRED_ONLY=1` runs the interleaved rounds alone;
//! `SENDERS_TREES_ROUNDS=<n>` sets their number (7 by default);
//! `SENDERS_TREES_FORMS=seq,rayon_par_iter,..` picks the forms (rayon's best is taken
//! among the rayon forms picked); `SENDERS_TREES_TREES=T1,nqueens12` the trees;
//! `SENDERS_TREES_LARGE=1` adds T1L (102 M nodes), T3L (111 M nodes, depth 17,844) and
//! nqueens(13). For profilers, `SENDERS_TREES_PROFILE=<form>:<tree>:<repeats>` runs one
//! form on one tree without criterion (e.g. `counting_spawn:T1:3`), and
//! `SENDERS_PROFILE_THREADS=1` gives every pool one worker, for exact callgrind counts.

use std::time::{Duration, Instant};

use criterion::{Criterion, SamplingMode};

#[path = "common/nqueens.rs"]
mod nqueens;
#[path = "common/paired.rs"]
#[allow(dead_code)] // shared by the benches; this one uses part of it
mod paired;
#[path = "common/tree_forms.rs"]
mod tree_forms;
#[path = "common/uts.rs"]
mod uts;

use tree_forms::{Ctx, Form, forms};
use uts::TreeWork;

/// Workers on every side.
const THREADS: usize = 2;
/// Interleaved rounds per tree.
const ROUNDS: usize = 7;

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// The forms picked by `SENDERS_TREES_FORMS` (all by default).
fn picked<W: TreeWork>() -> Vec<Form<W>> {
    let pick = env("SENDERS_TREES_FORMS");
    forms::<W>().into_iter().filter(|f| pick.as_ref().is_none_or(|p| p.split(',').any(|n| n == f.name))).collect()
}

/// Runs `form` on `w` and checks the counts.
fn run_checked<W: TreeWork>(ctx: &Ctx, w: W, form: &Form<W>) {
    let got = (form.run)(ctx, w);
    assert_eq!(got, w.expect(), "{} on {}: the counts", form.name, w.name());
}

/// `SENDERS_TREES_PROFILE=<form>:<tree>:<repeats>` on this tree, if it names it.
fn profile<W: TreeWork>(ctx: &Ctx, w: W, form: &str, repeats: u32) -> bool {
    let Some(f) = forms::<W>().into_iter().find(|f| f.name == form) else {
        panic!("unknown form {form:?}");
    };
    let start = Instant::now();
    for _ in 0..repeats {
        run_checked(ctx, w, &f);
    }
    println!("{form} on {} x {repeats}: {:?} per run", w.name(), start.elapsed() / repeats.max(1));
    true
}

/// Criterion's group for `w`, one benchmark per form.
fn criterion_tree<W: TreeWork>(c: &mut Criterion, ctx: &Ctx, w: W) {
    let mut g = c.benchmark_group(w.name());
    g.sample_size(10).sampling_mode(SamplingMode::Flat).warm_up_time(Duration::from_millis(500));
    g.measurement_time(Duration::from_secs(3));
    for f in picked::<W>() {
        g.bench_function(f.name, |b| b.iter(|| run_checked(ctx, w, &f)));
    }
    g.finish();
}

/// Every form in `rounds` interleaved rounds; prints each form's median and its ratio
/// to rayon's best form.
fn rounds_tree<W: TreeWork>(ctx: &Ctx, w: W, rounds: usize) {
    let forms = picked::<W>();
    if forms.is_empty() {
        return;
    }
    let mut times = vec![Vec::with_capacity(rounds); forms.len()];
    for round in 0..rounds {
        for k in 0..forms.len() {
            let i = (k + round) % forms.len();
            let start = Instant::now();
            run_checked(ctx, w, &forms[i]);
            times[i].push(start.elapsed().as_nanos() as f64);
        }
    }
    let medians: Vec<f64> = times.iter().map(|t| paired::median(t)).collect();
    let best = (0..forms.len()).filter(|&i| forms[i].rayon).min_by(|&a, &b| medians[a].total_cmp(&medians[b]));
    println!(
        "{} ({} nodes), {rounds} rounds, {} workers; ratio: median ÷ {}'s median [range of the rounds' ratios]",
        w.name(),
        w.expect().nodes,
        paired::threads(THREADS),
        best.map_or("-", |b| forms[b].name)
    );
    for (i, f) in forms.iter().enumerate() {
        let ratio = best.map(|b| {
            let per_round: Vec<f64> = times[i].iter().zip(&times[b]).map(|(o, r)| o / r).collect();
            let lo = per_round.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = per_round.iter().copied().fold(0.0, f64::max);
            format!("{:.3}× [{lo:.2}–{hi:.2}]", medians[i] / medians[b])
        });
        println!("  {:<18} {:>10}  {}", f.name, paired::format_ns(medians[i]), ratio.unwrap_or_default());
    }
}

/// Checks, criterion's groups and the interleaved rounds on one tree.
fn bench_tree<W: TreeWork>(c: &mut Criterion, ctx: &Ctx, w: W) {
    if env("SENDERS_TREES_TREES").is_some_and(|t| !t.split(',').any(|n| n == w.name())) {
        return;
    }
    for f in picked::<W>() {
        run_checked(ctx, w, &f);
    }
    if env("SENDERS_TREES_PAIRED_ONLY").is_none_or(|v| v != "1") {
        criterion_tree(c, ctx, w);
    }
    let rounds = env("SENDERS_TREES_ROUNDS").and_then(|s| s.parse().ok()).unwrap_or(ROUNDS);
    rounds_tree(ctx, w, rounds);
}

fn main() {
    let ctx = Ctx::new(paired::threads(THREADS));
    let large = env("SENDERS_TREES_LARGE").is_some_and(|v| v == "1");
    if let Some(spec) = env("SENDERS_TREES_PROFILE") {
        let mut parts = spec.split(':');
        let form = parts.next().unwrap_or("counting_spawn");
        let tree = parts.next().unwrap_or("T1");
        let repeats: u32 = parts.next().and_then(|s| s.parse().ok()).unwrap_or(3);
        let found = [uts::T1, uts::T3, uts::T1L, uts::T3L]
            .into_iter()
            .find(|t| t.name == tree)
            .map(|t| profile(&ctx, t, form, repeats))
            .or_else(|| {
                [nqueens::NQ12, nqueens::NQ13]
                    .into_iter()
                    .find(|t| t.name == tree)
                    .map(|t| profile(&ctx, t, form, repeats))
            });
        assert!(found.is_some(), "unknown tree {tree:?}");
        return;
    }
    let mut c = Criterion::default().without_plots().configure_from_args();
    bench_tree(&mut c, &ctx, uts::T1);
    bench_tree(&mut c, &ctx, uts::T3);
    bench_tree(&mut c, &ctx, nqueens::NQ12);
    if large {
        bench_tree(&mut c, &ctx, uts::T1L);
        bench_tree(&mut c, &ctx, uts::T3L);
        bench_tree(&mut c, &ctx, nqueens::NQ13);
    }
    c.final_summary();
}
