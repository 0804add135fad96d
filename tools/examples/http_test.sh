#!/usr/bin/env bash
# End-to-end test of http_server with real clients, on loopback only: serves
# a temporary directory with 2 worker processes and checks, with curl, the
# status codes, byte-exact bodies (a small file and a 1 MiB one), HEAD,
# 404, refused path traversal (".." plain and percent-encoded, and a symlink
# out of the root), 405, keep-alive and close (HTTP/1.1 and 1.0, counted
# with curl's num_connects); with raw requests over bash's /dev/tcp, the
# 400/413/431/501/505 answers, pipelining, the request timeout (408) and
# the keep-alive idle timeout; then runs wrk (200 connections for 2 s, then
# 2000 for 2 s when the fd limit allows) against a second server with the
# default timeouts and requires requests and no socket error; last, SIGTERM
# to each parent must stop its workers cleanly, and both workers of the
# load server must have served requests.
#
# usage: http_test.sh HTTP_SERVER
# Needs curl and wrk (Debian packages of the same names); exits 77 (skip)
# without them.
set -u

server_bin=$1
# $dir, cleanup on exit, require_tools, pass/fail/expect_eq, start_server
# and stop_server.
# shellcheck source-path=SCRIPTDIR source=example_test_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/example_test_lib.sh"
require_tools curl wrk timeout

expect_match() { # expect_match WHAT REGEX TEXT
    if grep -Eq -- "$2" <<<"$3"; then pass; else fail "$1: no match for '$2' in: $(head -c 300 <<<"$3")"; fi
}

# ---- the document root -------------------------------------------------------
root=$dir/root
mkdir -p "$root/sub/deeper" "$root/noindex"
printf 'hello, st\n' >"$root/small.txt"
head -c 1048576 /dev/urandom >"$root/big.bin"
printf '<!doctype html><title>st</title>\n' >"$root/index.html"
printf 'nested\n' >"$root/sub/deeper/file.txt"
printf 'spaced\n' >"$root/with space.txt"
printf 'secret\n' >"$dir/secret.txt"
ln -s ../secret.txt "$root/leak.txt"  # leads out of the root: refused
ln -s small.txt "$root/link.txt"      # stays inside: served
mkfifo "$root/fifo"                   # not a regular file: 404, without hanging

# ---- start: 2 workers, short timeouts so that they can be observed ----------
start_server server "$server_bin" -p 0 -r "$root" -w 2 -t 40 -i 2 -T 1
server_pid=$started_pid
port=$started_port
echo "http_server pid $server_pid listening on 127.0.0.1:$port (2 workers)"
url=http://127.0.0.1:$port

# ---- raw requests over /dev/tcp ----------------------------------------------
# raw REQUEST: sends the request (printf %b escapes) in one write, and prints
# everything the server sends until it closes the connection (at most 5 s).
raw() {
    local fd req
    printf -v req '%b' "$1"
    exec {fd}<>"/dev/tcp/127.0.0.1/$port" || return 1
    echo -n "$req" >&"$fd" # one write(2); bash's printf writes line by line
    timeout 5 cat <&"$fd"
    exec {fd}<&-
}

# The two timeouts run in the background while the other checks go on.
# Request timeout (-T 1): an incomplete head gets 408 and a close.
(
    start=$(date +%s%N)
    out=$(raw 'GET /small.txt HTTP/1.1\r\nHost: x\r\n' | head -n 1 | tr -d '\r')
    echo "$out $((($(date +%s%N) - start) / 1000000))" >"$dir/t408"
) &
t408_pid=$!
track "$t408_pid"
# Idle timeout (-i 2): a connection that sends nothing is closed, silently.
(
    start=$(date +%s%N)
    out=$(raw '' | wc -c)
    echo "$out $((($(date +%s%N) - start) / 1000000))" >"$dir/tidle"
) &
tidle_pid=$!
track "$tidle_pid"

# ---- curl: bodies, HEAD, index ----------------------------------------------
code=$(curl -s -D "$dir/h" -o "$dir/b" -w '%{http_code}' "$url/small.txt")
expect_eq "GET small status" 200 "$code"
if cmp -s "$dir/b" "$root/small.txt"; then pass; else fail "GET small: body differs"; fi
expect_match "GET small Content-Length" '^Content-Length: 10.$' "$(cat "$dir/h")"
expect_match "GET small Content-Type" '^Content-Type: text/plain' "$(cat "$dir/h")"
expect_match "GET small keep-alive" '^Connection: keep-alive.$' "$(cat "$dir/h")"

