#!/usr/bin/env bash
# Stage fuzz: the API fuzzer (libFuzzer + ASan + UBSan, tests/fuzz) for a
# fixed budget through tools/fuzz/run.sh, from the corpus in the repository,
# built in BUILD/fuzz; any finding fails. Group fuzz, one check.
#
#   tools/ci/fuzz.sh                       # 120 seconds
#   ST_FUZZ_SECONDS=10 tools/ci/fuzz.sh    # a shorter run
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin

budget=${ST_FUZZ_SECONDS:-120}
step "fuzz: $budget s of tools/fuzz/run.sh"
fuzz_log="$LOGS/fuzz.log"
if bash tools/fuzz/run.sh -t "$budget" -o "$BUILD/fuzz" >"$fuzz_log" 2>&1; then
    record fuzz 1 0 "$(grep -m1 '^fuzz: [0-9]* executions' "$fuzz_log")"
else
    tail -n 20 "$fuzz_log" || true
    record fuzz 0 1 "tools/fuzz/run.sh failed (log: $fuzz_log)"
fi

stage_summary
