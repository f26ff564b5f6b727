//! Misuse that must not compile: the soundness rules of `docs/DESIGN.md` §2.4 and a few
//! API rules (§5.6: `on` with nowhere to come back to, `EitherSender` sides of different
//! value types), checked with `trybuild`. Each case in `tests/ui/` has its expected compiler output beside it;
//! regenerate with `TRYBUILD=overwrite cargo test --test compile_fail` and review the diff.

#[test]
fn compile_fail() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
