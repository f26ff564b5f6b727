#!/usr/bin/env bash
# Hunts flaky tests: runs every test binary of `cargo test` (debug, as CI builds them)
# over and over, several copies of the same binary at once, so that the tests run on a
# loaded machine where threads are descheduled at awkward moments. Prints each failing
# run (binary, round, the failing tests and their panic lines) and a count at the end;
# exits 1 if any run failed.
#
#   tools/stress.sh              # 20 minutes, 2 copies at a time
#   tools/stress.sh 600 3        # 10 minutes, 3 copies at a time
#   tools/stress.sh 600 2 scope  # only the binaries whose name contains "scope"
#
# Left out: compile_fail (trybuild, deterministic), the loom targets (tools/loom.sh) and
# the soak (ignored by default; CI runs it for 60 s). Each run has a 300 s timeout, so a
# hang shows as a failure with exit code 124.
set -uo pipefail
cd "$(dirname "$0")/.."

secs=${1:-1200}
copies=${2:-2}
filter=${3:-}

mapfile -t bins < <(cargo test --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p' |
    grep -vE '/(compile_fail|loom_[a-z_]+|soak)-[0-9a-f]+$' | grep -F -- "$filter")
if [ ${#bins[@]} -eq 0 ]; then
    echo "error: no test binary matches \"$filter\"" >&2
    exit 1
fi

log=$(mktemp -d)
end=$((SECONDS + secs))
round=0
runs=0
while [ $SECONDS -lt $end ]; do
    round=$((round + 1))
    for bin in "${bins[@]}"; do
        pids=()
        for k in $(seq 1 "$copies"); do
            timeout 300 "$bin" -q >"$log/$k" 2>&1 &
            pids+=($!)
        done
        for k in $(seq 1 "$copies"); do
            runs=$((runs + 1))
            wait "${pids[$((k - 1))]}"
            rc=$?
            if [ "$rc" -ne 0 ]; then
                echo "=== round $round: $(basename "$bin") (copy $k) exited with $rc"
                grep -E '^---- |panicked at|^test result' "$log/$k" | head -8
                echo "$bin" >>"$log/failed"
            fi
        done
    done
done
failed=0
[ -f "$log/failed" ] && failed=$(wc -l <"$log/failed")
echo "$runs runs of ${#bins[@]} binaries in $round rounds (${SECONDS}s), $failed failed"
rm -rf "$log"
[ "$failed" -eq 0 ]
