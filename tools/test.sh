#!/usr/bin/env bash
# The test command of st: everything CI checks, from a fresh checkout.
#
#   tools/test.sh
#
# 1. installs missing Debian packages (tools/ci/deps.sh);
# 2. configures a fresh debug build with coverage in build-test/ and builds it;
# 3. runs the whole Meson test suite (unit, api per backend, tools, header);
# 4. runs clang-tidy over the project's C sources (any warning fails);
# 5. measures line coverage of src/ with lcov (below 90% fails);
# 6. checks that libst.so (release build) exports nothing but st_* symbols;
# 7. installs that build into build-test/stage and builds a State Threads
#    program against it through pkg-config, with libst.so and with libst.a;
# 8. runs the suite under ASan+UBSan, the multi-pthread tests under TSan,
#    and the unit, api (epoll, and poll and select through the runner
#    build) and tools under valgrind memcheck;
# 9. cross-builds the api suite with its runner and the register check for
#    every supported CPU and runs them under qemu-user (tools/cross/run.sh,
#    build root build-test/cross);
# 10. prints one line per group and, last, "N passed, N failed", where every
#    Criterion test counts as one check, every other Meson test as one, and
#    clang-tidy, the coverage gate, the symbol check, each link mode and
#    each CPU of the cross run as one each.
#
# Exit status 0 if and only if nothing failed. Environment knobs:
#   ST_TEST_BUILD_DIR   build directory (default build-test)
#   ST_COVERAGE_MIN     minimum src/ line coverage in percent (default 90)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "$ROOT"

BUILD=${ST_TEST_BUILD_DIR:-build-test}
COVERAGE_MIN=${ST_COVERAGE_MIN:-90}
JOBS=$(nproc 2>/dev/null || echo 2)
LOGS="$BUILD/meson-logs"
case $BUILD in
    '' | . | .. | / | src | include | tests | tools | arch | docs)
        echo "test.sh: refusing to use '$BUILD' as the build directory" >&2
        exit 2
        ;;
esac
START=$SECONDS

passed=0
failed=0
groups=()       # one line per check group, printed in the summary
problems=()     # what failed, printed in the summary

step() { printf '\n==> %s  [%ds]\n' "$*" $((SECONDS - START)); }
record() {      # record GROUP PASSED FAILED DETAIL
    passed=$((passed + $2))
    failed=$((failed + $3))
    groups+=("$(printf '%-14s %5d passed, %3d failed  %s' "$1" "$2" "$3" "$4")")
    if (($3 > 0)); then problems+=("$1: $4"); fi
}
strip_ansi() { sed -e 's/\x1b\[[0-9;]*[A-Za-z]//g'; }

