//! Sender adaptors.
pub(crate) mod then;
pub(crate) mod bulk;
pub(crate) mod when_all;
pub(crate) mod let_;
pub(crate) mod transfer;
pub(crate) mod channels;
pub(crate) mod write_env;
