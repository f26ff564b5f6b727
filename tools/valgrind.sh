#!/usr/bin/env bash
# Runs memcheck (`valgrind --error-exitcode=1 --leak-check=full`, definite leaks are
# errors) over the test binaries that drive the crate's unsafe code, and over the main
# example with a small tree. Fails on any memcheck error or definite leak.
#
#   tools/valgrind.sh
#
# Which binaries (debug builds; they keep test names in the stacks). The test binaries are
# built with `--cfg senders_uncached_blocks` (in target/valgrind), so that heap blocks go
# straight back to the allocator instead of a per-thread recycler: memcheck then reports
# any use of a freed block, which recycling would hide (the task bug behind a regression
# test in tests/model_random.rs crashed natively in some runs only; memcheck with uncached
# blocks reports it in the first round, every time).
#
# - the library's unit tests (registry, counters, stop sources), and once more from the
#   normal build, where the block recycler and its own tests are in;
# - scope, let_async_scope, task, any_sender, bridge: spawn blocks, scope cores, task
#   frames, erased senders and the future bridges, all in `crate::block`;
# - when_all, adaptors_basic, let_and_transfer, bulk_each, schedulers, domains, stop:
#   the operation states that hold user data and the adaptors that discard it;
# - when_all_vec: the run-time `when_all`, its `BlockVec` of senders and its block of
#   cells and operations, through failures, panics and stop requests;
# - model_random: random sender trees over every algorithm, on the pool, a single thread,
#   inline and in a counting scope (PROPTEST_CASES=64 here instead of 512, for time),
#   whose values borrow a count from the frame of the root that waits for them; and the
#   same trees, with directed ones, under roots that free that frame as soon as
#   `sync_wait` returns (MODEL_FREED_CASES=1024 of them, about 10 s here): memcheck
#   reports a value dropped after its completion as a write to freed memory;
# - bad_input: refused spawns, pool drops, panicking user schedulers and env queries;
# - on_either: `on` and `EitherSender`, whose operation states build and pin their parts;
# - drop_order, panics: completions that must drop everything first (values borrowing
#   the waiter's frame), and panics in drops and stop callbacks that must reach a waiter;
# - sort: the parallel sorts' merge buffer (bitwise copies in, copied back whole),
#   through panicking comparators, stop requests and drop-counting elements;
# - let_value_ref: the value lent from inside the operation, the lent sender's operation
#   dropped in its own completion, and the value handed on;
# - time, when_any: timed senders (their nodes in the timer heaps, stop callbacks racing
#   the deadline), `timeout`, and `when_any`'s race and its losers;
# - examples/tree (release) at depth 10: the pool, let_async_scope and rayon together.
#
# Left out: tests/pool.rs, whose binary valgrind 3.19 cannot load (it aborts in
# `m_seqmatch.c` on a symbol name of its deepest `when_all` types; the pool's code runs
# under memcheck in every other binary here); the loom and compile-fail targets; the soak
# (it checks its own allocation count, and takes minutes under memcheck).
#
# Tests that leak on purpose, and one scale test, are skipped (`--skip`), each named below with
# its reason: they leak a value to get a `'static` borrow for a `CountingScope` (whose tokens are
# `'static`), or they `mem::forget` an operation or future to show that leaking is safe.
set -euo pipefail
cd "$(dirname "$0")/.."

