#!/usr/bin/env bash
# The benchmark suite of st, end to end (docs/performance.md):
#
#   tools/bench/run.sh [--rt] [--no-callgrind] [--no-memory] [--no-peers] [--no-fairness]
#                      [--no-disk]
#
# 1. configures and builds two release builds (gcc -O2): build-bench/ with
#    the default options (guard pages on) and build-bench-noguard/ with
#    -Dguard_pages=false, and builds tools/bench/st_bench in each;
# 2. runs every group of st_bench: micro (raw switch, cond ping-pong, yield,
#    create+join cached and free), the timeout-heap test (1000 and 100 000
#    sleepers), loopback echo (st on epoll and on io_uring, the plain epoll
#    loop and the peers of tools/bench/peers.sh, libuv, Go and a liburing
#    loop, at 1, 100, 1000 and 10 000 connections), fairness under CPU
#    starvation (first-byte latency of 500 and 1000 connections opened at
#    once to a streaming server held to 5% of a CPU: st, a plain epoll loop,
#    and that loop in State Threads' order), disk writes against the
#    scheduler (a 1 ms tick's lateness and an echo server's round trips
#    while a coroutine writes 1 GiB, per file I/O mode, against a plain
#    write loop), memory per idle coroutine
#    (readers and sleepers, 16 KiB and 128 KiB stacks, with and without
#    guard pages), callgrind instruction counts per switch and per echo
#    round trip, and (with perf) system calls per echo request;
# 3. prints one table: every figure and its ratio to the floor (the raw
#    switch) or to the epoll baseline;
# 4. writes build-bench/results.txt (raw RESULT/NOTE lines), build-bench/
#    table.txt and build-bench/echo.dat, and draws build-bench/
#    echo_throughput.png when gnuplot is installed (tools/bench/plot.sh).
#
# --rt runs the benchmarks (not the builds) at SCHED_FIFO priority 1 (needs
# root): on a machine shared with other work, that work then only gets the
# CPU time the kernel's real-time throttling leaves it (5% by default). The
# fairness group's server then runs at SCHED_FIFO too, with a real-time
# budget (cgroup v1 cpu.rt_runtime_us) instead of a CFS quota.
#
# --no-peers leaves out the peers (and installing their packages).
#
# With ST_BENCH_STATE_THREADS set to a built State Threads tree (the
# directory holding its st.h and libst.a, e.g. LINUX_<release>_OPT after
# its `make linux-optimized`), the fairness groups measure State Threads
# too: the player server tools/bench/peers/st_players.c, built against it,
# as the server `state_threads` (tools/bench/peers/README.md).
#
# The fairness group creates a cgroup (or busy processes) to starve its
# server and removes it when done; the exit trap below also removes any a
# killed run left (st_bench_starve.<pid> under the cgroup mounts).
# --no-fairness leaves the group out.
#
# The disk group writes 1 GiB five times a round, five rounds, into the
# build directory (the machine's disk unless that is tmpfs, which the
# group then says); about a minute and a half. --no-disk leaves it out.
#
# About four minutes on two quiet cores, and two more with the
# peers. Environment: ST_BENCH_BUILD_DIR (default build-bench; the second
# build is that name with -noguard), CC (default gcc).
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
cd "$ROOT"

BUILD=${ST_BENCH_BUILD_DIR:-build-bench}
NOGUARD=$BUILD-noguard
CALLGRIND=1
MEMORY=1
PEERS=1
FAIRNESS=1
DISK=1
RT=0
for arg in "$@"; do
    case $arg in
        --no-callgrind) CALLGRIND=0 ;;
        --no-memory) MEMORY=0 ;;
        --no-peers) PEERS=0 ;;
        --no-fairness) FAIRNESS=0 ;;
        --no-disk) DISK=0 ;;
        --rt) RT=1 ;;
        *)
            echo "usage: $0 [--rt] [--no-callgrind] [--no-memory] [--no-peers] [--no-fairness] [--no-disk]" >&2
            exit 2
            ;;
    esac
done

say() { printf '==> %s\n' "$*" >&2; }

