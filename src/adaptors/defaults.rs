//! The default lowering of every customizable algorithm: [`default_transforms!`], which
//! writes a [`Domain`] impl's hooks, and [`DefaultDomain`]'s impl, which is all defaults.
//!
//! It sits above the adaptors, since the defaults name their implementations
//! (`ThenImpl`, `BulkChunkedImpl`, ...), so `domain.rs`, which declares the hooks, names
//! only what the hooks take.

use crate::domain::{DefaultDomain, Domain};

/// Writes the default (non-customized) transform hooks of a [`Domain`] impl.
///
/// `default_transforms!(except a, b)` writes the default of every hook but `a` and `b`,
/// which the impl writes itself; `default_transforms!(all)` writes every default. A hook
/// the crate adds later gets its default in both forms, so a domain written this way
/// keeps compiling. The names are the algorithms' (`then`, `bulk`, `bulk_chunked`,
/// `bulk_unchunked`, `bulk_each`, `bulk_chunks_mut`, `bulk_reduce`, `when_all`); `apply_spawn` and `apply_sync_wait` are
/// provided methods and may be named too. A name that is no hook does not compile.
///
/// ```
/// use senders::adaptors::{Then, ThenFn, ThenImpl};
/// use senders::{Domain, Env, Sender, default_transforms};
///
/// #[derive(Clone, Copy, Default)]
/// struct Traced;
/// impl Domain for Traced {
///     default_transforms!(except then);
///     type Then<S: Sender, F: ThenFn<S::Value>> = ThenImpl<S, F>;
///     fn transform_then<S: Sender, F: ThenFn<S::Value>, E: Env>(
///         self,
///         sndr: Then<S, F>,
///         env: Option<&E>,
///     ) -> ThenImpl<S, F> {
///         println!("then, {}", if env.is_some() { "late" } else { "early" });
///         sndr.lower()
///     }
/// }
/// ```
///
/// A name that is no hook is an error, not a silently written default:
///
/// ```compile_fail
/// # use senders::{Domain, default_transforms};
/// #[derive(Clone, Copy, Default)]
/// struct Typo;
/// impl Domain for Typo {
///     default_transforms!(except thne);
/// }
/// ```
///
/// The older form lists the defaults instead, `default_transforms!(bulk, when_all)`: it
/// writes just those, so such a domain must name each hook added later.
#[macro_export]
macro_rules! default_transforms {
    (except $($custom:ident),* $(,)?) => {
        $( $crate::default_transforms!(@hook $custom); )*
        $crate::default_transforms!(@each [$($custom)*] [
            then bulk bulk_chunked bulk_unchunked bulk_each bulk_chunks_mut bulk_reduce when_all
        ]);
    };
    (all) => { $crate::default_transforms!(except); };
    ($($algo:ident),* $(,)?) => { $( $crate::default_transforms!(@one $algo); )* };
    // Every hook's name.
    (@hook then) => {};
    (@hook bulk) => {};
    (@hook bulk_chunked) => {};
    (@hook bulk_unchunked) => {};
    (@hook bulk_each) => {};
    (@hook bulk_chunks_mut) => {};
    (@hook bulk_reduce) => {};
    (@hook when_all) => {};
    (@hook apply_spawn) => {};
    (@hook apply_sync_wait) => {};
    (@hook $other:ident) => {
        ::core::compile_error!(::core::concat!("default_transforms!: `", ::core::stringify!($other), "` is no hook of `Domain`"));
    };
    (@each $custom:tt [$($hook:ident)*]) => { $( $crate::default_transforms!(@unless $hook $custom); )* };
    // `@unless hook [names]`: the default of `hook` unless `names` holds it.
    (@unless then [then $($rest:ident)*]) => {};
    (@unless bulk [bulk $($rest:ident)*]) => {};
    (@unless bulk_chunked [bulk_chunked $($rest:ident)*]) => {};
    (@unless bulk_unchunked [bulk_unchunked $($rest:ident)*]) => {};
    (@unless bulk_each [bulk_each $($rest:ident)*]) => {};
    (@unless bulk_chunks_mut [bulk_chunks_mut $($rest:ident)*]) => {};
    (@unless bulk_reduce [bulk_reduce $($rest:ident)*]) => {};
    (@unless when_all [when_all $($rest:ident)*]) => {};
    (@unless $hook:ident [$other:ident $($rest:ident)*]) => { $crate::default_transforms!(@unless $hook [$($rest)*]); };
    (@unless $hook:ident []) => { $crate::default_transforms!(@one $hook); };
    // The defaults.
    (@one then) => {
        type Then<S: $crate::Sender, F: $crate::adaptors::ThenFn<S::Value>> = $crate::adaptors::ThenImpl<S, F>;
        const THEN_IS_DEFAULT: bool = true;
        fn transform_then<S: $crate::Sender, F: $crate::adaptors::ThenFn<S::Value>, E: $crate::Env>(
            self,
            sndr: $crate::adaptors::Then<S, F>,
            _env: ::core::option::Option<&E>,
        ) -> $crate::adaptors::ThenImpl<S, F> {
            sndr.lower()
        }
    };
    (@one bulk) => {
        type Bulk<S: $crate::Sender, F: $crate::adaptors::BulkFn<S::Value, S::Error>> =
            <Self as $crate::Domain>::BulkChunked<S, $crate::adaptors::EachIndex<F>>;
        fn transform_bulk<S: $crate::Sender, F: $crate::adaptors::BulkFn<S::Value, S::Error>, E: $crate::Env>(
            self,
            sndr: $crate::adaptors::Bulk<S, F>,
            env: ::core::option::Option<&E>,
        ) -> <Self as $crate::Domain>::BulkChunked<S, $crate::adaptors::EachIndex<F>> {
            <Self as $crate::Domain>::transform_bulk_chunked(self, sndr.into_chunked(), env)
        }
    };
    (@one bulk_chunked) => {
        type BulkChunked<S: $crate::Sender, F: $crate::adaptors::BulkChunkedFn<S::Value, S::Error>> =
            $crate::adaptors::BulkChunkedImpl<S, F>;
        fn transform_bulk_chunked<S: $crate::Sender, F: $crate::adaptors::BulkChunkedFn<S::Value, S::Error>, E: $crate::Env>(
            self,
            sndr: $crate::adaptors::BulkChunked<S, F>,
            _env: ::core::option::Option<&E>,
        ) -> $crate::adaptors::BulkChunkedImpl<S, F> {
            sndr.lower()
        }
    };
    (@one bulk_unchunked) => {
        type BulkUnchunked<S: $crate::Sender, F: $crate::adaptors::BulkFn<S::Value, S::Error>> = $crate::adaptors::BulkImpl<S, F>;
        fn transform_bulk_unchunked<S: $crate::Sender, F: $crate::adaptors::BulkFn<S::Value, S::Error>, E: $crate::Env>(
            self,
            sndr: $crate::adaptors::BulkUnchunked<S, F>,
            _env: ::core::option::Option<&E>,
        ) -> $crate::adaptors::BulkImpl<S, F> {
            sndr.lower()
        }
    };
    (@one bulk_each) => {
        type BulkEach<S: $crate::Sender, T, F: $crate::adaptors::BulkEachFn<T, S::Error>> = $crate::adaptors::BulkEachImpl<S, T, F>
        where
            S::Value: ::core::convert::AsMut<[T]>;
        fn transform_bulk_each<S: $crate::Sender, T, F: $crate::adaptors::BulkEachFn<T, S::Error>, E: $crate::Env>(
            self,
            sndr: $crate::adaptors::BulkEach<S, T, F>,
            _env: ::core::option::Option<&E>,
        ) -> $crate::adaptors::BulkEachImpl<S, T, F>
        where
            S::Value: ::core::convert::AsMut<[T]>,
        {
            sndr.lower()
        }
    };
    (@one bulk_chunks_mut) => {
        type BulkChunksMut<S: $crate::Sender, T, F: $crate::adaptors::BulkChunksMutFn<T, S::Error>> =
            $crate::adaptors::BulkChunksMutImpl<S, T, F>
        where
            S::Value: ::core::convert::AsMut<[T]>;
        fn transform_bulk_chunks_mut<S: $crate::Sender, T, F: $crate::adaptors::BulkChunksMutFn<T, S::Error>, E: $crate::Env>(
            self,
            sndr: $crate::adaptors::BulkChunksMut<S, T, F>,
            _env: ::core::option::Option<&E>,
        ) -> $crate::adaptors::BulkChunksMutImpl<S, T, F>
        where
            S::Value: ::core::convert::AsMut<[T]>,
        {
            sndr.lower()
        }
    };
    (@one bulk_reduce) => {
        type BulkReduce<S: $crate::Sender, R: $crate::adaptors::ReduceFns<S::Value>> =
            $crate::adaptors::ReduceOnChunked<Self, S, R>;
        fn transform_bulk_reduce<S: $crate::Sender, R: $crate::adaptors::ReduceFns<S::Value>, E: $crate::Env>(
            self,
            sndr: $crate::adaptors::BulkReduce<S, R>,
            env: ::core::option::Option<&E>,
        ) -> $crate::adaptors::ReduceOnChunked<Self, S, R> {
            sndr.lower_onto(self, env)
        }
    };
    (@one when_all) => {
        type WhenAll<C: $crate::adaptors::SenderTuple> = $crate::adaptors::WhenAllImpl<C>;
        fn transform_when_all<C: $crate::adaptors::SenderTuple, E: $crate::Env>(
            self,
            sndr: $crate::adaptors::WhenAll<C>,
            _env: ::core::option::Option<&E>,
        ) -> $crate::adaptors::WhenAllImpl<C> {
            sndr.lower()
        }
    };
}

impl Domain for DefaultDomain {
    default_transforms!(all);
}
