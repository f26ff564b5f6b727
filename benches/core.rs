//! Fixed costs of the core, before any pool exists:
//! - `sync_wait` of an inline pipeline against calling the closures directly;
//! - `when_all` of four inline children;
//! - a hop to a `SingleThreadContext` and back, against the same round trip through a
//!   plain thread fed by a std channel.
//!
//! Run with `cargo bench --bench core`.

use std::hint::black_box;
use std::sync::mpsc;

use criterion::{Criterion, criterion_group, criterion_main};
use senders::{Scheduler, SenderExt, SingleThreadContext, just, sync_wait, when_all};

fn inline_pipeline(c: &mut Criterion) {
    let mut g = c.benchmark_group("inline_pipeline");
    g.bench_function("direct_call", |b| {
        b.iter(|| {
            let x = black_box(2u64);
            black_box((x + 1) * 3)
        })
    });
    g.bench_function("sync_wait_just_then_then", |b| {
        b.iter(|| sync_wait(just(black_box(2u64)).then(|x| x + 1).then(|x| x * 3)))
    });
    g.bench_function("sync_wait_when_all_4", |b| {
        b.iter(|| {
            sync_wait(when_all((
                just(black_box(1u64)),
                just(2u64).then(|x| x + 1),
                just(3u64),
                just(4u64).then(|x| x * 2),
            )))
        })
    });
    g.finish();
}

fn thread_hop(c: &mut Criterion) {
    let mut g = c.benchmark_group("thread_round_trip");
    let ctx = SingleThreadContext::with_name("bench");
    let sch = ctx.scheduler();
    g.bench_function("senders_single_thread_context", |b| {
        b.iter(|| sync_wait(sch.schedule().then(|()| black_box(7u64))))
    });

    let (to_worker, jobs) = mpsc::channel::<mpsc::Sender<u64>>();
    let worker = std::thread::spawn(move || {
        for reply in jobs {
            let _ = reply.send(black_box(7));
        }
    });
    g.bench_function("std_channel_thread", |b| {
        b.iter(|| {
            let (tx, rx) = mpsc::channel();
            to_worker.send(tx).unwrap();
            rx.recv().unwrap()
        })
    });
    drop(to_worker);
    worker.join().unwrap();
    g.finish();
}

// No plots: criterion's plotting backend fails where it finds no font (it needs none
// to measure), and the tables printed here are the results.
criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = inline_pipeline, thread_hop
}
criterion_main!(benches);
