//! Behavioural tests of the domain machinery (P2999): a domain that customizes `bulk`
//! (counting its hook's calls, then lowering to the default) sees early customization
//! when a sender with its domain is built, late customization at connect time when its
//! scheduler is current, and nothing when its scheduler is never involved. Also:
//! `read_env(GetDomain)` and `sync_wait` going through the domain's `apply_sync_wait`.
//!
//! `when_all` of two senders with different known domains must not compile; that belongs
//! to the compile-fail suite.

use std::sync::atomic::{AtomicUsize, Ordering};

use senders::adaptors::{Bulk, BulkFn, BulkImpl};
use senders::consumers::SyncWaitReceiver;
use senders::domain::apply_sync_wait;
use senders::*;

/// Declares a domain customizing `bulk` with its own early/late/`sync_wait` counters, so
/// that tests running in parallel do not share counters.
macro_rules! counting_domain {
    ($name:ident) => {
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
        struct $name;
        #[allow(dead_code)] // not every test reads every counter
        impl $name {
            fn early() -> &'static AtomicUsize {
                static EARLY: AtomicUsize = AtomicUsize::new(0);
                &EARLY
            }
            fn late() -> &'static AtomicUsize {
                static LATE: AtomicUsize = AtomicUsize::new(0);
                &LATE
            }
            fn waits() -> &'static AtomicUsize {
                static WAITS: AtomicUsize = AtomicUsize::new(0);
                &WAITS
            }
            fn counts() -> (usize, usize) {
                (Self::early().load(Ordering::SeqCst), Self::late().load(Ordering::SeqCst))
            }
        }
        impl Domain for $name {
            default_transforms!(except bulk, apply_sync_wait);
            type Bulk<S: Sender, F: BulkFn<S::Value, S::Error>> = BulkImpl<S, F>;
            fn transform_bulk<S: Sender, F: BulkFn<S::Value, S::Error>, E: Env>(
                self,
                sndr: Bulk<S, F>,
                env: Option<&E>,
            ) -> BulkImpl<S, F> {
                let counter = if env.is_some() { Self::late() } else { Self::early() };
                counter.fetch_add(1, Ordering::SeqCst);
                sndr.lower()
            }
            fn apply_sync_wait<S>(self, sndr: S) -> Result<Option<<S as Sender>::Value>, <S as Sender>::Error>
            where
                S: Sender + SenderTo<SyncWaitReceiver<<S as Sender>::Value, <S as Sender>::Error>>,
            {
                Self::waits().fetch_add(1, Ordering::SeqCst);
                apply_sync_wait(DefaultDomain, sndr)
            }
        }
    };
}

/// Sums the iteration indices into the value.
fn add_index(i: usize, sum: &AtomicUsize) {
    sum.fetch_add(i, Ordering::SeqCst);
}

#[test]
fn early_customization_calls_the_hook_when_the_sender_is_built() {
    counting_domain!(EarlyDomain);
    let ctx = SingleThreadContext::<EarlyDomain>::with_domain("early");
    let sndr = ctx.scheduler().schedule().then(|()| AtomicUsize::new(0)).bulk(4, add_index);
    assert_eq!(EarlyDomain::counts(), (1, 0), "the hook runs with env == None when bulk is built");
    let r = sync_wait(sndr).unwrap().unwrap().into_inner();
    assert_eq!(r, 1 + 2 + 3, "the lowered bulk still runs every iteration");
    assert_eq!(EarlyDomain::counts(), (1, 0), "an early-transformed sender is not transformed again");
}

#[test]
fn late_customization_calls_the_hook_at_connect_when_the_scheduler_is_current() {
    counting_domain!(LateDomain);
    let ctx = SingleThreadContext::<LateDomain>::with_domain("late");
    let sndr = starts_on(ctx.scheduler(), just(AtomicUsize::new(0)).bulk(4, add_index));
    assert_eq!(LateDomain::counts(), (0, 0), "`just` has no domain: nothing happens when bulk is built");
    let r = sync_wait(sndr).unwrap().unwrap().into_inner();
    assert_eq!(r, 6);
    assert_eq!(LateDomain::counts(), (0, 1), "the hook runs once, with env == Some, at connect");
}

