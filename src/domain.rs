//! Domains (P2999): how an execution resource customizes sender algorithms.
//!
//! Rust has no specialization, so customization is a closed set of hooks on the
//! [`Domain`] trait, one per customizable algorithm. Each transform hook names the
//! sender it produces through an associated type, so dispatch stays static.
//!
//! | hook | algorithm | kind |
//! |---|---|---|
//! | [`Domain::transform_then`] | [`then`](crate::SenderExt::then) | `transform_sender` |
//! | [`Domain::transform_bulk`] | [`bulk`](crate::SenderExt::bulk) | `transform_sender` |
//! | [`Domain::transform_bulk_chunked`] | [`bulk_chunked`](crate::SenderExt::bulk_chunked) | `transform_sender` |
//! | [`Domain::transform_bulk_unchunked`] | [`bulk_unchunked`](crate::SenderExt::bulk_unchunked) | `transform_sender` |
//! | [`Domain::transform_bulk_each`] | [`bulk_each`](crate::SenderExt::bulk_each) | `transform_sender` |
//! | [`Domain::transform_bulk_chunks_mut`] | [`bulk_chunks_mut`](crate::SenderExt::bulk_chunks_mut) | `transform_sender` |
//! | [`Domain::transform_bulk_reduce`] | [`bulk_reduce`](crate::SenderExt::bulk_reduce), [`bulk_map_reduce`](crate::SenderExt::bulk_map_reduce) | `transform_sender` |
//! | [`Domain::transform_when_all`] | [`when_all`](crate::when_all) | `transform_sender` |
//! | [`Domain::apply_spawn`] | [`spawn`](crate::spawn()), [`spawn_future`](crate::spawn_future) | `apply_sender` |
//! | [`Domain::apply_sync_wait`] | [`sync_wait`](crate::sync_wait) | `apply_sender` |
//!
//! **Early** customization happens when an algorithm builds its sender: if the
//! predecessor has a known domain, that domain's hook replaces the default sender.
//! **Late** customization happens at `connect`: a still-untransformed sender asks the
//! domain found, in order, from the predecessor, the receiver's env domain, the domain
//! of the receiver's env scheduler, and finally [`DefaultDomain`] (P2999 §2.4 item 4).
//!
//! Transformation terminates by construction: a hook's result is connected directly,
//! never transformed again. [`DefaultDomain`]'s hooks lower to the default
//! implementations (`ThenImpl`, …), which are not customizable. The chains are the
//! default `transform_bulk` and `transform_bulk_reduce`
//! ([`default_transforms!`](crate::default_transforms)): P3481 defines `bulk` through
//! `bulk_chunked`, so it lowers `bulk` to `bulk_chunked` and returns the domain's own
//! `transform_bulk_chunked` of that, whose result is final; a reduction is lowered onto
//! the domain's own `bulk_chunked` the same way ([`BulkReduce::lower_onto`]). A domain
//! that customizes only `bulk_chunked` thus runs plain `bulk` and reductions too. A domain whose hook
//! returned the untransformed sender itself would make the types cyclic, which is a
//! compile error rather than an endless loop.
//!
//! A domain writes only the hooks it customizes:
//! [`default_transforms!`](crate::default_transforms)`(except ..)` writes every other
//! one. Adding a customizable algorithm `foo` to the crate therefore breaks no domain
//! written that way. The recipe:
//!
//! 1. `foo`'s `hook.rs`, beside the algorithm: the untransformed sender `Foo<..>`, a
//!    struct without bounds, and its function trait (the `impl Sender` stays above).
//! 2. [`Domain`]: `type Foo<..>: Sender<..>` and `fn transform_foo(self, Foo<..>,
//!    Option<&E>) -> Self::Foo<..>` (an `apply_*` hook is a provided method instead, and
//!    needs only step 5's `@hook` line); [`MaybeDomain`]: `EarlyFoo`/`early_foo`, the
//!    identity for [`NoDomain`] and the hook called with `None` for every `D: Domain`.
//! 3. `default_transforms!` (`src/adaptors/defaults.rs`): an `(@one foo)` arm writing
//!    the default (`sndr.lower()`).
//! 4. `foo` in the list of the `except` arm.
//! 5. `(@hook foo) => {};` and `(@unless foo [foo $($rest:ident)*]) => {};`.
//! 6. A row in the table above; a domain that customizes `foo` in `tests/domains.rs`.

