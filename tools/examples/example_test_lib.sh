# Helpers shared by the example programs' test scripts, which source it from
# their own directory (the bash ones through ${BASH_SOURCE[0]}, the sh ones
# through $0). Plain POSIX sh, so that both kinds can.
#
# Sourcing it makes $dir, a temporary directory, and sets the traps: on exit
# the processes listed in $pids (space-separated; see track/untrack) are
# killed and $dir is removed; SIGINT and SIGTERM exit with status 1.
#
# require_tools TOOL... exits with status 77 (skip) unless every TOOL is on
# the PATH. Checks are counted: pass, fail MESSAGE and expect_eq WHAT
# EXPECTED ACTUAL, then finish_checks NAME last prints the PASS or FAIL
# summary line and exits with status 1 if any check failed.

dir=$(mktemp -d)
pids=
cleanup() {
    for lib_pid in $pids; do kill "$lib_pid" 2>/dev/null; done
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# track PID...: kill them on exit. untrack PID...: no longer (they ended).
track() { pids="$pids $*"; }
untrack() {
    for lib_gone in "$@"; do
        lib_kept=
        for lib_pid in $pids; do
            [ "$lib_pid" = "$lib_gone" ] || lib_kept="$lib_kept $lib_pid"
        done
        pids=$lib_kept
    done
}

require_tools() {
    for lib_tool in "$@"; do
        if ! command -v "$lib_tool" >/dev/null 2>&1; then
            echo "SKIP: $lib_tool is not installed (Debian package: $lib_tool)"
            exit 77
        fi
    done
}

failures=0
checks=0
pass() { checks=$((checks + 1)); }
fail() {
    checks=$((checks + 1))
    failures=$((failures + 1))
    echo "FAIL: $*"
}
expect_eq() { # expect_eq WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then pass; else fail "$1: expected '$2', got '$3'"; fi
}
finish_checks() { # finish_checks NAME
    if [ "$failures" -ne 0 ]; then
        echo "FAIL: $failures of $checks checks failed"
        exit 1
    fi
    echo "PASS: $1, $checks checks"
}

# start_server NAME COMMAND...: runs COMMAND in the background (tracked),
# output in $dir/NAME.out and $dir/NAME.err, and waits (at most 5 s) for its
# `listening on 127.0.0.1:<port>` line; sets $started_pid and $started_port.
start_server() {
    lib_name=$1
    shift
    "$@" >"$dir/$lib_name.out" 2>"$dir/$lib_name.err" &
    started_pid=$!
    track "$started_pid"
    started_port=
    for _ in $(seq 100); do
        started_port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$dir/$lib_name.out")
        [ -n "$started_port" ] && return 0
        kill -0 "$started_pid" 2>/dev/null || break
        sleep 0.05
    done
    echo "FAIL: ${1##*/} ($lib_name) did not report its port"
    cat "$dir/$lib_name.err"
    exit 1
}

# stop_server PID: SIGTERM, then waits (at most 5 s) for it to end; sets
# $stopped_status to its exit status, or to "still running".
# shellcheck disable=SC2034 # stopped_status is read by the scripts
stop_server() {
    stopped_status="still running"
    kill -TERM "$1"
    for _ in $(seq 100); do
        if ! kill -0 "$1" 2>/dev/null; then
            wait "$1"
            stopped_status=$?
            untrack "$1"
            return
        fi
        sleep 0.05
    done
}
