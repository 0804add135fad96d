# shellcheck shell=bash
# What tools/test.sh and the stage scripts in tools/ci share; each sources it
# first. It moves to the source root and sets:
#
#   BUILD         the build directory (ST_TEST_BUILD_DIR, default build-test)
#   LOGS          BUILD/meson-logs, where every stage leaves its logs
#   COVERAGE_MIN  minimum src/ line coverage (ST_COVERAGE_MIN, default 90)
#   JOBS          parallel jobs (the number of cores)
#
# and defines step, record, summary and the helpers the stages count with.
#
# A stage run alone installs missing packages first (tools/ci/deps.sh) and
# prints its own summary. Under tools/test.sh (ST_CI_DRIVER set) the driver
# has done that; every record is also appended to the file ST_CI_RECORDS, from
# which the driver prints the summary of the whole run, and ST_CI_START keeps
# the step times counting from the driver's start.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$ROOT" || exit 2

BUILD=${ST_TEST_BUILD_DIR:-build-test}
# shellcheck disable=SC2034 # read by coverage.sh
COVERAGE_MIN=${ST_COVERAGE_MIN:-90}
JOBS=$(nproc 2>/dev/null || echo 2)
LOGS="$BUILD/meson-logs"
case $BUILD in
    '' | . | .. | / | src | include | tests | tools | arch | docs)
        echo "$(basename "$0"): refusing to use '$BUILD' as the build directory" >&2
        exit 2
        ;;
esac
START=${ST_CI_START:-$EPOCHSECONDS}
STAGE_START=$EPOCHSECONDS

passed=0
failed=0
groups=()       # one line per check group, printed in the summary
problems=()     # what failed, printed in the summary

step() { printf '\n==> %s  [%ds]\n' "$*" $((EPOCHSECONDS - START)); }
record() {      # record GROUP PASSED FAILED DETAIL
    passed=$((passed + $2))
    failed=$((failed + $3))
    groups+=("$(printf '%-14s %5d passed, %3d failed  %s' "$1" "$2" "$3" "$4")")
    if (($3 > 0)); then problems+=("$1: $4"); fi
    if [[ -n ${ST_CI_RECORDS:-} ]]; then
        printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$ST_CI_RECORDS"
    fi
}
strip_ansi() { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g'; }

# Prints the groups recorded so far, what failed, the time taken and, last,
# "N passed, N failed"; exits 0 if and only if nothing failed.
summary() {     # summary [TITLE]
    step "${1:-summary}"
    local line
    for line in "${groups[@]}"; do echo "  $line"; done
    if ((${#problems[@]} > 0)); then
        echo "failed:"
        for line in "${problems[@]}"; do echo "  - $line"; done
    fi
    if [[ ${1:-summary} == summary ]]; then
        echo "total time: $((EPOCHSECONDS - START))s"
    else
        echo "time: $((EPOCHSECONDS - STAGE_START))s"
    fi
    echo "$passed passed, $failed failed"
    if ((failed == 0)); then exit 0; fi
    exit 1
}
stage_summary() { summary "$(basename "$0" .sh): summary"; }

# The installed-deps step: missing Debian packages stop the run.
deps_step() {
    step "dependencies (tools/ci/deps.sh)"
    if ! bash tools/ci/deps.sh all; then
        record setup 0 1 "missing Debian packages (see the apt-get line above)"
        summary
    fi
}

# Every stage starts here: alone, it installs what is missing first.
stage_begin() {
    if [[ -z ${ST_CI_DRIVER:-} ]]; then deps_step; fi
    mkdir -p "$LOGS"
}

# The main build: a debug build with coverage, in BUILD. gcc is forced
# because lcov reads gcc's gcov data.
configure_main() {
    step "configure $BUILD (debug, coverage)"
    if ! CC=gcc meson setup "$BUILD" --buildtype=debug -Db_coverage=true -Dtests=enabled; then
        record build 0 1 "meson setup failed"
        stage_summary
    fi
}
compile_main() {
    step "compile"
    if ! meson compile -C "$BUILD" -j "$JOBS"; then
        record build 0 1 "compilation failed"
        stage_summary
    fi
}
# For a stage that needs the main build (lint, coverage): under the driver,
# build.sh has just made it; alone, it is configured when missing and brought
# up to date.
need_main_build() {
    if [[ -n ${ST_CI_DRIVER:-} ]]; then return 0; fi
    if [[ ! -f $BUILD/build.ninja ]]; then configure_main; fi
    compile_main
}

# Counts individual results (see tools/ci/count_tests.py) and records them as
# two groups, NAME (Criterion tests) and NAME-other (other Meson tests).
count_tests() {   # count_tests NAME TESTLOG MESON_EXIT_STATUS
    local name=$1 log=$2 rc=$3 out c_pass c_fail c_exes o_pass o_fail skipped
    out=$(python3 tools/ci/count_tests.py "$log") || out="0 1 0 0 0 0"
    read -r c_pass c_fail c_exes o_pass o_fail skipped <<<"$out"
    if ((c_pass + c_fail > 0)); then
        record "$name" "$c_pass" "$c_fail" "individual Criterion tests in $c_exes executables"
    fi
    if ((o_pass + o_fail > 0 || c_pass + c_fail == 0)); then
        record "$name-other" "$o_pass" "$o_fail" "other Meson tests, one check each; $skipped skipped"
    fi
    if ((c_pass + c_fail + o_pass + o_fail == 0)); then
        record "$name" 0 1 "no test ran"
    elif ((rc != 0 && c_fail + o_fail == 0)); then
        record "$name" 0 1 "meson test exited with $rc"
    fi
}

# Runs tools/ci/NAME.sh, a script that prints one "PASS <check>: ..." or
# "FAIL <check>: ..." line per check, with the work directory BUILD/NAME,
# and records its lines as the group NAME (log: LOGS/NAME.log). A script
# that prints no such line, or fails without a FAIL line, counts as one
# failed check.
record_check_script() {   # record_check_script NAME
    local name=$1 log="$LOGS/$1.log" rc=0 n_pass n_fail
    bash "tools/ci/$name.sh" "$BUILD/$name" 2>&1 | tee "$log" || rc=$?
    n_pass=$(grep -c '^PASS ' "$log" || true)
    n_fail=$(grep -c '^FAIL ' "$log" || true)
    if ((n_pass + n_fail == 0)); then
        record "$name" 0 1 "tools/ci/$name.sh printed no PASS/FAIL line (log: $log)"
    elif ((rc != 0 && n_fail == 0)); then
        record "$name" "$n_pass" 1 "tools/ci/$name.sh exited with $rc after $n_pass passed checks (log: $log)"
    else
        record "$name" "$n_pass" "$n_fail" "one check per PASS/FAIL line (log: $log)"
    fi
}

# A fresh build of its own for a dynamic analysis tool (see
# docs/debugging.md). A configure or compile failure counts as one failed
# check of the group.
tool_build() {   # tool_build GROUP DIR MESON_OPTIONS...
    local group=$1 dir=$2
    shift 2
    rm -rf "$dir"
    if ! CC=gcc meson setup "$dir" --buildtype=debug "$@" >"$LOGS/$group-setup.log" 2>&1 ||
        ! meson compile -C "$dir" -j "$JOBS" >"$LOGS/$group-compile.log" 2>&1; then
        tail -n 20 "$LOGS/$group-setup.log" "$LOGS/$group-compile.log" 2>/dev/null || true
        record "$group" 0 1 "could not build $dir (logs: $LOGS/$group-*.log)"
        return 1
    fi
}
