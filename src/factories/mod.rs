//! Sender factories.
pub(crate) mod just;
pub(crate) mod read_env;
