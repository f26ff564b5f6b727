#!/usr/bin/env bash
# Runs the test suite under AddressSanitizer and ThreadSanitizer. By hand only: it needs
# a nightly toolchain with the `rust-src` component (`rustup +nightly component add
# rust-src`), because std is rebuilt with the sanitizer (`-Zbuild-std`); CI does not run
# it. Fails if any binary fails, times out or has a sanitizer report.
#
#   tools/sanitizers.sh              # both, ASan first
#   tools/sanitizers.sh asan         # one of them
#   tools/sanitizers.sh tsan scope   # only the binaries whose name contains "scope"
#   SAN_BUILD_STD=0 tools/sanitizers.sh  # a nightly without rust-src: the prebuilt std
#
# Builds (debug with `opt-level=1` and line tables, for time; `--target` so that build
# scripts and proc macros are not instrumented):
#
# - asan: `-Zsanitizer=address --cfg senders_uncached_blocks` in target/asan. Uncached
#   blocks go straight back to the allocator instead of a per-thread recycler, so a use
#   of a freed block is reported (see tools/valgrind.sh). Runs with leak detection and
#   `detect_stack_use_after_return=1`: a value that reaches into a waiter's frame after
#   the frame returned is reported, not only a use of freed heap.
# - tsan: `-Zsanitizer=thread` in target/tsan, the normal build (recycler included).
#   std is instrumented too (build-std), so `Arc`, `Mutex`, channels and joins are seen.
#   One suppression, in tools/tsan-suppressions.txt: crossbeam-deque's documented race
#   between a stealer's speculative read of a slot and the owner's write to it.
#
# Every test binary runs with `--test-threads=2` under a timeout of $SAN_TIMEOUT seconds
# (default 900), except the loom targets (they build only under `--cfg loom`) and
# compile_fail (trybuild compares compiler messages with outputs written for the stable
# compiler; nothing of the crate runs there). The soak runs for $SOAK_SECS seconds
# (default 60). Under ASan the tests of tools/valgrind.sh that leak on purpose are skipped
# (its SKIP list, read from there so the lists cannot drift), and tests/pool.rs's
# `pending_timers_use_no_cpu`, which leaks a stop source for a `'static` borrow
# (valgrind.sh leaves that binary out). Under TSan, tests/nested_wait.rs's chains nest
# 2,000 deep (`SENDERS_TEST_NEST_DEPTH`), not 10,000: TSan's runtime keeps a shadow call
# stack of about 130,000 frames per thread and corrupts its own memory past it ("SEGV on
# unknown address", or a hang), and 10,000 nested waits are 250,000 frames in a debug
# build. Logs: target/sanitizers-{asan,tsan}-NAME.log.
set -uo pipefail
cd "$(dirname "$0")/.."

which=${1:-all}
filter=${2:-}
timeout_s=${SAN_TIMEOUT:-900}
export SOAK_SECS=${SOAK_SECS:-60} SOAK_SPAWNS=${SOAK_SPAWNS:-1000000000}
export CARGO_PROFILE_DEV_OPT_LEVEL=1 CARGO_PROFILE_DEV_DEBUG=line-tables-only
target=x86_64-unknown-linux-gnu
# SAN_BUILD_STD=0: without rust-src, std stays uninstrumented (the prebuilt nightly std);
# ASan still checks the crate's own memory accesses, TSan misses the synchronisation
# inside std (so `Arc`/`Mutex`/join edges may show as races) and the ABI check between
# an instrumented crate and the plain std is waived.
build_std=-Zbuild-std
if [ "${SAN_BUILD_STD:-1}" = 0 ]; then
    build_std=
    export RUSTFLAGS_EXTRA="-Cunsafe-allow-abi-mismatch=sanitizer"
fi

# The `[name]="tests"` lines of tools/valgrind.sh's SKIP table, as `name tests...`.
declare -A LEAKS=()
while read -r name tests; do
    LEAKS[$name]=$tests
done < <(sed -n 's/^ *\[\([a-z_]*\)\]="\([^"]*\)".*/\1 \2/p' tools/valgrind.sh)
LEAKS[pool]=pending_timers_use_no_cpu # Box::leak for 'static data

status=0

# run KIND: builds the test binaries of sanitizer KIND and runs each.
run() {
    local kind=$1 flags
    case $kind in
        asan) flags="-Zsanitizer=address --cfg senders_uncached_blocks" ;;
        tsan) flags="-Zsanitizer=thread" ;;
    esac
    flags="$flags ${RUSTFLAGS_EXTRA:-}"
    local bins
    mapfile -t bins < <(RUSTFLAGS="$flags" CARGO_TARGET_DIR=target/$kind \
        cargo +nightly test $build_std --target $target --tests --no-run 2>&1 |
        sed -n 's/.*Executable .*(\(.*\))$/\1/p' |
        grep -vE '/(compile_fail|loom_[a-z_]+)-[0-9a-f]+$' | grep -F -- "$filter")
    if [ ${#bins[@]} -eq 0 ]; then
        echo "tools/sanitizers.sh: $kind: no test binary built or matched \"$filter\"" >&2
        status=1
        return
    fi
    local bin name args log start rc
    for bin in "${bins[@]}"; do
        name=$(basename "$bin" | sed 's/-[0-9a-f]*$//')
        args=(--test-threads=2 -q)
        if [ "$kind" = asan ]; then
            for t in ${LEAKS[$name]:-}; do
                args+=(--skip "$t")
            done
        fi
        if [ "$name" = soak ]; then
            args+=(--ignored soak)
        fi
        local depth=10000
        if [ "$kind" = tsan ]; then
            depth=2000
        fi
        log=target/sanitizers-$kind-$name.log
        start=$SECONDS
        SENDERS_TEST_NEST_DEPTH=$depth ASAN_OPTIONS=detect_leaks=1:detect_stack_use_after_return=1 \
            TSAN_OPTIONS="halt_on_error=0:second_deadlock_stack=1:print_suppressions=1:suppressions=$PWD/tools/tsan-suppressions.txt" \
            timeout "$timeout_s" "$bin" "${args[@]}" >"$log" 2>&1
        rc=$?
        if [ $rc -eq 0 ] && ! grep -qE '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR)' "$log"; then
            printf '%5ds  %s %-20s ok\n' "$((SECONDS - start))" "$kind" "$name"
        else
            printf '%5ds  %s %-20s FAILED (rc %d, %s)\n' "$((SECONDS - start))" "$kind" "$name" "$rc" "$log"
            grep -E '^(WARNING: ThreadSanitizer|==[0-9]+==ERROR|SUMMARY)' "$log" | sort | uniq -c | head -20
            status=1
        fi
    done
}

case $which in
    asan | tsan) run "$which" ;;
    all) run asan; run tsan ;;
    *) echo "usage: tools/sanitizers.sh [asan|tsan|all] [filter]" >&2; exit 2 ;;
esac
exit $status
