#!/usr/bin/env bash
# State Threads' make targets carried out by Meson; the root Makefile calls
# this script and nothing else (docs/building.md, "Building with State
# Threads' make interface").
#
#   tools/make/st_make.sh help
#   tools/make/st_make.sh TARGET        linux-debug linux-optimized darwin-debug
#                                       darwin-optimized cygwin64-debug
#   tools/make/st_make.sh clean
#
# It works in the current directory, as ST's Makefile does: TARGET builds
# OS_RELEASE_DBG/ (or _OPT/) holding st.h and libst.a, with STATIC_ONLY=no
# also the shared library and its links, and points the symlink obj at it.
# Meson's build directory is the hidden DIR/.meson/build, which
# `cp -rf DIR/* dest` leaves behind.
#
# The make variables arrive in the environment: CC and AR (handed to Meson
# in its environment, or in a generated cross file when CC builds for
# another machine than this one), STRIP (the cross file's), RANLIB or
# RANDLIB (run on the copied libst.a, as ST does), LD (accepted; the
# compiler driver links, as it always does under Meson), STATIC_ONLY (yes by
# default) and EXTRA_CFLAGS, whose ST feature macros become st's Meson
# options (translate_flags) and whose other words go to the compiler.
# CFLAGS, CPPFLAGS and LDFLAGS from the environment are not used, as ST's
# Makefile does not use them either: EXTRA_CFLAGS is the way in.
#
# DRY_RUN=yes prints what would be run (output directory, machine, Meson
# arguments, cross file) and changes nothing.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
TARGETS="linux-debug linux-optimized darwin-debug darwin-optimized cygwin64-debug"

say() { echo "st: $*"; }
die() {
    echo "st: $*" >&2
    exit 1
}

