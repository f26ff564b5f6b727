//! A tour of the core: factories, adaptors, moving work between threads, and the
//! three ways a sender can end besides a value (stopped, error, panic).
//!
//! Run it with `cargo run --release --example hello`. Every line says which thread
//! produced its result: `main` (the thread blocked in `sync_wait`, which runs its own
//! run loop) or `worker` (the thread of a `SingleThreadContext`).

use std::convert::Infallible;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicU64, Ordering};

use senders::{SenderExt, SingleThreadContext, just, just_error, just_stopped, starts_on, sync_wait, when_all};

/// The name of the calling thread.
fn here() -> String {
    std::thread::current().name().unwrap_or("<unnamed>").to_owned()
}

/// Prints one result under a label.
fn show(label: &str, result: impl std::fmt::Debug) {
    println!("{label:<20} -> {result:?}");
}

fn main() {
    let ctx = SingleThreadContext::with_name("worker");
    let sch = ctx.scheduler();

    // `just` + `then`: runs inline on the thread that starts it.
    let r = sync_wait(just(20).then(|x| (x + 1, here())));
    show("just+then", r);

    // `when_all` joins two senders; `continues_on` hops to the worker for the rest.
    let r = sync_wait(
        when_all((just(1), just(2).then(|x| x * 10))).continues_on(sch.clone()).then(|(a, b)| (a + b, here())),
    );
    show("when_all+continues", r);

    // `starts_on`: the whole sender starts on the worker.
    let r = sync_wait(starts_on(sch.clone(), just(()).then(|()| here())));
    show("starts_on", r);

    // `let_value`: the next sender is chosen from the predecessor's value.
    let r = sync_wait(just(7).continues_on(sch.clone()).let_value(|n| just(n * n).then(|sq| (sq, here()))));
    show("let_value", r);

    // `bulk` over a Vec: the iterations run on the worker and read `input`, which lives
    // on this stack frame: `sync_wait` does not return before they are done.
    let input: Vec<u64> = (1..=8).collect();
    let out: Vec<AtomicU64> = input.iter().map(|_| AtomicU64::new(0)).collect();
    let r = sync_wait(
        just(out)
            .continues_on(sch.clone())
            .bulk(input.len(), |i, out: &Vec<AtomicU64>| {
                out[i].store(input[i] * input[i], Ordering::Relaxed);
            })
            .then(|out| {
                let squares: Vec<u64> = out.into_iter().map(AtomicU64::into_inner).collect();
                (squares, here())
            }),
    );
    show("bulk", r);

    // Stopped: `sync_wait` reports a stop as `Ok(None)`; `stopped_as_optional` turns it
    // into a value.
    let r = sync_wait(just_stopped::<i32, Infallible>().continues_on(sch.clone()));
    show("just_stopped", r);
    let r = sync_wait(
        just_stopped::<i32, Infallible>().stopped_as_optional().continues_on(sch.clone()).then(|v| (v, here())),
    );
    show("stopped_as_optional", r);

    // Errors: `sync_wait` returns `Err(e)`; `upon_error` recovers with a value.
    let r = sync_wait(just_error::<i32, &str>("disk full"));
    show("just_error", r);
    let r = sync_wait(just_error::<i32, &str>("disk full").continues_on(sch.clone()).upon_error(|e| {
        println!("  upon_error saw {e:?} on {}", here());
        -1
    }));
    show("upon_error", r);

    // A panic on the worker travels back as a completion and resumes in `sync_wait`,
    // on this thread, where `catch_unwind` catches it. (The default hook would print
    // the panic from the worker; keep the output quiet.)
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let caught = catch_unwind(AssertUnwindSafe(|| {
        sync_wait(just(1).continues_on(sch.clone()).then(|_: i32| -> i32 { panic!("boom on {}", here()) }))
    }));
    std::panic::set_hook(hook);
    let message = match &caught {
        Err(payload) => payload.downcast_ref::<String>().cloned().unwrap_or_default(),
        Ok(r) => format!("no panic: {r:?}"),
    };
    show("caught panic", (message, format!("resumed on {}", here())));
}
