#!/usr/bin/env bash
# The test command of st: everything CI checks, from a fresh checkout.
#
#   tools/test.sh
#
# Installs missing Debian packages (tools/ci/deps.sh), then runs the stages
# in tools/ci in this order, each also runnable alone (tools/ci/STAGE.sh):
#
#   build       fresh debug build with coverage in build-test/, whole Meson
#               test suite (unit, api per backend, tools, header, docs)
#   lint        clang-tidy over the project's C sources (any warning fails)
#   coverage    src/ line coverage with lcov (below 90% fails)
#   abi         libst.so (release build) exports nothing but st_*; installed,
#               a program builds through pkg-config with libst.so and libst.a
#   packaging   tools/ci/consumer_check.sh and tools/ci/dist_check.sh
#   make        State Threads' make interface as SRS uses it, native and
#               cross (tools/ci/make_check.sh)
#   sanitizers  the suite under ASan+UBSan, the multi-pthread tests under TSan
#   valgrind    unit, api (epoll; poll and select through the runner build)
#               and tools under valgrind memcheck
#   fuzz        120 s of the API fuzzer (tools/fuzz/run.sh)
#   cross       the api suite and the register check on every CPU under
#               qemu-user (tools/cross/run.sh, build root build-test/cross)
#
# Prints one line per group and, last, "N passed, N failed", where every
# Criterion test counts as one check, every other Meson test as one, and
# clang-tidy, the coverage gate, the symbol check, each link mode, each
# PASS/FAIL line of the packaging and make checks and each CPU of the cross
# run as one each. A failed configure or compile of the main build stops
# the run; a stage that fails without recording a failed check counts as
# one failed check.
#
# Exit status 0 if and only if nothing failed. Environment knobs:
#   ST_TEST_BUILD_DIR   build directory (default build-test)
#   ST_COVERAGE_MIN     minimum src/ line coverage in percent (default 90)
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ci/lib.sh"

deps_step

records=$(mktemp "${TMPDIR:-/tmp}/st-test.XXXXXX")
trap 'rm -f "$records"' EXIT
export ST_CI_DRIVER=1 ST_CI_START=$START ST_TEST_BUILD_DIR=$BUILD ST_COVERAGE_MIN=$COVERAGE_MIN

for stage in build lint coverage abi packaging make sanitizers valgrind fuzz cross; do
    : >"$records"
    stage_rc=0
    ST_CI_RECORDS=$records bash "tools/ci/$stage.sh" || stage_rc=$?
    stage_failed=0
    stopped=0
    while IFS=$'\t' read -r group n_pass n_fail detail; do
        record "$group" "$n_pass" "$n_fail" "$detail"
        stage_failed=$((stage_failed + n_fail))
        if [[ $group == build ]]; then stopped=1; fi
    done <"$records"
    if ((stage_rc != 0 && stage_failed == 0)); then
        record "$stage" 0 1 "tools/ci/$stage.sh exited with $stage_rc"
    fi
    if ((stopped)); then break; fi
done

summary