build() {
    local dir=$1
    shift
    if [[ ! -f $dir/meson-private/coredata.dat ]]; then
        say "configure $dir/ (release, -O2 $*)"
        CC=${CC:-gcc} meson setup "$dir" --buildtype=release -Doptimization=2 -Dtests=disabled \
            "$@" >/dev/null
    fi
    say "build $dir/tools/bench/st_bench"
    ninja -C "$dir" tools/bench/st_bench tools/examples/udp_batch >/dev/null
}

build "$BUILD"
build "$NOGUARD" -Dguard_pages=false
B=$BUILD/tools/bench/st_bench
NG=$NOGUARD/tools/bench/st_bench
OUT=$BUILD/results.txt
TMP=$(mktemp -d)
server_pid=
cleanup() {
    if [[ -n $server_pid ]]; then kill "$server_pid" 2>/dev/null || true; fi
    rm -rf "$TMP"
    # Cgroups of fairness runs that were killed (their busy processes died with them).
    local dir
    for dir in /sys/fs/cgroup/st_bench_starve.* /sys/fs/cgroup/*/st_bench_starve.*; do
        if [[ -d $dir && ! -d /proc/${dir##*.} ]]; then rmdir "$dir" 2>/dev/null || true; fi
    done
}
trap cleanup EXIT

# Each echo connection is one fd in the client and one in the server.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# From here on every process this script starts inherits the policy.
policy="normal scheduling"
if ((RT)); then
    if chrt -f -p 1 $$ >/dev/null 2>&1; then
        policy="SCHED_FIFO priority 1 (--rt)"
    else
        say "warning: --rt: cannot switch to SCHED_FIFO (not root?); running normally"
    fi
fi

# ---------------------------------------------------------------------------
# The machine, for the record.
# (No `| head` under pipefail: the writer may die of SIGPIPE and fail the line.)
cpu_model=$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)
compiler=$(${CC:-gcc} --version)
compiler=${compiler%%$'\n'*}
{
    echo "INFO date $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "INFO cpus $(nproc) x ${cpu_model:-unknown}"
    echo "INFO kernel $(uname -sr)"
    echo "INFO compiler $compiler, meson buildtype=release optimization=2"
    echo "INFO limits fds $(ulimit -n), vm.max_map_count $(cat /proc/sys/vm/max_map_count)"
    echo "INFO scheduling $policy"
    echo "INFO load average at start $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$OUT"
read -r load1 _ </proc/loadavg
if ((!RT)) && awk -v l="$load1" 'BEGIN { exit !(l > 0.5) }'; then
    say "warning: load average $load1: other work is running, timings will be noisy (see --rt)"
fi

# The peers: sets PEER_NAMES, PEER_LIST and PEER_ARGS (--peer NAME=PROGRAM for st_bench).
source tools/bench/peers.sh

# State Threads in the fairness groups (ST_BENCH_STATE_THREADS, above).
FAIR_ST_LIST=
FAIR_ST_ARGS=()
if [[ -n ${ST_BENCH_STATE_THREADS:-} ]]; then
    st_tree=$ST_BENCH_STATE_THREADS
    st_players="$ROOT/$BUILD/st_players_state_threads"
    if ${CC:-gcc} -O2 -I"$st_tree" tools/bench/peers/st_players.c "$st_tree/libst.a" \
        -o "$st_players" 2>"$TMP/st_players.log" && "$st_players" --probe >>"$OUT"; then
        FAIR_ST_LIST=,state_threads
        FAIR_ST_ARGS=(--peer "state_threads=$st_players")
        echo "INFO state_threads $st_tree/libst.a" >>"$OUT"
    else
        say "warning: the player server does not build against $st_tree: no state_threads"
        sed 's/^/    /' "$TMP/st_players.log" >&2
        echo "NOTE fairness: no state_threads (st_players.c did not build against $st_tree)" >>"$OUT"
    fi
fi

# Run one group, keeping its RESULT/NOTE lines; a failure is recorded, not fatal.
group() {
    local what=$1
    shift
    say "$what"
    if ! "$@" | tee -a "$OUT" | sed 's/^/    /' >&2; then
        echo "NOTE $what: failed ($*)" >>"$OUT"
    fi
}

group "micro: switches, yield, create+join" "$B" micro
group "timeout-heap test, 1000 sleepers" "$B" heap --sleepers 1000 --rounds 1000
# 100 000 sleepers need 100 000 stacks: with guard pages that is two
# mappings each, past vm.max_map_count unless the allocator groups them.
if ! "$B" heap --sleepers 100000 --rounds 10 >"$TMP/heap" 2>/dev/null; then
    cat "$TMP/heap" >>"$OUT"
    group "timeout-heap test, 100 000 sleepers (no guard pages)" "$NG" heap --sleepers 100000 \
        --rounds 10
    echo "NOTE heap_100000 was measured in the build without guard pages" >>"$OUT"
else
    say "timeout-heap test, 100 000 sleepers"
    tee -a "$OUT" <"$TMP/heap" | sed 's/^/    /' >&2
fi
# epoll-drain is the epoll loop reading until EAGAIN: the system calls st makes.
# st-io_uring is st on its io_uring backend (an extension); the peers follow.
# All alternate in the same rounds, and every ratio is to the plain epoll loop.
group "loopback echo: st, plain epoll, st on io_uring, peers" "$B" echo \
    --server "epoll,st,epoll-drain,st-io_uring$PEER_LIST" "${PEER_ARGS[@]}" --conns 1,100,1000,10000
# A burst of new connections to a streaming server that gets 5% of a CPU:
# how long each waits for its first byte, st against the plain epoll loop,
# against that loop in State Threads' order (deadlines before I/O) and,
# when it is given, against State Threads itself.
if ((FAIRNESS)); then
    group "fairness: first byte under CPU starvation" "$B" fairness \
        --server "epoll,st,epoll-timers$FAIR_ST_LIST" "${FAIR_ST_ARGS[@]}" \
        --conns 500,1000 --share 5 --repeat 8
    # The same burst the moment the server listens: no idle time to make stacks
    # ahead, so st pays for a new stack per connection; epoll-page is the loop
    # paying for one fresh page per connection, the least such a stack costs.
    group "fairness: a burst the moment the server listens" "$B" fairness \
        --server "epoll,st,epoll-page$FAIR_ST_LIST" "${FAIR_ST_ARGS[@]}" \
        --conns 500 --share 5 --repeat 8 --pause 0
fi
# A coroutine writes 1 GiB (1 MiB writes, an fsync every 64 MiB) while a
# 1 ms tick and an echo server share its scheduler: each file I/O mode
# (State Threads' blocking calls, worker pthreads, io_uring) against a
# plain write loop.
if ((DISK)); then
    group "disk: 1 GiB written beside a 1 ms tick and an echo server" "$B" disk --dir "$BUILD" \
        --repeat 5
fi
# Batched datagrams: st_sendmmsg (32 per call) against one st_sendto per packet.
group "UDP, 64-byte datagrams: st_sendmmsg vs st_sendto" \
    "$BUILD/tools/examples/udp_batch" -n 200000 -b 32 -r 3

if ((MEMORY)); then
    group "memory: readers, guard pages" "$B" memory --read --count 100000 --stack 16
    group "memory: readers, guard pages" "$B" memory --read --count 100000 --stack 128
    group "memory: readers, no guard pages" "$NG" memory --read --count 100000 --stack 16
    group "memory: readers, no guard pages" "$NG" memory --read --count 100000 --stack 128
    group "memory: sleepers, guard pages" "$B" memory --sleep --count 1000000 --stack 16
    group "memory: sleepers, no guard pages" "$NG" memory --sleep --count 1000000 --stack 16
    group "memory: sleepers, no guard pages" "$NG" memory --sleep --count 1000000 --stack 128
fi

# ---------------------------------------------------------------------------
# Callgrind: instructions executed, which repeat exactly however noisy the
# machine. Each figure is the difference of two runs of different lengths,
# which cancels start-up and tear-down, divided by the difference in work.
callgrind_total() { sed -n 's/^summary: *//p' "$1"; }

cg_micro() {
    local only=$1 n
    for n in 200000 50000; do
        valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.$only.$n" \
            "$B" micro --only "$only" --exact "$n" >/dev/null 2>"$TMP/cg.$only.$n.log"
    done
    awk -v a="$(callgrind_total "$TMP/cg.$only.200000")" \
        -v b="$(callgrind_total "$TMP/cg.$only.50000")" \
        'BEGIN { printf "%.1f", (a - b) / (2 * 150000) }'
}

# One echo server run under a tool (the command given after the counts),
# driven natively by the client: `conns` connections, exactly `n` round
# trips, each request sent `gap` microseconds after the previous echo.
echo_under() {
    local server=$1 conns=$2 n=$3 gap=$4 port=
    shift 4
    rm -f "$TMP/serve.out" # the previous run's port must not be read
    "$@" "$B" serve --server "$server" "${PEER_ARGS[@]}" --once >"$TMP/serve.out" \
        2>"$TMP/serve.log" &
    server_pid=$!
    for _ in $(seq 300); do
        port=$(sed -n 's/^port \([0-9][0-9]*\)$/\1/p' "$TMP/serve.out" 2>/dev/null)
        [[ -n $port ]] && break
        sleep 0.1
    done
    # A second with nothing to do first: st makes its listener's stack
    # reserve in its first quiet moments (docs/design.md, "Bursts"), which
    # must not fall into one of the two runs a count is the difference of.
    sleep 1
    if [[ -z $port ]] ||
        ! "$B" client --port "$port" --conns "$conns" --requests "$n" --gap-us "$gap" >/dev/null; then
        kill "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
        server_pid=
        return 1
    fi
    wait "$server_pid" || true
    server_pid=
}

# Callgrind: user-space instructions of the server per round trip, one
# connection. The client waits 2 ms before each request, so that the
# server, slowed down some fifty times, is idle in epoll_wait when it
# arrives, as it is natively with one connection.
cg_echo() {
    local server=$1 n
    for n in 1500 500; do
        echo_under "$server" 1 "$n" 2000 valgrind --tool=callgrind \
            --callgrind-out-file="$TMP/cg.echo.$server.$n" || return 1
    done
    awk -v a="$(callgrind_total "$TMP/cg.echo.$server.1500")" \
        -v b="$(callgrind_total "$TMP/cg.echo.$server.500")" \
        'BEGIN { printf "%.0f", (a - b) / 1000 }'
}

if ((CALLGRIND)) && command -v valgrind >/dev/null; then
    say "callgrind: instructions per switch and per echo round trip"
    {
        v=$(cg_micro raw) &&
            echo "RESULT cg_switch_raw $v Ir - callgrind: raw switch, per switch"
        v=$(cg_micro cond) &&
            echo "RESULT cg_switch_cond $v Ir cg_switch_raw callgrind: cond ping-pong, per switch"
        v=$(cg_echo epoll) &&
            echo "RESULT cg_echo_epoll $v Ir - callgrind: epoll server, per round trip"
        v=$(cg_echo st) &&
            echo "RESULT cg_echo_st $v Ir cg_echo_epoll callgrind: st server, per round trip"
    } | tee -a "$OUT" | sed 's/^/    /' >&2
elif ((CALLGRIND)); then
    echo "NOTE callgrind figures skipped: valgrind is not installed" >>"$OUT"
fi

# System calls of the server per request under load, natively, counted by
# perf's syscall tracepoints (exact counts, little overhead): the difference
# of two runs of different lengths over the difference in requests.
SYSCALLS=(read write epoll_wait epoll_ctl epoll_pwait io_uring_enter futex)
sys_events() {
    local name list=raw_syscalls:sys_enter
    for name in "${SYSCALLS[@]}"; do list+=",syscalls:sys_enter_$name"; done
    echo "$list"
}
sys_echo() {
    local server=$1 conns=$2 long=$3 short=$4 n
    for n in "$long" "$short"; do
        echo_under "$server" "$conns" "$n" 0 perf stat -x, -e "$(sys_events)" \
            -o "$TMP/sys.$server.$conns.$n" -- || return 1
    done
    awk -F, -v d=$((long - short)) '
        FNR == 1 { file++ }
        $1 ~ /^[0-9]+$/ { n = split($3, e, ":"); c[e[n]] += (file == 1 ? $1 : -$1) }
        END {
            printf "%.2f\n", c["sys_enter"] / d
            for (k in c) if (k != "sys_enter" && c[k] != 0) printf " %s %.2f", substr(k, 11), c[k] / d
            printf "\n"
        }' "$TMP/sys.$server.$conns.$long" "$TMP/sys.$server.$conns.$short"
}

if perf stat -x, -e raw_syscalls:sys_enter -o /dev/null true >/dev/null 2>&1; then
    say "perf: system calls per echo request"
    {
        for conns in 1 100 1000 10000; do
            long=60000 short=20000
            if ((conns == 1)); then long=6000 short=2000; fi
            for server in epoll st st-io_uring "${PEER_NAMES[@]}"; do
                if sys=$(sys_echo "$server" "$conns" "$long" "$short"); then
                    base=-
                    [[ $server != epoll ]] && base=sys_epoll_$conns
                    echo "RESULT sys_${server}_$conns $(head -n 1 <<<"$sys") calls $base" \
                        "syscalls/request, $server, $conns conn"
                    echo "NOTE sys_${server}_$conns per request:$(tail -n 1 <<<"$sys")"
                fi
            done
        done
    } | tee -a "$OUT" | sed 's/^/    /' >&2
else
    echo "NOTE system-call counts skipped: perf cannot count syscall tracepoints here" >>"$OUT"
fi

echo "INFO load average at end $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT"

# ---------------------------------------------------------------------------
# The table: every figure with its ratio to its base.
awk -v rt="$RT" '
function num(v) {
    if (v >= 1000) return sprintf("%.0f", v)
    if (v >= 100) return sprintf("%.1f", v)
    return sprintf("%.2f", v)
}
/^INFO / { sub(/^INFO /, ""); info[++ni] = $0; next }
/^NOTE / { sub(/^NOTE /, ""); notes[++nn] = $0; next }
/^RESULT / {
    key = $2; val[key] = $3; unit[key] = $4; base[key] = $5
    label = $0; sub(/^RESULT [^ ]+ [^ ]+ [^ ]+ [^ ]+ /, "", label)
    desc[key] = label; order[++n] = key
}
END {
    for (i = 1; i <= ni; i++) print info[i]
    print ""
    printf "%-50s %12s %-10s %8s\n", "figure", "value", "unit", "ratio"
    for (i = 1; i <= n; i++) {
        k = order[i]; r = ""; rs = ""
        if (base[k] != "-" && (base[k] in val) && val[base[k]] > 0) {
            r = val[k] / val[base[k]]; rs = sprintf("%.2fx", r)
        }
        line = sprintf("%-50s %12s %-10s %8s", substr(desc[k], 1, 50), num(val[k]), unit[k], rs)
        sub(/ +$/, "", line)
        print line
    }
    print ""
    print "ratio: to the raw switch (the floor) for times; server/epoll for echo, callgrind echo and syscalls."
    for (i = 1; i <= nn; i++) {
        print "note: " notes[i]
        if (match(notes[i], /everything else [0-9]+%/)) {
            other = substr(notes[i], RSTART + 16, RLENGTH - 17) + 0
            if (other > 25) disturbed++
        }
    }
    if (disturbed > 0 && rt)
        print "other work took over 25% of a CPU in " disturbed " groups; with --rt it only had what real-time throttling left"
    else if (disturbed > 0)
        print "warning: in " disturbed " groups other work took over 25% of a CPU: their figures are disturbed"
}' "$OUT" >"$BUILD/table.txt"

# Echo throughput by connection count, for the plot.
awk '/^RESULT echo_(st|epoll)_[0-9]+ / {
        split($2, p, "_"); rps[p[3], p[2]] = $3; if (!(p[3] in seen)) { seen[p[3]] = 1; c[++n] = p[3] }
    }
    END {
        print "# connections epoll_rps st_rps"
        for (i = 1; i <= n; i++) print c[i], rps[c[i], "epoll"] + 0, rps[c[i], "st"] + 0
    }' "$OUT" >"$BUILD/echo.dat"
if command -v gnuplot >/dev/null; then
    bash tools/bench/plot.sh "$BUILD/echo.dat" "$BUILD/echo_throughput.png" >/dev/null &&
        say "plot: $BUILD/echo_throughput.png"
else
    say "no gnuplot: the plot is skipped (apt-get install gnuplot-nox; then tools/bench/plot.sh)"
fi

echo
cat "$BUILD/table.txt"
