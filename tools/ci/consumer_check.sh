#!/usr/bin/env bash
# st as other projects consume it, from the working tree:
#
#   tools/ci/consumer_check.sh [WORKDIR]
#
# 1. meson: the separate Meson project tests/consumer, copied to WORKDIR with
#    this repository linked at its subprojects/st-source, configured offline
#    (--wrap-mode=nodownload, --force-fallback-for=st) so that its
#    dependency('st') is satisfied through subprojects/st.wrap; its program
#    is built and run.
# 2. pkgconfig-shared, pkgconfig-static: st built (release) and installed
#    into WORKDIR/prefix, then the same tests/consumer/main.c built with
#    plain `cc $(pkg-config --cflags --libs st)` against libst.so, and with
#    `cc -static $(pkg-config --static --cflags --libs st)`, and run.
#
# Prints one "PASS <check>: ..." or "FAIL <check>: ..." line per check, and
# exits 0 only if all passed. Logs stay in WORKDIR (default: a temporary
# directory, removed at the end unless a check failed).
set -uo pipefail
# shellcheck source=tools/ci/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"

# ---------------------------------------------------------------------------
# 1. The Meson consumer, through the wrap.
src="$WORK/consumer"
mkdir -p "$src/subprojects"
cp "$ROOT/tests/consumer/meson.build" "$ROOT/tests/consumer/main.c" "$src/"
cp "$ROOT/tests/consumer/subprojects/st.wrap" "$src/subprojects/"
ln -s "$ROOT" "$src/subprojects/st-source"
log="$WORK/meson.log"
if ! meson setup "$WORK/consumer-build" "$src" --wrap-mode=nodownload \
    --force-fallback-for=st >"$log" 2>&1; then
    fail meson "meson setup of tests/consumer failed" "$log"
elif ! grep -q 'Executing subproject st' "$log"; then
    fail meson "dependency('st') was not resolved through subprojects/st.wrap" "$log"
elif ! meson compile -C "$WORK/consumer-build" consumer >>"$log" 2>&1; then
    fail meson "tests/consumer did not build" "$log"
elif ! run_ok "$WORK/meson-run.log" "$WORK/consumer-build/consumer"; then
    fail meson "the consumer program failed" "$WORK/meson-run.log"
else
    pass meson "tests/consumer built with dependency('st') from subprojects/st.wrap: $(head -n 1 "$WORK/meson-run.log")"
fi
# The link points back at the repository, which may contain WORKDIR: drop it
# so that nothing walking the tree later loops through it.
rm -f "$src/subprojects/st-source"

# ---------------------------------------------------------------------------
# 2. An installed st, found with pkg-config by a plain cc command line.
prefix="$WORK/prefix"
build="$WORK/st-build"
log="$WORK/install.log"
installed=0
# Only what is installed is built: the libraries and the man pages.
if meson setup "$build" "$ROOT" --buildtype=release -Dtests=disabled --prefix "$prefix" \
    >"$log" 2>&1 &&
    meson compile -C "$build" st:shared_library st:static_library \
        tools/man/man-pages:custom >>"$log" 2>&1 &&
    meson install -C "$build" --no-rebuild >>"$log" 2>&1; then
    pc=$(find "$prefix" -name st.pc -print -quit)
    if [[ -n $pc ]]; then
        installed=1
        PKG_CONFIG_PATH=$(dirname "$pc")
        export PKG_CONFIG_PATH
    fi
fi
if ((installed == 0)); then
    fail pkgconfig-shared "could not build and install st into $prefix" "$log"
    fail pkgconfig-static "could not build and install st into $prefix" "$log"
else
    libdir=$(pkg-config --variable=libdir st)
    exe="$WORK/consumer-shared"
    log="$WORK/pkgconfig-shared.log"
    # shellcheck disable=SC2046
    if ! cc -o "$exe" "$ROOT/tests/consumer/main.c" $(pkg-config --cflags --libs st) \
        -Wl,-rpath,"$libdir" >"$log" 2>&1; then
        fail pkgconfig-shared "cc \$(pkg-config --cflags --libs st) failed" "$log"
    elif ! grep -q "$libdir/libst.so.1" <<<"$(ldd "$exe")"; then
        fail pkgconfig-shared "the program does not load $libdir/libst.so.1"
    elif ! run_ok "$WORK/pkgconfig-shared-run.log" "$exe"; then
        fail pkgconfig-shared "the program failed" "$WORK/pkgconfig-shared-run.log"
    else
        pass pkgconfig-shared "main.c built with pkg-config st against the installed libst.so.1"
    fi

    exe="$WORK/consumer-static"
    log="$WORK/pkgconfig-static.log"
    # shellcheck disable=SC2046
    if ! cc -static -o "$exe" "$ROOT/tests/consumer/main.c" \
        $(pkg-config --static --cflags --libs st) >"$log" 2>&1; then
        fail pkgconfig-static "cc -static \$(pkg-config --static --cflags --libs st) failed" "$log"
    elif ldd "$exe" >/dev/null 2>&1; then
        fail pkgconfig-static "the program is not statically linked"
    elif ! run_ok "$WORK/pkgconfig-static-run.log" "$exe"; then
        fail pkgconfig-static "the program failed" "$WORK/pkgconfig-static-run.log"
    else
        pass pkgconfig-static "main.c built with pkg-config --static st against the installed libst.a"
    fi
fi

check_finish