summary() {
    step "summary"
    local line
    for line in "${groups[@]}"; do echo "  $line"; done
    if ((${#problems[@]} > 0)); then
        echo "failed:"
        for line in "${problems[@]}"; do echo "  - $line"; done
    fi
    echo "total time: $((SECONDS - START))s"
    echo "$passed passed, $failed failed"
    if ((failed == 0)); then exit 0; fi
    exit 1
}

# ---------------------------------------------------------------------------
step "dependencies (tools/ci/deps.sh)"
if ! bash tools/ci/deps.sh all; then
    record setup 0 1 "missing Debian packages (see the apt-get line above)"
    summary
fi

# ---------------------------------------------------------------------------
# Always a fresh directory: stale .gcda files or a build dir configured with
# another compiler would make the coverage figure meaningless. gcc is forced
# because lcov reads gcc's gcov data.
step "configure $BUILD (debug, coverage)"
rm -rf "$BUILD"
if ! CC=gcc meson setup "$BUILD" --buildtype=debug -Db_coverage=true -Dtests=enabled; then
    record build 0 1 "meson setup failed"
    summary
fi

step "compile"
if ! meson compile -C "$BUILD" -j "$JOBS"; then
    record build 0 1 "compilation failed"
    summary
fi

# ---------------------------------------------------------------------------
step "meson test"
# Debug code with coverage counters runs slower than a release build, so the
# per-test timeouts get some slack.
rm -f "$LOGS/testlog.json"
test_rc=0
meson test -C "$BUILD" --no-rebuild --print-errorlogs \
    --num-processes "$JOBS" --timeout-multiplier 3 || test_rc=$?
echo "meson test exit status: $test_rc"

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
count_tests criterion "$LOGS/testlog.json" "$test_rc"

# ---------------------------------------------------------------------------
# Meson's clang-tidy target lints every C file that git tracks; outside a git
# checkout (or before the first commit) the same set is found with find(1).
step "clang-tidy"
tidy_log="$LOGS/clang-tidy.log"
tidy_rc=0
if [[ -n $(git -C "$ROOT" ls-files -- '*.c' '*.h' 2>/dev/null) ]]; then
    ninja -C "$BUILD" clang-tidy >"$tidy_log" 2>&1 || tidy_rc=$?
else
    echo "(no tracked files: running clang-tidy over src include tests tools)"
    find src include tests tools \( -name '*.[ch]' -o -name '*.cpp' \) -print0 2>/dev/null |
        sort -z | xargs -0 -r -n 1 -P "$JOBS" clang-tidy --quiet -p "$BUILD" >"$tidy_log" 2>&1 ||
        tidy_rc=$?
fi
tidy_diags=$(strip_ansi <"$tidy_log" | grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error):' |
    sed -e "s#^$ROOT/$BUILD/\.\./##" -e "s#^\.\./##" -e "s#^$ROOT/##" | sort -u || true)
if [[ -n $tidy_diags ]]; then
    tidy_count=$(wc -l <<<"$tidy_diags")
    head -n 200 <<<"$tidy_diags"
    if ((tidy_count > 200)); then echo "... ($tidy_count in all, see $tidy_log)"; fi
    record clang-tidy 0 1 "$tidy_count diagnostics (full log: $tidy_log)"
elif ((tidy_rc != 0)); then
    strip_ansi <"$tidy_log" | tail -n 30
    record clang-tidy 0 1 "clang-tidy exited with $tidy_rc (log: $tidy_log)"
else
    echo "clang-tidy: no warnings"
    record clang-tidy 1 0 "zero warnings"
fi

# ---------------------------------------------------------------------------
step "coverage (lcov, src/ only)"
cov_info="$LOGS/coverage-src.info"
cov_ok=0
if ninja -C "$BUILD" coverage-html >"$LOGS/coverage.log" 2>&1 &&
    lcov --quiet --extract "$LOGS/coverage.info" "$ROOT/src/*" \
        --output-file "$cov_info" >>"$LOGS/coverage.log" 2>&1; then
    lcov --list "$cov_info" 2>/dev/null | sed -e "s#$ROOT/##" || true
    read -r cov_hit cov_total < <(awk -F: '
        /^LH:/ { h += $2 } /^LF:/ { t += $2 } END { print h + 0, t + 0 }' "$cov_info")
    if ((cov_total > 0)); then
        cov_pct=$(awk -v h="$cov_hit" -v t="$cov_total" 'BEGIN { printf "%.1f", 100 * h / t }')
        echo "src/ line coverage: $cov_pct% ($cov_hit of $cov_total lines); required: $COVERAGE_MIN%"
        echo "html report: $LOGS/coveragereport/index.html"
        if awk -v h="$cov_hit" -v t="$cov_total" -v m="$COVERAGE_MIN" 'BEGIN { exit !(100 * h >= m * t) }'; then
            record coverage 1 0 "src/ lines $cov_pct% >= $COVERAGE_MIN%"
        else
            record coverage 0 1 "src/ lines $cov_pct% < $COVERAGE_MIN%"
        fi
        cov_ok=1
    fi
fi
if ((cov_ok == 0)); then
    grep -v 'redefined at' "$LOGS/coverage.log" | tail -n 20 || true
    record coverage 0 1 "no coverage data for src/ (log: $LOGS/coverage.log)"
fi

# ---------------------------------------------------------------------------
# Checked on a plain release build of the shared library: the coverage build
# also exports libgcov's own __gcov_* symbols, which the installed library
# never has.
step "exported symbols of libst.so (release build in $BUILD/release-abi)"
abi="$BUILD/release-abi"
so="$abi/libst.so"
stage="$ROOT/$BUILD/stage"
if meson setup "$abi" --buildtype=release -Dtests=disabled --prefix "$stage" \
    >"$LOGS/release-abi.log" 2>&1 &&
    { meson compile -C "$abi" st:shared_library >>"$LOGS/release-abi.log" 2>&1 ||
        meson compile -C "$abi" >>"$LOGS/release-abi.log" 2>&1; } &&
    [[ -f $so ]] && syms=$(nm -D --defined-only "$so"); then
    bad=$(awk 'NF >= 2 { print $NF }' <<<"$syms" |
        grep -Ev '^(st_[A-Za-z0-9_]+|_init|_fini|_edata|_end|__bss_start)$' || true)
    n_st=$(awk 'NF >= 2 { print $NF }' <<<"$syms" | grep -c '^st_' || true)
    if [[ -n $bad ]]; then
        echo "symbols outside st_*:"
        sed 's/^/  /' <<<"$bad"
        record symbols 0 1 "$(wc -l <<<"$bad") exported symbols outside st_*"
    elif ((n_st == 0)); then
        record symbols 0 1 "libst.so exports no st_* symbol"
    else
        echo "nm -D: $n_st st_* symbols, nothing else"
        record symbols 1 0 "$n_st st_* symbols, nothing else"
    fi
else
    tail -n 20 "$LOGS/release-abi.log" || true
    record symbols 0 1 "could not build $so (log: $LOGS/release-abi.log)"
fi

# ---------------------------------------------------------------------------
# A State Threads program builds unchanged against the installed library:
# st.h from the install, libst.so or libst.a found through pkg-config st.
step "install and build a State Threads program through pkg-config"
install_check() {   # install_check MODE (shared|static)
    local mode=$1 exe="$abi/st_program_$1" pc_dir libdir
    pc_dir=$(dirname "$(find "$stage" -name st.pc -print -quit)")
    libdir=$(PKG_CONFIG_PATH=$pc_dir pkg-config --variable=libdir st)
    # ldd's output is taken whole before grep looks at it: with pipefail,
    # `ldd | grep -q` fails whenever grep exits before ldd has written all.
    local deps
    if [[ $mode == shared ]]; then
        # shellcheck disable=SC2046
        cc -o "$exe" tests/header/c_program.c $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs st) \
            -Wl,-rpath,"$libdir" && "$exe" && deps=$(ldd "$exe") && grep -q "$libdir/libst.so" <<<"$deps"
    else
        # shellcheck disable=SC2046
        cc -o "$exe" tests/header/c_program.c $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags st) \
            "$libdir/libst.a" && "$exe" && deps=$(ldd "$exe") && ! grep -q libst <<<"$deps"
    fi
}
if meson install -C "$abi" >"$LOGS/install.log" 2>&1 && [[ -f $stage/include/st.h ]]; then
    for mode in shared static; do
        if install_check "$mode"; then
            record "link-$mode" 1 0 "program built with pkg-config st against the installed $mode library"
        else
            record "link-$mode" 0 1 "program did not build or run against the installed library ($mode)"
        fi
    done
else
    tail -n 20 "$LOGS/install.log" || true
    record install 0 1 "meson install failed (log: $LOGS/install.log)"
fi

# ---------------------------------------------------------------------------
# Packaging as users meet it (docs/packaging.md): tests/consumer through its
# Meson wrap and through pkg-config (shared and static) against an installed
# copy; meson dist from HEAD, and the tarball's own build, tests and DESTDIR
# install. Each PASS/FAIL line of the two scripts is one check.
step "packaging: Meson wrap and pkg-config consumers, meson dist"
for pk in consumer_check dist_check; do
    pk_log="$LOGS/$pk.log"
    bash "tools/ci/$pk.sh" "$BUILD/$pk" 2>&1 | tee "$pk_log" || true
    pk_pass=$(grep -c '^PASS ' "$pk_log" || true)
    pk_fail=$(grep -c '^FAIL ' "$pk_log" || true)
    if ((pk_pass + pk_fail == 0)); then
        record "$pk" 0 1 "tools/ci/$pk.sh printed no PASS/FAIL line (log: $pk_log)"
    else
        record "$pk" "$pk_pass" "$pk_fail" "one check per PASS/FAIL line (log: $pk_log)"
    fi
done

# ---------------------------------------------------------------------------
# The dynamic analysis tools, each on its own build (see docs/debugging.md).
# A configure or compile failure counts as one failed check of the group.
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

# valgrind memcheck: the unit suite, the api suite on one backend with
# Criterion, the api suite's I/O topics on poll and select through its
# runner build (the backends share every code path valgrind can see but the
# dispatch), and the tools, with leak checking.
# Criterion's own runtime keeps "possibly lost" blocks, so definite and
# indirect leaks are the errors.
step "valgrind memcheck: unit, api (epoll; runner: poll, select), tools"
vg="$BUILD/valgrind"
vg_cmd="valgrind -q --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite,indirect --trace-children=yes"
if tool_build valgrind "$vg" -Dtests=enabled; then
    # With --wrapper, meson names the log after the wrapper.
    rm -f "$vg/meson-logs/testlog-valgrind.json"
    vg_rc=0
    meson test -C "$vg" --no-rebuild --print-errorlogs --num-processes "$JOBS" \
        --timeout-multiplier 10 --wrapper "$vg_cmd" \
        --suite unit --suite api --no-suite poll --no-suite select --no-suite io_uring || vg_rc=$?
    count_tests valgrind "$vg/meson-logs/testlog-valgrind.json" "$vg_rc"
    vg_pass=0
    vg_fail=0
    vg_bad=()
    for prog in "ST_TEST_EVENTSYS=poll tests/api/api_runner_io" \
        "ST_TEST_EVENTSYS=select tests/api/api_runner_io" \
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

# ---------------------------------------------------------------------------
# The API fuzzer (libFuzzer + ASan + UBSan, tests/fuzz) for a fixed budget,
# from the corpus in the repository; any finding fails the step.
step "fuzz: 120 s of tools/fuzz/run.sh"
fuzz_log="$LOGS/fuzz.log"
if bash tools/fuzz/run.sh -t 120 -o "$BUILD/fuzz" >"$fuzz_log" 2>&1; then
    record fuzz 1 0 "$(grep -m1 '^fuzz: [0-9]* executions' "$fuzz_log")"
else
    tail -n 20 "$fuzz_log" || true
    record fuzz 0 1 "tools/fuzz/run.sh failed (log: $fuzz_log)"
fi

# ---------------------------------------------------------------------------
# Every supported CPU: the api suite built with its runner and the register
# check (tests/arch), cross-built (static) and run under qemu-user, x86_64
# natively. Each `RESULT <cpu> PASS|FAIL` line is one check.
step "cross: the api suite and the register check on every CPU (tools/cross/run.sh)"
cross_log="$LOGS/cross.log"
cross_rc=0
bash tools/cross/run.sh -j "$JOBS" -o "$BUILD/cross" 2>&1 | tee "$cross_log" || cross_rc=$?
cross_pass=$(grep -c '^RESULT [^ ]* PASS$' "$cross_log" || true)
cross_fail=$(grep -c '^RESULT [^ ]* FAIL' "$cross_log" || true)
if ((cross_pass + cross_fail == 0)); then
    record cross 0 1 "tools/cross/run.sh printed no RESULT line (exit $cross_rc, log: $cross_log)"
elif ((cross_fail > 0)); then
    record cross "$cross_pass" "$cross_fail" "failed on $(awk '/^RESULT [^ ]* FAIL/ { printf "%s%s", sep, $2; sep = " " }' \
        "$cross_log") (reasons in the RESULT lines above; log: $cross_log)"
else
    record cross "$cross_pass" 0 "one check per CPU: api suite (epoll) and register check under qemu-user (x86_64 natively)"
fi
if ((cross_rc != 0 && cross_fail == 0)); then
    record cross-script 0 1 "tools/cross/run.sh exited with $cross_rc"
fi

summary
