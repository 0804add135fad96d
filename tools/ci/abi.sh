#!/usr/bin/env bash
# Stage abi: a release build of the library in BUILD/release-abi exports
# nothing but st_* symbols (group symbols, one check), and one with
# -Ddebug_stats=true adds just State Threads' counters, as TLS (group
# debug-stats, one check); installed into
# BUILD/stage, it builds a State Threads program through pkg-config, with
# libst.so and with libst.a (groups link-shared and link-static, one check
# each).
#
#   tools/ci/abi.sh
set -euo pipefail
# shellcheck source=tools/ci/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
stage_begin

# Checked on a plain release build of the shared library: the coverage build
# also exports libgcov's own __gcov_* symbols, which the installed library
# never has.
step "exported symbols of libst.so (release build in $BUILD/release-abi)"
abi="$BUILD/release-abi"
so="$abi/libst.so"
stage="$ROOT/$BUILD/stage"
rm -rf "$abi" "$stage"
if meson setup "$abi" --buildtype=release -Dtests=disabled --prefix "$stage" \
    >"$LOGS/release-abi.log" 2>&1 &&
    { meson compile -C "$abi" st:shared_library >>"$LOGS/release-abi.log" 2>&1 ||
        meson compile -C "$abi" >>"$LOGS/release-abi.log" 2>&1; } &&
    [[ -f $so ]] && syms=$(nm -D --defined-only "$so"); then
    bad=$(awk 'NF >= 2 { print $NF }' <<<"$syms" |
        grep -Ev '^(st_[A-Za-z0-9_]+|_init|_fini|_edata|_end|__bss_start)$' || true)
    n_st=$(awk 'NF >= 2 { print $NF }' <<<"$syms" | grep -c '^st_' || true)
    if [[ -n $bad ]]; then
        echo "symbols outside st_*:"
        awk '{ print "  " $0 }' <<<"$bad"
        record symbols 0 1 "$(wc -l <<<"$bad") exported symbols outside st_*"
    elif ((n_st == 0)); then
        record symbols 0 1 "libst.so exports no st_* symbol"
    else
        echo "nm -D: $n_st st_* symbols, nothing else"
        record symbols 1 0 "$n_st st_* symbols, nothing else"
    fi
else
    tail -n 20 "$LOGS/release-abi.log" || true
    record symbols 0 1 "could not build $so (log: $LOGS/release-abi.log)"
fi

# With -Ddebug_stats=true the library also exports State Threads'
# DEBUG_STATS counters, under State Threads' names, as thread-local data
# (SRS declares them `extern __thread`), from libst.so and libst.a alike,
# and still nothing else besides st_*.
step "debug_stats: the counters, exported as TLS (release build in $BUILD/release-stats)"
stats_build="$BUILD/release-stats"
stats_syms="_st_active_count _st_num_free_stacks"
for name in recvfrom sendto read readv writev recvmsg sendmsg; do
    stats_syms+=" _st_stat_$name _st_stat_${name}_eagain"
done
for name in epoll epoll_zero epoll_shake epoll_spin sched_15ms sched_20ms sched_25ms sched_30ms \
    sched_35ms sched_40ms sched_80ms sched_160ms sched_s thread_run thread_idle thread_yield \
    thread_yield2; do
    stats_syms+=" _st_stat_$name"
done
# stats_check FILE READELF-OPTION: the counters missing or not TLS, and the
# other default-visibility globals that are not st_*, one a line.
stats_check() {
    local defined
    defined=$(readelf -W "$2" "$1" | awk '$5 == "GLOBAL" && $6 == "DEFAULT" && $7 != "UND" {
        print $4, $8 }' | sort -u)
    for sym in $stats_syms; do
        grep -qx "TLS $sym" <<<"$defined" || echo "missing or not TLS: $sym"
    done
    awk '{ print $2 }' <<<"$defined" | grep -Ev '^(st_[A-Za-z0-9_]+|_init|_fini|_edata|_end|__bss_start)$' |
        grep -vxF -f <(tr ' ' '\n' <<<"$stats_syms") | sed 's/^/not st_* nor a counter: /' || true
}
rm -rf "$stats_build"
if meson setup "$stats_build" --buildtype=release -Dtests=disabled -Ddebug_stats=true \
    >"$LOGS/release-stats.log" 2>&1 &&
    meson compile -C "$stats_build" st:shared_library st:static_library \
        >>"$LOGS/release-stats.log" 2>&1; then
    bad=$(stats_check "$stats_build/libst.so" --dyn-syms; stats_check "$stats_build/libst.a" --syms)
    n_stats=$(wc -w <<<"$stats_syms")
    if [[ -n $bad ]]; then
        awk '{ print "  " $0 }' <<<"$bad"
        record debug-stats 0 1 "$(wc -l <<<"$bad") problems with the debug_stats exports"
    else
        echo "libst.so and libst.a: the $n_stats counters as TLS, nothing else besides st_*"
        record debug-stats 1 0 "$n_stats counters exported as TLS from libst.so and libst.a"
    fi
else
    tail -n 20 "$LOGS/release-stats.log" || true
    record debug-stats 0 1 "could not build the debug_stats library (log: $LOGS/release-stats.log)"
fi

# A State Threads program builds unchanged against the installed library:
# st.h from the install, libst.so or libst.a found through pkg-config st.
step "install and build a State Threads program through pkg-config"
install_check() {   # install_check MODE (shared|static)
    local mode=$1 exe="$abi/st_program_$1" pc_dir libdir
    pc_dir=$(dirname "$(find "$stage" -name st.pc -print -quit)")
    libdir=$(PKG_CONFIG_PATH=$pc_dir pkg-config --variable=libdir st)
    # ldd's output is taken whole before grep looks at it: with pipefail,
    # `ldd | grep -q` fails whenever grep exits before ldd has written all.
    local deps
    if [[ $mode == shared ]]; then
        # shellcheck disable=SC2046
        cc -o "$exe" tests/header/c_program.c $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags --libs st) \
            -Wl,-rpath,"$libdir" && "$exe" && deps=$(ldd "$exe") && grep -q "$libdir/libst.so" <<<"$deps"
    else
        # shellcheck disable=SC2046
        cc -o "$exe" tests/header/c_program.c $(PKG_CONFIG_PATH=$pc_dir pkg-config --cflags st) \
            "$libdir/libst.a" && "$exe" && deps=$(ldd "$exe") && ! grep -q libst <<<"$deps"
    fi
}
if meson install -C "$abi" >"$LOGS/install.log" 2>&1 && [[ -f $stage/include/st.h ]]; then
    for mode in shared static; do
        if install_check "$mode"; then
            record "link-$mode" 1 0 "program built with pkg-config st against the installed $mode library"
        else
            record "link-$mode" 0 1 "program did not build or run against the installed library ($mode)"
        fi
    done
else
    tail -n 20 "$LOGS/install.log" || true
    record install 0 1 "meson install failed (log: $LOGS/install.log)"
fi

stage_summary