usage() {
    cat <<EOF

Please specify one of the following targets:

  linux-debug        LINUX_\$(uname -r)_DBG: Meson buildtype debug (-g -O0)
  linux-optimized    LINUX_\$(uname -r)_OPT: optimised (-O2), no assertions
  darwin-debug       DARWIN_\$(uname -r)_DBG
  darwin-optimized   DARWIN_\$(uname -r)_OPT
  cygwin64-debug     CYGWIN64_\$(uname -s)_DBG
  clean              removes the *_DBG and *_OPT directories and obj

Variables: CC AR LD RANLIB (or RANDLIB) STRIP STATIC_ONLY=yes|no EXTRA_CFLAGS
(ST's feature macros there become Meson options; see docs/building.md).
The build is Meson's; its build directory is DIR/.meson/build.

EOF
}

# ---------------------------------------------------------------------------
# EXTRA_CFLAGS, split at whitespace: ST's feature macros set st's Meson
# options, ST's platform macros need nothing, every other word is handed to
# the compiler (c_args) and, but for the preprocessor's (-D, -U, -I, -i...),
# to the compiler driver that links the shared library (c_link_args), as -m,
# -f and sanitizer flags must reach both. Sets OPTIONS: Meson arguments in a fixed order; of two
# words for one option the last wins.
translate_flags() {
    local words=() w i=0 name pass=() link=()
    local stack_mode='' valgrind='' debug_stats='' sanitize='' epoll=''
    read -r -d '' -a words <<<"${EXTRA_CFLAGS:-}" || true
    while ((i < ${#words[@]})); do
        w=${words[i]}
        i=$((i + 1))
        # A preprocessor flag and its argument as two words ("-D NAME",
        # "-I DIR") stay together.
        case $w in
            -D | -U | -I | -include | -imacros | -isystem | -iquote | -idirafter)
                if ((i < ${#words[@]})); then
                    w="$w ${words[i]}"
                    i=$((i + 1))
                fi
                ;;
        esac
        # name: the macro a -D defines, "-" and the macro a -U undefines.
        name=${w#-[DU]}
        name=${name# }
        name=${name%%=*}
        case $w in
            -D*) ;;
            -U*) name=-$name ;;
            *) name='' ;;
        esac
        case $name:$w in
            MALLOC_STACK:*) stack_mode=free ;;
            MD_CACHE_STACK:*) stack_mode=cache ;;
            MD_VALGRIND:*) valgrind=enabled ;;
            DEBUG_STATS:*) debug_stats=true ;;
            MD_ASAN:* | :-fsanitize=address) sanitize=address ;;
            -MD_HAVE_EPOLL:*) epoll=disabled ;;
            # st picks its event backends itself (epoll, poll and select on
            # Linux; a program chooses with st_set_eventsys), and always
            # uses clock_gettime.
            MD_HAVE_EPOLL:* | MD_HAVE_SELECT:* | MD_HAVE_KQUEUE:* | MD_OSX_NO_CLOCK_GETTIME:*) ;;
            *)
                pass+=("$w")
                case $w in -[DUI]* | -i*) ;; *) link+=("$w") ;; esac
                ;;
        esac
    done
    OPTIONS=()
    if [[ -n $stack_mode ]]; then OPTIONS+=("-Dstack_mode=$stack_mode"); fi
    if [[ -n $valgrind ]]; then OPTIONS+=("-Dvalgrind=$valgrind"); fi
    if [[ -n $debug_stats ]]; then OPTIONS+=("-Ddebug_stats=$debug_stats"); fi
    if [[ -n $sanitize ]]; then OPTIONS+=("-Db_sanitize=$sanitize"); fi
    if [[ -n $epoll ]]; then OPTIONS+=("-Deventsys_epoll=$epoll"); fi
    if ((${#pass[@]} > 0)); then OPTIONS+=("-Dc_args=${pass[*]}"); fi
    if ((${#link[@]} > 0)); then OPTIONS+=("-Dc_link_args=${link[*]}"); fi
}

# ---------------------------------------------------------------------------
# Machines. machine_of TRIPLET prints "system cpu_family cpu endian" as a
# Meson cross file names them (the families of tools/cross/*.ini, and
# x86_64); for a CPU it does not know, family and endian are "-" and it
# fails.
machine_of() {
    local t cpu family=- endian=little system=unknown
    t=$(printf '%s' "$1" | tr '[:upper:]' '[:lower:]')
    cpu=${t%%-*}
    case $cpu in
        x86_64 | amd64) family=x86_64 cpu=x86_64 ;;
        i[3-6]86) family=x86 ;;
        aarch64 | arm64) family=aarch64 cpu=aarch64 ;;
        aarch64_be) family=aarch64 endian=big ;;
        arm*eb) family=arm endian=big ;;
        arm*) family=arm ;;
        mips64*el | mipsisa64*el) family=mips64 ;;
        mips64* | mipsisa64*) family=mips64 endian=big ;;
        mips*el) family=mips ;;
        mips*) family=mips endian=big ;;
        powerpc64le | ppc64le) family=ppc64 cpu=ppc64le ;;
        powerpc64 | ppc64) family=ppc64 cpu=ppc64 endian=big ;;
        riscv64) family=riscv64 ;;
        s390x) family=s390x endian=big ;;
        *) endian=- ;;
    esac
    case $t in
        *-linux*) system=linux ;;
        *-darwin* | *-apple-*) system=darwin ;;
        *-cygwin*) system=cygwin ;;
        *-mingw* | *-windows*) system=windows ;;
    esac
    echo "$system $family $cpu $endian"
    [[ $family != - ]]
}

# The triplet a compiler builds for: compiler_target WORDS...
compiler_target() { "$@" -dumpmachine 2>/dev/null; }

# This machine's own triplet: the native compiler's, else uname's.
native_target() {
    local c
    for c in cc gcc clang; do
        if command -v "$c" >/dev/null 2>&1 && compiler_target "$c"; then return 0; fi
    done
    echo "$(uname -m)-unknown-$(uname -s)"
}

