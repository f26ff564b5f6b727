//! The ways a user walks a tree ([`TreeWork`]: UTS, nqueens) in parallel: rayon's three
//! forms, sequential recursion, and ours, written with the public API and no `unsafe`.
//! Each form is a named function in [`forms`]'s list; a form that cannot return values
//! (a spawn) counts into a [`Sink`] of side counters, as users do. Every form visits a
//! node the same way: its `arity` (the node's own work), then each child from its slot
//! (one SHA-1 compression per child in UTS).
//!
//! To add a form: write `fn my_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts` and add a
//! [`Form`] to [`forms`]. Shared by `benches/trees.rs` and `examples/report.rs`.

#![allow(dead_code)]

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crossbeam_utils::CachePadded;
use rayon::prelude::*;
use senders::{
    AnySender, CountingScope, CountingToken, LetReduceToken, LetScopeToken, PoolScheduler, ReduceToken, ReducingScope,
    SenderExt, Spawnable, StaticThreadPool, Task, defer, just, schedule, spawn, starts_on, sync_wait, when_all_iter,
};

use super::uts::{Counts, TreeWork};

/// The workers' stacks on every side: the recursive forms nest a call per level, and
/// rayon's default (2 MiB) already overflows on T3's depth (1572); T3L's is 17,844.
const STACK: usize = 64 << 20;

/// The pools of the forms: ours, ours with latent forks, rayon's; and the side
/// counters of the forms that need them `'static`.
pub struct Ctx {
    pub sch: &'static PoolScheduler,
    pub latent_sch: &'static PoolScheduler,
    pub rayon: rayon::ThreadPool,
    pub sink: &'static Sink,
    _pools: (StaticThreadPool, StaticThreadPool),
}

impl Ctx {
    /// Pools of `threads` workers each (the schedulers and the sink are leaked: the
    /// `CountingScope` forms need them `'static`, as a user's do).
    pub fn new(threads: usize) -> Ctx {
        let pool = StaticThreadPool::builder().num_threads(threads).stack_size(STACK).build().expect("a pool");
        let latent = StaticThreadPool::builder()
            .num_threads(threads)
            .stack_size(STACK)
            .latent_forks(true)
            .build()
            .expect("a pool");
        Ctx {
            sch: Box::leak(Box::new(pool.scheduler())),
            latent_sch: Box::leak(Box::new(latent.scheduler())),
            rayon: rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .stack_size(STACK)
                .build()
                .expect("a rayon pool"),
            sink: Box::leak(Box::new(Sink::default())),
            _pools: (pool, latent),
        }
    }
}

/// A named form.
pub struct Form<W> {
    pub name: &'static str,
    /// What the form is, for the report's rows.
    pub label: &'static str,
    /// Whether this is one of rayon's forms (a ratio's denominator is rayon's best).
    pub rayon: bool,
    pub run: fn(&Ctx, W) -> Counts,
}

/// Every form, sequential first, then rayon's, then ours.
pub fn forms<W: TreeWork>() -> Vec<Form<W>> {
    vec![
        Form { name: "seq", label: "sequential recursion", rayon: false, run: seq_form },
        Form { name: "rayon_scope", label: "`rayon::scope`, a `spawn` per child", rayon: true, run: rayon_scope_form },
        Form { name: "rayon_par_iter", label: "`par_iter` over the children", rayon: true, run: rayon_par_iter_form },
        Form {
            name: "rayon_join",
            label: "`rayon::join` over halves of the children",
            rayon: true,
            run: rayon_join_form,
        },
        Form {
            name: "let_scope_spawn",
            label: "a `spawn` per child into `let_async_scope`",
            rayon: false,
            run: let_scope_form,
        },
        Form {
            name: "let_reduce_spawn",
            label: "a `spawn` per child into `let_async_scope_reduce`, values returned",
            rayon: false,
            run: let_reduce_form,
        },
        Form {
            name: "counting_reduce_spawn",
            label: "a `spawn` per child into a `ReducingScope`, values returned",
            rayon: false,
            run: counting_reduce_form,
        },
        Form {
            name: "counting_spawn",
            label: "a `spawn` per child into a `CountingScope`",
            rayon: false,
            run: counting_form,
        },
        Form {
            name: "nested_sync_wait",
            label: "nested `sync_wait(when_all_iter(..))`",
            rayon: false,
            run: nested_form,
        },
        Form { name: "task", label: "a `Task` per node awaiting `when_all_iter`", rayon: false, run: task_form },
        Form {
            name: "any_natural",
            label: "`AnySender` recursion: `when_all_iter(children.map(visit)).then(..).boxed()`",
            rayon: false,
            run: any_natural_form,
        },
        Form {
            name: "any_defer",
            label: "`AnySender` + `defer(when_all_iter(..))`",
            rayon: false,
            run: any_defer_form,
        },
        Form {
            name: "latent_spawn",
            label: "the `CountingScope` spawn on a `latent_forks` pool",
            rayon: false,
            run: latent_form,
        },
    ]
}