use crate::adaptors::bulk::{
    Bulk, BulkChunked, BulkChunkedFn, BulkChunksMut, BulkChunksMutFn, BulkEach, BulkEachFn, BulkFn, BulkUnchunked,
};
use crate::adaptors::reduce::{BulkReduce, ReduceFns};
use crate::adaptors::then::{Then, ThenFn};
use crate::adaptors::when_all::{SenderTuple, WhenAll};
use crate::env::{EmptyEnv, Env};
use crate::job::SpawnedOp;
use crate::receiver::Receiver;
use crate::scheduler::MaybeScheduler;
use crate::sender::{Sender, SenderTo};

/// An execution domain: a tag type that selects implementations of the customizable
/// algorithms.
///
/// A domain writes the hooks of the algorithms it customizes and
/// [`default_transforms!`](crate::default_transforms)`(except ..)` with their names,
/// which writes the default of every other hook, those the crate adds later included.
/// The two `apply_*` hooks are provided methods. A domain that counts its `bulk`s, early
/// and late, and leaves everything else as it is:
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// use senders::adaptors::{Bulk, BulkFn, BulkImpl};
/// use senders::{Domain, Env, Scheduler, SenderExt, Sender, SingleThreadContext, default_transforms, sync_wait};
///
/// static BULKS: AtomicUsize = AtomicUsize::new(0);
///
/// #[derive(Clone, Copy, Default)]
/// struct Counted;
/// impl Domain for Counted {
///     default_transforms!(except bulk);
///     type Bulk<S: Sender, F: BulkFn<S::Value, S::Error>> = BulkImpl<S, F>;
///     fn transform_bulk<S: Sender, F: BulkFn<S::Value, S::Error>, E: Env>(
///         self,
///         sndr: Bulk<S, F>,
///         _env: Option<&E>,
///     ) -> BulkImpl<S, F> {
///         BULKS.fetch_add(1, Ordering::Relaxed);
///         sndr.lower()
///     }
/// }
///
/// let ctx = SingleThreadContext::<Counted>::with_domain("counted");
/// let sum = ctx.scheduler().schedule().then(|()| AtomicUsize::new(0)).bulk(4, |i, sum: &AtomicUsize| {
///     sum.fetch_add(i, Ordering::Relaxed);
/// });
/// assert_eq!(sync_wait(sum).unwrap().unwrap().into_inner(), 1 + 2 + 3);
/// assert_eq!(BULKS.load(Ordering::Relaxed), 1, "the domain's own bulk, called when the bulk was built");
/// ```
pub trait Domain: Copy + Default + Send + Sync + 'static {
    /// The sender `transform_then` produces.
    type Then<S: Sender, F: ThenFn<S::Value>>: Sender<Value = F::Output, Error = S::Error>;
    /// Transforms a `then` sender; `env` is `None` for early, `Some` for late
    /// customization.
    fn transform_then<S: Sender, F: ThenFn<S::Value>, E: Env>(
        self,
        sndr: Then<S, F>,
        env: Option<&E>,
    ) -> Self::Then<S, F>;
    /// Whether `transform_then` is the default (`then` as it is): then an
    /// [`AnySender`](crate::AnySender) may run `then` of a ready value as a plain call, in
    /// place of a heap block. `false` unless the domain says otherwise; the default
    /// [`default_transforms!`](crate::default_transforms) writes for `then` says `true`.
    const THEN_IS_DEFAULT: bool = false;

    /// The sender `transform_bulk` produces.
    type Bulk<S: Sender, F: BulkFn<S::Value, S::Error>>: Sender<Value = S::Value, Error = S::Error>;
    /// Transforms a `bulk` sender; `env` is `None` for early, `Some` for late.
    /// The default [`default_transforms!`](crate::default_transforms) writes is the
    /// reference's: `bulk_chunked` of the same shape ([`Bulk::into_chunked`]), transformed by
    /// [`transform_bulk_chunked`](Self::transform_bulk_chunked).
    fn transform_bulk<S: Sender, F: BulkFn<S::Value, S::Error>, E: Env>(
        self,
        sndr: Bulk<S, F>,
        env: Option<&E>,
    ) -> Self::Bulk<S, F>;

    /// The sender `transform_bulk_chunked` produces.
    type BulkChunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>>: Sender<Value = S::Value, Error = S::Error>;
    /// Transforms a `bulk_chunked` sender; `env` is `None` for early, `Some` for late.
    fn transform_bulk_chunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>, E: Env>(
        self,
        sndr: BulkChunked<S, F>,
        env: Option<&E>,
    ) -> Self::BulkChunked<S, F>;

    /// The sender `transform_bulk_unchunked` produces.
    type BulkUnchunked<S: Sender, F: BulkFn<S::Value, S::Error>>: Sender<Value = S::Value, Error = S::Error>;
    /// Transforms a `bulk_unchunked` sender; `env` is `None` for early, `Some` for late.
    fn transform_bulk_unchunked<S: Sender, F: BulkFn<S::Value, S::Error>, E: Env>(
        self,
        sndr: BulkUnchunked<S, F>,
        env: Option<&E>,
    ) -> Self::BulkUnchunked<S, F>;

    /// The sender `transform_bulk_each` produces.
    type BulkEach<S: Sender, T, F: BulkEachFn<T, S::Error>>: Sender<Value = S::Value, Error = S::Error>
    where
        S::Value: AsMut<[T]>;
    /// Transforms a `bulk_each` sender; `env` is `None` for early, `Some` for late.
    fn transform_bulk_each<S: Sender, T, F: BulkEachFn<T, S::Error>, E: Env>(
        self,
        sndr: BulkEach<S, T, F>,
        env: Option<&E>,
    ) -> Self::BulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>;

    // The bulk algorithms beyond P3481: rayon's `par_chunks_mut` and reductions.

    /// The sender `transform_bulk_chunks_mut` produces.
    type BulkChunksMut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>: Sender<Value = S::Value, Error = S::Error>
    where
        S::Value: AsMut<[T]>;
    /// Transforms a `bulk_chunks_mut` sender; `env` is `None` for early, `Some` for late.
    /// [`default_transforms!`](crate::default_transforms)`(bulk_chunks_mut)` visits the
    /// chunks in order ([`BulkChunksMutImpl`](crate::adaptors::BulkChunksMutImpl)).
    fn transform_bulk_chunks_mut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>, E: Env>(
        self,
        sndr: BulkChunksMut<S, T, F>,
        env: Option<&E>,
    ) -> Self::BulkChunksMut<S, T, F>
    where
        S::Value: AsMut<[T]>;

    /// The sender `transform_bulk_reduce` produces.
    type BulkReduce<S: Sender, R: ReduceFns<S::Value>>: Sender<Value = R::Acc, Error = S::Error>;
    /// Transforms a reduction (`bulk_reduce`, `bulk_map_reduce`); `env` is `None` for
    /// early, `Some` for late. [`default_transforms!`](crate::default_transforms)`(bulk_reduce)`
    /// lowers it onto this domain's own
    /// [`transform_bulk_chunked`](Self::transform_bulk_chunked)
    /// ([`BulkReduce::lower_onto`]).
    fn transform_bulk_reduce<S: Sender, R: ReduceFns<S::Value>, E: Env>(
        self,
        sndr: BulkReduce<S, R>,
        env: Option<&E>,
    ) -> Self::BulkReduce<S, R>;

    /// The sender `transform_when_all` produces.
    type WhenAll<C: SenderTuple>: Sender<Value = C::Values, Error = C::Error>;
    /// Transforms a `when_all` sender; `env` is `None` for early, `Some` for late.
    fn transform_when_all<C: SenderTuple, E: Env>(self, sndr: WhenAll<C>, env: Option<&E>) -> Self::WhenAll<C>;

    /// `apply_sender(domain, spawn, sndr)`: starts a spawned operation. The default
    /// starts it inline on the calling thread.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use senders::scope::SpawnedOp;
    /// use senders::{Domain, Scheduler, SenderExt, SimpleCountingScope, SingleThreadContext, default_transforms, spawn, sync_wait};
    /// static SPAWNED: AtomicUsize = AtomicUsize::new(0);
    /// #[derive(Clone, Copy, Default)]
    /// struct Counted;
    /// impl Domain for Counted {
    ///     default_transforms!(except apply_spawn);
    ///     fn apply_spawn(self, op: SpawnedOp) {
    ///         SPAWNED.fetch_add(1, Ordering::Relaxed);
    ///         op.start();
    ///     }
    /// }
    /// let ctx = SingleThreadContext::<Counted>::with_domain("counted");
    /// let scope = SimpleCountingScope::new();
    /// spawn(ctx.scheduler().schedule().then(|()| ()), scope.token());
    /// sync_wait(scope.join()).unwrap();
    /// assert_eq!(SPAWNED.load(Ordering::Relaxed), 1);
    /// ```
    fn apply_spawn(self, op: SpawnedOp) {
        op.start();
    }

    /// `apply_sender(domain, sync_wait, sndr)`: blocks until `sndr` completes. The
    /// default drives a [`RunLoop`](crate::RunLoop) on the calling thread, or, on a pool
    /// worker, waits by working (see [`sync_wait`](crate::sync_wait)).
    ///
    /// ```
    /// use senders::{DefaultDomain, Domain, SenderExt, just};
    /// assert_eq!(DefaultDomain.apply_sync_wait(just(6).then(|x| x * 7)), Ok(Some(42)));
    /// ```
    fn apply_sync_wait<S>(self, sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
    where
        S: Sender + SenderTo<WaitReceiver<<S as Sender>::Value, <S as Sender>::Error>>,
    {
        <DefaultDomain as DefaultSyncWait>::wait(sndr)
    }
}

