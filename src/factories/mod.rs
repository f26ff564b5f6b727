//! Sender factories: the senders behind [`just`], [`just_error`], [`just_stopped`],
//! [`read_env`] and [`defer`], and their operation states.
pub(crate) mod defer;
pub(crate) mod just;
pub(crate) mod read_env;

pub use defer::{Defer, defer};
pub use just::{Just, JustError, JustOp, JustStopped, just, just_error, just_stopped};
pub use read_env::{ReadEnv, ReadEnvOp, read_env};
