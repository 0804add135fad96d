#!/usr/bin/env bash
# State Threads' make interface (the root Makefile, tools/make/st_make.sh)
# as SRS uses it, in a copy of the source tree (the files git lists):
#
#   tools/ci/make_check.sh [WORKDIR]
#
# 1. help: `make` without a target lists the targets and succeeds, as ST's;
#    flags-*: the EXTRA_CFLAGS translation, one check per row of the table
#    in docs/building.md (DRY_RUN=yes prints the Meson arguments), and
#    dry-run: none of it touched the tree; machines: for every CPU of
#    tools/cross the generated cross file names the host machine as
#    tools/cross/<cpu>.ini does; native: gcc and clang build natively;
#    other-os: darwin-debug and cygwin64-debug refuse with a clear message.
# 2. srs-debug*: exactly SRS's command line,
#      env EXTRA_CFLAGS="-DMALLOC_STACK" make linux-debug STATIC_ONLY=yes \
#          CC=gcc AR=ar LD=ld RANDLIB=ranlib
#    gives LINUX_$(uname -r)_DBG with st.h and libst.a and the obj link;
#    `cp -rf LINUX_*_DBG/* dest` copies nothing else; tests/consumer/main.c
#    built against dest/st.h and dest/libst.a runs; srs-debug-api:
#    tests/consumer/debug_api.c built with -DDEBUG links against State
#    Threads' DEBUG functions there and, under gdb, stops on each blocked
#    coroutine's stack (skipped when gdb is missing). rebuild: the same command
#    again sets up and copies nothing; reconfigure: without -DMALLOC_STACK
#    the build is set up again with the other stack mode. srs-stats: with
#    -DDEBUG_STATS added, tests/consumer/debug_stats.c, which declares State
#    Threads' counters itself as SRS does, links against the result and
#    sees them count.
# 3. optimized-*: linux-optimized STATIC_ONLY=no gives libst.so with its
#    soname links, built with -O2; the program links libst.so and runs.
# 4. cross-*: linux-debug with CC=aarch64-linux-gnu-gcc (and SRS's AR, LD,
#    RANDLIB) gives an AArch64 libst.a; the program built with the cross
#    compiler runs under qemu-aarch64 (skipped, with the reason printed,
#    when qemu-aarch64 is not installed).
# 5. clean: `make clean` removes the output directories and obj, nothing else.
#
# Prints one "PASS <check>: ..." or "FAIL <check>: ..." line per check and
# exits 0 only if all passed. Logs stay in WORKDIR (default: a temporary
# directory, removed at the end unless a check failed).
set -euo pipefail
# shellcheck source=tools/ci/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

SRC=$WORK/st
LOG=$WORK/logs
DBG=LINUX_$(uname -r)_DBG
OPT=LINUX_$(uname -r)_OPT
MAIN=$SRC/tests/consumer/main.c
mkdir -p "$SRC" "$LOG"

# st_make LOG ARGS...: make ARGS in the copy, output to LOG.
st_make() {
    local log=$1
    shift
    (cd "$SRC" && make "$@") >"$log" 2>&1
}
# The Meson setup arguments a dry run prints: setup_args ARGS...
setup_args() {
    (cd "$SRC" && make -s DRY_RUN=yes "$@") |
        awk '/^meson setup / { on = 1; next } /^[^ ]/ { on = 0 } on { print substr($0, 3) }'
}
mtime() { stat -c %y "$1" 2>/dev/null || echo missing; }
# The entries of a directory on one line, links with their targets.
listing() {
    find "$1" -mindepth 1 -maxdepth 1 \( -type l -printf '%P->%l\n' \) -o -printf '%P\n' |
        sort | tr '\n' ' '
}

# ---------------------------------------------------------------------------
# The copy: what git lists (committed files and new ones not ignored).
if ! (cd "$ROOT" && git ls-files -z --cached --others --exclude-standard) >"$WORK/files" 2>"$LOG/copy.log"; then
    fail copy "git ls-files failed: the check copies a git checkout" "$LOG/copy.log"
    exit 1
