//! Sender adaptors: the sender, receiver and operation-state types behind
//! [`SenderExt`](crate::SenderExt)'s methods and the adaptor functions ([`when_all`],
//! [`starts_on`], [`on`], [`stop_when`], ...).
//!
//! Users rarely name these types: they are what the methods return, spelled out here
//! for signatures and for the documentation of their completions.
//!
//! | file | what |
//! |---|---|
//! | `then/` | `then`, `upon_error`, `upon_stopped` |
//! | `let_.rs` | `let_value`, `let_error`, `let_stopped` |
//! | `let_ref.rs` | `let_value_ref`, `let_value_ref_with`: `let_value` by reference, handing the value on |
//! | `bulk/` | `bulk`, `bulk_chunked`, `bulk_unchunked`, `bulk_each`, `bulk_chunks_mut`, and their [`Grain`] (default lowering; the pool's is in `pool/domain.rs`) |
//! | `reduce/` | `bulk_reduce`, `bulk_map_reduce`: fold per chunk, then combine in order (lowered onto `bulk_chunked`) |
//! | `collect.rs` | `bulk_map_collect`, `bulk_try_map_collect`, `bulk_filter_map_collect`: parallel collect into a `Vec`, in order (built on `bulk_chunked`) |
//! | `sort/` | `bulk_sort`, `bulk_sort_unstable` and their `_by` / `_by_key` forms: a parallel merge sort and quicksort on `when_all` |
//! | `when_all/` | `when_all`, `fork_join`, and the start policies a domain plugs in |
//! | `when_any.rs` | `when_any`: the first of several senders to complete decides |
//! | `continues_on.rs` | `continues_on` / `schedule_from`, and `starts_on` |
//! | `on.rs` | `on` |
//! | `stop_when.rs` | `stop_when` |
//! | `write_env.rs` | `write_env` and `prop` |
//! | `channels.rs` | the channel reshapers: `into_variant`, `map_error`, `stopped_as_*`, `with_error` |
//! | `either.rs` | `EitherSender` |
//! | `defaults.rs` | `default_transforms!` and `DefaultDomain`'s hooks: each customizable algorithm's default lowering |
pub(crate) mod bulk;
pub(crate) mod channels;
pub(crate) mod collect;
pub(crate) mod continues_on;
mod defaults;
pub(crate) mod either;
pub(crate) mod let_;
pub(crate) mod let_ref;
pub(crate) mod on;
pub(crate) mod reduce;
pub(crate) mod sort;
pub(crate) mod stop_when;
pub(crate) mod then;
pub(crate) mod when_all;
pub(crate) mod when_any;
pub(crate) mod write_env;

pub use crate::block::{BlockSlice, BlockVec, BlockVecIntoIter};
pub use bulk::{
    Bulk, BulkChunked, BulkChunkedFn, BulkChunkedImpl, BulkChunkedReceiver, BulkChunksMut, BulkChunksMutFn,
    BulkChunksMutImpl, BulkChunksMutReceiver, BulkEach, BulkEachFn, BulkEachImpl, BulkEachReceiver, BulkFn, BulkImpl,
    BulkOutcome, BulkReceiver, BulkUnchunked, EachIndex, Grain,
};
pub use channels::{
    IntoVariant, IntoVariantReceiver, MapError, MapErrorFn, MapErrorReceiver, StoppedAsError, StoppedAsErrorReceiver,
    StoppedAsOptional, StoppedAsOptionalReceiver, WithError, WithErrorReceiver,
};
pub use collect::{
    CollectFinish, CollectStart, CollectState, FilterFinish, FilterMapChunk, FilterMapCollect, FilterStart,
    FilterState, MapChunk, MapCollect, Slots, TryMapChunk, TryMapCollect,
};
pub use continues_on::{
    ContinuesOnHopReceiver, ContinuesOnReceiver, ScheduleFrom, ScheduleFromOp, StartsOn, StartsOnHopReceiver,
    StartsOnOp, StartsOnReceiver, schedule_from, starts_on,
};
pub use either::{EitherOp, EitherSender};
pub use let_::{Let, LetFirstReceiver, LetKind, LetOp, LetSecondEnv, LetSecondReceiver, OnError, OnStopped, OnValue};
pub use let_ref::{
    LendAny, LendConnect, LendFn, LendScope, LendSlot, LendTyped, Lender, LenderTo, LentReceiver, LetRefEnv,
    LetRefFirst, LetRefReceiver, LetValueRef, LetValueRefOp,
};
pub use on::{On, OnOp, on};
pub use reduce::{
    BulkReduce, FoldReduce, MapReduce, ReduceChunk, ReduceFinish, ReduceFns, ReduceOnChunked, ReduceStart, ReduceState,
};
pub use sort::{
    Attach, AttachReceiver, BulkSort, By, ByKey, ByOrd, Detach, SortCompare, Sorting, StopGate, StopGateOp,
};
pub use stop_when::{StopWhen, StopWhenOp, StopWhenReceiver, stop_when};
pub use then::{Then, ThenFn, ThenImpl, ThenReceiver, UponError, UponErrorReceiver, UponStopped, UponStoppedReceiver};
pub use when_all::{
    ChildOp, ChildSlot, ConnectTuple, DomainFold, ForkJob, ForkJoin, ListCells, SenderTuple, Sequential,
    Shared as WhenAllShared, StartPolicy, ValueCell, WhenAll, WhenAllImpl, WhenAllIter, WhenAllIterOp,
    WhenAllOfBlockVec, WhenAllOp, WhenAllReceiver, fork_join, when_all, when_all_iter, when_all_with_variant,
};
pub use when_any::{
    ConnectWhenAny, Race, WhenAny, WhenAnyChildren, WhenAnyOp, WhenAnyReceiver, when_any, when_any_iter,
};
pub use write_env::{Prop, WriteEnv, WriteEnvReceiver, prop};
