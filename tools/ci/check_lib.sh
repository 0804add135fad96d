# shellcheck shell=bash
# What the check scripts (consumer_check.sh, dist_check.sh, make_check.sh)
# share; each sources it first, with its own arguments. A check script
# prints one "PASS <check>: ..." or "FAIL <check>: ..." line per check
# (record_check_script in lib.sh counts them), then one last line,
# "NAME: PASS (N checks)" or "NAME: FAIL (...)", and exits 0 only if every
# check passed. It sets:
#
#   ROOT     the source root
#   WORK     the work directory, where the logs stay: the script's argument
#            WORKDIR, emptied first and kept; without one a new temporary
#            directory, removed at the end unless a check failed
#   JOBS     parallel jobs (the number of cores)
#
# and defines pass, fail, run_ok and check_finish. CHECK_LOG_LINES (set
# before sourcing; default 20) is how much of a log fail shows.

# shellcheck disable=SC2034 # ROOT and JOBS are for the scripts that source this
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
CHECK_NAME=$(basename "$0" .sh)
if [[ $# -ge 1 ]]; then
    WORK=$1
    rm -rf "$WORK"
    mkdir -p "$WORK"
    WORK=$(cd "$WORK" && pwd -P)
    check_keep=1
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/st-$CHECK_NAME.XXXXXX")
    check_keep=0
fi
JOBS=$(nproc 2>/dev/null || echo 2)
passed=0
failed=0

pass() {   # pass CHECK WHAT
    echo "PASS $1: $2"
    passed=$((passed + 1))
}
fail() {   # fail CHECK WHAT [LOG]: and the end of LOG
    echo "FAIL $1: $2"
    failed=$((failed + 1))
    if [[ -n ${3:-} && -f $3 ]]; then tail -n "${CHECK_LOG_LINES:-20}" "$3" | sed 's/^/    /'; fi
}
# Runs a program that prints a line starting with "ok" when it worked (as
# tests/consumer/main.c does), with a time limit: run_ok LOG COMMAND...
run_ok() {
    local log=$1
    shift
    timeout 120 "$@" >"$log" 2>&1 && grep -q '^ok' "$log"
}
# The last line and the exit status.
check_finish() {
    if ((failed > 0)); then
        echo "$CHECK_NAME: FAIL ($failed of $((passed + failed)) checks failed; logs in $WORK)"
        exit 1
    fi
    if ((check_keep == 0)); then rm -rf "$WORK"; fi
    echo "$CHECK_NAME: PASS ($passed checks)"
    exit 0
}
