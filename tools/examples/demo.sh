#!/usr/bin/env bash
# The main job of st, end to end: build the library in release mode, start the
# example echo server (one coroutine per connection, epoll backend) on
# loopback, drive it with the load client, and report connections, requests
# per second and the server's memory.
#
#   tools/examples/demo.sh [-c connections] [-d seconds] [-b epoll|poll|select]
#
# Defaults: 300 connections for 5 seconds on epoll. Only loopback is used.
# Environment: ST_DEMO_BUILD_DIR (default build).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$ROOT"

BUILD=${ST_DEMO_BUILD_DIR:-build}
CONNS=300
SECS=5
BACKEND=epoll
MSG_SIZE=64

usage() {
    echo "usage: $0 [-c connections] [-d seconds] [-b epoll|poll|select]" >&2
    exit 2
}
while getopts "c:d:b:h" opt; do
    case $opt in
        c) CONNS=$OPTARG ;;
        d) SECS=$OPTARG ;;
        b) BACKEND=$OPTARG ;;
        *) usage ;;
    esac
done
[[ $CONNS =~ ^[1-9][0-9]*$ && $SECS =~ ^[1-9][0-9]*$ ]] || usage
[[ $BACKEND =~ ^(epoll|poll|select)$ ]] || usage

say() { printf '==> %s\n' "$*"; }

say "dependencies"
bash tools/ci/deps.sh build

if [[ -f $BUILD/meson-private/coredata.dat ]]; then
    say "reusing $BUILD/"
else
    say "configure $BUILD/ (release)"
    rm -rf "$BUILD"
    meson setup "$BUILD" --buildtype=release
fi

say "compile"
server=$BUILD/tools/examples/echo_server
client=$BUILD/tools/examples/load_client
# Only the two example programs and the library they need; the whole
# project when the targets are named differently.
ninja -C "$BUILD" tools/examples/echo_server tools/examples/load_client ||
    meson compile -C "$BUILD"
for exe in "$server" "$client"; do
    if [[ ! -x $exe ]]; then
        echo "demo: $exe was not built" >&2
        exit 1
    fi
done

# Each connection is one fd in the client and one in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

server_log=$(mktemp)
server_pid=
cleanup() {
    if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$server_pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -KILL "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -f "$server_log"
}
trap cleanup EXIT

say "start echo_server on 127.0.0.1 (backend $BACKEND)"
# -t: the server stops by itself even if this script is killed.
"$server" -p 0 -b "$BACKEND" -t $((SECS + 30)) >"$server_log" 2>&1 &
server_pid=$!

port=
for _ in $(seq 100); do
    port=$(sed -n 's/.*listening on 127\.0\.0\.1:\([0-9][0-9]*\).*/\1/p;T;q' "$server_log")
    [[ -n $port ]] && break
    kill -0 "$server_pid" 2>/dev/null || break
    sleep 0.1
done
if [[ -z $port ]]; then
    echo "demo: echo_server did not report its port; its output:" >&2
    cat "$server_log" >&2
    exit 1
fi
say "echo_server pid $server_pid listening on 127.0.0.1:$port"

say "load_client: $CONNS connections, ${SECS}s, ${MSG_SIZE}-byte messages"
result=$("$client" -p "$port" -c "$CONNS" -d "$SECS" -s "$MSG_SIZE" --pid "$server_pid")
echo
echo "$result"

final=$(grep -E '(^| )rps=' <<<"$result" | tail -n 1 || true)
field() { sed -n "s/.*\\b$1=\\([^ ]*\\).*/\\1/p" <<<"$final"; }
conns=$(field connections)
requests=$(field requests)
rps=$(field rps)
rss=$(field server_rss_kib)
errors=$(field errors)
if [[ -z $rps ]]; then
    echo "demo: load_client printed no result line" >&2
    exit 1
fi

say "stop echo_server"
cleanup
server_pid=
trap - EXIT

echo
echo "st echo server, $BACKEND backend, loopback, ${SECS}s:"
printf '  %-20s %s\n' "connections" "${conns:-?}"
printf '  %-20s %s\n' "requests" "${requests:-?}"
printf '  %-20s %s\n' "requests per second" "$rps"
if [[ -n $errors ]]; then printf '  %-20s %s\n' "errors" "$errors"; fi
if [[ $rss =~ ^[0-9]+$ ]]; then
    printf '  %-20s %s KiB (%s MiB)\n' "server memory (RSS)" "$rss" \
        "$(awk -v k="$rss" 'BEGIN { printf "%.1f", k / 1024 }')"
else
    printf '  %-20s %s\n' "server memory (RSS)" "${rss:-?}"
fi
