//! Schedulers provided by the core.
pub(crate) mod run_loop;
