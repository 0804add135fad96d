#!/usr/bin/env bash
# Stage make: State Threads' make interface (the root Makefile and
# tools/make/st_make.sh) as SRS uses it: its linux-debug command line, a
# shared linux-optimized build, an aarch64 cross build run under qemu-user,
# the EXTRA_CFLAGS translation and make clean, in a copy of the tree
# (tools/ci/make_check.sh). Group make_check: each PASS/FAIL line of the
# script is one check.
#
#   tools/ci/make.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin

step "make interface: SRS's make linux-debug, linux-optimized, a cross build, flags, clean"
record_check_script make_check

stage_summary
