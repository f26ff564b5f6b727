//! Model-based random testing: random sender trees, run for real and compared with a
//! sequential reference interpreter.
//!
//! A tree is a [`Node`] (an AST over every algorithm: `just`/`just_error`/`just_stopped`,
//! `then`, `upon_error`, `upon_stopped`, `let_value`/`let_error`/`let_stopped`,
//! `when_all`, `bulk`, `bulk_each`, `stopped_as_optional`/`stopped_as_error`,
//! `continues_on`, `starts_on`, `nest` into a `CountingScope`, `spawn_future`,
//! `let_async_scope` with spawned children that borrow the scoped value, a `Task`
//! awaiting sub-senders, and `AnySender`: every node is built as an `AnySender`, so the
//! depth is arbitrary). User functions panic at random. Each tree runs in three
//! contexts, with `continues_on`/`starts_on` using that context's scheduler and the
//! whole tree started on it: a `StaticThreadPool` (2 workers), a `SingleThreadContext`,
//! and inline (`InlineScheduler`, `sync_wait` on the test thread).
//!
//! # Reference semantics
//!
//! Values and errors are `i64` (wrapping arithmetic). The interpreter returns the SET of
//! acceptable completions ([`Out`]: value, error, stopped, or a panic with its message):
//!
//! - `then(f)`: `v` becomes `v + k` (or `f`'s panic); errors and stops pass. Likewise
//!   `upon_error` (`e` becomes the value `e + k`) and `upon_stopped` (stop becomes `k`).
//! - `let_value(f)`: `v` continues with the body tree, whose value gets `+ v` (or `f`'s
//!   panic); `let_error` and `let_stopped` likewise on their channel.
//! - `when_all(c..)`: all values give their sum. Otherwise the first error or panic to
//!   arrive wins, and an error or panic beats a stop (src/adaptors/when_all.rs); since
//!   children may run in parallel, ANY failing child's failure is acceptable, so the
//!   set is the union over the children's possible combinations. Failures that only
//!   arise because a sibling's failure requested stop are discarded by `when_all`
//!   itself, so they need not be modelled.
//! - `bulk(n, f)`: at most one iteration fails (with an error or a panic), so the
//!   result is deterministic: that failure, else the value.
//! - `bulk_each`: the value becomes `n` copies, each incremented, then summed; at most
//!   one element's function panics.
//! - `stopped_as_optional`: `v` becomes `v`, stop becomes `-1`; `stopped_as_error(e)`.
//! - `continues_on`, `starts_on`, `nest`, `spawn_future`, `AnySender`: the identity.
//! - `let_async_scope`: on the input's value, spawns every child (each borrowing the
//!   scoped value) and continues with the body (its value `+ v`). If no child or body
//!   fails, the body's completion; otherwise any failure (error or panic) of a child or
//!   of the body is acceptable (they race, and the first requests stop on the rest).
//!   A child's value and stop are ignored by the scope.
//! - `Task`: awaits its children in order; the first non-value completion is the
//!   task's (an awaited stop stops the task); otherwise the sum, or the body's panic
//!   after the last await. A panicking `let_async_scope` function panics first thing,
//!   so the completion is that panic.
//! - Stop requests: a failing or stopping `when_all` child, and a failing
//!   `let_async_scope` child, request stop on their siblings; a case may also wrap the
//!   tree in `stop_when` with a source stopped before it starts or from another thread
//!   while it runs. Where a stop request may arrive, the interpreter lets every
//!   stop-sensitive node (`continues_on`, `starts_on`, `bulk`, `bulk_each`, `nest`,
//!   `spawn_future`, `let_async_scope`, `Task`) also complete stopped, and lets the
//!   adaptors above it turn that stop into a value or error as usual; in `when_all`, a
//!   stop arriving first may also pre-empt a sibling's failure. This is an
//!   over-approximation: it does not say which of these nodes must stop.
//!
//! The sets are exact wherever the crate is deterministic (one failing leaf, or none)
//! and over-approximate only where completions race. `PROPTEST_CASES` sets the number
//! of cases (512 by default here); failures shrink, and the seeds of past failures are
//! kept in `tests/model_random.proptest-regressions`.

