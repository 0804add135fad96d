#!/usr/bin/env python3
"""Count the results of a `meson test` run from its testlog.json.

Every Criterion test counts as one check, from the "Synthesis: Tested: X |
Passing: Y | Failing: Z | Crashing: W" line Criterion prints (crashes are
included in Failing; tested - passing is used so nothing is counted twice).
A Criterion executable that exits badly although all its tests passed, or
that dies before printing its synthesis, adds one failure. Any other Meson
test counts as one check. Prints one line:
    criterion_passed criterion_failed criterion_executables other_passed other_failed skipped
and, on stderr, what failed.
"""
import json, re, sys

path = sys.argv[1]
ansi = re.compile(r'\x1b\[[0-9;]*[A-Za-z]')
synth = re.compile(r'Synthesis: Tested: (\d+) \| Passing: (\d+) \| Failing: (\d+) \| Crashing: (\d+)')
good = {'OK', 'EXPECTEDFAIL'}
c_pass = c_fail = c_exes = o_pass = o_fail = skipped = 0
notes = []
try:
    with open(path, encoding='utf-8', errors='replace') as f:
        entries = [json.loads(line) for line in f if line.strip()]
except OSError as e:
    print(f'note: cannot read {path}: {e}', file=sys.stderr)
    entries = []
for e in entries:
    name = e.get('name', '?')
    result = e.get('result', '?')
    text = ansi.sub('', (e.get('stdout') or '') + '\n' + (e.get('stderr') or ''))
    m = None
    for m in synth.finditer(text):
        pass
    if m:
        c_exes += 1
        tested, passing = int(m.group(1)), int(m.group(2))
        c_pass += passing
        c_fail += tested - passing
        for fl in re.findall(r'^\[FAIL\] (.*)$', text, re.M):
            notes.append(f'{name}: {fl.strip()}')
        if result not in good and tested == passing:
            c_fail += 1
            notes.append(f'{name}: all tests passed but the executable ended with {result}')
    elif result == 'SKIP':
        skipped += 1
    elif re.search(r'^\[(RUN |----|FAIL|SKIP|PASS)\]', text, re.M):
        c_exes += 1
        c_fail += 1
        notes.append(f'{name}: Criterion executable ended with {result} before its synthesis')
    elif result in good:
        o_pass += 1
    else:
        o_fail += 1
        notes.append(f'{name}: {result}')
for n in notes:
    print('  ' + n, file=sys.stderr)
print(c_pass, c_fail, c_exes, o_pass, o_fail, skipped)
