#!/usr/bin/env bash
# A peer of the echo benchmark echoes correctly: st_bench's client (which
# checks every byte) against it at 1 and 20 connections, next to the epoll
# loop, with tiny windows; no timing is checked. Exit 77 (skipped) when the
# peer cannot run here (its --probe fails, e.g. io_uring refused).
#
#   smoke.sh ST_BENCH PEER_PROGRAM
set -euo pipefail
st_bench=$1
peer=$2
name=$(basename "$peer")
if ! note=$("$peer" --probe); then
    echo "$name --probe failed: skipped"
    exit 77
fi
echo "$note"
"$st_bench" echo --server "epoll,$name" --peer "$name=$peer" --conns 1,20 \
    --warmup 0.05 --window 0.05 --windows 2 --repeat 1