mod common;

use common::payload_message;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use senders::consumers::SyncWaitReceiver;
use senders::domain::NoDomain;
use senders::*;
use std::collections::BTreeSet;
use std::panic::AssertUnwindSafe;
use std::sync::{Mutex, OnceLock};

/// A completion, as observed or predicted.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Out {
    Val(i64),
    Err(i64),
    Stop,
    Panic(String),
}

impl Out {
    fn is_failure(&self) -> bool {
        matches!(self, Out::Err(_) | Out::Panic(_))
    }
}

/// Whether a user function panics, and with which tag in its message.
type PanicTag = Option<u8>;

fn panic_msg(tag: u8) -> String {
    format!("model panic {tag}")
}

/// Where a `bulk` iteration fails.
#[derive(Clone, Debug)]
enum BulkFail {
    Error(usize, i64),
    Panic(usize, u8),
}

#[derive(Clone, Debug)]
enum Node {
    Just(i64),
    JustError(i64),
    JustStopped,
    Then(Box<Node>, i64, PanicTag),
    UponError(Box<Node>, i64, PanicTag),
    UponStopped(Box<Node>, i64, PanicTag),
    LetValue(Box<Node>, Box<Node>, PanicTag),
    LetError(Box<Node>, Box<Node>, PanicTag),
    LetStopped(Box<Node>, Box<Node>, PanicTag),
    WhenAll(Vec<Node>),
    Bulk(Box<Node>, usize, Option<BulkFail>),
    BulkEach(Box<Node>, usize, Option<(usize, u8)>),
    StoppedAsOptional(Box<Node>),
    StoppedAsError(Box<Node>, i64),
    ContinuesOn(Box<Node>),
    StartsOn(Box<Node>),
    Nest(Box<Node>),
    SpawnFuture(Box<Node>),
    LetScope(Box<Node>, Vec<Node>, Box<Node>, PanicTag),
    Task(Vec<Node>, PanicTag),
}

// ---------------------------------------------------------------------------------------
// The reference interpreter

type Set = BTreeSet<Out>;

fn one(o: Out) -> Set {
    BTreeSet::from([o])
}

/// Maps each completion of `set` through `f`.
fn map(set: Set, f: impl Fn(Out) -> Set) -> Set {
    set.into_iter().flat_map(f).collect()
}

fn panic_or(tag: PanicTag, o: Out) -> Out {
    match tag {
        Some(t) => Out::Panic(panic_msg(t)),
        None => o,
    }
}

/// Every combination of one completion from each set.
fn combos(sets: &[Set]) -> Vec<Vec<Out>> {
    let mut acc: Vec<Vec<Out>> = vec![Vec::new()];
    for s in sets {
        acc = acc.iter().flat_map(|prefix| s.iter().map(move |o| [prefix.clone(), vec![o.clone()]].concat())).collect();
    }
    acc
}

