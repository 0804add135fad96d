# shellcheck shell=bash
# The peers of the echo benchmark (docs/performance.md, "Peers"): echo
# servers on other event loops, measured by st_bench next to st and the
# plain epoll loop, with the same client:
#
#   uv     libuv, one loop, uv_read_start/uv_write   (tools/bench/peers/uv_echo.c)
#   go     Go, a goroutine per connection, GOMAXPROCS 1 (tools/bench/peers/go_echo.go)
#   uring  a hand-written liburing loop                (tools/bench/peers/uring_echo.c)
#
# run.sh sources this file once its builds are done; it reads run.sh's
# BUILD, OUT, TMP and PEERS (0 after --no-peers) and its say(), installs the
# peers' packages (tools/ci/deps.sh bench: libuv1-dev golang-go; as root
# only, otherwise it prints the apt-get line), builds what it can (the C
# peers with Meson, which builds them only where their library is; the Go
# one with `go build`, never downloading anything) and sets
#
#   PEER_NAMES   the peers that run here, in order
#   PEER_LIST    the same as a list for st_bench --server: ",uv,go,uring" (or less)
#   PEER_ARGS    st_bench's options naming them (--peer NAME=PROGRAM ...)
#
# Each peer that cannot be had is skipped with the reason, on stderr and as
# a NOTE line in the results. Each that runs leaves the NOTE line its
# --probe prints (version, and for uring the io_uring features it uses).

PEER_NAMES=()
PEER_LIST=
PEER_ARGS=()

peer_skip() { # peer_skip NAME REASON
    say "peer $1 skipped: $2"
    echo "NOTE peer $1 skipped: $2" >>"$OUT"
}

# A peer whose program runs here: its --probe line goes to the results.
peer_add() { # peer_add NAME PROGRAM
    local note
    if note=$("$2" --probe 2>"$TMP/peer.err"); then
        PEER_NAMES+=("$1")
        PEER_LIST+=",$1"
        PEER_ARGS+=(--peer "$1=$2")
        echo "$note" | tee -a "$OUT" | sed 's/^/    /' >&2
    else
        peer_skip "$1" "$2 --probe failed: $(tr '\n' ' ' <"$TMP/peer.err" | cut -c 1-300)"
    fi
}

# A C peer that Meson builds when its library is found (tools/bench/peers/meson.build).
peer_meson() { # peer_meson NAME TARGET PKG-CONFIG-NAME DEBIAN-PACKAGE
    local target=tools/bench/peers/$2
    if ! pkg-config --exists "$3"; then
        peer_skip "$1" "no $3 (Debian package $4; tools/ci/deps.sh bench installs it)"
        return
    fi
    # Installed after the build was configured: let Meson look again.
    if ! ninja -C "$BUILD" -t query "$target" >/dev/null 2>&1 &&
        ! meson setup --reconfigure "$BUILD" >"$TMP/peer.err" 2>&1; then
        peer_skip "$1" "meson setup --reconfigure $BUILD failed: $(tail -n 3 "$TMP/peer.err" | tr '\n' ' ')"
        return
    fi
    if ninja -C "$BUILD" "$target" >"$TMP/peer.err" 2>&1; then
        peer_add "$1" "$BUILD/$target"
    else
        peer_skip "$1" "$target did not build: $(tail -n 3 "$TMP/peer.err" | tr '\n' ' ')"
    fi
}

# The Go peer, built from the standard library alone: no module mode, no
# proxy, the caches under the build directory.
peer_go() {
    local out=$BUILD/tools/bench/peers/go_echo gocache
    if ! command -v go >/dev/null; then
        peer_skip go "no Go toolchain (Debian package golang-go; tools/ci/deps.sh bench installs it)"
        return
    fi
    mkdir -p "$BUILD/go"
    gocache=$(cd "$BUILD/go" && pwd -P)
    if GOCACHE=$gocache/cache GOPATH=$gocache/path GO111MODULE=off GOPROXY=off GOFLAGS='' \
        CGO_ENABLED=0 go build -o "$out" tools/bench/peers/go_echo.go >"$TMP/peer.err" 2>&1; then
        peer_add go "$out"
    else
        peer_skip go "go build failed: $(tail -n 3 "$TMP/peer.err" | tr '\n' ' ')"
    fi
}

if ((PEERS)); then
    say "peers: libuv, Go and liburing echo servers (tools/bench/peers.sh)"
    if ! bash tools/ci/deps.sh bench >"$TMP/peer.deps" 2>&1; then
        sed 's/^/    /' "$TMP/peer.deps" >&2
        say "peers: packages are missing; the peers that need them are skipped"
    fi
    peer_meson uv uv_echo libuv libuv1-dev
    peer_go
    peer_meson uring uring_echo liburing liburing-dev
else
    echo "NOTE peers (libuv, Go, liburing) skipped: --no-peers" >>"$OUT"
fi