# Sets CC_TARGET (the triplet CC builds for), MACHINE (machine_of it) and
# CROSS: yes when CC builds for another system, CPU family or byte order
# than the native compiler.
detect_machine() {
    local cc_words=() native
    read -r -a cc_words <<<"${CC:-cc}"
    CC_TARGET=$(compiler_target "${cc_words[@]}") ||
        die "cannot run '${CC:-cc} -dumpmachine': CC must name a C compiler (gcc or clang)"
    MACHINE=$(machine_of "$CC_TARGET") || true
    native=$(machine_of "$(native_target)") || true
    CROSS=no
    if [[ -n ${CC:-} && $MACHINE != "$native" ]]; then CROSS=yes; fi
}

# A word list as a Meson array: meson_array WORDS...
meson_array() {
    local out='' w
    for w in "$@"; do
        w=${w//\\/\\\\}
        w=${w//\'/\\\'}
        out+="${out:+, }'$w'"
    done
    echo "[$out]"
}

# A binutils program for the cross compiler CC: the one given, else the one
# named with CC's prefix (aarch64-linux-gnu-gcc: aarch64-linux-gnu-ar) if it
# is next to CC or in PATH; else nothing. tool_for NAME GIVEN
tool_for() {
    local cc_words=() cc base prefix
    if [[ -n $2 ]]; then
        echo "$2"
        return 0
    fi
    read -r -a cc_words <<<"$CC"
    cc=${cc_words[${#cc_words[@]} - 1]}
    base=${cc##*/}
    case $base in
        *-gcc*) prefix=${base%-gcc*}- ;;
        *-clang*) prefix=${base%-clang*}- ;;
        *-cc) prefix=${base%-cc}- ;;
        *) return 0 ;;
    esac
    if [[ $cc == */* && -x ${cc%/*}/$prefix$1 ]]; then
        echo "${cc%/*}/$prefix$1"
    elif command -v "$prefix$1" >/dev/null 2>&1; then
        echo "$prefix$1"
    fi
}

# The Meson cross file for CC (MACHINE set by detect_machine).
cross_file() {
    local cc_words=() system family cpu endian ar strip
    read -r -a cc_words <<<"$CC"
    read -r system family cpu endian <<<"$MACHINE"
    if [[ $family == - ]]; then
        die "CC=$CC builds for $CC_TARGET, a CPU st does not know (st's CPUs: x86_64 x86 aarch64 arm mips mips64 ppc64 riscv64 s390x)"
    fi
    ar=$(tool_for ar "${AR:-}")
    strip=$(tool_for strip "${STRIP:-}")
    echo "[binaries]"
    echo "c = $(meson_array "${cc_words[@]}")"
    if [[ -n $ar ]]; then echo "ar = $(meson_array "$ar")"; fi
    if [[ -n $strip ]]; then echo "strip = $(meson_array "$strip")"; fi
    echo
    echo "[host_machine]"
    echo "system = '$system'"
    echo "cpu_family = '$family'"
    echo "cpu = '$cpu'"
    echo "endian = '$endian'"
}

system_name() {
    case $1 in
        linux) echo Linux ;;
        darwin) echo macOS ;;
        cygwin) echo Cygwin ;;
        *) echo "$1" ;;
    esac
}
targets_for() {
    case $1 in
        linux) echo "here use linux-debug or linux-optimized" ;;
        darwin) echo "here use darwin-debug or darwin-optimized" ;;
        cygwin) echo "here use cygwin64-debug" ;;
        *) echo "ST's make interface has no target for it" ;;
    esac
}

# ---------------------------------------------------------------------------
# The output directory.

# The shared library and its links as Meson names them on each system:
# shared_artifacts DIR prints the names present in DIR.
shared_artifacts() {
    local f
    for f in "$1"/libst.so "$1"/libst.so.* "$1"/libst*.dylib "$1"/cygst*.dll "$1"/libst.dll.a; do
        if [[ $f == *.p || ! (-f $f || -L $f) ]]; then continue; fi
        echo "${f##*/}"
    done
}

# Copies a file or link into DIR when it changed, keeping its time stamp, so
# that an unchanged library does not relink its users; sets COPIED to yes
# or no. install_artifact SOURCE DIR
install_artifact() {
    local dst=$2/${1##*/}
    COPIED=no
    if [[ -L $1 ]]; then
        if [[ -L $dst && $(readlink "$dst") == "$(readlink "$1")" ]]; then return 0; fi
    elif [[ -f $dst && ! -L $dst && ! $1 -nt $dst ]]; then
        return 0
    fi
    rm -f "$dst"
    cp -pP "$1" "$dst" || die "could not copy $1 to $2"
    COPIED=yes
}

build() {
    local target=$1 os want build_kind dir mdir bdir static_only ranlib=()
    local setup=() compile_targets=() env_args=() cross_text='' state f
    case $target in
        linux-debug) os=LINUX want=linux build_kind=DBG ;;
        linux-optimized) os=LINUX want=linux build_kind=OPT ;;
        darwin-debug) os=DARWIN want=darwin build_kind=DBG ;;
        darwin-optimized) os=DARWIN want=darwin build_kind=OPT ;;
        cygwin64-debug) os=CYGWIN64 want=cygwin build_kind=DBG ;;
        *) die "unknown target '$target' (targets: $TARGETS clean help)" ;;
    esac
    static_only=${STATIC_ONLY:-yes}
    case $static_only in
        yes | no) ;;
        *) die "STATIC_ONLY must be yes or no, not '$static_only'" ;;
    esac
    read -r -a ranlib <<<"${RANLIB:-${RANDLIB:-}}" || true

    detect_machine
    if [[ ${MACHINE%% *} != "$want" ]]; then
        die "$target builds for $(system_name "$want"), but ${CC:-cc} builds for $CC_TARGET ($(system_name "${MACHINE%% *}")); $(targets_for "${MACHINE%% *}")"
    fi

    # ST names the directory after the build machine's kernel release; on
    # Cygwin after uname -s, as uname -r has parentheses there.
    if [[ $os == CYGWIN64 ]]; then
        dir=${os}_$(uname -s)_$build_kind
    else
        dir=${os}_$(uname -r)_$build_kind
    fi
    mdir=$dir/.meson
    bdir=$mdir/build

    # ST's debug build is -g -O0 and has its DEBUG functions
    # (_st_iterate_threads...), its optimised one -O2.
    if [[ $build_kind == DBG ]]; then
        setup+=(--buildtype=debug -Ddebug_api=true)
    else
        setup+=(-Ddebug=false -Doptimization=2 -Db_ndebug=true)
    fi
    # Only the library: no test suites, and only its targets are compiled.
    setup+=(-Dtests=disabled)
    translate_flags
    if ((${#OPTIONS[@]} > 0)); then setup+=("${OPTIONS[@]}"); fi
    compile_targets=(st:static_library)
    if [[ $static_only == no ]]; then compile_targets+=(st:shared_library); fi
    if [[ $CROSS == yes ]]; then
        cross_text=$(cross_file)
        setup+=("--cross-file=$PWD/$mdir/cross.ini")
    else
        if [[ -n ${CC:-} ]]; then env_args+=("CC=$CC"); fi
        if [[ -n ${AR:-} ]]; then env_args+=("AR=$AR"); fi
    fi

    if [[ ${DRY_RUN:-no} == yes ]]; then
        echo "output: $dir"
        echo "machine: $CC_TARGET ($MACHINE), cross: $CROSS"
        echo "environment: ${env_args[*]:-}"
        echo "meson setup $bdir $ROOT"
        printf '  %s\n' "${setup[@]}"
        if [[ $CROSS == yes ]]; then
            echo "cross file $mdir/cross.ini:"
            printf '%s\n' "$cross_text" | sed 's/^/  /'
        fi
        echo "meson compile -C $bdir ${compile_targets[*]}"
        if ((${#ranlib[@]} > 0)); then echo "ranlib: ${ranlib[*]} $dir/libst.a"; fi
        echo "obj -> $dir"
        return 0
    fi

    command -v meson >/dev/null 2>&1 ||
        die "meson is not installed: st builds with Meson and Ninja (Debian: tools/ci/deps.sh build)"

    # A build directory set up with other arguments, another compiler or
    # another Meson is set up again from scratch.
    state=$(printf '%s\n' "meson $(meson --version)" "${env_args[@]:-}" "${setup[@]}" "$cross_text")
    mkdir -p "$mdir"
    if [[ ! -f $bdir/build.ninja || ! -f $mdir/setup.state || $(cat "$mdir/setup.state") != "$state" ]]; then
        say "$dir: meson setup for $target${CC:+ with CC=$CC}${EXTRA_CFLAGS:+, EXTRA_CFLAGS=$EXTRA_CFLAGS}"
        rm -rf "$bdir" "$mdir/setup.state" "$mdir/cross.ini"
        if [[ $CROSS == yes ]]; then printf '%s\n' "$cross_text" >"$mdir/cross.ini"; fi
        # Meson sees CC and AR only as given here (a cross build takes them
        # from the cross file), and none of the environment's flags.
        if ! env -u CC -u AR -u CFLAGS -u CPPFLAGS -u LDFLAGS ${env_args[@]+"${env_args[@]}"} \
            meson setup "$bdir" "$ROOT" "${setup[@]}" >"$mdir/setup.log" 2>&1; then
            grep -E '^(.*: )?ERROR' "$mdir/setup.log" >&2 || tail -n 20 "$mdir/setup.log" >&2
            if grep -qi ninja "$mdir/setup.log"; then
                echo "st: Meson needs Ninja (Debian: tools/ci/deps.sh build)" >&2
            fi
            die "meson setup failed (log: $mdir/setup.log)"
        fi
        printf '%s\n' "$state" >"$mdir/setup.state"
    fi

    # Ninja's progress lines are left out; compiler messages are shown.
    local progress='^(\[[0-9]+/[0-9]+\] |INFO: |ninja: (Entering|no work))'
    if ! meson compile -C "$bdir" "${compile_targets[@]}" >"$mdir/compile.log" 2>&1; then
        grep -Ev "$progress" "$mdir/compile.log" >&2 || true
        die "build failed (log: $mdir/compile.log)"
    fi
    grep -Ev "$progress" "$mdir/compile.log" || true

    # The output: st.h, libst.a and, unless STATIC_ONLY, the shared library.
    install_artifact "$ROOT/include/st.h" "$dir"
    install_artifact "$bdir/libst.a" "$dir"
    if [[ $COPIED == yes && ${#ranlib[@]} -gt 0 ]]; then
        "${ranlib[@]}" "$dir/libst.a" || die "${ranlib[*]} $dir/libst.a failed"
    fi
    for f in $(shared_artifacts "$dir"); do
        if [[ $static_only == yes || ! -e $bdir/$f ]]; then rm -f "${dir:?}/$f"; fi
    done
    if [[ $static_only == no ]]; then
        for f in $(shared_artifacts "$bdir"); do install_artifact "$bdir/$f" "$dir"; done
    fi

    # ST's obj link to the directory built last.
    if [[ -e obj && ! -L obj ]]; then
        say "obj exists and is not a symbolic link: left alone"
    else
        ln -sfn "$dir" obj
    fi
    say "$dir: $(cd "$dir" && echo *)"
}

# ST's clean: the output directories and the obj link, nothing else.
clean() {
    local d
    for d in *_DBG *_OPT; do
        if [[ -d $d && ! -L $d ]]; then
            rm -rf -- "$d"
            say "removed $d"
        fi
    done
    if [[ -L obj ]]; then rm -f obj; fi
}

case ${1:-help} in
    help) usage ;;
    clean) clean ;;
    *) build "$1" ;;
esac
