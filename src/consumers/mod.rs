//! Sender consumers: [`sync_wait`], and the receiver and environment it connects with.
pub(crate) mod sync_wait;

pub use sync_wait::{SyncWaitEnv, SyncWaitReceiver, sync_wait};