/// The default `sync_wait`, which [`Domain::apply_sync_wait`] runs unless a domain
/// replaces it: [`DefaultDomain`] implements it beside `sync_wait` itself. The hook's
/// bound names the receiver through it, so this module does not import `sync_wait`.
pub trait DefaultSyncWait {
    /// The receiver `sync_wait` connects its sender to:
    /// [`SyncWaitReceiver`](crate::consumers::SyncWaitReceiver).
    type Receiver<V, E>: Receiver<V, E>;
    /// Starts `sndr` and blocks the calling thread until it completes, as
    /// [`sync_wait`](crate::sync_wait) describes.
    fn wait<S>(sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
    where
        S: Sender + SenderTo<Self::Receiver<<S as Sender>::Value, <S as Sender>::Error>>;
}

/// The receiver of the default `sync_wait`: [`SyncWaitReceiver`](crate::consumers::SyncWaitReceiver).
type WaitReceiver<V, E> = <DefaultDomain as DefaultSyncWait>::Receiver<V, E>;

/// The domain used when no other is known: every algorithm gets its standard lowering.
/// [`GetDomain`](crate::GetDomain)'s example reads it from `sync_wait`'s environment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DefaultDomain;

/// The absence of a known domain. It resolves to [`DefaultDomain`], but unlike it,
/// leaves room for late customization from the receiver's environment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoDomain;

/// Either a [`Domain`] or [`NoDomain`]: the type-level optional used by sender
/// attributes and environments. Its early hooks implement early customization.
pub trait MaybeDomain: Copy + Default + Send + Sync + 'static {
    /// `Self` if it is a domain, otherwise `D`.
    type Or<D: MaybeDomain>: MaybeDomain;
    /// `Self` if it is a domain, otherwise [`DefaultDomain`].
    type Resolved: Domain;

