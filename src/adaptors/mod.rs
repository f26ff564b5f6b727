//! Sender adaptors.
pub(crate) mod then;
pub(crate) mod bulk;
pub(crate) mod when_all;
