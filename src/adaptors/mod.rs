//! Sender adaptors: the sender, receiver and operation-state types behind
//! [`SenderExt`](crate::SenderExt)'s methods and the adaptor functions ([`when_all`],
//! [`starts_on`], [`on`], [`stop_when`], ...).
//!
//! Users rarely name these types: they are what the methods return, spelled out here
//! for signatures and for the documentation of their completions.
pub(crate) mod bulk;
pub(crate) mod channels;
pub(crate) mod either;
pub(crate) mod let_;
pub(crate) mod on;
pub(crate) mod stop_when;
pub(crate) mod then;
pub(crate) mod transfer;
pub(crate) mod when_all;
pub(crate) mod write_env;

pub use bulk::{
    Bulk, BulkEach, BulkEachFn, BulkEachImpl, BulkEachReceiver, BulkFn, BulkImpl, BulkOutcome, BulkReceiver,
};
pub use channels::{
    IntoVariant, IntoVariantReceiver, MapError, MapErrorFn, MapErrorReceiver, StoppedAsError, StoppedAsErrorReceiver,
    StoppedAsOptional, StoppedAsOptionalReceiver, WithError, WithErrorReceiver,
};
pub use either::{EitherOp, EitherSender};
pub use let_::{Let, LetFirstReceiver, LetKind, LetOp, LetSecondEnv, LetSecondReceiver, OnError, OnStopped, OnValue};
pub use on::{On, OnOp, on};
pub use stop_when::{StopWhen, StopWhenOp, StopWhenReceiver, stop_when};
pub use then::{Then, ThenFn, ThenImpl, ThenReceiver, UponError, UponErrorReceiver, UponStopped, UponStoppedReceiver};
pub use transfer::{
    ScheduleFrom, ScheduleFromOp, StartsOn, StartsOnHopReceiver, StartsOnOp, StartsOnReceiver, TransferHopReceiver,
    TransferReceiver, schedule_from, starts_on,
};
pub use when_all::{
    ConnectTuple, DomainFold, SenderTuple, Sequential, Shared as WhenAllShared, Slot, StartPolicy, WhenAll,
    WhenAllImpl, WhenAllOp, WhenAllReceiver, when_all, when_all_with_variant,
};
pub use write_env::{Prop, WriteEnv, WriteEnvReceiver, prop};
