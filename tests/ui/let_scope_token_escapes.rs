//! A `let_async_scope` token must not outlive its scope. Its lifetime `'s` is
//! higher-ranked (the function must accept a token of *any* `'s`) and invariant, so the
//! token can be kept neither in storage declared outside the `sync_wait` (which lives on
//! after the join, when the scope's core is recycled) nor in a thread started with
//! `std::thread::spawn` (which is not joined by the scope and requires `'static`).
use std::cell::RefCell;

use senders::{LetScopeToken, RunLoopScheduler, SenderExt, just, spawn, sync_wait};

fn stash_outside() {
    let stash: RefCell<Option<LetScopeToken<'_, '_, RunLoopScheduler>>> = RefCell::new(None);
    sync_wait(just(()).let_async_scope(|tk, ()| {
        *stash.borrow_mut() = Some(tk);
    }))
    .unwrap();
    // The scope is joined and gone: this would spawn into a recycled core.
    if let Some(tk) = stash.borrow_mut().take() {
        spawn(just(()), tk);
    }
}

fn detached_thread() {
    sync_wait(just(()).let_async_scope(|tk, ()| {
        std::thread::spawn(move || {
            spawn(just(()), tk);
        });
    }))
    .unwrap();
}

fn main() {
    stash_outside();
    detached_thread();
}
