#!/usr/bin/env bash
# Stage coverage: line coverage of src/ with lcov, from the data the main
# build's test run left (build.sh); below ST_COVERAGE_MIN percent (default 90)
# fails. Alone, with no test run in BUILD yet, it builds and runs the suite
# first (uncounted). Group coverage, one check.
#
#   tools/ci/coverage.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin
need_main_build
if [[ ! -f $LOGS/testlog.json ]]; then
    step "meson test (coverage data only, not counted)"
    meson test -C "$BUILD" --no-rebuild --num-processes "$JOBS" \
        --timeout-multiplier 3 >/dev/null 2>&1 || true
fi

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

stage_summary