code=$(curl -s -o "$dir/b" -w '%{http_code}' "$url/big.bin")
expect_eq "GET 1 MiB status" 200 "$code"
if cmp -s "$dir/b" "$root/big.bin"; then pass; else fail "GET 1 MiB: body differs"; fi

head_out=$(curl -s -I -w 'downloaded=%{size_download}\n' "$url/big.bin")
expect_match "HEAD status" '^HTTP/1.1 200 OK' "$head_out"
expect_match "HEAD Content-Length" '^Content-Length: 1048576.$' "$head_out"
expect_match "HEAD has no body" '^downloaded=0$' "$head_out"

expect_eq "GET / serves index.html" "$(cat "$root/index.html")" "$(curl -s "$url/")"
expect_eq "GET nested" nested "$(curl -s "$url/sub/deeper/file.txt")"
expect_eq "GET with %20" spaced "$(curl -s "$url/with%20space.txt")"
expect_eq "GET symlink inside the root" "hello, st" "$(curl -s "$url/link.txt")"
expect_eq "GET ./ segments" nested "$(curl -s --path-as-is "$url/./sub//deeper/./file.txt")"

# ---- error statuses -----------------------------------------------------------
st() { curl -s -o /dev/null --max-time 5 -w '%{http_code}' "$@"; }
expect_eq "404 missing file" 404 "$(st "$url/nope.txt")"
expect_eq "404 directory without index" 404 "$(st "$url/noindex/")"
expect_eq "404 FIFO" 404 "$(st "$url/fifo")"
expect_eq "400 ../ traversal" 400 "$(st --path-as-is "$url/../secret.txt")"
expect_eq "400 sub/../../ traversal" 400 "$(st --path-as-is "$url/sub/../../secret.txt")"
expect_eq "400 %2e%2e traversal" 400 "$(st --path-as-is "$url/%2e%2e/secret.txt")"
expect_eq "400 %2E%2E%2f traversal" 400 "$(st --path-as-is "$url/sub/%2E%2E%2f%2e%2e/secret.txt")"
expect_eq "403 symlink out of the root" 403 "$(st "$url/leak.txt")"
if curl -s --path-as-is "$url/../secret.txt" "$url/leak.txt" | grep -q secret; then
    fail "a file outside the root was served"
else
    pass
fi
post=$(curl -s -i -X POST -d 'x=1' "$url/small.txt")
expect_match "405 POST" '^HTTP/1.1 405 ' "$post"
expect_match "405 Allow" '^Allow: GET, HEAD.$' "$post"
expect_eq "405 DELETE" 405 "$(st -X DELETE "$url/small.txt")"

first() { head -n 1 | tr -d '\r'; }
expect_eq "400 garbage" "HTTP/1.1 400 Bad Request" "$(raw 'GARBAGE\r\n\r\n' | first)"
expect_eq "400 HTTP/1.1 without Host" "HTTP/1.1 400 Bad Request" \
    "$(raw 'GET /small.txt HTTP/1.1\r\nConnection: close\r\n\r\n' | first)"
expect_eq "505 HTTP/2.0" "HTTP/1.1 505 HTTP Version Not Supported" \
    "$(raw 'GET / HTTP/2.0\r\nHost: x\r\n\r\n' | first)"
expect_eq "413 large body" "HTTP/1.1 413 Content Too Large" \
    "$(raw 'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n' | first)"
expect_eq "431 large head" "HTTP/1.1 431 Request Header Fields Too Large" \
    "$(raw "GET / HTTP/1.1\\r\\nHost: x\\r\\nX-Big: $(head -c 9000 /dev/zero | tr '\0' a)\\r\\n\\r\\n" | first)"
expect_eq "501 Transfer-Encoding" "HTTP/1.1 501 Not Implemented" \
    "$(raw 'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n' | first)"

# HTTP/1.0 needs no Host and closes by default (raw returns at the close).
out=$(raw 'GET /small.txt HTTP/1.0\r\n\r\n')
expect_match "HTTP/1.0 status" '^HTTP/1.1 200 OK' "$out"
expect_match "HTTP/1.0 closes" '^Connection: close.$' "$out"
expect_match "HTTP/1.0 body" '^hello, st$' "$out"