#[test]
fn let_value_second_sender_is_customized_by_the_predecessors_domain() {
    counting_domain!(LetDomain);
    let ctx = SingleThreadContext::<LetDomain>::with_domain("let");
    let sndr = ctx.scheduler().schedule().let_value(|()| just(AtomicUsize::new(0)).bulk(4, add_index));
    assert_eq!(LetDomain::counts(), (0, 0));
    let r = sync_wait(sndr).unwrap().unwrap().into_inner();
    assert_eq!(r, 6);
    assert_eq!(LetDomain::counts(), (0, 1), "the second sender's bulk is customized late, by the predecessor's domain");
}

#[test]
fn default_domain_never_calls_a_custom_hook() {
    counting_domain!(UnusedDomain);
    let ctx = SingleThreadContext::<UnusedDomain>::with_domain("unused");
    let r = sync_wait(just(AtomicUsize::new(0)).bulk(4, add_index)).unwrap().unwrap().into_inner();
    assert_eq!(r, 6);
    // The bulk runs before the transition into the domain, so it is not customized.
    let r = sync_wait(just(AtomicUsize::new(0)).bulk(4, add_index).continues_on(ctx.scheduler()))
        .unwrap()
        .unwrap()
        .into_inner();
    assert_eq!(r, 6);
    assert_eq!(UnusedDomain::counts(), (0, 0));
}

#[test]
fn default_transforms_keep_then_and_when_all_working_in_a_custom_domain() {
    counting_domain!(PlainDomain);
    let ctx = SingleThreadContext::<PlainDomain>::with_domain("plain");
    let r = sync_wait(when_all((ctx.scheduler().schedule().then(|()| 1), just(2))).then(|(a, b)| a + b));
    assert_eq!(r, Ok(Some(3)));
    let sch = ctx.scheduler();
    let msg = std::panic::catch_unwind(|| sync_wait(sch.schedule().then(|()| -> i32 { panic!("domain boom") })))
        .expect_err("a panic in a customized domain's then must reach the caller");
    assert_eq!(msg.downcast_ref::<&str>(), Some(&"domain boom"));
}

#[test]
fn read_env_get_domain_reports_the_current_schedulers_domain() {
    counting_domain!(ReadDomain);
    // The type annotations are the assertions: the answer's type is the domain.
    let ctx = SingleThreadContext::<ReadDomain>::with_domain("read");
    let r: Result<Option<ReadDomain>, _> = sync_wait(starts_on(ctx.scheduler(), read_env(GetDomain)));
    assert_eq!(r, Ok(Some(ReadDomain)));
    let r: Result<Option<DefaultDomain>, _> = sync_wait(read_env(GetDomain));
    assert_eq!(r, Ok(Some(DefaultDomain)));
}

#[test]
fn sync_wait_goes_through_the_senders_domain() {
    counting_domain!(WaitDomain);
    let ctx = SingleThreadContext::<WaitDomain>::with_domain("wait");
    assert_eq!(sync_wait(ctx.scheduler().schedule().then(|()| 5)), Ok(Some(5)));
    assert_eq!(WaitDomain::waits().load(Ordering::SeqCst), 1);
    assert_eq!(sync_wait(just(5)), Ok(Some(5)));
    assert_eq!(WaitDomain::waits().load(Ordering::SeqCst), 1, "a sender without the domain does not use it");
}

/// `starts_on(sch, sndr)` has `sch`'s domain (the reference's rule): a domain that
/// customizes `sync_wait` sees `sync_wait(starts_on(sch, just(..)))`, whose child has no
/// domain of its own.
#[test]
fn sync_wait_of_starts_on_goes_through_the_schedulers_domain() {
    counting_domain!(StartsOnDomain);
    let ctx = SingleThreadContext::<StartsOnDomain>::with_domain("starts-on");
    assert_eq!(sync_wait(starts_on(ctx.scheduler(), just(5))), Ok(Some(5)));
    assert_eq!(StartsOnDomain::waits().load(Ordering::SeqCst), 1);
    let r: Result<Option<StartsOnDomain>, _> = sync_wait(starts_on(ctx.scheduler(), read_env(GetDomain)));
    assert_eq!(r, Ok(Some(StartsOnDomain)));
}

