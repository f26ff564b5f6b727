//! `Task` (P3552): async blocks that await senders.
//!
//! Run it with `cargo run --release --example task`. It shows P3552's hello world, nested
//! tasks, errors with `?`, a cancelled task, a task that moves to another scheduler, and
//! a recursive `fib` whose `when_all` forks on the pool, timed against `rayon::join` and
//! against the same recursion with `tokio::spawn`.

use std::convert::Infallible;
use std::time::{Duration, Instant};

use senders::{
    SenderExt, SingleThreadContext, StaticThreadPool, Task, change_scheduler, just, just_error, just_stopped, schedule,
    starts_on, sync_wait, when_all,
};

/// P3552's example: `co_return co_await ex::just(0);`.
fn hello() -> Task<'static, i32> {
    Task::new(async {
        println!("Hello, world!");
        just(0).await
    })
}

fn double(x: u64) -> Task<'static, u64> {
    Task::new(async move { Ok(x * 2) })
}

/// Nested tasks: awaiting a task runs it to completion and returns its value.
fn nested() -> Task<'static, u64> {
    Task::new(async {
        let a = double(10).await?;
        let b = double(a).await?;
        Ok(a + b)
    })
}

/// Errors: `?` on an awaited sender's error completes the task with it.
fn parse(s: &'static str) -> Task<'static, u64, String> {
    Task::new(async move {
        let n = just(s).with_error::<String>().then(str::parse::<u64>).await?;
        let n = n.map_err(|e| format!("{s:?}: {e}"))?;
        if n == 0 {
            // An awaited error completes the task with it, through `?`.
            just_error::<(), String>("zero is not allowed".into()).await?;
        }
        Ok(n)
    })
}

/// Awaiting a stopped sender cancels the task: it completes stopped, never resumed.
fn cancelled() -> Task<'static, &'static str> {
    Task::new(async {
        just_stopped::<(), Infallible>().await?;
        Ok("never reached")
    })
}

/// One task per node; the pool's `when_all` runs the two children in parallel.
fn fib(n: u32) -> Task<'static, u64> {
    Task::new(async move {
        if n < 2 {
            return Ok(u64::from(n));
        }
        let (a, b) = when_all((fib(n - 1), fib(n - 2))).await?;
        Ok(a + b)
    })
}

fn fib_rayon(n: u32) -> u64 {
    if n < 2 {
        return u64::from(n);
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn fib_tokio(n: u32) -> std::pin::Pin<Box<dyn std::future::Future<Output = u64> + Send>> {
    Box::pin(async move {
        if n < 2 {
            return u64::from(n);
        }
        let (a, b) = (tokio::spawn(fib_tokio(n - 1)), tokio::spawn(fib_tokio(n - 2)));
        a.await.unwrap() + b.await.unwrap()
    })
}

/// The best of `runs` timings of `f`.
fn best<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut out = None;
    for _ in 0..runs {
        let t = Instant::now();
        let v = f();
        best = best.min(t.elapsed());
        out = Some(v);
    }
    (best, out.expect("at least one run"))
}

fn main() {
    assert_eq!(sync_wait(hello()).unwrap(), Some(0));
    println!("nested: {:?}", sync_wait(nested()).unwrap());
    println!("parse(\"42\"): {:?}", sync_wait(parse("42")));
    println!("parse(\"x\"): {:?}", sync_wait(parse("x")));
    println!("parse(\"0\"): {:?}", sync_wait(parse("0")));
    println!("cancelled: {:?} (None: completed stopped)", sync_wait(cancelled()).unwrap());

    let elsewhere = SingleThreadContext::with_name("elsewhere");
    let moved = Task::<_, Infallible>::new(async {
        let before = std::thread::current().name().map(str::to_owned);
        change_scheduler(elsewhere.scheduler()).await;
        let after = std::thread::current().name().map(str::to_owned);
        Ok((before, after))
    });
    println!("change_scheduler: {:?}", sync_wait(moved).unwrap().unwrap());

    const N: u32 = 25;
    const RUNS: usize = 5;
    let pool = StaticThreadPool::new(2).expect("pool");
    let rpool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("rayon pool");
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().expect("tokio runtime");
    // Warm the pool up once, then time each way.
    sync_wait(starts_on(pool.scheduler(), schedule(&pool.scheduler()))).unwrap();
    let (ours, a) = best(RUNS, || sync_wait(starts_on(pool.scheduler(), fib(N))).unwrap().unwrap());
    let (ray, b) = best(RUNS, || rpool.install(|| fib_rayon(N)));
    let (tok, c) = best(RUNS, || rt.block_on(fib_tokio(N)));
    assert!(a == b && b == c, "the three fibs agree");
    println!("\nfib({N}) = {a}, one task per node, 2 workers, best of {RUNS}:");
    println!("| way | time | ours ÷ theirs |");
    println!("|---|---|---|");
    println!("| Task + when_all (ours) | {ours:.2?} | 1.00 |");
    println!("| rayon::join | {ray:.2?} | {:.2} |", ours.as_secs_f64() / ray.as_secs_f64());
    println!("| tokio::spawn + JoinHandle | {tok:.2?} | {:.2} |", ours.as_secs_f64() / tok.as_secs_f64());
}
