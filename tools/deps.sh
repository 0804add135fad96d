#!/usr/bin/env bash
# Install the Debian 12 packages st needs, when some are missing.
#
#   tools/deps.sh          everything: build, tests, coverage and clang-tidy
#   tools/deps.sh build    only what building the library and tools needs
#
# Run as root it installs what is missing (apt-get update first, only then);
# run as another user it prints the apt-get line to run and exits 1.
# With everything present it only asks dpkg, and takes well under a second.
set -euo pipefail

build_pkgs=(gcc meson ninja-build pkg-config python3)
test_pkgs=(g++ libcriterion-dev lcov gcovr clang clang-tidy binutils valgrind)

case "${1:-all}" in
    build) wanted=("${build_pkgs[@]}") ;;
    all | test) wanted=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
    *)
        echo "usage: $0 [build|all]" >&2
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
