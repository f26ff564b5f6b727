//! Sender consumers.
pub(crate) mod sync_wait;
