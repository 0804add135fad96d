#!/usr/bin/env bash
# Stage lint: clang-tidy over the project's C sources, with the main build's
# compile commands (BUILD, configured and built when missing). Any warning
# fails; group clang-tidy, one check.
#
#   tools/ci/lint.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin
need_main_build

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

stage_summary