    /// The sender an early-customized `then` becomes.
    type EarlyThen<S: Sender, F: ThenFn<S::Value>>: Sender<Value = F::Output, Error = S::Error>;
    /// Early customization of `then`.
    fn early_then<S: Sender, F: ThenFn<S::Value>>(sndr: Then<S, F>) -> Self::EarlyThen<S, F>;

    /// The sender an early-customized `bulk` becomes.
    type EarlyBulk<S: Sender, F: BulkFn<S::Value, S::Error>>: Sender<Value = S::Value, Error = S::Error>;
    /// Early customization of `bulk`.
    fn early_bulk<S: Sender, F: BulkFn<S::Value, S::Error>>(sndr: Bulk<S, F>) -> Self::EarlyBulk<S, F>;

    /// The sender an early-customized `bulk_chunked` becomes.
    type EarlyBulkChunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>>: Sender<Value = S::Value, Error = S::Error>;
    /// Early customization of `bulk_chunked`.
    fn early_bulk_chunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>>(
        sndr: BulkChunked<S, F>,
    ) -> Self::EarlyBulkChunked<S, F>;

    /// The sender an early-customized `bulk_unchunked` becomes.
    type EarlyBulkUnchunked<S: Sender, F: BulkFn<S::Value, S::Error>>: Sender<Value = S::Value, Error = S::Error>;
    /// Early customization of `bulk_unchunked`.
    fn early_bulk_unchunked<S: Sender, F: BulkFn<S::Value, S::Error>>(
        sndr: BulkUnchunked<S, F>,
    ) -> Self::EarlyBulkUnchunked<S, F>;

