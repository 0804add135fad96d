#!/usr/bin/env bash
# Cross-build st's conformance suite for every CPU st supports, run it under
# qemu-user, and print one line per CPU:
#
#   RESULT <cpu> PASS
#   RESULT <cpu> FAIL (<short reason>)
#
# usage: tools/cross/run.sh [-j N] [-t SECONDS] [-o DIR] [--fresh] [--list] [CPU...]
#
#   CPU...       some of the CPUs of --list (default: all of them, in that order)
#   -j N         CPUs handled at once (default 2); RESULT lines keep the order
#   -t SECONDS   time limit of each of the three test programs (default 300)
#   -o DIR       build root (default build-cross, or $ST_CROSS_BUILD_ROOT);
#                one build directory per CPU, logs in DIR/logs
#   --fresh      wipe each CPU's build directory first
#   --list       print the CPUs with their cross file and emulator, and exit
#
# For each CPU: configure DIR/<cpu> (x86_64 natively, the others with
# tools/cross/<file>.ini and no other option), build the suite's runner
# builds (tests/api/api_runner_plain, tests/api/api_runner_io and
# tests/arch/arch_regs, linked with -static in a cross build, so qemu needs
# no target libc) and run them under the cross file's exe_wrapper (x86_64:
# natively): the register check, the scheduler topics once, and the I/O
# topics once with ST_TEST_EVENTSYS=epoll. io_uring is not run: qemu-user
# does not emulate it (the log says so). Under an emulator the tests' time
# limits are tripled (ST_RUNNER_TIMEOUT_SCALE=3) and ST_TEST_EMULATOR names
# the emulator, so that a test qemu cannot run skips with its reason. The
# whole output goes to DIR/logs/<cpu>-tests.log. A CPU passes iff each of
# the three programs exited 0 and ended with `N passed, 0 failed`, N > 0. A
# missing cross file, compiler, C library, emulator, arch/ port or register
# check is a failure with its reason, never a skip. An existing build
# directory configured from the same cross file is reused (ninja rebuilds
# what changed). Exit status 0 iff every selected CPU passed.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
START=$SECONDS

# cpu : cross file : Meson cpu_family (arch/ directory) : emulator : libc dev package
TABLE=(
    "x86_64:::native:"
    "x86:i686.ini:x86:qemu-i386:libc6-dev-i386-cross"
    "aarch64:aarch64.ini:aarch64:qemu-aarch64:libc6-dev-arm64-cross"
    "arm:arm.ini:arm:qemu-arm:libc6-dev-armhf-cross"
    "riscv64:riscv64.ini:riscv64:qemu-riscv64:libc6-dev-riscv64-cross"
    "mips:mips.ini:mips:qemu-mips:libc6-dev-mips-cross"
    "mipsel:mipsel.ini:mips:qemu-mipsel:libc6-dev-mipsel-cross"
    "mips64:mips64.ini:mips64:qemu-mips64:libc6-dev-mips64-cross"
    "mips64el:mips64el.ini:mips64:qemu-mips64el:libc6-dev-mips64el-cross"
    "ppc64le:ppc64le.ini:ppc64:qemu-ppc64le:libc6-dev-ppc64el-cross"
    "s390x:s390x.ini:s390x:qemu-s390x:libc6-dev-s390x-cross"
)
declare -A INI FAMILY QEMU LIBC
ALL=()
for row in "${TABLE[@]}"; do
    IFS=: read -r cpu ini fam emu libc <<<"$row"
    ALL+=("$cpu")
    INI[$cpu]=$ini
    FAMILY[$cpu]=${fam:-$cpu}
    QEMU[$cpu]=$emu
    LIBC[$cpu]=$libc
done

