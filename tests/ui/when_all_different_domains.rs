//! `when_all` children must share a domain (P2999 §2.4 item 7): two different known
//! domains have no common domain.
use senders::{Domain, Scheduler, SingleThreadContext, sync_wait, when_all};

#[derive(Clone, Copy, Default)]
struct DomainA;
impl Domain for DomainA {
    senders::default_transforms!(all);
}

#[derive(Clone, Copy, Default)]
struct DomainB;
impl Domain for DomainB {
    senders::default_transforms!(all);
}

fn main() {
    let ctx_a = SingleThreadContext::<DomainA>::with_domain("a");
    let ctx_b = SingleThreadContext::<DomainB>::with_domain("b");
    let _ = sync_wait(when_all((
        ctx_a.scheduler().schedule(),
        ctx_b.scheduler().schedule(),
    )));
}