    /// The sender an early-customized `bulk_each` becomes.
    type EarlyBulkEach<S: Sender, T, F: BulkEachFn<T, S::Error>>: Sender<Value = S::Value, Error = S::Error>
    where
        S::Value: AsMut<[T]>;
    /// Early customization of `bulk_each`.
    fn early_bulk_each<S: Sender, T, F: BulkEachFn<T, S::Error>>(
        sndr: BulkEach<S, T, F>,
    ) -> Self::EarlyBulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>;

    /// The sender an early-customized `bulk_chunks_mut` becomes.
    type EarlyBulkChunksMut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>: Sender<Value = S::Value, Error = S::Error>
    where
        S::Value: AsMut<[T]>;
    /// Early customization of `bulk_chunks_mut`.
    fn early_bulk_chunks_mut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>(
        sndr: BulkChunksMut<S, T, F>,
    ) -> Self::EarlyBulkChunksMut<S, T, F>
    where
        S::Value: AsMut<[T]>;

    /// The sender an early-customized reduction becomes.
    type EarlyBulkReduce<S: Sender, R: ReduceFns<S::Value>>: Sender<Value = R::Acc, Error = S::Error>;
    /// Early customization of a reduction.
    fn early_bulk_reduce<S: Sender, R: ReduceFns<S::Value>>(sndr: BulkReduce<S, R>) -> Self::EarlyBulkReduce<S, R>;

    /// The sender an early-customized `when_all` becomes.
    type EarlyWhenAll<C: SenderTuple>: Sender<Value = C::Values, Error = C::Error>;
    /// Early customization of `when_all`.
    fn early_when_all<C: SenderTuple>(sndr: WhenAll<C>) -> Self::EarlyWhenAll<C>;
}

impl MaybeDomain for NoDomain {
    type Or<D: MaybeDomain> = D;
    type Resolved = DefaultDomain;

