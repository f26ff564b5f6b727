//! Schedulers provided by the core.
pub(crate) mod inline;
pub(crate) mod run_loop;
pub(crate) mod single_thread;