/// An [`AnySender`] keeps `then` of a `just` as a plain call (no block) only where the
/// erased environment's domain leaves `then` as it is: a domain that customizes `then`
/// still sees it, late, at connect.
#[test]
fn a_domain_that_customizes_then_sees_it_through_an_erased_then_of_just() {
    use senders::adaptors::{Then, ThenFn, ThenImpl};
    use senders::schedulers::SingleThreadScheduler;
    use std::convert::Infallible;

    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    struct ThenDomain;
    static LATE_THENS: AtomicUsize = AtomicUsize::new(0);
    impl Domain for ThenDomain {
        default_transforms!(except then);
        type Then<S: Sender, F: ThenFn<S::Value>> = ThenImpl<S, F>;
        fn transform_then<S: Sender, F: ThenFn<S::Value>, E: Env>(
            self,
            sndr: Then<S, F>,
            env: Option<&E>,
        ) -> ThenImpl<S, F> {
            if env.is_some() {
                LATE_THENS.fetch_add(1, Ordering::SeqCst);
            }
            sndr.lower()
        }
    }

    let ctx = SingleThreadContext::<ThenDomain>::with_domain("then");
    let erased: AnySender<'static, u32, Infallible, SingleThreadScheduler<ThenDomain>> =
        AnySender::new(just(2u32).then(|x| x + 1));
    assert_eq!(LATE_THENS.load(Ordering::SeqCst), 0, "nothing is transformed when erased");
    assert_eq!(sync_wait(starts_on(ctx.scheduler(), erased)).unwrap(), Some(3));
    assert_eq!(LATE_THENS.load(Ordering::SeqCst), 1, "the domain's `then` ran at connect");
}

/// P3481 defines `bulk` through `bulk_chunked`: a domain that customizes only
/// `bulk_chunked` (`default_transforms!` writes `bulk`) sees a plain `bulk`, early
/// and late, and the chunk function it gets runs every index of the `bulk`.
#[test]
fn a_domain_that_customizes_only_bulk_chunked_sees_plain_bulk() {
    use senders::adaptors::{BulkChunked, BulkChunkedFn, BulkChunkedImpl};

    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    struct ChunkedDomain;
    static EARLY: AtomicUsize = AtomicUsize::new(0);
    static LATE: AtomicUsize = AtomicUsize::new(0);
    impl Domain for ChunkedDomain {
        default_transforms!(except bulk_chunked);
        type BulkChunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>> = BulkChunkedImpl<S, F>;
        fn transform_bulk_chunked<S: Sender, F: BulkChunkedFn<S::Value, S::Error>, E: Env>(
            self,
            sndr: BulkChunked<S, F>,
            env: Option<&E>,
        ) -> BulkChunkedImpl<S, F> {
            let counter = if env.is_some() { &LATE } else { &EARLY };
            counter.fetch_add(1, Ordering::SeqCst);
            sndr.lower()
        }
    }
    let counts = || (EARLY.load(Ordering::SeqCst), LATE.load(Ordering::SeqCst));

    let ctx = SingleThreadContext::<ChunkedDomain>::with_domain("chunked");
    let early = ctx.scheduler().schedule().then(|()| AtomicUsize::new(0)).bulk(4, add_index);
    assert_eq!(counts(), (1, 0), "the domain's bulk_chunked transformed the bulk when it was built");
    assert_eq!(sync_wait(early).unwrap().unwrap().into_inner(), 1 + 2 + 3);
    let late = starts_on(ctx.scheduler(), just(AtomicUsize::new(0)).bulk(4, add_index));
    assert_eq!(sync_wait(late).unwrap().unwrap().into_inner(), 1 + 2 + 3);
    assert_eq!(counts(), (1, 1), "and at connect, under the domain's scheduler");
    // `bulk_chunked` itself still goes through the same hook.
    let chunked =
        ctx.scheduler().schedule().then(|()| AtomicUsize::new(0)).bulk_chunked(4, |lo, hi, sum: &AtomicUsize| {
            (lo..hi).for_each(|i| add_index(i, sum));
        });
    assert_eq!(sync_wait(chunked).unwrap().unwrap().into_inner(), 1 + 2 + 3);
    assert_eq!(counts(), (2, 1));
}