usage() {
    sed -n '8,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

JOBS=2
TIMEOUT=${ST_CROSS_TIMEOUT:-300}
OUT=${ST_CROSS_BUILD_ROOT:-}
FRESH=0
LIST=0
SELECTED=()
while (($# > 0)); do
    case $1 in
        -j) JOBS=${2:-}; shift 2 || usage ;;
        -j*) JOBS=${1#-j}; shift ;;
        -t) TIMEOUT=${2:-}; shift 2 || usage ;;
        -o) OUT=${2:-}; shift 2 || usage ;;
        --fresh) FRESH=1; shift ;;
        --list) LIST=1; shift ;;
        -h | --help) usage ;;
        -*) echo "run.sh: unknown option $1" >&2; usage ;;
        *)
            if [[ -z ${INI[$1]+set} ]]; then
                echo "run.sh: unknown CPU '$1' (known: ${ALL[*]})" >&2
                exit 2
            fi
            SELECTED+=("$1")
            shift
            ;;
    esac
done
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: -j needs a positive number" >&2; exit 2; }
[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: -t needs a positive number" >&2; exit 2; }
if ((${#SELECTED[@]} == 0)); then
    SELECTED=("${ALL[@]}")
else # keep the fixed order, drop repetitions
    declare -A want=()
    for cpu in "${SELECTED[@]}"; do want[$cpu]=1; done
    SELECTED=()
    for cpu in "${ALL[@]}"; do [[ -n ${want[$cpu]:-} ]] && SELECTED+=("$cpu"); done
fi

if ((LIST)); then
    printf '%-9s %-25s %-8s %s\n' cpu "cross file" arch/ emulator
    for cpu in "${ALL[@]}"; do
        printf '%-9s %-25s %-8s %s\n' "$cpu" "${INI[$cpu]:+tools/cross/${INI[$cpu]}}" \
            "${FAMILY[$cpu]}" "${QEMU[$cpu]}"
    done
    exit 0
fi

# The build root: relative paths are taken from where the script was called.
OUT=$(realpath -m "${OUT:-$ROOT/build-cross}")
case $OUT in
    '' | "$ROOT" | "$ROOT"/src | "$ROOT"/include | "$ROOT"/tests | "$ROOT"/tools* | "$ROOT"/arch | "$ROOT"/docs)
        echo "run.sh: refusing to use '$OUT' as the build root" >&2
        exit 2
        ;;
esac
LOGS=$OUT/logs
STATE=$OUT/.state
mkdir -p "$LOGS" || exit 2
rm -rf "$STATE"
mkdir -p "$STATE"
cd "$ROOT" || exit 2

# Reads a Meson cross file: prints the C compiler, the host cpu_family and
# the exe_wrapper (shell-quoted), one per line; empty when absent or not a
# plain literal.
read_ini() {
    python3 - "$1" <<'PY'
import ast, configparser, shlex, sys

cp = configparser.ConfigParser(interpolation=None)
cp.read(sys.argv[1])

def get(section, key):
    try:
        value = ast.literal_eval(cp.get(section, key))
    except Exception:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, list) else []

c = get('binaries', 'c')
print(c[-1] if c else '')
print((get('host_machine', 'cpu_family') or [''])[0])
print(shlex.join(get('binaries', 'exe_wrapper')))
PY
}

# finish CPU VERDICT [DETAIL...]: the job's result, written atomically.
finish() {
    local cpu=$1 verdict=$2
    shift 2
    printf '%s\n' "$verdict" "$@" >"$STATE/$cpu.tmp"
    mv "$STATE/$cpu.tmp" "$STATE/$cpu.result"
}

# One CPU, start to end; runs in the background.
run_cpu() {
    local cpu=$1 ini=${INI[$1]} fam=${FAMILY[$1]} dir=$OUT/$1
    local blog=$LOGS/$cpu-build.log vlog=$LOGS/$cpu-tests.log
    local cc='' ini_fam='' wrapper='' stamp t0=$SECONDS t1 rc
    local -a runner=() setup=(meson setup "$dir")
    rm -f "$vlog"
    : >"$blog"

    # What the CPU needs, checked before anything is built.
    if [[ $cpu == x86_64 ]]; then
        if [[ $(uname -m) != x86_64 ]]; then
            finish "$cpu" "FAIL (the host is $(uname -m), not x86_64: no native build)"
            return
        fi
        stamp=native
    else
        if [[ ! -f tools/cross/$ini ]]; then
            finish "$cpu" "FAIL (no cross file tools/cross/$ini)"
            return
        fi
        {
            read -r cc
            read -r ini_fam
            read -r wrapper
        } < <(read_ini "tools/cross/$ini")
        if [[ -z $cc ]]; then
            finish "$cpu" "FAIL (tools/cross/$ini names no C compiler under [binaries])"
            return
        fi
        if [[ $ini_fam != "$fam" ]]; then
            finish "$cpu" "FAIL (tools/cross/$ini has cpu_family '$ini_fam', expected '$fam')"
            return
        fi
        if ! command -v "$cc" >/dev/null 2>&1; then
            finish "$cpu" "FAIL (no compiler $cc: install gcc-${cc%-gcc})"
            return
        fi
        if ! printf '#include <stdio.h>\n' | "$cc" -E -x c - >/dev/null 2>>"$blog"; then
            finish "$cpu" "FAIL (no C library headers for $cc: install ${LIBC[$cpu]})"
            return
        fi
        if [[ -n $wrapper ]]; then
            eval "runner=($wrapper)"
        else
            runner=("${QEMU[$cpu]}")
        fi
        if ! command -v "${runner[0]}" >/dev/null 2>&1; then
            finish "$cpu" "FAIL (no emulator ${runner[0]}: install qemu-user)"
            return
        fi
        setup+=(--cross-file "$ROOT/tools/cross/$ini")
        stamp=$(cat "tools/cross/$ini")
    fi
    if [[ ! -f arch/$fam/switch.S ]]; then
        finish "$cpu" "FAIL (no port: arch/$fam/switch.S is missing)"
        return
    fi
    if [[ ! -f tests/arch/regs/$fam.S ]]; then
        finish "$cpu" "FAIL (no register check: tests/arch/regs/$fam.S is missing)"
        return
    fi

    # Configure (unless the directory was configured from the same cross
    # file), then build the three test programs and what they link.
    if ((FRESH)) || [[ ! -f $dir/meson-private/coredata.dat ]] ||
        [[ "$(cat "$dir/.st-cross-file" 2>/dev/null)" != "$stamp" ]]; then
        rm -rf "$dir"
        if ! "${setup[@]}" >>"$blog" 2>&1; then
            finish "$cpu" "FAIL (meson setup failed)" "$(grep -E 'ERROR' "$blog" | tail -n 3)"
            return
        fi
        printf '%s' "$stamp" >"$dir/.st-cross-file"
    fi
    local -a progs=(tests/arch/arch_regs tests/api/api_runner_plain tests/api/api_runner_io)
    if ! ninja -C "$dir" "${progs[@]}" >>"$blog" 2>&1; then
        finish "$cpu" "FAIL (build failed)" "$(grep -E 'error|Error|FAILED' "$blog" | head -n 8)"
        return
    fi
    if [[ $cpu != x86_64 ]] && file -L "$dir/${progs[0]}" 2>/dev/null | grep -q 'dynamically linked'; then
        finish "$cpu" "FAIL (the test programs are not linked statically: static linking does not work)"
        return
    fi
    t1=$SECONDS

    # Run them. timeout(1) runs in its own process group; its pid is kept so
    # that an interrupted run.sh can stop it and everything under it.
    local -a env_args=()
    if [[ $cpu != x86_64 ]]; then
        env_args=(ST_RUNNER_TIMEOUT_SCALE=3 "ST_TEST_EMULATOR=${runner[0]}")
    fi
    local prog rc last p f npass=0 nfail=0 nskip=0 bad=''
    : >"$vlog"
    for prog in "${progs[@]}"; do
        local -a penv=("${env_args[@]}")
        if [[ $prog == */api_runner_io ]]; then
            penv+=(ST_TEST_EVENTSYS=epoll)
            if [[ $cpu != x86_64 ]]; then
                echo "== io_uring: not run, qemu-user does not emulate io_uring" >>"$vlog"
            fi
        fi
        echo "== ${penv[*]} ${prog##*/}" >>"$vlog"
        env "${penv[@]}" timeout -k 10 "$TIMEOUT" "${runner[@]}" "$dir/$prog" >"$vlog.part" 2>&1 &
        echo $! >"$STATE/$cpu.pid"
        wait $!
        rc=$?
        rm -f "$STATE/$cpu.pid"
        cat "$vlog.part" >>"$vlog"
        last=$(tail -n 1 "$vlog.part")
        npass=$((npass + $(grep -c '^PASS ' "$vlog.part")))
        nfail=$((nfail + $(grep -c '^FAIL ' "$vlog.part")))
        nskip=$((nskip + $(grep -c '^SKIP ' "$vlog.part")))
        if ((rc == 124 || rc == 137)); then
            bad+="${bad:+; }${prog##*/} timed out after ${TIMEOUT}s"
        elif ((rc > 128)); then
            bad+="${bad:+; }${prog##*/} killed by signal $((rc - 128))"
        elif [[ $last =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed$ ]]; then
            p=${BASH_REMATCH[1]} f=${BASH_REMATCH[2]}
            if ((rc != 0 || f != 0 || p == 0)); then
                bad+="${bad:+; }${prog##*/}: $f of $((p + f)) failed"
            fi
        else
            bad+="${bad:+; }${prog##*/} exited $rc without its summary line"
        fi
    done
    rm -f "$vlog.part"

    local fails times
    fails=$(grep '^FAIL ' "$vlog" | head -n 10 | cut -c1-200)
    times="build $((t1 - t0))s, tests $((SECONDS - t1))s"
    if [[ -z $bad ]]; then
        finish "$cpu" PASS "$npass passed, $nskip skipped ($times)"
    else
        finish "$cpu" "FAIL ($bad)" "$fails"
    fi
}

stop_all() {
    local f
    for f in "$STATE"/*.pid; do
        [[ -f $f ]] && kill -TERM "$(cat "$f")" 2>/dev/null
    done
    for f in $(jobs -p); do kill -TERM "$f" 2>/dev/null; done
    echo "run.sh: interrupted" >&2
    exit 130
}
trap stop_all INT TERM

echo "cross: ${SELECTED[*]} (${JOBS} at a time, build root $OUT)"
n=${#SELECTED[@]}
next=0
shown=0
npassed=0
failed=()
while ((shown < n)); do
    while ((next < n)) && (($(jobs -rp | wc -l) < JOBS)); do
        run_cpu "${SELECTED[next]}" </dev/null &
        next=$((next + 1))
    done
    # Results in the fixed order, as soon as each one and all before it are in.
    while ((shown < n)) && [[ -f $STATE/${SELECTED[shown]}.result ]]; do
        cpu=${SELECTED[shown]}
        {
            read -r verdict
            echo "RESULT $cpu $verdict"
            while IFS= read -r line; do
                [[ -n $line ]] && echo "    $line"
            done
        } <"$STATE/$cpu.result"
        if [[ $verdict == PASS ]]; then
            npassed=$((npassed + 1))
        else
            failed+=("$cpu")
            logs=()
            for f in "$LOGS/$cpu-build.log" "$LOGS/$cpu-tests.log"; do
                [[ -s $f ]] && logs+=("$f")
            done
            ((${#logs[@]} == 0)) || echo "    log: ${logs[*]}"
        fi
        shown=$((shown + 1))
    done
    if ((shown < n)); then
        sleep 0.5
    fi
done
wait
rm -rf "$STATE"

echo "cross: $npassed of $n CPUs passed${failed[*]:+ (failed: ${failed[*]})}, total time $((SECONDS - START))s"
((${#failed[@]} == 0))
