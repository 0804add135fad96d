#!/usr/bin/env bash
# The test command of st: everything CI checks, from a fresh checkout.
#
#   tools/test.sh
#
# 1. installs missing Debian packages (tools/deps.sh);
# 2. configures a fresh debug build with coverage in build-test/ and builds it;
# 3. runs the whole Meson test suite (unit, api per backend, tools, header);
# 4. runs clang-tidy over the project's C sources (any warning fails);
# 5. measures line coverage of src/ with lcov (below 90% fails);
# 6. checks that libst.so (release build) exports nothing but st_* symbols;
# 7. installs that build into build-test/stage and builds a State Threads
#    program against it through pkg-config, with libst.so and with libst.a;
# 8. prints one line per group and, last, "N passed, N failed", where every
#    Criterion test counts as one check, every other Meson test as one, and
#    clang-tidy, the coverage gate, the symbol check and each link mode as
#    one each.
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
step "dependencies (tools/deps.sh)"
if ! bash tools/deps.sh all; then
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

# Counts every Criterion test in every test executable, from the
# "Synthesis: Tested: X | Passing: Y | Failing: Z | Crashing: W" line that
# Criterion prints (crashes are included in Failing; tests - passing is
# used so nothing is counted twice). A Criterion executable that exits
# badly although all its tests passed, or that dies before printing its
# synthesis, adds one failure. Any other Meson test counts as one check.
parse_out=$(python3 - "$LOGS/testlog.json" <<'PY'
import json, re, sys

path = sys.argv[1]
ansi = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')
synth = re.compile(r'Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)')
good = {'OK', 'EXPECTEDFAIL'}
c_pass = c_fail = c_exes = o_pass = o_fail = skipped = 0
notes = []
try:
    with open(path, encoding='utf-8', errors='replace') as f:
        entries = [json.loads(line) for line in f if line.strip()]
except OSError as e:
    print(f'note: cannot read {path}: {e}', file=sys.stderr)
    entries = []
for e in entries:
    name = e.get('name', '?')
    result = e.get('result', '?')
    text = ansi.sub('', (e.get('stdout') or '') + '\n' + (e.get('stderr') or ''))
    m = None
    for m in synth.finditer(text):
        pass
    if m:
        c_exes += 1
        tested, passing = int(m.group(1)), int(m.group(2))
        c_pass += passing
        c_fail += tested - passing
        for fl in re.findall(r'^\[FAIL\] (.*)$', text, re.M):
            notes.append(f'{name}: {fl.strip()}')
        if result not in good and tested == passing:
            c_fail += 1
            notes.append(f'{name}: all tests passed but the executable ended with {result}')
    elif result == 'SKIP':
        skipped += 1
    elif re.search(r'^\[(RUN |----|FAIL|SKIP|PASS)\]', text, re.M):
        c_exes += 1
        c_fail += 1
        notes.append(f'{name}: Criterion executable ended with {result} before its synthesis')
    elif result in good:
        o_pass += 1
    else:
        o_fail += 1
        notes.append(f'{name}: {result}')
for n in notes:
    print('  ' + n, file=sys.stderr)
print(c_pass, c_fail, c_exes, o_pass, o_fail, skipped)
PY
) || parse_out="0 1 0 0 0 0"
read -r c_pass c_fail c_exes o_pass o_fail skipped <<<"$parse_out"
if ((c_pass + c_fail == 0)); then
    record criterion 0 1 "no Criterion test ran"
else
    record criterion "$c_pass" "$c_fail" "individual Criterion tests in $c_exes executables"
fi
record other-tests "$o_pass" "$o_fail" "other Meson tests (tools, header), one check each; $skipped skipped"
if ((test_rc != 0 && c_fail + o_fail == 0)); then
    record meson-test 0 1 "meson test exited with $test_rc"
fi

# ---------------------------------------------------------------------------
# Meson's clang-tidy target lints every C file that git tracks; outside a git
# checkout (or before the first commit) the same set is found with find(1).
step "clang-tidy"
tidy_log="$LOGS/clang-tidy.log"
tidy_rc=0
if git -C "$ROOT" ls-files -- '*.c' '*.h' 2>/dev/null | grep -q .; then
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
    if [[ $mode == shared ]]; then
        # shellcheck disable=SC2046
        cc -o "$exe" tests/header/c_program.c $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs st) \
            -Wl,-rpath,"$libdir" && "$exe" && ldd "$exe" | grep -q "$libdir/libst.so"
    else
        # shellcheck disable=SC2046
        cc -o "$exe" tests/header/c_program.c $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags st) \
            "$libdir/libst.a" && "$exe" && ! ldd "$exe" | grep -q libst
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

summary