/// The side counters of the spawn forms, each on its own cache line. A parent adds its
/// children to `nodes` (one write per node with children, not one per node); where the
/// leaves are the childless nodes (UTS) they are the nodes less those with children,
/// otherwise (nqueens' solutions, rare) a node adds its own; the depth is written only
/// when it grows.
#[derive(Default)]
pub struct Sink {
    nodes: CachePadded<AtomicU64>,
    parents: CachePadded<AtomicU64>,
    leaves: CachePadded<AtomicU64>,
    depth: CachePadded<AtomicU64>,
}

impl Sink {
    /// Counts a node with these `own` counts, `forked` of whose children were forked.
    #[inline]
    pub fn node<W: TreeWork>(&self, own: Counts, forked: u64) {
        if forked > 0 {
            self.nodes.fetch_add(forked, Relaxed);
            if W::LEAVES_ARE_CHILDLESS {
                self.parents.fetch_add(1, Relaxed);
            }
        }
        if !W::LEAVES_ARE_CHILDLESS && own.leaves > 0 {
            self.leaves.fetch_add(own.leaves, Relaxed);
        }
        if own.depth > self.depth.load(Relaxed) {
            self.depth.fetch_max(own.depth, Relaxed);
        }
    }

    /// The counts so far (the root included), and zero counters for the next walk.
    pub fn take<W: TreeWork>(&self) -> Counts {
        let nodes = 1 + self.nodes.swap(0, Relaxed);
        let parents = self.parents.swap(0, Relaxed);
        let leaves = self.leaves.swap(0, Relaxed);
        let depth = self.depth.swap(0, Relaxed);
        Counts { nodes, leaves: if W::LEAVES_ARE_CHILDLESS { nodes - parents } else { leaves }, depth }
    }
}

// ---------------------------------------------------------------------------------------
// Sequential and rayon.
// ---------------------------------------------------------------------------------------

fn seq<W: TreeWork>(w: W, n: W::Node) -> Counts {
    let arity = w.arity(&n);
    let mut c = w.own(&n, arity);
    for i in 0..arity {
        if let Some(child) = w.child(&n, i) {
            c = c.merge(seq(w, child));
        }
    }
    c
}

fn seq_form<W: TreeWork>(_: &Ctx, w: W) -> Counts {
    seq(w, w.root())
}

/// `par_iter` over a node's slots; each child is made in its own job.
fn rayon_par_iter<W: TreeWork>(w: W, n: W::Node) -> Counts {
    let arity = w.arity(&n);
    let own = w.own(&n, arity);
    (0..arity)
        .into_par_iter()
        .filter_map(|i| w.child(&n, i))
        .map(|child| rayon_par_iter(w, child))
        .reduce(Counts::default, Counts::merge)
        .merge(own)
}

fn rayon_par_iter_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    ctx.rayon.install(|| rayon_par_iter(w, w.root()))
}

/// `join` over the halves of the slots `lo..hi` of `n`, down to one slot.
fn rayon_halves<W: TreeWork>(w: W, n: &W::Node, lo: u32, hi: u32) -> Counts {
    if hi - lo == 1 {
        return w.child(n, lo).map_or(Counts::default(), |child| rayon_join(w, child));
    }
    let mid = lo + (hi - lo) / 2;
    let (a, b) = rayon::join(|| rayon_halves(w, n, lo, mid), || rayon_halves(w, n, mid, hi));
    a.merge(b)
}

fn rayon_join<W: TreeWork>(w: W, n: W::Node) -> Counts {
    let arity = w.arity(&n);
    let own = w.own(&n, arity);
    if arity == 0 { own } else { rayon_halves(w, &n, 0, arity).merge(own) }
}

fn rayon_join_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    ctx.rayon.install(|| rayon_join(w, w.root()))
}

