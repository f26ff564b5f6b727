#!/usr/bin/env bash
# Runs the loom model-checking tests (tests/loom_*.rs) with the CI settings.
#
#   tools/loom.sh                  # every loom test target
#   tools/loom.sh register_races   # extra arguments go to `cargo test` (here: a filter)
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
# `--test` accepts a glob: every loom_* target, but no other test is built.
exec cargo test --release --test 'loom_*' "$@"
