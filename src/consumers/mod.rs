//! Sender consumers: [`sync_wait`], and the receiver and environment it connects with;
//! [`sync_wait_value`], for a sender that cannot fail.
pub(crate) mod sync_wait;
pub(crate) mod wait_value;

pub use sync_wait::{SyncWaitEnv, SyncWaitReceiver, sync_wait};
pub use wait_value::sync_wait_value;