/// The completions of `n`. `stop` says whether a stop may be requested on `n`'s stop
/// token while it runs (by a failing or stopping `when_all` sibling, or a failing
/// `let_async_scope` child): then every stop-sensitive node may also complete stopped.
fn reference(n: &Node, stop: bool) -> Set {
    let r = |n: &Node| reference(n, stop);
    let set = match n {
        Node::Just(v) => one(Out::Val(*v)),
        Node::JustError(e) => one(Out::Err(*e)),
        Node::JustStopped => one(Out::Stop),
        Node::Then(i, k, p) => map(r(i), |o| match o {
            Out::Val(v) => one(panic_or(*p, Out::Val(v.wrapping_add(*k)))),
            o => one(o),
        }),
        Node::UponError(i, k, p) => map(r(i), |o| match o {
            Out::Err(e) => one(panic_or(*p, Out::Val(e.wrapping_add(*k)))),
            o => one(o),
        }),
        Node::UponStopped(i, k, p) => map(r(i), |o| match o {
            Out::Stop => one(panic_or(*p, Out::Val(*k))),
            o => one(o),
        }),
        Node::LetValue(i, body, p) => map(r(i), |o| match o {
            Out::Val(v) => let_body(body, *p, v, stop),
            o => one(o),
        }),
        Node::LetError(i, body, p) => map(r(i), |o| match o {
            Out::Err(e) => let_body(body, *p, e, stop),
            o => one(o),
        }),
        Node::LetStopped(i, body, p) => map(r(i), |o| match o {
            Out::Stop => let_body(body, *p, 0, stop),
            o => one(o),
        }),
        Node::WhenAll(cs) => {
            let sets = siblings(cs, stop, |_| true);
            let mut out = Set::new();
            for combo in combos(&sets) {
                let failures: Vec<&Out> = combo.iter().filter(|o| o.is_failure()).collect();
                let stopped = combo.contains(&Out::Stop);
                if !failures.is_empty() {
                    out.extend(failures.into_iter().cloned());
                    // A stop that arrives first requests stop on the failing siblings,
                    // which may then stop instead of failing.
                    if stopped {
                        out.insert(Out::Stop);
                    }
                } else if stopped {
                    out.insert(Out::Stop);
                } else {
                    out.insert(Out::Val(combo.iter().map(val).fold(0, i64::wrapping_add)));
                }
            }
            out
        }
        Node::Bulk(i, shape, fail) => map(r(i), |o| match (o, fail) {
            (Out::Val(_), Some(BulkFail::Error(at, e))) if at < shape => one(Out::Err(*e)),
            (Out::Val(_), Some(BulkFail::Panic(at, t))) if at < shape => one(Out::Panic(panic_msg(*t))),
            (o, _) => one(o),
        }),
        Node::BulkEach(i, shape, fail) => map(r(i), |o| match (o, fail) {
            (Out::Val(_), Some((at, t))) if at < shape => one(Out::Panic(panic_msg(*t))),
            (Out::Val(v), _) => {
                let n = *shape as i64;
                one(Out::Val(v.wrapping_mul(n).wrapping_add(n)))
            }
            (o, _) => one(o),
        }),
        Node::StoppedAsOptional(i) => map(r(i), |o| match o {
            Out::Stop => one(Out::Val(-1)),
            o => one(o),
        }),
        Node::StoppedAsError(i, e) => map(r(i), |o| match o {
            Out::Stop => one(Out::Err(*e)),
            o => one(o),
        }),
        Node::ContinuesOn(i) | Node::StartsOn(i) | Node::Nest(i) | Node::SpawnFuture(i) => r(i),
        Node::LetScope(i, children, body, p) => map(r(i), |o| match o {
            Out::Val(_) if p.is_some() => one(panic_or(*p, Out::Stop)),
            Out::Val(v) => {
                let mut all: Vec<Node> = children.clone();
                all.push(Node::Then(body.clone(), v, None));
                // Only a failure (not a stop) requests stop on the rest of the scope.
                let sets = siblings(&all, stop, Out::is_failure);
                let mut out = Set::new();
                for combo in combos(&sets) {
                    let failures: Vec<&Out> = combo.iter().filter(|o| o.is_failure()).collect();
                    if failures.is_empty() {
                        out.insert(combo.last().expect("the body").clone());
                    } else {
                        out.extend(failures.into_iter().cloned());
                    }
                }
                out
            }
            o => one(o),
        }),
        Node::Task(cs, p) => map(task_ref(cs, 0, stop), |o| match o {
            Out::Val(v) => one(panic_or(*p, Out::Val(v))),
            o => one(o),
        }),
    };
    if stop && stop_sensitive(n) {
        let mut set = set;
        set.insert(Out::Stop);
        return set;
    }
    set
}

