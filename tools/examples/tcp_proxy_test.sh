#!/usr/bin/env bash
# End-to-end test of tcp_proxy, on loopback only. Two proxies: one in front
# of http_server, one in front of echo_server. Checks:
#   - curl through the proxy: a 1 MiB file byte-exact, and keep-alive (two
#     URLs over one proxied connection);
#   - load_client through the proxy: 50 connections for 2 s, no error;
#   - half-close: a client sends 200 KB, shuts down its write side, and must
#     get the whole echo back and then end of stream (the proxy passes the
#     client's FIN to the echo server and the server's FIN back);
#   - the idle timeout (-i 2) resets a silent connection after about 2 s;
#   - an upstream that refuses: the client's connection ends at once;
#   - SIGTERM: the proxy stops with status 0 and reports the traffic.
#
# usage: tcp_proxy_test.sh TCP_PROXY ECHO_SERVER LOAD_CLIENT HTTP_SERVER
# Needs curl and python3; exits 77 (skip) without them.
set -u

proxy_bin=$1
echo_bin=$2
load_bin=$3
http_bin=$4
# $dir, cleanup on exit, require_tools, pass/fail/expect_eq, start_server
# and stop_server.
# shellcheck source-path=SCRIPTDIR source=example_test_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/example_test_lib.sh"
require_tools curl python3 timeout

root=$dir/root
mkdir -p "$root"
head -c 1048576 /dev/urandom >"$root/big.bin"
printf 'hello, st\n' >"$root/small.txt"

start_server http "$http_bin" -p 0 -r "$root" -t 30
http_port=$started_port
start_server echo "$echo_bin" -p 0 -t 30
echo_port=$started_port
start_server proxy_http "$proxy_bin" -l 0 -u "127.0.0.1:$http_port" -t 30
proxy_http_port=$started_port
start_server proxy_echo "$proxy_bin" -l 0 -u "127.0.0.1:$echo_port" -t 30 -i 2
proxy_echo_pid=$started_pid
proxy_echo_port=$started_port
# An upstream port with nothing behind it: a socket that is bound but does
# not listen refuses connections, and holds the port for the whole test (a
# port that is let go may become the source port of one of the test's own
# connections, and a connect from it to itself succeeds).
start_server dead_port python3 -c '
import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
print("listening on 127.0.0.1:%d" % s.getsockname()[1], flush=True)
time.sleep(3600)'
dead_port=$started_port
start_server proxy_dead "$proxy_bin" -l 0 -u "127.0.0.1:$dead_port" -t 30
proxy_dead_pid=$started_pid
proxy_dead_port=$started_port
echo "http_server :$http_port <- proxy :$proxy_http_port; echo_server :$echo_port <- proxy :$proxy_echo_port"

# The idle timeout runs in the background: a connection that stays silent.
python3 - "$proxy_echo_port" >"$dir/idle" 2>&1 <<'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(6)
t0 = time.monotonic()
try:
    data = s.recv(1)
    how = "eof" if data == b"" else "data"
except ConnectionResetError:
    how = "reset"
except socket.timeout:
    how = "timeout"
print(how, int((time.monotonic() - t0) * 1000))
EOF
idle_pid=$!
track "$idle_pid"

# ---- HTTP through the proxy ------------------------------------------------------
code=$(curl -s -o "$dir/big" -w '%{http_code}' "http://127.0.0.1:$proxy_http_port/big.bin")
expect_eq "GET 1 MiB through the proxy: status" 200 "$code"
if cmp -s "$dir/big" "$root/big.bin"; then pass; else fail "GET 1 MiB through the proxy: body differs"; fi
expect_eq "keep-alive through the proxy (num_connects)" "1 0 " \
    "$(curl -s -o /dev/null -o /dev/null -w '%{num_connects} ' \
        "http://127.0.0.1:$proxy_http_port/small.txt" "http://127.0.0.1:$proxy_http_port/big.bin")"

# ---- echo load through the proxy -------------------------------------------------
summary=$("$load_bin" -p "$proxy_echo_port" -c 50 -d 2 -s 64 2>"$dir/load.err")
load_status=$?
echo "load_client through the proxy: $summary"
errors=$(sed -n 's/.* errors=\([0-9][0-9]*\).*/\1/p' <<<"$summary")
requests=$(sed -n 's/.* requests=\([0-9][0-9]*\).*/\1/p' <<<"$summary")
expect_eq "load_client exit status" 0 "$load_status"
expect_eq "load_client errors" 0 "${errors:-none}"
if [ "${requests:-0}" -gt 0 ]; then pass; else fail "load_client: no requests"; fi

# ---- half-close ----------------------------------------------------------------------
halfclose=$(timeout 10 python3 - "$proxy_echo_port" <<'EOF'
import socket, sys, threading
data = bytes(range(256)) * 800
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(5)
def send():
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
t = threading.Thread(target=send)
t.start()
got = bytearray()
while True:
    chunk = s.recv(65536)
    if not chunk:
        break
    got += chunk
t.join()
print("ok" if bytes(got) == data else "got %d of %d bytes" % (len(got), len(data)))
EOF
)
expect_eq "half-close: full echo, then end of stream" ok "$halfclose"

# ---- an upstream that refuses --------------------------------------------------------
start_ms=$(date +%s%N)
curl -s -o /dev/null --max-time 5 "http://127.0.0.1:$proxy_dead_port/"
curl_status=$?
ms=$((($(date +%s%N) - start_ms) / 1000000))
# The proxy resets the client: depending on timing curl sees that while
# connecting (7), sending (55) or receiving (52, 56); 28 would be a hang.
case $curl_status in
    7 | 52 | 55 | 56) pass ;;
    *) fail "refused upstream: curl exit status $curl_status (want the connection reset)" ;;
esac
if [ "$ms" -lt 2000 ]; then pass; else fail "refused upstream: took ${ms} ms"; fi

# ---- idle timeout -------------------------------------------------------------------
wait "$idle_pid"
read -r how ms <"$dir/idle"
expect_eq "idle connection reset" reset "$how"
if [ "${ms:-0}" -ge 1800 ] && [ "${ms:-0}" -lt 4500 ]; then pass; else fail "idle reset after ${ms} ms (want ~2000)"; fi

# ---- stop ------------------------------------------------------------------------------
stop_server "$proxy_echo_pid"
expect_eq "tcp_proxy exit status after SIGTERM" 0 "$stopped_status"
stop_server "$proxy_dead_pid"
expect_eq "tcp_proxy (refused upstream) exit status after SIGTERM" 0 "$stopped_status"
expect_eq "refused upstream counted" 1 \
    "$(sed -n 's/^stopped: .* \([0-9][0-9]*\) upstream failures$/\1/p' "$dir/proxy_dead.out")"
cat "$dir/proxy_echo.out"
stopped=$(grep '^stopped: ' "$dir/proxy_echo.out")
up=$(sed -n 's/.* \([0-9][0-9]*\) bytes up.*/\1/p' <<<"$stopped")
down=$(sed -n 's/.* \([0-9][0-9]*\) bytes down.*/\1/p' <<<"$stopped")
# (Not necessarily equal: load_client closes with requests in flight.)
if [ "${up:-0}" -gt 204800 ] && [ "${down:-0}" -gt 204800 ]; then
    pass
else
    fail "echo proxy traffic: '$up' bytes up, '$down' bytes down"
fi

finish_checks tcp_proxy
