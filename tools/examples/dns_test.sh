#!/bin/sh
# End-to-end test of dns_lookup against dns_fake_server on 127.0.0.1 (no
# network needed). Checks:
#   - the printed addresses for A, several A plus AAAA, AAAA only, a CNAME
#     (any case, trailing dot), a name that needs a retransmission, and the
#     NXDOMAIN, no-address, SERVFAIL, timeout and invalid-name results, with
#     exit status 1 because some names have no address;
#   - -4 and -6, and exit status 0 when every name resolves;
#   - concurrency: 50 names whose answers each take 500 ms resolve in well
#     under 50 x 500 ms;
#   - a server that never answers: "timeout" after all attempts, in about
#     attempts x timeout.
#
# usage: dns_test.sh DNS_LOOKUP DNS_FAKE_SERVER
set -u

lookup_bin=$1
server_bin=$2

# $dir, cleanup on exit, pass/fail, start_server and the summary line.
# shellcheck source-path=SCRIPTDIR source=example_test_lib.sh
. "$(dirname "$0")/example_test_lib.sh"

# The results here are lists of lines: this expect_eq, unlike the shared
# one, shows a mismatch as two blocks.
expect_eq() { # expect_eq WHAT EXPECTED ACTUAL
    if [ "$2" = "$3" ]; then
        pass
    else
        fail "$1"
        printf '  expected:\n%s\n  got:\n%s\n' "$2" "$3" | sed 's/^/    /'
    fi
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

start_server zone "$server_bin" -p 0 -t 30 -d 500
zone=127.0.0.1:$started_port
start_server mute "$server_bin" -p 0 -t 30 -n
mute=127.0.0.1:$started_port
echo "dns_fake_server on $zone, a silent one on $mute"

# ---- every kind of result ---------------------------------------------------
out=$("$lookup_bin" -s "$zone" -t 300 -r 2 one.test multi.test v6.test alias.test \
    ALIAS.Test. retry.test empty.test nope.test servfail.test silent.test bad..name 2>"$dir/err")
status=$?
expect_eq "results" "one.test 192.0.2.1
multi.test 192.0.2.10
multi.test 192.0.2.11
multi.test 2001:db8::10
v6.test 2001:db8::6
alias.test 192.0.2.1
ALIAS.Test. 192.0.2.1
retry.test 192.0.2.2
empty.test no address
nope.test NXDOMAIN
servfail.test SERVFAIL
silent.test timeout
bad..name invalid name" "$out"
expect_eq "exit status with unresolved names" 1 "$status"
cat "$dir/err"

# ---- -4, -6, all resolved ---------------------------------------------------
out=$("$lookup_bin" -s "$zone" -4 multi.test one.test 2>/dev/null)
status=$?
expect_eq "-4" "multi.test 192.0.2.10
multi.test 192.0.2.11
one.test 192.0.2.1" "$out"
expect_eq "exit status when all resolve" 0 "$status"
expect_eq "-6" "multi.test 2001:db8::10
one.test no address" "$("$lookup_bin" -s "$zone" -6 multi.test one.test 2>/dev/null)"

# ---- concurrency: 50 answers that each take 500 ms -------------------------
names=
i=1
while [ "$i" -le 50 ]; do
    names="$names slow$i.test"
    i=$((i + 1))
done
start_ms=$(now_ms)
# shellcheck disable=SC2086
count=$("$lookup_bin" -s "$zone" $names 2>/dev/null | grep -c ' 192\.0\.2\.3$')
ms=$(($(now_ms) - start_ms))
expect_eq "50 slow names resolved" 50 "$count"
if [ "$ms" -ge 450 ] && [ "$ms" -lt 3000 ]; then
    pass
    echo "50 names with 500 ms answers resolved in $ms ms"
else
    fail "50 slow names took $ms ms (want about 500)"
fi

# ---- a server that never answers: 2 attempts of 200 ms ---------------------
start_ms=$(now_ms)
out=$("$lookup_bin" -s "$mute" -t 200 -r 1 one.test v6.test 2>/dev/null)
status=$?
ms=$(($(now_ms) - start_ms))
expect_eq "silent server" "one.test timeout
v6.test timeout" "$out"
expect_eq "exit status on timeout" 1 "$status"
if [ "$ms" -ge 380 ] && [ "$ms" -lt 2000 ]; then pass; else fail "timeout after $ms ms (want about 400)"; fi

# ---- usage errors -------------------------------------------------------------
"$lookup_bin" -s "$zone" >/dev/null 2>&1
expect_eq "no names: usage error" 2 "$?"
"$lookup_bin" -s 'not-an-address' one.test >/dev/null 2>&1
expect_eq "bad server: usage error" 2 "$?"

finish_checks dns_lookup
