#!/bin/sh
# Test of the graceful shutdown example: for SIGTERM and then SIGINT, start
# graceful_shutdown, wait for its `ready` line, send the signal, and require
# exit status 0 with the `got SIG...` and `<n> workers stopped` lines (every
# worker, whatever it was blocked in, ended with EINTR).
#
# usage: graceful_shutdown_test.sh GRACEFUL_SHUTDOWN [WORKERS [BACKEND]]
set -u

bin=$1
workers=${2:-8}
backend=${3:-epoll}
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null; rm -rf "$dir"' EXIT

status=0
for sig in TERM INT; do
    out="$dir/$sig.out"
    : >"$out" # exists before the background job opens it
    # -t: the program gives up by itself should the signal never arrive.
    "$bin" -w "$workers" -e "$backend" -t 20 >"$out" 2>"$dir/$sig.err" &
    pid=$!

    # Wait (at most 10 s) for the "ready" line.
    tries=0
    while ! grep -q '^ready' "$out" && [ "$tries" -lt 100 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    if ! grep -q '^ready' "$out"; then
        echo "FAIL (SIG$sig): graceful_shutdown never printed ready"
        cat "$out" "$dir/$sig.err"
        status=1
        continue
    fi

    kill -s "$sig" "$pid"
    wait "$pid"
    rc=$?
    pid=
    cat "$out"
    if [ "$rc" -ne 0 ]; then
        echo "FAIL (SIG$sig): exit status $rc"
        cat "$dir/$sig.err"
        status=1
    elif ! grep -qx "got SIG$sig" "$out"; then
        echo "FAIL (SIG$sig): no 'got SIG$sig' line"
        status=1
    elif ! grep -qx "$workers workers stopped" "$out"; then
        echo "FAIL (SIG$sig): no '$workers workers stopped' line"
        cat "$dir/$sig.err"
        status=1
    else
        echo "PASS: SIG$sig stopped $workers workers cleanly"
    fi
done
exit "$status"