/// A domain names only the hooks it customizes: this one was written when `then` and
/// `bulk` were the crate's whole list, and says nothing of `bulk_chunked`,
/// `bulk_unchunked`, `bulk_each`, `bulk_chunks_mut`, `bulk_reduce` or `when_all`, added
/// since. It compiles, its two hooks run, early and late, and every other algorithm
/// under it takes the default.
#[test]
fn a_domain_written_against_an_older_list_of_hooks_gets_the_defaults_of_the_newer_ones() {
    use senders::adaptors::{Then, ThenFn, ThenImpl};

    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    struct OldDomain;
    static THENS: AtomicUsize = AtomicUsize::new(0);
    static BULKS: AtomicUsize = AtomicUsize::new(0);
    impl Domain for OldDomain {
        default_transforms!(except then, bulk);
        type Then<S: Sender, F: ThenFn<S::Value>> = ThenImpl<S, F>;
        fn transform_then<S: Sender, F: ThenFn<S::Value>, E: Env>(
            self,
            sndr: Then<S, F>,
            _env: Option<&E>,
        ) -> ThenImpl<S, F> {
            THENS.fetch_add(1, Ordering::SeqCst);
            sndr.lower()
        }
        type Bulk<S: Sender, F: BulkFn<S::Value, S::Error>> = BulkImpl<S, F>;
        fn transform_bulk<S: Sender, F: BulkFn<S::Value, S::Error>, E: Env>(
            self,
            sndr: Bulk<S, F>,
            _env: Option<&E>,
        ) -> BulkImpl<S, F> {
            BULKS.fetch_add(1, Ordering::SeqCst);
            sndr.lower()
        }
    }
    let counts = || (THENS.load(Ordering::SeqCst), BULKS.load(Ordering::SeqCst));

    let ctx = SingleThreadContext::<OldDomain>::with_domain("old");
    let sched = ctx.scheduler();
    let bulk = sched.schedule().then(|()| AtomicUsize::new(0)).bulk(4, add_index);
    assert_eq!(counts(), (1, 1), "the domain's then and bulk, early");
    assert_eq!(sync_wait(bulk).unwrap().unwrap().into_inner(), 1 + 2 + 3);
    let late = starts_on(sched.clone(), just(AtomicUsize::new(0)).bulk(4, add_index));
    assert_eq!(sync_wait(late).unwrap().unwrap().into_inner(), 1 + 2 + 3);
    assert_eq!(counts(), (1, 2), "the domain's bulk, late");

    // The hooks it does not name: the defaults, which do not call its own.
    let chunked = sched.schedule().then(|()| AtomicUsize::new(0)).bulk_chunked(4, |lo, hi, sum: &AtomicUsize| {
        (lo..hi).for_each(|i| add_index(i, sum));
    });
    let unchunked = sched.schedule().then(|()| AtomicUsize::new(0)).bulk_unchunked(4, add_index);
    let each = sched.schedule().then(|()| vec![1, 2, 3]).bulk_each(|_, x: &mut i32| *x *= 10);
    let both = when_all((sched.schedule().then(|()| 1), sched.schedule().then(|()| 2)));
    assert_eq!(counts(), (6, 2), "one then apiece, and no bulk hook for the other bulks");
    assert_eq!(sync_wait(chunked).unwrap().unwrap().into_inner(), 1 + 2 + 3);
    assert_eq!(sync_wait(unchunked).unwrap().unwrap().into_inner(), 1 + 2 + 3);
    assert_eq!(sync_wait(each).unwrap(), Some(vec![10, 20, 30]));
    assert_eq!(sync_wait(both).unwrap(), Some((1, 2)));
    assert_eq!(counts(), (6, 2));
}

/// The older form, which lists the defaults, still writes just those.
#[test]
fn a_domain_that_lists_its_defaults_still_compiles() {
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
    struct Listed;
    impl Domain for Listed {
        default_transforms!(
            then,
            bulk,
            bulk_chunked,
            bulk_unchunked,
            bulk_each,
            bulk_chunks_mut,
            bulk_reduce,
            when_all
        );
    }
    let ctx = SingleThreadContext::<Listed>::with_domain("listed");
    let sndr = ctx.scheduler().schedule().then(|()| AtomicUsize::new(0)).bulk(3, add_index);
    assert_eq!(sync_wait(sndr).unwrap().unwrap().into_inner(), 1 + 2);
}