/// A `spawn` per child into one `rayon::scope`, counting into the sink.
fn rayon_scope_node<'s, W: TreeWork>(s: &rayon::Scope<'s>, w: W, n: W::Node, sink: &'s Sink) {
    let arity = w.arity(&n);
    let mut forked = 0;
    for i in 0..arity {
        if let Some(child) = w.child(&n, i) {
            forked += 1;
            s.spawn(move |s| rayon_scope_node(s, w, child, sink));
        }
    }
    sink.node::<W>(w.own(&n, arity), forked);
}

fn rayon_scope_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    let sink = Sink::default();
    ctx.rayon.install(|| rayon::scope(|s| rayon_scope_node(s, w, w.root(), &sink)));
    sink.take::<W>()
}

// ---------------------------------------------------------------------------------------
// Ours.
// ---------------------------------------------------------------------------------------

/// The token of a `let_async_scope` run on the pool.
type Token<'s, 'e> = LetScopeToken<'s, 'e, PoolScheduler>;

/// A `spawn` per child into the `let_async_scope`, the scheduler and the sink borrowed.
fn let_scope_node<'s, 'e, W: TreeWork>(
    tk: Token<'s, 'e>,
    sch: &'s PoolScheduler,
    w: W,
    n: W::Node,
    sink: &'s Sink,
) -> impl Spawnable<Token<'s, 'e>> {
    schedule(sch).then(move |()| {
        let arity = w.arity(&n);
        let mut forked = 0;
        for i in 0..arity {
            if let Some(child) = w.child(&n, i) {
                forked += 1;
                spawn(let_scope_node(tk, sch, w, child, sink), tk);
            }
        }
        sink.node::<W>(w.own(&n, arity), forked);
    })
}

fn let_scope_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    let sink = Sink::default();
    let sch = ctx.sch;
    let work = just(()).let_async_scope(|tk, ()| {
        spawn(let_scope_node(tk, sch, w, w.root(), &sink), tk);
    });
    sync_wait(starts_on(sch.clone(), work)).expect("the tree");
    sink.take::<W>()
}

/// The token of a `let_async_scope_reduce` whose work returns a node's own counts.
type ReduceTk<'s, 'e> = LetReduceToken<'s, 'e, PoolScheduler, Counts>;

/// A `spawn` per child into the reducing scope; the node returns its own counts, which
/// the scope folds per worker and merges at the join (no side counters).
fn let_reduce_node<'s, 'e, W: TreeWork>(
    tk: ReduceTk<'s, 'e>,
    sch: &'s PoolScheduler,
    w: W,
    n: W::Node,
) -> impl Spawnable<ReduceTk<'s, 'e>> {
    schedule(sch).then(move |()| {
        let arity = w.arity(&n);
        for i in 0..arity {
            if let Some(child) = w.child(&n, i) {
                spawn(let_reduce_node(tk, sch, w, child), tk);
            }
        }
        w.own(&n, arity)
    })
}

fn let_reduce_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    let sch = ctx.sch;
    let work = just(()).let_async_scope_reduce(
        Counts::default,
        |a: &mut Counts, v| *a = a.merge(v),
        Counts::merge,
        |tk, ()| {
            spawn(let_reduce_node(tk, sch, w, w.root()), tk);
        },
    );
    sync_wait(starts_on(sch.clone(), work)).expect("the tree").expect("a value")
}

/// The token of a `ReducingScope` of counts.
type CountReduceTk = ReduceToken<CountingToken, Counts>;

/// A node in a `ReducingScope`: spawns its children, returns its own counts.
fn counting_reduce_node<W: TreeWork>(sch: &'static PoolScheduler, tk: CountReduceTk, w: W, n: W::Node) -> Counts {
    let arity = w.arity(&n);
    for i in 0..arity {
        if let Some(child) = w.child(&n, i) {
            spawn(schedule(sch).then(move |()| counting_reduce_node(sch, tk, w, child)), tk);
        }
    }
    w.own(&n, arity)
}

fn counting_reduce_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    let sch = ctx.sch;
    let mut scope = ReducingScope::new(Counts::default, |a: &mut Counts, v: Counts| *a = a.merge(v), Counts::merge);
    let tk = scope.token();
    let root = w.root();
    spawn(schedule(sch).then(move |()| counting_reduce_node(sch, tk, w, root)), tk);
    sync_wait(scope.join()).expect("the join").expect("a value")
}