/// Whether a node may complete stopped, instead of as its input does, when a stop is
/// requested: those that schedule, loop, or watch the stop token.
fn stop_sensitive(n: &Node) -> bool {
    matches!(
        n,
        Node::ContinuesOn(_)
            | Node::StartsOn(_)
            | Node::Bulk(..)
            | Node::BulkEach(..)
            | Node::Nest(_)
            | Node::SpawnFuture(_)
            | Node::LetScope(..)
            | Node::Task(..)
    )
}

/// The completions of children run side by side, one of which requests stop on the
/// others when it completes in a way `requests_stop` accepts: if any child may, all of
/// them are interpreted with stop requests possible.
fn siblings(cs: &[Node], stop: bool, requests_stop: impl Fn(&Out) -> bool) -> Vec<Set> {
    let sets: Vec<Set> = cs.iter().map(|c| reference(c, stop)).collect();
    let may_stop = cs.len() > 1 && sets.iter().flatten().any(|o| !matches!(o, Out::Val(_)) && requests_stop(o));
    if may_stop && !stop { cs.iter().map(|c| reference(c, true)).collect() } else { sets }
}

fn val(o: &Out) -> i64 {
    match o {
        Out::Val(v) => *v,
        _ => unreachable!("only values are summed"),
    }
}

/// The body of a `let_*` on the input `x`: the function's panic, or the body with `x`
/// added to its value.
fn let_body(body: &Node, p: PanicTag, x: i64, stop: bool) -> Set {
    if let Some(t) = p {
        return one(Out::Panic(panic_msg(t)));
    }
    map(reference(body, stop), |b| match b {
        Out::Val(b) => one(Out::Val(b.wrapping_add(x))),
        b => one(b),
    })
}

fn task_ref(cs: &[Node], acc: i64, stop: bool) -> Set {
    let Some((first, rest)) = cs.split_first() else { return one(Out::Val(acc)) };
    map(reference(first, stop), |o| match o {
        Out::Val(v) => task_ref(rest, acc.wrapping_add(v), stop),
        o => one(o),
    })
}

// ---------------------------------------------------------------------------------------
// Building the real sender

type Any = AnySender<'static, i64, i64>;

/// The scope that `nest` and `spawn_future` use: one for the whole run, never closed.
fn scope() -> &'static CountingScope {
    static SCOPE: OnceLock<CountingScope> = OnceLock::new();
    SCOPE.get_or_init(CountingScope::new)
}

fn maybe_panic(p: PanicTag) {
    if let Some(t) = p {
        std::panic::panic_any(panic_msg(t));
    }
}

/// `continues_on` and `starts_on` with one context's scheduler.
trait Hops {
    fn continues_on(&self, s: Any) -> Any;
    fn starts_on(&self, s: Any) -> Any;
}

macro_rules! hops {
    ($t:ty) => {
        impl Hops for $t {
            fn continues_on(&self, s: Any) -> Any {
                s.continues_on(self.clone()).boxed()
            }
            fn starts_on(&self, s: Any) -> Any {
                starts_on(self.clone(), s).boxed()
            }
        }
    };
}

hops!(PoolScheduler);
hops!(SingleThreadScheduler<NoDomain>);
hops!(InlineScheduler);

