#!/usr/bin/env bash
# Stage packaging: st as users meet it (docs/packaging.md). tests/consumer
# through its Meson wrap and through pkg-config (shared and static) against an
# installed copy (tools/ci/consumer_check.sh); meson dist from HEAD, and the
# tarball's own build, tests and DESTDIR install (tools/ci/dist_check.sh).
# Groups consumer_check and dist_check: each PASS/FAIL line of the two
# scripts is one check.
#
#   tools/ci/packaging.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin

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

stage_summary