fi
(
    cd "$ROOT"
    while IFS= read -r -d '' f; do
        if [[ -e $f || -L $f ]]; then printf '%s\0' "$f"; fi
    done <"$WORK/files" | tar --null -T - -cf -
) | tar -xf - -C "$SRC"

# ---------------------------------------------------------------------------
# 1. Without building.
if (cd "$SRC" && make) >"$LOG/help.log" 2>&1; then
    missing=()
    for t in linux-debug linux-optimized darwin-debug darwin-optimized cygwin64-debug clean; do
        grep -qw -- "$t" "$LOG/help.log" || missing+=("$t")
    done
    if ((${#missing[@]} == 0)); then
        pass help "make without a target lists the targets and exits 0"
    else
        fail help "the target list lacks ${missing[*]}" "$LOG/help.log"
    fi
else
    fail help "make without a target failed" "$LOG/help.log"
fi

base=$'--buildtype=debug\n-Ddebug_api=true\n-Dtests=disabled'
# flags NAME EXTRA_CFLAGS EXPECTED: the setup arguments are exactly the base
# ones followed by EXPECTED (lines).
flags() {
    local got want=$base${3:+$'\n'$3}
    got=$(EXTRA_CFLAGS=$2 setup_args linux-debug CC=gcc) || true
    if [[ $got == "$want" ]]; then
        pass "flags-$1" "EXTRA_CFLAGS=\"$2\": ${3:-no option}"
    else
        fail "flags-$1" "EXTRA_CFLAGS=\"$2\" gave: ${got//$'\n'/ } (wanted: ${want//$'\n'/ })"
    fi
}
flags malloc-stack "-DMALLOC_STACK" "-Dstack_mode=free"
flags cache-stack "-DMD_CACHE_STACK" "-Dstack_mode=cache"
flags valgrind "-DMD_VALGRIND" "-Dvalgrind=enabled"
flags debug-stats "-DDEBUG_STATS" "-Ddebug_stats=true"
flags asan "-DMD_ASAN" "-Db_sanitize=address"
flags fsanitize "-fsanitize=address" "-Db_sanitize=address"
flags no-epoll "-UMD_HAVE_EPOLL" "-Deventsys_epoll=disabled"
flags platform "-DMD_HAVE_EPOLL -DMD_HAVE_SELECT -DMD_HAVE_KQUEUE -DMD_OSX_NO_CLOCK_GETTIME" ""
flags unknown "-DFOO=1 -O3 -Wno-x" $'-Dc_args=-DFOO=1 -O3 -Wno-x\n-Dc_link_args=-O3 -Wno-x'
flags srs-asan "-DMALLOC_STACK -DMD_ASAN -fsanitize=address -fno-omit-frame-pointer" \
    $'-Dstack_mode=free\n-Db_sanitize=address\n-Dc_args=-fno-omit-frame-pointer\n-Dc_link_args=-fno-omit-frame-pointer'
flags two-words "-D MALLOC_STACK -I /opt/x" $'-Dstack_mode=free\n-Dc_args=-I /opt/x'
# EXTRA_CFLAGS on make's command line, as older SRS passes it.
got=$(setup_args linux-debug EXTRA_CFLAGS="-DMD_HAVE_EPOLL -DMD_VALGRIND") || true
if [[ $got == "$base"$'\n-Dvalgrind=enabled' ]]; then
    pass flags-command-line "make linux-debug EXTRA_CFLAGS=...: -Dvalgrind=enabled"
else
    fail flags-command-line "make linux-debug EXTRA_CFLAGS=\"-DMD_HAVE_EPOLL -DMD_VALGRIND\" gave: ${got//$'\n'/ }"
fi
if compgen -G "$SRC/*_DBG" >/dev/null || [[ -e $SRC/obj || -L $SRC/obj ]]; then
    fail dry-run "DRY_RUN=yes created $(cd "$SRC" && echo ./*_DBG obj)"
else
    pass dry-run "DRY_RUN=yes created nothing"
fi

# The host machine of the generated cross file against tools/cross/<cpu>.ini.
host_lines() { grep -E "^ *(system|cpu_family|endian) = " | tr -d ' '; }
agree=() absent=() differ=()
for ini in "$SRC"/tools/cross/*.ini; do
    cpu=$(basename "$ini" .ini)
    cc=$(sed -n "s/^c = '\(.*\)'\$/\1/p" "$ini")
    if ! command -v "$cc" >/dev/null 2>&1; then
        absent+=("$cpu")
        continue
    fi
    got=$( (cd "$SRC" && make -s DRY_RUN=yes linux-debug CC="$cc") | host_lines) || true
    if [[ -n $got && $got == "$(host_lines <"$ini")" ]]; then agree+=("$cpu"); else differ+=("$cpu"); fi
done
if ((${#differ[@]} > 0 || ${#agree[@]} == 0)); then
    fail machines "the cross file differs from tools/cross for: ${differ[*]:-every CPU} (no compiler: ${absent[*]:-none})"
else
    pass machines "cross files agree with tools/cross for ${agree[*]}${absent[*]:+ (no compiler, not checked: ${absent[*]})}"
fi

native=()
for cc in gcc clang; do
    if ! command -v "$cc" >/dev/null 2>&1; then continue; fi
    plan=$(cd "$SRC" && make -s DRY_RUN=yes linux-debug CC="$cc") || true
    if grep -q 'cross: no$' <<<"$plan"; then
        native+=("$cc")
    else
        fail native "CC=$cc was taken for a cross compiler"
        native=()
        break
    fi
done
if ((${#native[@]} > 0)); then pass native "${native[*]}: native builds, no cross file"; fi

other_ok=1
for t in darwin-debug:macOS cygwin64-debug:Cygwin; do
    if st_make "$LOG/${t%%:*}.log" "${t%%:*}" || ! grep -q "${t#*:}" "$LOG/${t%%:*}.log"; then
        fail other-os "make ${t%%:*} on Linux did not refuse naming ${t#*:}" "$LOG/${t%%:*}.log"
        other_ok=0
    fi
done
if compgen -G "$SRC/DARWIN_*" >/dev/null || compgen -G "$SRC/CYGWIN64_*" >/dev/null; then
    fail other-os "a refused target created its directory"
elif ((other_ok)); then
    pass other-os "darwin-debug and cygwin64-debug refuse on Linux: $(grep -m1 '^st:' "$LOG/darwin-debug.log")"
fi

# ---------------------------------------------------------------------------
# 2. SRS's command line.
srs_make() {   # srs_make LOG [MAKE ARGUMENTS instead of SRS's variables]
    local log=$1
    shift
    (cd "$SRC" && env EXTRA_CFLAGS="-DMALLOC_STACK" make linux-debug STATIC_ONLY=yes \
        CC=gcc AR=ar LD=ld RANDLIB=ranlib "$@") >"$log" 2>&1
}
built=0
if ! srs_make "$LOG/srs-debug.log"; then
    fail srs-debug "make linux-debug failed" "$LOG/srs-debug.log"
elif [[ ! -f $SRC/$DBG/st.h || ! -f $SRC/$DBG/libst.a ]]; then
    fail srs-debug "$DBG lacks st.h or libst.a: $(listing "$SRC/$DBG")"
elif [[ $(readlink "$SRC/obj") != "$DBG" ]]; then
    fail srs-debug "obj does not point at $DBG"
else
    built=1
    pass srs-debug "$DBG/st.h and $DBG/libst.a, obj -> $DBG"
fi

dest=$WORK/dest-debug
mkdir -p "$dest"
if ((built)) && cp -rf "$SRC"/LINUX_*_DBG/* "$dest/"; then
    got=$(listing "$dest")
    if [[ $got == "libst.a st.h " ]]; then
        pass srs-debug-copy "cp -rf $DBG/* dest copies: $got"
    else
        fail srs-debug-copy "cp -rf $DBG/* dest copies: $got"
    fi
    if ! gcc -o "$WORK/program-debug" "$MAIN" -I "$dest" "$dest/libst.a" >"$LOG/program-debug.log" 2>&1; then
        fail srs-debug-program "tests/consumer/main.c did not build against dest/libst.a" "$LOG/program-debug.log"
    elif ! run_ok "$LOG/program-debug-run.log" "$WORK/program-debug"; then
        fail srs-debug-program "the program failed" "$LOG/program-debug-run.log"
    else
        pass srs-debug-program "main.c with dest/st.h and dest/libst.a: $(head -n 1 "$LOG/program-debug-run.log")"
    fi
else
    fail srs-debug-copy "nothing to copy: the build failed"
    fail srs-debug-program "nothing to link: the build failed"
fi

# State Threads' DEBUG functions: a program built with DEBUG links against
# the debug build and iterates; under gdb, a breakpoint in
# _st_show_thread_stack stops on each blocked coroutine's own stack during
# the first iteration, and not for the coroutine that had not run.
api_prog=$WORK/program-debug-api
if ((built == 0)); then
    fail srs-debug-api "nothing to link: the build failed"
elif ! gcc -g -DDEBUG -o "$api_prog" "$SRC/tests/consumer/debug_api.c" -I "$dest" "$dest/libst.a" \
    >"$LOG/program-debug-api.log" 2>&1; then
    fail srs-debug-api "tests/consumer/debug_api.c built with -DDEBUG did not link" "$LOG/program-debug-api.log"
elif ! run_ok "$LOG/program-debug-api-run.log" "$api_prog"; then
    fail srs-debug-api "the program failed" "$LOG/program-debug-api-run.log"
else
    pass srs-debug-api "-DDEBUG program: $(head -n 1 "$LOG/program-debug-api-run.log")"
    if ! command -v gdb >/dev/null 2>&1; then
        echo "SKIP srs-debug-api-gdb: gdb is not installed (tools/ci/deps.sh installs it)"
    else
        printf '%s\n' 'set pagination off' 'break _st_show_thread_stack' 'commands 1' 'silent' \
            'printf "STOP %s\n", messg ? messg : "(stack)"' 'bt' 'continue' 'end' 'run' >"$WORK/iterate.gdb"
        timeout 120 gdb -batch -nx -x "$WORK/iterate.gdb" "$api_prog" >"$LOG/gdb-iterate.log" 2>&1 || true
        # The first iteration: from its start to its end.
        first=$(awk '/^STOP Iteration started/ { on = 1 } on { print } /^STOP Iteration completed/ { if (on) exit }' \
            "$LOG/gdb-iterate.log")
        if ! grep -q '^ok' "$LOG/gdb-iterate.log"; then
            fail srs-debug-api-gdb "the program did not finish under gdb" "$LOG/gdb-iterate.log"
        elif [[ $(grep -c '^STOP Iteration started' "$LOG/gdb-iterate.log") != 2 ]]; then
            fail srs-debug-api-gdb "not two iterations" "$LOG/gdb-iterate.log"
        elif ! grep -q 'blocked_in_cond_wait' <<<"$first" || ! grep -q 'sleeping_in_usleep' <<<"$first"; then
            fail srs-debug-api-gdb "the first iteration did not stop on both blocked coroutines' stacks" "$LOG/gdb-iterate.log"
        elif grep -q 'never_ran' <<<"$first"; then
            fail srs-debug-api-gdb "the first iteration ran a coroutine that had not started" "$LOG/gdb-iterate.log"
        else
            pass srs-debug-api-gdb "break _st_show_thread_stack: each blocked coroutine's own stack, $(grep -c '^STOP (stack)' "$LOG/gdb-iterate.log") stops in two iterations"
        fi
    fi
fi

# The same command again does nothing; without -DMALLOC_STACK the build is
# set up again, with the caching stack mode.
stamp=$(mtime "$SRC/$DBG/libst.a")
config=$SRC/$DBG/.meson/build/st_config.h
if ! srs_make "$LOG/rebuild.log"; then
    fail rebuild "the same make linux-debug failed the second time" "$LOG/rebuild.log"
elif grep -q 'meson setup' "$LOG/rebuild.log" || [[ $(mtime "$SRC/$DBG/libst.a") != "$stamp" ]]; then
    fail rebuild "the same command set the build up again or copied libst.a again" "$LOG/rebuild.log"
else
    pass rebuild "the same command again: no setup, libst.a untouched"
fi
if ! grep -q 'ST__STACK_MODE_FREE 1' "$config" 2>/dev/null; then
    fail reconfigure "-DMALLOC_STACK did not give stack_mode=free ($config)"
elif ! st_make "$LOG/reconfigure.log" linux-debug STATIC_ONLY=yes CC=gcc AR=ar LD=ld RANDLIB=ranlib; then
    fail reconfigure "make linux-debug without EXTRA_CFLAGS failed" "$LOG/reconfigure.log"
elif ! grep -q 'meson setup' "$LOG/reconfigure.log" || ! grep -q 'ST__STACK_MODE_FREE 0' "$config"; then
    fail reconfigure "dropping -DMALLOC_STACK did not set the build up again with stack_mode=cache" "$LOG/reconfigure.log"
else
    pass reconfigure "without -DMALLOC_STACK: set up again, stack_mode=cache"
fi

# SRS with its debug statistics: -DDEBUG_STATS gives the counters, which a
# program declaring them itself (as SRS does) links against and reads.
stats_dest=$WORK/dest-stats
mkdir -p "$stats_dest"
if ! (cd "$SRC" && env EXTRA_CFLAGS="-DMALLOC_STACK -DDEBUG_STATS" make linux-debug STATIC_ONLY=yes \
    CC=gcc AR=ar LD=ld RANDLIB=ranlib) >"$LOG/srs-stats.log" 2>&1; then
    fail srs-stats "make linux-debug with -DDEBUG_STATS failed" "$LOG/srs-stats.log"
elif ! cp -rf "$SRC/$DBG"/* "$stats_dest/" ||
    ! gcc -o "$WORK/program-stats" "$SRC/tests/consumer/debug_stats.c" -I "$stats_dest" \
        "$stats_dest/libst.a" >"$LOG/program-stats.log" 2>&1; then
    fail srs-stats "tests/consumer/debug_stats.c did not link against the counters" "$LOG/program-stats.log"
elif ! run_ok "$LOG/program-stats-run.log" "$WORK/program-stats"; then
    fail srs-stats "the counters did not count as State Threads does" "$LOG/program-stats-run.log"
else
    pass srs-stats "-DDEBUG_STATS: debug_stats.c reads the counters: $(head -n 1 "$LOG/program-stats-run.log")"
fi

# ---------------------------------------------------------------------------
# 3. linux-optimized with the shared library.
dest=$WORK/dest-optimized
mkdir -p "$dest"
if ! st_make "$LOG/optimized.log" linux-optimized STATIC_ONLY=no CC=gcc AR=ar LD=ld RANDLIB=ranlib; then
    fail optimized "make linux-optimized STATIC_ONLY=no failed" "$LOG/optimized.log"
    fail optimized-program "nothing to link: the build failed"
else
    cp -rf "$SRC"/LINUX_*_OPT/* "$dest/"
    real=$(cd "$dest" && echo libst.so.1.*)
    soname=$(readelf -d "$dest/$real" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    ccmds=$SRC/$OPT/.meson/build/compile_commands.json
    if [[ ! -f $dest/st.h || ! -f $dest/libst.a || ! -f $dest/$real || -L $dest/$real ]]; then
        fail optimized "dest lacks st.h, libst.a or the shared library: $(listing "$dest")"
    elif [[ $(readlink "$dest/libst.so") != libst.so.1 || $(readlink "$dest/libst.so.1") != "$real" ]]; then
        fail optimized "the links are not libst.so -> libst.so.1 -> $real: $(listing "$dest")"
    elif [[ $soname != libst.so.1 ]]; then
        fail optimized "$real has SONAME '$soname', not libst.so.1"
    elif ! grep -q -- ' -O2 ' "$ccmds" || grep -q -- ' -O0 ' "$ccmds"; then
        fail optimized "the library was not compiled with -O2 ($ccmds)"
    elif [[ $(readlink "$SRC/obj") != "$OPT" ]]; then
        fail optimized "obj does not point at $OPT"
    else
        pass optimized "$OPT: st.h libst.a libst.so -> libst.so.1 -> $real (SONAME libst.so.1), -O2; obj -> $OPT"
    fi
    exe=$WORK/program-shared
    if ! gcc -o "$exe" "$MAIN" -I "$dest" -L "$dest" -lst >"$LOG/program-shared.log" 2>&1; then
        fail optimized-program "main.c did not link against dest/libst.so" "$LOG/program-shared.log"
    elif ! grep -q "$dest/libst.so.1" <<<"$(LD_LIBRARY_PATH=$dest ldd "$exe")"; then
        fail optimized-program "the program does not load $dest/libst.so.1"
    elif ! LD_LIBRARY_PATH=$dest run_ok "$LOG/program-shared-run.log" "$exe"; then
        fail optimized-program "the program failed" "$LOG/program-shared-run.log"
    else
        pass optimized-program "main.c with libst.so.1, run with LD_LIBRARY_PATH: $(head -n 1 "$LOG/program-shared-run.log")"
    fi
fi

# ---------------------------------------------------------------------------
# 4. A cross build for aarch64, run under qemu-user.
dest=$WORK/dest-aarch64
mkdir -p "$dest"
if ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1; then
    fail cross "aarch64-linux-gnu-gcc is not installed (tools/ci/deps.sh installs it)"
elif ! st_make "$LOG/cross.log" linux-debug CC=aarch64-linux-gnu-gcc AR=aarch64-linux-gnu-ar \
    LD=aarch64-linux-gnu-ld RANDLIB=aarch64-linux-gnu-ranlib; then
    fail cross "make linux-debug CC=aarch64-linux-gnu-gcc failed" "$LOG/cross.log"
else
    cp -rf "$SRC"/LINUX_*_DBG/* "$dest/"
    machine=$(readelf -h "$dest/libst.a" 2>/dev/null | sed -n 's/^ *Machine: *//p' | sort -u | tr '\n' ' ')
    if [[ $machine != "AArch64 " ]]; then
        fail cross "dest/libst.a holds objects for: ${machine:-nothing readable}" "$LOG/cross.log"
    elif ! grep -q "cpu_family = 'aarch64'" "$SRC/$DBG/.meson/cross.ini"; then
        fail cross "no aarch64 cross file in $DBG/.meson"
    else
        pass cross "CC=aarch64-linux-gnu-gcc: cross file generated, libst.a holds AArch64 objects"
    fi
    exe=$WORK/program-aarch64
    if ! aarch64-linux-gnu-gcc -o "$exe" "$MAIN" -I "$dest" "$dest/libst.a" >"$LOG/program-aarch64.log" 2>&1; then
        fail cross-program "main.c did not build with aarch64-linux-gnu-gcc" "$LOG/program-aarch64.log"
    elif ! command -v qemu-aarch64 >/dev/null 2>&1; then
        echo "SKIP cross-program: qemu-aarch64 is not installed (tools/ci/deps.sh installs qemu-user); built, not run"
    elif ! run_ok "$LOG/program-aarch64-run.log" qemu-aarch64 -L /usr/aarch64-linux-gnu "$exe"; then
        fail cross-program "the program failed under qemu-aarch64" "$LOG/program-aarch64-run.log"
    else
        pass cross-program "main.c built with aarch64-linux-gnu-gcc, under qemu-aarch64: $(head -n 1 "$LOG/program-aarch64-run.log")"
    fi
fi

# ---------------------------------------------------------------------------
# 5. make clean, with things beside the output that it must leave: a file
# and a link whose names match *_DBG and *_OPT, and the whole tree.
touch "$SRC/notes_DBG"
ln -s src "$SRC/link_OPT"
(cd "$SRC" && find . -mindepth 1 | grep -Ev "^\./($DBG|$OPT|obj)(/|$)" | sort) >"$WORK/clean-want"
if ! st_make "$LOG/clean.log" clean; then
    fail clean "make clean failed" "$LOG/clean.log"
elif [[ -e $SRC/$DBG || -e $SRC/$OPT || -L $SRC/obj ]]; then
    fail clean "make clean left $(cd "$SRC" && echo ./*_DBG ./*_OPT obj)"
elif ! (cd "$SRC" && find . -mindepth 1 | sort) | diff "$WORK/clean-want" - >"$LOG/clean.diff"; then
    fail clean "make clean removed more than the output directories and obj" "$LOG/clean.diff"
else
    pass clean "removed $DBG, $OPT and obj; everything else is left, notes_DBG and link_OPT too"
fi

check_finish
