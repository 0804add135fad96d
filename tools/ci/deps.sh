#!/usr/bin/env bash
# Install the Debian 12 packages st needs, when some are missing.
#
#   tools/ci/deps.sh          everything: build, tests, coverage, clang-tidy and
#                          the cross toolchains with qemu-user (tools/cross/run.sh)
#   tools/ci/deps.sh build    only what building the library and tools needs
#                          (make: for the Makefile, ST's make interface)
#   tools/ci/deps.sh bench    build, plus the benchmark's peers (tools/bench/peers.sh):
#                          libuv and Go; tools/test.sh never needs them
#
# Run as root it installs what is missing (apt-get update first, only then);
# run as another user it prints the apt-get line to run and exits 1.
# With everything present it only asks dpkg, and takes well under a second.
set -euo pipefail

build_pkgs=(gcc make meson ninja-build pkg-config python3 liburing-dev)
bench_pkgs=(libuv1-dev golang-go)
test_pkgs=(g++ libcriterion-dev lcov gcovr clang libclang-rt-14-dev clang-tidy binutils valgrind gdb curl wrk)
# tools/cross/run.sh: one gcc per foreign CPU, its C library (only a
# Recommends of the compiler, so never installed by --no-install-recommends
# alone), and qemu-user to run the results.
cross_pkgs=(
    gcc-i686-linux-gnu libc6-dev-i386-cross
    gcc-aarch64-linux-gnu libc6-dev-arm64-cross
    gcc-arm-linux-gnueabihf libc6-dev-armhf-cross
    gcc-riscv64-linux-gnu libc6-dev-riscv64-cross
    gcc-mips-linux-gnu libc6-dev-mips-cross
    gcc-mipsel-linux-gnu libc6-dev-mipsel-cross
    gcc-mips64-linux-gnuabi64 libc6-dev-mips64-cross
    gcc-mips64el-linux-gnuabi64 libc6-dev-mips64el-cross
    gcc-powerpc64le-linux-gnu libc6-dev-ppc64el-cross
    gcc-s390x-linux-gnu libc6-dev-s390x-cross
    qemu-user
)

case "${1:-all}" in
    build) wanted=("${build_pkgs[@]}") ;;
    bench) wanted=("${build_pkgs[@]}" "${bench_pkgs[@]}") ;;
    all | test) wanted=("${build_pkgs[@]}" "${test_pkgs[@]}" "${cross_pkgs[@]}") ;;
    *)
        echo "usage: $0 [build|bench|all]" >&2
        exit 2
        ;;
esac

is_installed() {
    local status
    status=$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) || return 1
    [[ $status == installed ]]
}

if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "deps: this is not a Debian-based system; install by hand: ${wanted[*]}" >&2
    exit 1
fi

missing=()
for pkg in "${wanted[@]}"; do
    is_installed "$pkg" || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

if [[ $(id -u) -ne 0 ]]; then
    echo "deps: missing Debian packages: ${missing[*]}" >&2
    echo "deps: install them with:" >&2
    echo "    sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
    echo "deps: (on a machine whose package lists are empty, run 'sudo apt-get update' first)" >&2
    exit 1
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
