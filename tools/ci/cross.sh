#!/usr/bin/env bash
# Stage cross: every supported CPU, through tools/cross/run.sh (build root
# BUILD/cross): the api suite built with its runner and the register check
# (tests/arch), cross-built (static) and run under qemu-user, x86_64
# natively. Group cross: each `RESULT <cpu> PASS|FAIL` line is one check.
#
#   tools/ci/cross.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin

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

stage_summary