fn build(n: &Node, sch: &dyn Hops) -> Any {
    match n.clone() {
        Node::Just(v) => just(v).with_error::<i64>().boxed(),
        Node::JustError(e) => just_error::<i64, i64>(e).boxed(),
        Node::JustStopped => just_stopped::<i64, i64>().boxed(),
        Node::Then(i, k, p) => build(&i, sch)
            .then(move |v| {
                maybe_panic(p);
                v.wrapping_add(k)
            })
            .boxed(),
        Node::UponError(i, k, p) => build(&i, sch)
            .upon_error(move |e| {
                maybe_panic(p);
                e.wrapping_add(k)
            })
            .with_error::<i64>()
            .boxed(),
        Node::UponStopped(i, k, p) => build(&i, sch)
            .upon_stopped(move || {
                maybe_panic(p);
                k
            })
            .boxed(),
        Node::LetValue(i, body, p) => {
            let body = build(&body, sch);
            build(&i, sch)
                .let_value(move |v| {
                    maybe_panic(p);
                    body.then(move |b| b.wrapping_add(v))
                })
                .boxed()
        }
        Node::LetError(i, body, p) => {
            let body = build(&body, sch);
            build(&i, sch)
                .let_error(move |e| {
                    maybe_panic(p);
                    body.then(move |b| b.wrapping_add(e))
                })
                .boxed()
        }
        Node::LetStopped(i, body, p) => {
            let body = build(&body, sch);
            build(&i, sch)
                .let_stopped(move || {
                    maybe_panic(p);
                    body
                })
                .boxed()
        }
        Node::WhenAll(cs) => {
            let mut it = cs.iter().map(|c| build(c, sch));
            let (a, b) = (it.next().expect("two children"), it.next().expect("two children"));
            match it.next() {
                None => when_all((a, b)).then(|(a, b): (i64, i64)| a.wrapping_add(b)).boxed(),
                Some(c) => {
                    when_all((a, b, c)).then(|(a, b, c): (i64, i64, i64)| a.wrapping_add(b).wrapping_add(c)).boxed()
                }
            }
        }
        Node::Bulk(i, shape, fail) => build(&i, sch)
            .bulk(shape, move |at, _: &i64| -> Result<(), i64> {
                match fail {
                    Some(BulkFail::Error(f, e)) if f == at => Err(e),
                    Some(BulkFail::Panic(f, t)) if f == at => std::panic::panic_any(panic_msg(t)),
                    _ => Ok(()),
                }
            })
            .boxed(),
        Node::BulkEach(i, shape, fail) => build(&i, sch)
            .then(move |v| vec![v; shape])
            .bulk_each(move |at, x: &mut i64| {
                if let Some((f, t)) = fail
                    && f == at
                {
                    std::panic::panic_any(panic_msg(t));
                }
                *x = x.wrapping_add(1);
            })
            .then(|v: Vec<i64>| v.into_iter().fold(0, i64::wrapping_add))
            .boxed(),
        Node::StoppedAsOptional(i) => {
            build(&i, sch).stopped_as_optional().then(|o: Option<i64>| o.unwrap_or(-1)).boxed()
        }
        Node::StoppedAsError(i, e) => build(&i, sch).stopped_as_error(e).boxed(),
        Node::ContinuesOn(i) => sch.continues_on(build(&i, sch)),
        Node::StartsOn(i) => sch.starts_on(build(&i, sch)),
        Node::Nest(i) => nest(build(&i, sch), scope().token()).boxed(),
        Node::SpawnFuture(i) => spawn_future(build(&i, sch), scope().token()).boxed(),
        Node::LetScope(i, children, body, p) => {
            let children: Vec<Any> = children.iter().map(|c| build(c, sch)).collect();
            let body = build(&body, sch);
            build(&i, sch)
                .let_async_scope(move |tk, v| {
                    maybe_panic(p);
                    let v: &i64 = v;
                    for c in children {
                        // The child borrows the scoped value.
                        spawn(c.then(move |c| _ = std::hint::black_box(c.wrapping_add(*v))), tk);
                    }
                    // The returned sender may not borrow the value: it gets a copy.
                    let x = *v;
                    body.then(move |b| b.wrapping_add(x))
                })
                .boxed()
        }
        Node::Task(cs, p) => {
            let cs: Vec<Any> = cs.iter().map(|c| build(c, sch)).collect();
            Task::<i64, i64>::new(async move {
                let mut acc = 0i64;
                for c in cs {
                    acc = acc.wrapping_add(c.await?);
                }
                maybe_panic(p);
                Ok(acc)
            })
            .boxed()
        }
    }
}

