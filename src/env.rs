//! Environments and queries.
//!
//! An environment answers the standard queries through typed accessors, resolved at
//! compile time, and an open set of user queries keyed by type.
//!
//! | P2300 query | here | static? |
//! |---|---|---|
//! | `get_scheduler` | [`Env::scheduler`] / [`GetScheduler`] | yes: [`Env::Scheduler`] ([`NoScheduler`] if none) |
//! | `get_domain` | [`Env::Domain`] / [`GetDomain`] | yes ([`NoDomain`] if none) |
//! | `get_stop_token` | [`Env::stop_token`] | the type is always [`StopToken`]; a never-stop token is a value |
//! | user queries | [`Query`] keys, [`EnvExt::get`], [`prop`](crate::prop) | looked up by `TypeId` |
//!
//! The allocator query is deliberately absent: operation states are stored inline by
//! their parents and the crate allocates only where a paper's algorithm must (spawn).

use std::any::{Any, TypeId};

use crate::domain::{MaybeDomain, NoDomain};
use crate::scheduler::{MaybeScheduler, NoScheduler};
use crate::stop::StopToken;

/// An environment: the answers a receiver gives to queries from the operation it is
/// connected to.
///
/// ```
/// use senders::{EmptyEnv, Env};
/// assert!(!EmptyEnv.stop_token().stop_possible());
/// ```
pub trait Env {
    /// The current scheduler (`get_scheduler`), or [`NoScheduler`].
    type Scheduler: MaybeScheduler;
    /// The current domain (`get_domain`), or [`NoDomain`].
    type Domain: MaybeDomain;

    /// The current scheduler.
    ///
    /// ```
    /// use senders::Env;
    /// use senders::schedulers::NoScheduler;
    /// // `EmptyEnv` has none; a receiver inside `starts_on(sch, ..)` answers `sch`.
    /// assert_eq!(senders::EmptyEnv.scheduler(), NoScheduler);
    /// ```
    fn scheduler(&self) -> Self::Scheduler;

    /// The stop token the operation should observe. It borrows the environment, so it
    /// cannot be kept beyond the operation.
    ///
    /// ```
    /// use senders::{Env, InplaceStopSource, StopToken};
    /// use senders::{domain::NoDomain, schedulers::NoScheduler};
    /// struct Cancellable<'a>(&'a InplaceStopSource);
    /// impl Env for Cancellable<'_> {
    ///     type Scheduler = NoScheduler;
    ///     type Domain = NoDomain;
    ///     fn scheduler(&self) -> NoScheduler { NoScheduler }
    ///     fn stop_token(&self) -> StopToken<'_> { self.0.token() }
    /// }
    /// let source = InplaceStopSource::new();
    /// let env = Cancellable(&source);
    /// assert!(!env.stop_token().stop_requested());
    /// source.request_stop();
    /// assert!(env.stop_token().stop_requested());
    /// ```
    fn stop_token(&self) -> StopToken<'_>;

    /// Looks up a user query by the `TypeId` of its [`Query`] key. Use [`EnvExt::get`].
    ///
    /// ```
    /// use senders::{Env, EnvExt, Query, StopToken};
    /// use senders::{domain::NoDomain, schedulers::NoScheduler};
    /// use std::any::{Any, TypeId};
    /// struct Tenant;
    /// impl Query for Tenant { type Value = &'static str; }
    /// struct Acme;
    /// impl Env for Acme {
    ///     type Scheduler = NoScheduler;
    ///     type Domain = NoDomain;
    ///     fn scheduler(&self) -> NoScheduler { NoScheduler }
    ///     fn stop_token(&self) -> StopToken<'_> { StopToken::never() }
    ///     fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
    ///         (key == TypeId::of::<Tenant>()).then_some(&"acme" as &(dyn Any + Send + Sync))
    ///     }
    /// }
    /// assert_eq!(Acme.get::<Tenant>(), Some(&"acme"));
    /// ```
    fn prop(&self, key: TypeId) -> Option<&(dyn Any + Send + Sync)> {
        let _ = key;
        None
    }
}

