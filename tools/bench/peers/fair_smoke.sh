#!/usr/bin/env bash
# A player server of the fairness benchmark serves: one burst of 20 players
# against it, unstarved, beside the epoll loop, and every player must have
# had its first byte (st_bench itself only reports how many did); no timing
# is checked.
#
#   fair_smoke.sh ST_BENCH PEER_PROGRAM
set -euo pipefail
st_bench=$1
peer=$2
name=$(basename "$peer")
conns=20
"$peer" --probe
out=$("$st_bench" fairness --server "epoll,$name" --peer "$name=$peer" --conns "$conns" \
    --repeat 1 --method none --pause 0 --limit 5)
echo "$out"
served=$(awk -v key="fair_${name}_${conns}n_served" '$1 == "RESULT" && $2 == key { print $3 }' <<<"$out")
if [[ $served != "$conns" ]]; then
    echo "FAIL: $name served ${served:-no} players of $conns"
    exit 1
fi
echo "ok: $name served all $conns players"
