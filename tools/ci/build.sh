#!/usr/bin/env bash
# Stage build: configures a fresh debug build with coverage in BUILD
# (default build-test), compiles it and runs the whole Meson test suite, which
# also leaves the coverage data coverage.sh reads. Groups: criterion (every
# Criterion test one check) and criterion-other (every other Meson test one).
#
#   tools/ci/build.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin

# Always a fresh directory: stale .gcda files or a build dir configured with
# another compiler would make the coverage figure meaningless.
rm -rf "$BUILD"
configure_main
compile_main

step "meson test"
# Debug code with coverage counters runs slower than a release build, so the
# per-test timeouts get some slack.
rm -f "$LOGS/testlog.json"
test_rc=0
meson test -C "$BUILD" --no-rebuild --print-errorlogs \
    --num-processes "$JOBS" --timeout-multiplier 3 || test_rc=$?
echo "meson test exit status: $test_rc"
count_tests criterion "$LOGS/testlog.json" "$test_rc"

stage_summary