/// The key of a user-defined query.
///
/// ```
/// use senders::{Query, prop, read_env, sync_wait, SenderExt};
/// struct Tenant;
/// impl Query for Tenant { type Value = &'static str; }
/// let v = sync_wait(read_env(Tenant).write_env(prop::<Tenant>("acme")));
/// assert_eq!(v.unwrap(), Some(Some("acme")));
/// ```
pub trait Query: 'static {
    /// The type of the query's answer.
    type Value: Clone + Send + Sync + 'static;
}

/// Typed access to user queries.
///
/// ```
/// use senders::{EmptyEnv, EnvExt, Query};
/// struct Tenant;
/// impl Query for Tenant { type Value = &'static str; }
/// assert_eq!(EmptyEnv.get::<Tenant>(), None);
/// ```
pub trait EnvExt: Env {
    /// The answer to the user query `Q`, if any layer of the environment provides it.
    ///
    /// ```
    /// use senders::{EnvExt, Query, SenderExt, prop, read_env, sync_wait};
    /// struct Tenant;
    /// impl Query for Tenant { type Value = &'static str; }
    /// // A receiver's environment, as an operation sees it, answers through `get`:
    /// // `read_env(Tenant)` is `env.get::<Tenant>().cloned()`.
    /// let s = read_env(Tenant).write_env(prop::<Tenant>("acme"));
    /// assert_eq!(sync_wait(s).unwrap(), Some(Some("acme")));
    /// assert_eq!(senders::EmptyEnv.get::<Tenant>(), None);
    /// ```
    fn get<Q: Query>(&self) -> Option<&Q::Value> {
        self.prop(TypeId::of::<Q>()).and_then(|v| v.downcast_ref::<Q::Value>())
    }
}
impl<E: Env + ?Sized> EnvExt for E {}

/// The environment with no scheduler, no domain, a never-stop token and no user
/// queries. [`Receiver`](crate::Receiver)'s example uses it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmptyEnv;

impl Env for EmptyEnv {
    type Scheduler = NoScheduler;
    type Domain = NoDomain;
    fn scheduler(&self) -> NoScheduler {
        NoScheduler
    }
    fn stop_token(&self) -> StopToken<'_> {
        StopToken::never()
    }
}

/// The `get_scheduler` query, for [`read_env`](crate::read_env).
///
/// ```
/// use senders::{GetScheduler, SenderExt, SingleThreadContext, SingleThreadScheduler, read_env, starts_on, sync_wait};
/// let ctx = SingleThreadContext::new();
/// let sch = ctx.scheduler();
/// let expected = sch.clone();
/// let there = read_env(GetScheduler).then(move |s: SingleThreadScheduler<_>| s == expected);
/// assert_eq!(sync_wait(starts_on(sch, there)).unwrap(), Some(true));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GetScheduler;

/// The `get_domain` query, for [`read_env`](crate::read_env).
///
/// ```
/// use senders::{DefaultDomain, GetDomain, read_env, sync_wait};
/// assert_eq!(sync_wait(read_env(GetDomain)).unwrap(), Some(DefaultDomain));
/// ```
#[derive(Clone, Copy, Debug, Default)]
pub struct GetDomain;

/// A query that [`read_env`](crate::read_env) can answer from an environment `E`.
pub trait EnvQuery<E: Env + ?Sized> {
    /// The answer's type.
    type Output;
    /// Asks `env`.
    ///
    /// ```
    /// use senders::{EmptyEnv, GetDomain, DefaultDomain};
    /// use senders::env::EnvQuery;
    /// assert_eq!(GetDomain.ask(&EmptyEnv), DefaultDomain);
    /// ```
    fn ask(&self, env: &E) -> Self::Output;
}

impl<E: Env + ?Sized> EnvQuery<E> for GetScheduler
where
    E::Scheduler: crate::Scheduler,
{
    type Output = E::Scheduler;
    fn ask(&self, env: &E) -> E::Scheduler {
        env.scheduler()
    }
}

impl<E: Env + ?Sized> EnvQuery<E> for GetDomain {
    type Output = <E::Domain as MaybeDomain>::Resolved;
    fn ask(&self, _env: &E) -> Self::Output {
        Default::default()
    }
}

impl<E: Env + ?Sized, Q: Query> EnvQuery<E> for Q {
    type Output = Option<Q::Value>;
    fn ask(&self, env: &E) -> Option<Q::Value> {
        env.get::<Q>().cloned()
    }
}