/// Runs a sender to completion on this thread and classifies the completion.
fn observe<S>(sndr: S) -> Out
where
    S: Sender<Value = i64, Error = i64> + SenderTo<SyncWaitReceiver<i64, i64>>,
{
    match std::panic::catch_unwind(AssertUnwindSafe(|| sync_wait(sndr))) {
        Ok(Ok(Some(v))) => Out::Val(v),
        Ok(Ok(None)) => Out::Stop,
        Ok(Err(e)) => Out::Err(e),
        Err(p) => Out::Panic(payload_message(&*p)),
    }
}

/// The model's panics are expected: keep them off the output (others still print).
fn quiet_model_panics() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !payload_message(info.payload()).starts_with("model panic") {
                default(info);
            }
        }));
    });
}

struct Contexts {
    pool: StaticThreadPool,
    single: SingleThreadContext,
}

fn contexts() -> &'static Mutex<Contexts> {
    static CTX: OnceLock<Mutex<Contexts>> = OnceLock::new();
    CTX.get_or_init(|| Mutex::new(Contexts { pool: common::pool(2), single: SingleThreadContext::new() }))
}

// ---------------------------------------------------------------------------------------
// The generator

fn panic_tag() -> impl Strategy<Value = PanicTag> {
    prop_oneof![6 => Just(None), 1 => (0u8..8).prop_map(Some)]
}

fn small() -> impl Strategy<Value = i64> {
    -50i64..50
}

fn leaf() -> impl Strategy<Value = Node> {
    prop_oneof![
        4 => small().prop_map(Node::Just),
        1 => small().prop_map(Node::JustError),
        1 => Just(Node::JustStopped),
    ]
}

fn bulk_fail() -> impl Strategy<Value = Option<BulkFail>> {
    prop_oneof![
        4 => Just(None),
        1 => (0usize..5, small()).prop_map(|(at, e)| Some(BulkFail::Error(at, e))),
        1 => (0usize..5, 0u8..8).prop_map(|(at, t)| Some(BulkFail::Panic(at, t))),
    ]
}

fn tree() -> impl Strategy<Value = Node> {
    leaf().prop_recursive(5, 40, 3, |inner| {
        let boxed = inner.clone();
        let b = move || boxed.clone().prop_map(Box::new);
        prop_oneof![
            (b(), small(), panic_tag()).prop_map(|(i, k, p)| Node::Then(i, k, p)),
            (b(), small(), panic_tag()).prop_map(|(i, k, p)| Node::UponError(i, k, p)),
            (b(), small(), panic_tag()).prop_map(|(i, k, p)| Node::UponStopped(i, k, p)),
            (b(), b(), panic_tag()).prop_map(|(i, x, p)| Node::LetValue(i, x, p)),
            (b(), b(), panic_tag()).prop_map(|(i, x, p)| Node::LetError(i, x, p)),
            (b(), b(), panic_tag()).prop_map(|(i, x, p)| Node::LetStopped(i, x, p)),
            prop::collection::vec(inner.clone(), 2..=3).prop_map(Node::WhenAll),
            (b(), 0usize..5, bulk_fail()).prop_map(|(i, n, f)| Node::Bulk(i, n, f)),
            (b(), 0usize..5, prop::option::weighted(0.2, (0usize..5, 0u8..8)))
                .prop_map(|(i, n, f)| Node::BulkEach(i, n, f)),
            b().prop_map(Node::StoppedAsOptional),
            (b(), small()).prop_map(|(i, e)| Node::StoppedAsError(i, e)),
            b().prop_map(Node::ContinuesOn),
            b().prop_map(Node::StartsOn),
            b().prop_map(Node::Nest),
            b().prop_map(Node::SpawnFuture),
            (b(), prop::collection::vec(inner.clone(), 0..=2), b(), panic_tag())
                .prop_map(|(i, cs, x, p)| Node::LetScope(i, cs, x, p)),
            (prop::collection::vec(inner.clone(), 0..=3), panic_tag()).prop_map(|(cs, p)| Node::Task(cs, p)),
        ]
    })
}