# Pipelining: two requests in one write, answered in order; a POST body is
# read and dropped, and the connection goes on.
out=$(raw 'GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\nPOST /small.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /sub/deeper/file.txt HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
expect_eq "pipelined statuses" "200 405 200" \
    "$(grep -a '^HTTP/1.1 ' <<<"$out" | cut -d' ' -f2 | tr '\n' ' ' | sed 's/ $//')"
expect_match "pipelined bodies in order" 'hello, st' "$out"
expect_eq "pipelined last body" nested "$(tail -n 1 <<<"$out")"

# ---- keep-alive: curl reuses the connection for the second URL -------------
conns() { curl -s -o /dev/null -o /dev/null -w '%{num_connects} ' "$@" "$url/small.txt" "$url/big.bin"; }
expect_eq "HTTP/1.1 keep-alive" "1 0 " "$(conns)"
expect_eq "HTTP/1.1 Connection: close" "1 1 " "$(conns -H 'Connection: close')"
expect_eq "HTTP/1.0 closes" "1 1 " "$(conns --http1.0)"
expect_eq "HTTP/1.0 Connection: keep-alive" "1 0 " "$(conns --http1.0 -H 'Connection: keep-alive')"

# ---- the two timeouts ------------------------------------------------------------
wait "$t408_pid" "$tidle_pid"
untrack "$t408_pid" "$tidle_pid"
t408=$(cat "$dir/t408")
expect_match "408 after the request timeout" '^HTTP/1.1 408 Request Timeout ' "$t408"
ms=${t408##* }
if [ "$ms" -ge 800 ] && [ "$ms" -lt 4000 ]; then pass; else fail "408 came after ${ms} ms (want ~1000)"; fi
read -r bytes ms <"$dir/tidle"
expect_eq "idle connection closed without a response" 0 "$bytes"
if [ "$ms" -ge 1800 ] && [ "$ms" -lt 4500 ]; then pass; else fail "idle close after ${ms} ms (want ~2000)"; fi

# ---- load: wrk ----------------------------------------------------------------------
# Against a second server with the default timeouts: on a loaded machine a
# request head can take longer than the first server's 1 s to arrive, and
# the 408 that follows would count as a socket error of the load.
start_server load_server "$server_bin" -p 0 -r "$root" -w 2 -t 40
load_pid=$started_pid
load_port=$started_port
run_wrk() { # run_wrk CONNECTIONS SECONDS
    local out requests
    out=$(wrk -t2 -c"$1" -d"$2"s "http://127.0.0.1:$load_port/small.txt" 2>&1)
    printf '%s\n' "$out" | sed 's/^/    /'
    requests=$(sed -n 's/^ *\([0-9][0-9]*\) requests in .*/\1/p' <<<"$out")
    if [ -n "$requests" ] && [ "$requests" -gt 0 ]; then pass; else fail "wrk -c$1: no requests"; fi
    if grep -q 'Socket errors' <<<"$out"; then fail "wrk -c$1: $(grep 'Socket errors' <<<"$out")"; else pass; fi
    if grep -q 'Non-2xx' <<<"$out"; then fail "wrk -c$1: $(grep 'Non-2xx' <<<"$out")"; else pass; fi
}
echo "wrk: 200 connections, 2 s"
run_wrk 200 2
ulimit -n "$(ulimit -Hn)" 2>/dev/null
if [ "$(ulimit -n)" = unlimited ] || [ "$(ulimit -n)" -ge 2200 ]; then
    echo "wrk: 2000 connections, 2 s"
    run_wrk 2000 2
else
    echo "(fd limit $(ulimit -n): the 2000-connection run is skipped)"
fi

# ---- stop: SIGTERM to the parent reaches both workers ----------------------------
stop_server "$server_pid"
expect_eq "http_server exit status after SIGTERM" 0 "$stopped_status"
cat "$dir/server.out"
if [ -s "$dir/server.err" ]; then sed 's/^/  server: /' "$dir/server.err"; fi
stop_server "$load_pid"
expect_eq "load http_server exit status after SIGTERM" 0 "$stopped_status"
cat "$dir/load_server.out"
# wrk's connections are spread over both workers (SO_REUSEPORT).
busy=$(grep -Ec '^worker [0-9]+: [0-9]+ connections, [1-9][0-9]* requests$' "$dir/load_server.out")
expect_eq "workers of the load server that served requests" 2 "$busy"
if [ -s "$dir/load_server.err" ]; then sed 's/^/  load server: /' "$dir/load_server.err"; fi

finish_checks http_server