    type EarlyThen<S: Sender, F: ThenFn<S::Value>> = Then<S, F>;
    fn early_then<S: Sender, F: ThenFn<S::Value>>(sndr: Then<S, F>) -> Then<S, F> {
        sndr
    }
    type EarlyBulk<S: Sender, F: BulkFn<S::Value, S::Error>> = Bulk<S, F>;
    fn early_bulk<S: Sender, F: BulkFn<S::Value, S::Error>>(sndr: Bulk<S, F>) -> Bulk<S, F> {
        sndr
    }
    type EarlyBulkChunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>> = BulkChunked<S, F>;
    fn early_bulk_chunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>>(
        sndr: BulkChunked<S, F>,
    ) -> BulkChunked<S, F> {
        sndr
    }
    type EarlyBulkUnchunked<S: Sender, F: BulkFn<S::Value, S::Error>> = BulkUnchunked<S, F>;
    fn early_bulk_unchunked<S: Sender, F: BulkFn<S::Value, S::Error>>(
        sndr: BulkUnchunked<S, F>,
    ) -> BulkUnchunked<S, F> {
        sndr
    }
    type EarlyBulkEach<S: Sender, T, F: BulkEachFn<T, S::Error>>
        = BulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>;
    fn early_bulk_each<S: Sender, T, F: BulkEachFn<T, S::Error>>(sndr: BulkEach<S, T, F>) -> BulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>,
    {
        sndr
    }
    type EarlyBulkChunksMut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>
        = BulkChunksMut<S, T, F>
    where
        S::Value: AsMut<[T]>;
    fn early_bulk_chunks_mut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>(
        sndr: BulkChunksMut<S, T, F>,
    ) -> BulkChunksMut<S, T, F>
    where
        S::Value: AsMut<[T]>,
    {
        sndr
    }
    type EarlyBulkReduce<S: Sender, R: ReduceFns<S::Value>> = BulkReduce<S, R>;
    fn early_bulk_reduce<S: Sender, R: ReduceFns<S::Value>>(sndr: BulkReduce<S, R>) -> BulkReduce<S, R> {
        sndr
    }
    type EarlyWhenAll<C: SenderTuple> = WhenAll<C>;
    fn early_when_all<C: SenderTuple>(sndr: WhenAll<C>) -> WhenAll<C> {
        sndr
    }
}

impl<D: Domain> MaybeDomain for D {
    type Or<X: MaybeDomain> = D;
    type Resolved = D;

    type EarlyThen<S: Sender, F: ThenFn<S::Value>> = D::Then<S, F>;
    fn early_then<S: Sender, F: ThenFn<S::Value>>(sndr: Then<S, F>) -> D::Then<S, F> {
        D::default().transform_then::<S, F, EmptyEnv>(sndr, None)
    }
    type EarlyBulk<S: Sender, F: BulkFn<S::Value, S::Error>> = D::Bulk<S, F>;
    fn early_bulk<S: Sender, F: BulkFn<S::Value, S::Error>>(sndr: Bulk<S, F>) -> D::Bulk<S, F> {
        D::default().transform_bulk::<S, F, EmptyEnv>(sndr, None)
    }
    type EarlyBulkChunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>> = D::BulkChunked<S, F>;
    fn early_bulk_chunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>>(
        sndr: BulkChunked<S, F>,
    ) -> D::BulkChunked<S, F> {
        D::default().transform_bulk_chunked::<S, F, EmptyEnv>(sndr, None)
    }
    type EarlyBulkUnchunked<S: Sender, F: BulkFn<S::Value, S::Error>> = D::BulkUnchunked<S, F>;
    fn early_bulk_unchunked<S: Sender, F: BulkFn<S::Value, S::Error>>(
        sndr: BulkUnchunked<S, F>,
    ) -> D::BulkUnchunked<S, F> {
        D::default().transform_bulk_unchunked::<S, F, EmptyEnv>(sndr, None)
    }
    type EarlyBulkEach<S: Sender, T, F: BulkEachFn<T, S::Error>>
        = D::BulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>;
    fn early_bulk_each<S: Sender, T, F: BulkEachFn<T, S::Error>>(sndr: BulkEach<S, T, F>) -> D::BulkEach<S, T, F>
    where
        S::Value: AsMut<[T]>,
    {
        D::default().transform_bulk_each::<S, T, F, EmptyEnv>(sndr, None)
    }
    type EarlyBulkChunksMut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>
        = D::BulkChunksMut<S, T, F>
    where
        S::Value: AsMut<[T]>;
    fn early_bulk_chunks_mut<S: Sender, T, F: BulkChunksMutFn<T, S::Error>>(
        sndr: BulkChunksMut<S, T, F>,
    ) -> D::BulkChunksMut<S, T, F>
    where
        S::Value: AsMut<[T]>,
    {
        D::default().transform_bulk_chunks_mut::<S, T, F, EmptyEnv>(sndr, None)
    }
    type EarlyBulkReduce<S: Sender, R: ReduceFns<S::Value>> = D::BulkReduce<S, R>;
    fn early_bulk_reduce<S: Sender, R: ReduceFns<S::Value>>(sndr: BulkReduce<S, R>) -> D::BulkReduce<S, R> {
        D::default().transform_bulk_reduce::<S, R, EmptyEnv>(sndr, None)
    }
    type EarlyWhenAll<C: SenderTuple> = D::WhenAll<C>;
    fn early_when_all<C: SenderTuple>(sndr: WhenAll<C>) -> D::WhenAll<C> {
        D::default().transform_when_all::<C, EmptyEnv>(sndr, None)
    }
}