/// A `spawn` per child into a `CountingScope` (everything `'static`).
fn counting_node<W: TreeWork>(sch: &'static PoolScheduler, tk: CountingToken, w: W, n: W::Node, sink: &'static Sink) {
    let arity = w.arity(&n);
    let mut forked = 0;
    for i in 0..arity {
        if let Some(child) = w.child(&n, i) {
            forked += 1;
            spawn(schedule(sch).then(move |()| counting_node(sch, tk, w, child, sink)), tk);
        }
    }
    sink.node::<W>(w.own(&n, arity), forked);
}

/// The tree into a fresh `CountingScope` of the pool of `sch`: the root spawned from the
/// calling thread, then the scope's join.
fn counting_tree<W: TreeWork>(sch: &'static PoolScheduler, sink: &'static Sink, w: W) -> Counts {
    let scope = CountingScope::new();
    let tk = scope.token();
    let root = w.root();
    spawn(schedule(sch).then(move |()| counting_node(sch, tk, w, root, sink)), tk);
    sync_wait(scope.join()).expect("the join");
    sink.take::<W>()
}

fn counting_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    counting_tree(ctx.sch, ctx.sink, w)
}

/// The spawn form on a pool with latent forks (`PoolBuilder::latent_forks(true)`).
fn latent_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    counting_tree(ctx.latent_sch, ctx.sink, w)
}

/// Each node waits for its children with `sync_wait(when_all_iter(..))`, each child a
/// `schedule(..).then(..)` onto the pool.
fn nested<W: TreeWork>(sch: &PoolScheduler, w: W, n: W::Node) -> Counts {
    let arity = w.arity(&n);
    let own = w.own(&n, arity);
    if arity == 0 {
        return own;
    }
    let kids =
        (0..arity).filter_map(|i| w.child(&n, i)).map(|child| schedule(sch).then(move |()| nested(sch, w, child)));
    let counts = sync_wait(when_all_iter(kids)).expect("the children").expect("a value");
    counts.into_iter().fold(own, Counts::merge)
}

fn nested_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    let sch = ctx.sch;
    sync_wait(schedule(sch).then(move |()| nested(sch, w, w.root()))).expect("the tree").expect("a value")
}

/// A `Task` per node, awaiting the `when_all_iter` of its children's tasks.
fn task_node<W: TreeWork>(w: W, n: W::Node) -> Task<'static, Counts, Infallible> {
    Task::new(async move {
        let arity = w.arity(&n);
        let own = w.own(&n, arity);
        if arity == 0 {
            return Ok(own);
        }
        let kids = when_all_iter((0..arity).filter_map(|i| w.child(&n, i)).map(|child| task_node(w, child))).await?;
        Ok(kids.into_iter().fold(own, Counts::merge))
    })
}

fn task_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    sync_wait(starts_on(ctx.sch.clone(), task_node(w, w.root()))).expect("the tree").expect("a value")
}

/// The natural recursion of `AnySender`s: `when_all_iter` pulls its children when it
/// starts, so each node's children are built on the worker that starts it.
fn any_natural<W: TreeWork>(w: W, n: W::Node) -> AnySender<'static, Counts> {
    let arity = w.arity(&n);
    let own = w.own(&n, arity);
    when_all_iter((0..arity).filter_map(move |i| w.child(&n, i)).map(move |child| any_natural(w, child)))
        .then(move |kids| kids.into_iter().fold(own, Counts::merge))
        .boxed()
}

fn any_natural_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    let root = w.root();
    sync_wait(starts_on(ctx.sch.clone(), defer(move || any_natural(w, root)))).expect("the tree").expect("a value")
}

/// The natural recursion of `AnySender`s, each node's `when_all_iter` built when the
/// node starts (`defer`), so that the tree is not built before it runs.
fn any_defer<W: TreeWork>(w: W, n: W::Node) -> AnySender<'static, Counts> {
    defer(move || {
        let arity = w.arity(&n);
        let own = w.own(&n, arity);
        when_all_iter((0..arity).filter_map(move |i| w.child(&n, i)).map(move |child| any_defer(w, child)))
            .then(move |kids| kids.into_iter().fold(own, Counts::merge))
    })
    .boxed()
}

fn any_defer_form<W: TreeWork>(ctx: &Ctx, w: W) -> Counts {
    sync_wait(starts_on(ctx.sch.clone(), any_defer(w, w.root()))).expect("the tree").expect("a value")
}