# binary name, then the tests it skips.
declare -A SKIP=(
    [senders]="after_shutdown_began_outside_pushes_are_refused_and_worker_pushes_still_run" # a refused test job's box
    [scope]="stop_when_completes_only_after_a_forwarded_stop_request_returns nest_completes_only_after_the_scopes_stop_request_returns a_future_stopped_by_its_receiver_keeps_its_block_until_the_stop_request_returns a_spawned_schedule_from_a_worker_runs_on_the_pool_and_sees_the_scopes_stop a_stop_request_on_the_future_is_forwarded_and_completes_it_stopped dropping_the_future_requests_stop_on_the_work dropping_the_futures_operation_before_start_requests_stop p3149_recursive_tree_with_spawn_future_visits_every_node_once p3149_recursive_tree_with_spawn_visits_every_node_once request_stop_reaches_running_work stress_a_million_random_spawns_with_stops_and_panics the_join_completes_on_the_receivers_scheduler" # leak() for 'static data
    [let_async_scope]="p3149_counting_scope_variant_visits_every_node_once" # leaks its tree: a counting scope's token is 'static
    [task]="an_await_registered_in_the_final_poll_is_never_started a_leaked_awaited_operation_completes_before_the_task_resumes a_loop_of_inline_awaits_runs_in_constant_stack" # mem::forget; the last one: 10M awaits, minutes under memcheck
    [bridge]="a_leaked_future_leaks_memory_but_the_operation_completes" # mem::forget
    [stop]="callback_dropping_a_callback_that_already_ran callback_dropping_a_not_yet_run_callback_prevents_it callback_registering_on_the_stopping_source_runs_inline callback_that_drops_itself callback_that_drops_itself_through_a_raw_pointer" # a leaked 'static source
    [bad_input]="a_join_started_inside_the_scopes_own_work_completes_after_it spawn_of_a_sender_whose_connect_panics_unwinds_to_the_caller_and_the_join_completes" # leak() for 'static scopes
    [when_all_vec]="a_tree_of_millions_of_nodes_is_built_as_it_runs" # for time: 4.8 million nodes, minutes under memcheck; the other lazy tests run the same blocks
    [sort]="the_unstable_sort_stays_n_log_n_against_an_adversary" # for time: 6 million comparisons under a lock, minutes under memcheck; the other sort tests run the same code on every path
    [drop_order]="" [panics]="" [let_value_ref]="" [time]="" [when_any]="" [model_random]="" [on_either]="" [any_sender]="" [when_all]="" [adaptors_basic]="" [let_and_transfer]="" [bulk_each]="" [schedulers]="" [domains]=""
)

memcheck=(valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite)

# The test binaries as cargo built them ("Executable ... (path)"): uncached blocks for the
# list above, the normal build for the library's own tests of the recycler.
mapfile -t bins < <(RUSTFLAGS="--cfg senders_uncached_blocks" CARGO_TARGET_DIR=target/valgrind \
    cargo test --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p')
lib_cached=$(cargo test --lib --no-run 2>&1 | sed -n 's/.*Executable .*(\(.*\))$/\1/p')
export PROPTEST_CASES=64 MODEL_FREED_CASES=1024

status=0
for name in "${!SKIP[@]}"; do
    bin=""
    for b in "${bins[@]}"; do
        if [[ $(basename "$b") == "$name"-* ]]; then
            bin=$b
        fi
    done
    if [ -z "$bin" ]; then
        echo "tools/valgrind.sh: no test binary named $name" >&2
        exit 1
    fi
    skips=()
    for t in ${SKIP[$name]}; do
        skips+=(--skip "$t")
    done
    start=$SECONDS
    if "${memcheck[@]}" "$bin" --test-threads=2 -q "${skips[@]}" >"target/valgrind-$name.log" 2>&1; then
        printf '%5ds  %-18s ok\n' "$((SECONDS - start))" "$name"
    else
        printf '%5ds  %-18s FAILED (target/valgrind-%s.log)\n' "$((SECONDS - start))" "$name" "$name"
        tail -40 "target/valgrind-$name.log"
        status=1
    fi
done

start=$SECONDS
if "${memcheck[@]}" "$lib_cached" --test-threads=2 -q --skip "${SKIP[senders]}" >target/valgrind-senders-cached.log 2>&1; then
    printf '%5ds  %-18s ok\n' "$((SECONDS - start))" "senders (recycler)"
else
    printf '%5ds  %-18s FAILED\n' "$((SECONDS - start))" "senders (recycler)"
    tail -40 target/valgrind-senders-cached.log
    status=1
fi

cargo build --release --example tree -q
start=$SECONDS
if "${memcheck[@]}" target/release/examples/tree 10 >target/valgrind-tree.log 2>&1; then
    printf '%5ds  %-18s ok\n' "$((SECONDS - start))" "example tree 10"
else
    printf '%5ds  %-18s FAILED\n' "$((SECONDS - start))" "example tree 10"
    tail -40 target/valgrind-tree.log
    status=1
fi
exit $status