/// A stop request from outside the tree, on a `stop_when` around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopMode {
    Never,
    /// Requested before the tree starts.
    Before,
    /// Requested from another thread while the tree runs.
    Racing,
}

fn stop_mode() -> impl Strategy<Value = StopMode> {
    prop_oneof![6 => Just(StopMode::Never), 1 => Just(StopMode::Before), 1 => Just(StopMode::Racing)]
}

fn run(sndr: Any, mode: StopMode) -> Out {
    let source = InplaceStopSource::new();
    match mode {
        StopMode::Never => observe(sndr),
        StopMode::Before => {
            source.request_stop();
            observe(stop_when(sndr, source.token()))
        }
        StopMode::Racing => std::thread::scope(|s| {
            s.spawn(|| source.request_stop());
            observe(stop_when(sndr, source.token()))
        }),
    }
}

fn check(tree: &Node, mode: StopMode) -> Result<(), TestCaseError> {
    quiet_model_panics();
    let stop = mode != StopMode::Never;
    let want = reference(tree, stop);
    // On the pool and the single thread the tree is started there (`starts_on`).
    let want_hop = reference(&Node::StartsOn(Box::new(tree.clone())), stop);
    let ctx = contexts().lock().unwrap_or_else(|e| e.into_inner());
    let pool = ctx.pool.scheduler();
    let on_pool = run(pool.starts_on(build(tree, &pool)), mode);
    prop_assert!(want_hop.contains(&on_pool), "pool: got {:?}, want one of {:?}", on_pool, want_hop);
    let single = ctx.single.scheduler();
    let on_single = run(single.starts_on(build(tree, &single)), mode);
    prop_assert!(want_hop.contains(&on_single), "single thread: got {:?}, want one of {:?}", on_single, want_hop);
    let inline = run(build(tree, &InlineScheduler), mode);
    prop_assert!(want.contains(&inline), "inline: got {:?}, want one of {:?}", inline, want);
    Ok(())
}

fn config() -> Config {
    Config {
        // `Config::default()` reads `PROPTEST_CASES`; without it, 512 cases.
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(512),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn random_trees_match_the_reference(t in tree(), mode in stop_mode()) {
        check(&t, mode)?;
    }
}

/// A regression found by this model: a task awaiting an erased task that panics after an
/// await. The outer task finishes with the panic from its run loop, whose completion frees
/// the erased block holding the outer operation; the loop held the lock on the task's
/// panic slot across that completion (an `if let` on the guard) and unlocked it in freed
/// memory, corrupting the next block the thread's recycler handed out.
///
/// Natively the corruption shows only when that block is in use, so the normal build is a
/// stress test: before the fix it crashed (SIGSEGV) in some runs (1 of 7 here), and the
/// random test about once in 100,000 cases. Under memcheck with uncached blocks
/// (`tools/valgrind.sh`, `--cfg senders_uncached_blocks`) the write to the freed block is
/// reported in the first round, every time, so a few rounds suffice there.
#[test]
fn regression_panic_after_an_await_in_an_erased_task_inside_a_task() {
    let tree = Node::Task(vec![Node::Task(vec![Node::Just(1)], Some(6))], None);
    let rounds = if cfg!(senders_uncached_blocks) { 10 } else { 20_000 };
    for _ in 0..rounds {
        // The allocation pattern decides where a stale write lands; this lookup
        // allocates, as the run that found the bug did.
        let _ = std::env::var("PROPTEST_CASES");
        check(&tree, StopMode::Never).unwrap();
    }
}
