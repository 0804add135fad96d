#!/usr/bin/env bash
# The release tarball builds, tests and installs on its own:
#
#   tools/ci/dist_check.sh [-r REPO] [WORKDIR]
#
# 1. dist: clones the current HEAD of REPO (default: this repository; only
#    committed files count, as in any release) into WORKDIR, configures it
#    and runs `meson dist --no-tests` there, which writes st-<version>.tar.xz;
# 2. build: unpacks the tarball and configures and builds it with the
#    default options, away from any git checkout;
# 3. test: runs the whole `meson test` suite of the unpacked tree;
# 4. install: `DESTDIR=WORKDIR/stage meson install` and checks what lands
#    where: st.h in includedir; libst.a, libst.so -> libst.so.1 ->
#    libst.so.1.<minor>.<patch> with SONAME libst.so.1 in libdir; st.pc in
#    libdir/pkgconfig with the project's version; st.3 and one page per
#    function of docs/reference.md in mandir/man3.
#
# Prints one "PASS <check>: ..." or "FAIL <check>: ..." line per check and
# exits 0 only if all passed. Logs stay in WORKDIR (default: a temporary
# directory, removed at the end unless a check failed).
set -uo pipefail

REPO=
if [[ ${1:-} == -r ]]; then
    REPO=$(cd "$2" && pwd -P)
    shift 2
fi
CHECK_LOG_LINES=25
# shellcheck source=tools/ci/check_lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
REPO=${REPO:-$ROOT}

skip_rest() {   # the checks that cannot run after an earlier failure
    local c
    for c in "$@"; do fail "$c" "not run: an earlier step failed"; done
    check_finish
}

if [[ -n $(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
    echo "note: $REPO has uncommitted changes; the check uses its HEAD, $(git -C "$REPO" rev-parse --short HEAD)"
fi

# ---------------------------------------------------------------------------
# 1. meson dist in a clean clone of HEAD.
log="$WORK/dist.log"
tarball=
if git clone -q "$REPO" "$WORK/clone" >"$log" 2>&1 &&
    meson setup "$WORK/clone-build" "$WORK/clone" -Dtests=disabled >>"$log" 2>&1 &&
    meson dist -C "$WORK/clone-build" --no-tests --formats xztar >>"$log" 2>&1; then
    tarball=$(find "$WORK/clone-build/meson-dist" -name '*.tar.xz' -print -quit)
fi
if [[ -z $tarball ]]; then
    fail dist "meson dist did not produce a tarball" "$log"
    skip_rest build test install
fi
pass dist "$(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB) from $(git -C "$REPO" rev-parse --short HEAD)"

# ---------------------------------------------------------------------------
# 2. The unpacked tarball configures and builds with the default options.
log="$WORK/build.log"
mkdir -p "$WORK/unpacked"
tar -C "$WORK/unpacked" -xf "$tarball"
src=$(find "$WORK/unpacked" -mindepth 1 -maxdepth 1 -type d -print -quit)
build="$WORK/dist-build"
if [[ -z $src || -e $src/.git ]]; then
    fail build "the tarball does not unpack into one directory without .git"
    skip_rest test install
fi
if ! meson setup "$build" "$src" >"$log" 2>&1 || ! meson compile -C "$build" -j "$JOBS" >>"$log" 2>&1; then
    fail build "the unpacked $(basename "$src") did not configure or build" "$log"
    skip_rest test install
fi
pass build "$(basename "$src") configured and built with the default options"

# ---------------------------------------------------------------------------
# 3. Its own test suite.
log="$WORK/test.log"
if meson test -C "$build" --no-rebuild --print-errorlogs --num-processes "$JOBS" >"$log" 2>&1; then
    pass test "meson test in the unpacked tree: $(awk '/^Ok:/ { print $2 }' "$log") tests passed, none failed"
else
    grep -E '^[0-9]+/[0-9]+ .*(FAIL|TIMEOUT|ERROR)' "$log" | head -n 20
    # What the failing tests printed (--print-errorlogs puts it between
    # scissors lines), since the log stays on the machine that ran it.
    awk '/✀/ { inside = 1; next } inside && /^―/ { inside = 0 } inside' "$log" |
        head -n 80 | sed 's/^/    | /'
    fail test "meson test in the unpacked tree failed (log: $log)" "$log"
fi

# ---------------------------------------------------------------------------
# 4. DESTDIR install: the files and where they go.
log="$WORK/install.log"
stage="$WORK/stage"
if ! DESTDIR="$stage" meson install -C "$build" --no-rebuild >"$log" 2>&1; then
    fail install "DESTDIR=$stage meson install failed" "$log"
    check_finish
fi
# The installation directories as configured (absolute, or relative to prefix).
read -r _prefix includedir libdir mandir < <(meson introspect "$build" --buildoptions | python3 -c '
import json, os, sys
opts = {o["name"]: o["value"] for o in json.load(sys.stdin)}
p = opts["prefix"]
print(p, *(os.path.join(p, opts[k]) for k in ("includedir", "libdir", "mandir")))')
version=$(meson introspect "$build" --projectinfo | python3 -c 'import json,sys; print(json.load(sys.stdin)["version"])')
inc="$stage$includedir" lib="$stage$libdir" man3="$stage$mandir/man3"
problems=()
[[ -f $inc/st.h ]] || problems+=("no $includedir/st.h")
[[ -f $lib/libst.a ]] || problems+=("no $libdir/libst.a")
[[ -f $lib/libst.so.$version && ! -L $lib/libst.so.$version ]] || problems+=("no $libdir/libst.so.$version")
[[ $(readlink "$lib/libst.so.1" 2>/dev/null) == "libst.so.$version" ]] ||
    problems+=("$libdir/libst.so.1 is not a link to libst.so.$version")
[[ $(readlink "$lib/libst.so" 2>/dev/null) == libst.so.1 ]] ||
    problems+=("$libdir/libst.so is not a link to libst.so.1")
soname=$(readelf -d "$lib/libst.so.$version" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[[ $soname == libst.so.1 ]] || problems+=("SONAME is '$soname', not libst.so.1")
pc="$lib/pkgconfig/st.pc"
if [[ -f $pc ]]; then
    grep -qx "Version: $version" "$pc" || problems+=("st.pc does not say Version: $version")
    grep -qx "Name: st" "$pc" || problems+=("st.pc does not say Name: st")
else
    problems+=("no $libdir/pkgconfig/st.pc")
fi
pages=$(python3 "$src/tools/man/md2man.py" --list "$src/docs/reference.md")
n_pages=0
for page in $pages; do
    if [[ -s $man3/$page ]]; then n_pages=$((n_pages + 1)); else problems+=("no $mandir/man3/$page"); fi
done
if ((${#problems[@]} > 0)); then
    for p in "${problems[@]}"; do echo "    $p"; done
    fail install "${#problems[@]} problems in the DESTDIR installation (log: $log)"
else
    pass install "DESTDIR layout: st.h, libst.a, libst.so -> libst.so.1 -> libst.so.$version (SONAME libst.so.1), st.pc $version, $n_pages man pages"
fi
check_finish