/// The common domain of two senders: equal domains, or a known one and an unknown one.
/// Two different known domains have no common domain, so `when_all` of them does not
/// compile.
pub trait CommonDomain<B: MaybeDomain>: MaybeDomain {
    /// The common domain.
    type Out: MaybeDomain;
}
impl<B: MaybeDomain> CommonDomain<B> for NoDomain {
    type Out = B;
}
impl<D: Domain> CommonDomain<NoDomain> for D {
    type Out = D;
}
impl<D: Domain> CommonDomain<D> for D {
    type Out = D;
}

/// The domain early customization uses for `S`: its own, or [`DefaultDomain`].
pub type EarlyDomain<S> = <<S as Sender>::Domain as MaybeDomain>::Resolved;

/// The domain late customization uses for `S` connected in environment `E`
/// (P2999 §2.4 item 4).
pub type LateDomain<S, E> = <<<<S as Sender>::Domain as MaybeDomain>::Or<<E as Env>::Domain> as MaybeDomain>::Or<
    <<E as Env>::Scheduler as MaybeScheduler>::Domain,
> as MaybeDomain>::Resolved;

/// `transform_env(domain, sndr, env)`: the environment a sender's children see.
///
/// The default transformation is the identity; algorithms that change their children's
/// environment (`starts_on`, `let_value`, `when_all`, `write_env`) do it in their own
/// receivers, so a generic recursive transformation sees the right scheduler and domain
/// by connecting through them.
///
/// ```
/// use senders::domain::transform_env;
/// use senders::{DefaultDomain, EmptyEnv, just};
/// let env = EmptyEnv;
/// assert!(std::ptr::eq(transform_env(DefaultDomain, &just(1), &env), &env), "the identity");
/// ```
pub fn transform_env<'e, D: Domain, S: Sender, E: Env>(_domain: D, _sndr: &S, env: &'e E) -> &'e E {
    env
}

/// `apply_sender(domain, sync_wait, sndr)`.
///
/// ```
/// use senders::domain::apply_sync_wait;
/// use senders::{DefaultDomain, just_error};
/// assert_eq!(apply_sync_wait(DefaultDomain, just_error::<i32, _>("no")), Err("no"));
/// ```
pub fn apply_sync_wait<D: Domain, S>(domain: D, sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
where
    S: Sender + SenderTo<WaitReceiver<<S as Sender>::Value, <S as Sender>::Error>>,
{
    domain.apply_sync_wait(sndr)
}
