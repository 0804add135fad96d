#!/usr/bin/env bash
# Fuzz the public API with libFuzzer for a fixed time (tests/fuzz/fuzz_api.c).
#
#   tools/fuzz/run.sh [-t SECONDS] [-j JOBS] [-o BUILD_DIR] [-- LIBFUZZER_ARGS...]
#
#   -t SECONDS   total fuzzing time (default 120)
#   -j JOBS      parallel fuzzing processes sharing the corpus directory
#                (default: the number of cores)
#   -o DIR       build directory (default build-fuzz), configured with clang,
#                -Db_sanitize=address,undefined and the library instrumented
#                for coverage (-fsanitize=fuzzer-no-link); only the harness
#                links libFuzzer itself (-fsanitize=fuzzer)
#
# The seeds in tests/fuzz/corpus are read, never written: new inputs go to
# DIR/fuzz-corpus, findings to DIR/fuzz-artifacts. The last lines printed are
# the number of executions and "fuzz: PASS" or "fuzz: FAIL"; the exit status
# is 0 for PASS. A finding replays with DIR/tests/fuzz/fuzz_api_replay FILE
# (or the fuzzer binary with the file as its argument).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$ROOT"

budget=120
jobs=$(nproc 2>/dev/null || echo 1)
build=${ST_FUZZ_BUILD_DIR:-build-fuzz}
while (($# > 0)); do
    case $1 in
        -t) budget=$2; shift 2 ;;
        -j) jobs=$2; shift 2 ;;
        -o) build=$2; shift 2 ;;
        --) shift; break ;;
        -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "fuzz.sh: unknown argument '$1' (try -h)" >&2; exit 2 ;;
    esac
done
case $budget in '' | *[!0-9]*) echo "fuzz.sh: -t wants whole seconds" >&2; exit 2 ;; esac
case $jobs in '' | 0 | *[!0-9]*) echo "fuzz.sh: -j wants a positive count" >&2; exit 2 ;; esac
case $build in
    '' | . | .. | / | src | include | tests | tools | arch | docs)
        echo "fuzz.sh: refusing to use '$build' as the build directory" >&2
        exit 2
        ;;
esac

fail() {
    echo "fuzz.sh: $*" >&2
    echo "fuzz: FAIL"
    exit 1
}

command -v clang >/dev/null 2>&1 || fail "clang is not installed (Debian: clang)"
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '%s\n' '#include <stddef.h>' '#include <stdint.h>' \
    'int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }' \
    >"$probe/probe.c"
clang -fsanitize=fuzzer,address "$probe/probe.c" -o "$probe/probe" >"$probe/log" 2>&1 ||
    fail "clang cannot link libFuzzer (Debian: libclang-rt-14-dev): $(tail -n 3 "$probe/log")"

# Configure once. A directory this script did not make is never touched.
if [[ -e $build && ! -f $build/.st-fuzz-build ]]; then
    fail "$build exists and is not a build directory of tools/fuzz/run.sh"
fi
if [[ ! -f $build/build.ninja ]]; then
    rm -rf "$build"
    mkdir -p "$build"
    touch "$build/.st-fuzz-build"
    CC=clang meson setup "$build" --buildtype=debugoptimized -Dtests=disabled \
        -Db_sanitize=address,undefined -Db_lundef=false \
        -Dc_args="-fsanitize=fuzzer-no-link -fno-sanitize-recover=all" \
        >"$probe/setup.log" 2>&1 || { tail -n 20 "$probe/setup.log"; rm -f "$build/build.ninja"; fail "meson setup failed"; }
fi
meson compile -C "$build" fuzz_api fuzz_api_replay >"$probe/build.log" 2>&1 ||
    { tail -n 30 "$probe/build.log"; fail "building the harness failed"; }

work="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
mkdir -p "$work" "$artifacts"
rm -f "$artifacts"/crash-* "$artifacts"/leak-* "$artifacts"/timeout-* "$artifacts"/oom-* "$artifacts"/slow-unit-*

echo "fuzz: $budget s, $jobs process(es), logs in $build/fuzz-*.log"
rm -f "$build"/fuzz-*.log
run_one() {   # run_one JOB: one libFuzzer process for the whole budget
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
        UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        "$build/tests/fuzz/fuzz_api" -max_total_time="$budget" -timeout=20 -max_len=512 \
        -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$artifacts/" \
        "${extra[@]}" "$work" tests/fuzz/corpus >"$build/fuzz-$1.log" 2>&1
}
extra=("$@")
start=$(date +%s.%N)
pids=()
for ((j = 0; j < jobs; j++)); do
    run_one "$j" &
    pids+=($!)
done
rc=0
for pid in "${pids[@]}"; do
    wait "$pid" || rc=$?
done
end=$(date +%s.%N)

# Each process prints its exact count in its final statistics.
execs=$(awk '/^stat::number_of_executed_units:/ { n += $2 } END { print n + 0 }' "$build"/fuzz-*.log)
elapsed=$(awk -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", e - s }')
rate=$(awk -v n="$execs" -v s="$start" -v e="$end" 'BEGIN { printf "%.0f", (e > s) ? n / (e - s) : 0 }')
findings=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
log="$build/fuzz-0.log"
grep -h "DONE" "$build"/fuzz-*.log || tail -n 3 "$log"
echo "fuzz: $execs executions in ${elapsed} s ($rate exec/s), corpus $(find "$work" -type f | wc -l) files"
if ((rc != 0 || findings > 0)); then
    grep -h -m 5 -E 'ERROR|invariant violated|runtime error|Test unit written' "$build"/fuzz-*.log || true
    echo "fuzz: $findings finding(s) in $artifacts (exit status $rc)"
    echo "fuzz: FAIL"
    exit 1
fi
echo "fuzz: PASS"
