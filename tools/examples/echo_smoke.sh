#!/bin/sh
# Smoke test of the example pair: start echo_server on a free loopback port
# for a few seconds, drive it with load_client (50 connections, 2 seconds)
# and fail unless requests went through without a single error and the
# server then stopped cleanly by itself.
#
# usage: echo_smoke.sh ECHO_SERVER LOAD_CLIENT [BACKEND]
set -u

server_bin=$1
client_bin=$2
backend=${3:-}
dir=$(mktemp -d)
trap 'kill "$server_pid" 2>/dev/null; rm -rf "$dir"' EXIT INT TERM
server_pid=

if [ -n "$backend" ]; then
    "$server_bin" -p 0 -t 6 -b "$backend" >"$dir/server.out" 2>"$dir/server.err" &
else
    "$server_bin" -p 0 -t 6 >"$dir/server.out" 2>"$dir/server.err" &
fi
server_pid=$!

# Wait (at most 5 s) for the "listening on 127.0.0.1:<port>" line.
port=
tries=0
while [ -z "$port" ] && [ "$tries" -lt 50 ]; do
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$dir/server.out")
    [ -n "$port" ] || sleep 0.1
    tries=$((tries + 1))
done
if [ -z "$port" ]; then
    echo "FAIL: echo_server did not report its port"
    cat "$dir/server.err"
    exit 1
fi
echo "echo_server pid $server_pid listening on port $port"

summary=$("$client_bin" -p "$port" -c 50 -d 2 -s 64 --pid "$server_pid" 2>"$dir/client.err")
client_status=$?
echo "$summary"

status=0
rps=$(echo "$summary" | sed -n 's/.* rps=\([0-9][0-9]*\).*/\1/p')
errors=$(echo "$summary" | sed -n 's/.* errors=\([0-9][0-9]*\).*/\1/p')
if [ "$client_status" -ne 0 ] || [ -z "$rps" ] || [ "$rps" -le 0 ] || [ "$errors" != 0 ]; then
    echo "FAIL: load_client status $client_status, rps '${rps}', errors '${errors}'"
    tail -n 5 "$dir/client.err"
    status=1
fi

# The server stops by itself after -t seconds, with status 0.
wait "$server_pid"
server_status=$?
server_pid=
if [ "$server_status" -ne 0 ]; then
    echo "FAIL: echo_server exited with status $server_status"
    cat "$dir/server.err"
    status=1
fi
cat "$dir/server.out"
[ "$status" -eq 0 ] && echo "PASS: echo smoke test"
exit "$status"
