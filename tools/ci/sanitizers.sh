#!/usr/bin/env bash
# Stage sanitizers: the whole suite under ASan+UBSan (BUILD/asan; groups asan
# and asan-other, counted as build.sh counts), and the multi-pthread programs
# under TSan (BUILD/tsan; group tsan, one check per program). Each on a fresh
# build of its own.
#
#   tools/ci/sanitizers.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin

# AddressSanitizer + UndefinedBehaviorSanitizer: the whole suite. ASan's own
# SIGSEGV handler is off so that st's overflow report is what tests see;
# detect_stack_use_after_return exercises the fake stacks on coroutine stacks.
step "ASan + UBSan: the whole test suite"
asan="$BUILD/asan"
if tool_build asan "$asan" -Db_sanitize=address,undefined -Db_lundef=false \
    -Dc_args=-fno-sanitize-recover=all -Dtests=enabled; then
    rm -f "$asan/meson-logs/testlog.json"
    asan_rc=0
    ASAN_OPTIONS=detect_stack_use_after_return=1:handle_segv=0:detect_leaks=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        meson test -C "$asan" --no-rebuild --print-errorlogs --num-processes "$JOBS" \
        --timeout-multiplier 3 || asan_rc=$?
    count_tests asan "$asan/meson-logs/testlog.json" "$asan_rc"
fi

# ThreadSanitizer: Criterion's runtime does not work under TSan, so the
# multi-pthread tests run through framework-free programs: the pthreads
# stress test (tests/debug) and the api suite's tests that start pthreads,
# built with the suite's own runner (tests/api/st_runner.c), the I/O ones
# once per backend.
step "TSan: multi-pthread programs"
tsan="$BUILD/tsan"
if tool_build tsan "$tsan" -Db_sanitize=thread -Db_lundef=false -Dtests=disabled; then
    ts_pass=0
    ts_fail=0
    # Each entry: log name, environment, program and its arguments.
    for entry in "debug_pthreads||tests/debug/debug_pthreads 4 500" \
        "api_runner_plain||tests/api/api_runner_plain *pthread*" \
        "api_runner_io-epoll|ST_TEST_EVENTSYS=epoll|tests/api/api_runner_io *pthread*" \
        "api_runner_io-poll|ST_TEST_EVENTSYS=poll|tests/api/api_runner_io *pthread*" \
        "api_runner_io-select|ST_TEST_EVENTSYS=select|tests/api/api_runner_io *pthread*"; do
        IFS='|' read -r ts_name ts_env ts_cmd <<<"$entry"
        read -r -a ts_argv <<<"$ts_cmd"
        ts_log="$LOGS/tsan-$ts_name.log"
        # shellcheck disable=SC2086
        if env $ts_env TSAN_OPTIONS=halt_on_error=1 ST_RUNNER_TIMEOUT_SCALE=5 \
            "$tsan/${ts_argv[0]}" "${ts_argv[@]:1}" >"$ts_log" 2>&1; then
            ts_pass=$((ts_pass + 1))
        else
            ts_fail=$((ts_fail + 1))
            tail -n 30 "$ts_log" || true
        fi
    done
    record tsan "$ts_pass" "$ts_fail" "multi-pthread programs under ThreadSanitizer, one check each"
fi

stage_summary
