#!/bin/sh
# expect_diagnostic.sh PATTERN COMMAND...
# Passes when COMMAND fails (non-zero exit or death by a signal) AND its
# output contains PATTERN (an extended regular expression): a debugging tool
# that stops catching the mistake makes this test fail.
set -u
pattern=$1
shift
out=$("$@" 2>&1)
status=$?
printf '%s\n' "$out" | tail -n 40
if [ "$status" -eq 0 ]; then
    echo "FAIL: '$*' exited 0; the tool did not catch the mistake"
    exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq -- "$pattern"; then
    echo "FAIL: no /$pattern/ in the output of '$*' (exit status $status)"
    exit 1
fi
echo "ok: '$*' failed with status $status and reported /$pattern/"
