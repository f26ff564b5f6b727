#!/usr/bin/env bash
# Runs the loom model-checking tests with the CI settings: the integration targets
# tests/loom_*.rs (stop tokens, when_all, when_any's race (tests/loom_when_any.rs),
# stop_when's forwarding, and loom_pool: the whole pool with two workers, sleep/wake,
# shutdown and a counting scope's spawn/stop/join together) and the models inside the
# library, which need crate internals: the pool's sleep protocol (src/pool/sleep.rs),
# the scope counter (src/scope/counter.rs), the spawn_future race
# (src/scope/future.rs), let_async_scope's error, panic and stop paths
# (src/scope/let_scope/loom_tests.rs), the sender-as-future block (src/bridge.rs), the task's
# state word (src/task/state.rs), the run loop with sync_wait's finisher
# (src/schedulers/run_loop/loom_tests.rs), and the timer service's fire/cancel and insert/cancel
# races and its sleep/wake protocol (src/time/tests.rs). loom_pool also models the
# pool's when_all join.
#
#   tools/loom.sh                  # every loom test target
#   tools/loom.sh register_races   # extra arguments go to `cargo test` (here: a filter)
#   tools/loom.sh whole_pool       # only the whole-pool models (tests/loom_pool.rs)
#
# LOOM_MAX_PREEMPTIONS defaults to 2 (the CI bound); override it from the environment
# for a deeper search. The build uses its own target directory, target/loom, so the
# `--cfg loom` flags do not invalidate the normal build in target/.
set -euo pipefail
cd "$(dirname "$0")/.."

shopt -s nullglob
files=(tests/loom_*.rs)
if [ ${#files[@]} -eq 0 ]; then
    echo "tools/loom.sh: no tests/loom_*.rs, nothing to run"
    exit 0
fi

export RUSTFLAGS="--cfg loom"
export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}"
export CARGO_TARGET_DIR="${LOOM_TARGET_DIR:-target/loom}"
# `--test` accepts a glob: every loom_* target, and `--lib` the in-crate models; no other
# test is built.
exec cargo test --release --lib --test 'loom_*' "$@"
