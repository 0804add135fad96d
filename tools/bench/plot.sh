#!/usr/bin/env bash
# Echo throughput versus connections, st and plain epoll, as a PNG:
#
#   tools/bench/plot.sh ECHO_DAT OUT_PNG
#
# ECHO_DAT is the echo.dat that tools/bench/run.sh writes (columns:
# connections, epoll requests/s, st requests/s). Needs gnuplot (Debian
# package gnuplot-nox). Each st point is labelled with its ratio to epoll.
set -euo pipefail

if [[ $# -ne 2 ]]; then
    echo "usage: $0 ECHO_DAT OUT_PNG" >&2
    exit 2
fi
dat=$1
out=$2
if ! command -v gnuplot >/dev/null; then
    echo "plot.sh: gnuplot is not installed (Debian: apt-get install gnuplot-nox)" >&2
    exit 1
fi
if [[ ! -s $dat ]]; then
    echo "plot.sh: $dat is missing or empty: run tools/bench/run.sh first" >&2
    exit 1
fi

# pngcairo draws antialiased text; plain png is the fallback.
terminal="png size 900,560"
if gnuplot -e 'set terminal pngcairo' >/dev/null 2>&1; then
    terminal="pngcairo size 900,560 font 'Sans,11'"
fi

gnuplot <<GNUPLOT
set terminal $terminal
set output '$out'
set title 'Loopback TCP echo, 64-byte messages, one request in flight per connection'
set xlabel 'connections'
set ylabel 'requests per second'
set logscale x
set xrange [0.5:20000]
set yrange [0:*]
set format y '%.0f'
set xtics ('1' 1, '10' 10, '100' 100, '1000' 1000, '10 000' 10000)
set grid
set key top right
plot '$dat' using 1:2 with linespoints linewidth 2 pointtype 7 title 'plain epoll loop', \
     '' using 1:3 with linespoints linewidth 2 pointtype 5 title 'st (epoll backend)', \
     '' using 1:3:(sprintf('%.2fx', \$3 / \$2)) with labels offset 0,-1.2 notitle
GNUPLOT
echo "$out"
