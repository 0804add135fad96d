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
record_check_script consumer_check
record_check_script dist_check

stage_summary
