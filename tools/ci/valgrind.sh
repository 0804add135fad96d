#!/usr/bin/env bash
# Stage valgrind: memcheck with leak checking, on a fresh build in
# BUILD/valgrind: the unit suite and the api suite on epoll and on io_uring
# (its operation engine has paths of its own) through meson test (groups
# valgrind and valgrind-other, counted as build.sh counts), then the api
# suite's I/O topics on poll, select and io_uring through its runner build
# (poll and select share every code path valgrind can see but the
# dispatch), the porting tools and the pthreads stress test (group
# valgrind-tools, one check per program).
#
#   tools/ci/valgrind.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin

# Criterion's own runtime keeps "possibly lost" blocks, so definite and
# indirect leaks are the errors.
step "valgrind memcheck: unit, api (epoll, io_uring; runner: poll, select, io_uring), tools"
vg="$BUILD/valgrind"
vg_cmd="valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect --trace-children=yes"
if tool_build valgrind "$vg" -Dtests=enabled; then
    # With --wrapper, meson names the log after the wrapper.
    rm -f "$vg/meson-logs/testlog-valgrind.json"
    vg_rc=0
    meson test -C "$vg" --no-rebuild --print-errorlogs --num-processes "$JOBS" \
        --timeout-multiplier 10 --wrapper "$vg_cmd" \
        --suite unit --suite api --no-suite poll --no-suite select || vg_rc=$?
    count_tests valgrind "$vg/meson-logs/testlog-valgrind.json" "$vg_rc"
    vg_pass=0
    vg_fail=0
    vg_bad=()
    for prog in "ST_TEST_EVENTSYS=poll tests/api/api_runner_io" \
        "ST_TEST_EVENTSYS=select tests/api/api_runner_io" \
        "ST_TEST_EVENTSYS=io_uring tests/api/api_runner_io" \
        "tools/porting/helloworld" "tools/porting/stack" "tools/porting/backtrace --check" \
        "tests/debug/debug_pthreads 2 500"; do
        vg_env=(ST_RUNNER_TIMEOUT_SCALE=10)
        if [[ $prog == ST_TEST_EVENTSYS=* ]]; then
            vg_env+=("${prog%% *}")
            prog=${prog#* }
        fi
        vg_log="$LOGS/valgrind-$(basename "${prog%% *}")${vg_env[1]:+-${vg_env[1]#*=}}.log"
        # shellcheck disable=SC2086
        if env "${vg_env[@]}" $vg_cmd $vg/$prog >"$vg_log" 2>&1; then
            vg_pass=$((vg_pass + 1))
        else
            vg_fail=$((vg_fail + 1))
            vg_bad+=("$prog")
            tail -n 20 "$vg_log" || true
        fi
    done
    record valgrind-tools "$vg_pass" "$vg_fail" \
        "tools under memcheck, one check each${vg_bad:+; failed: ${vg_bad[*]}}"
fi

stage_summary
