#!/usr/bin/env python3
"""Test of tools/gdb/st.py: gdb in batch mode on gdb_target.

usage: test_gdb.py GDB GDB_TARGET ST_PY WORKDIR [--fp-strict]

1. live: stopped in all_parked(), st-info / st-list / st-bt all / st-bt -fp all
   must show every coroutine in its known state, start function, wait object
   and call chain, ending at the entry trampoline; gcore writes a core file;
   plain `bt` is the same before and after st-bt; the program then runs to
   a clean exit.
2. core: the same checks on the core file (no process, no register writes).
3. live, stopped inside a coroutine (sleeper_level2): the primordial
   coroutine is the suspended one; coroutines not started yet say so.
4. ground truth: a breakpoint on st__ctx_switch records, for every switch,
   the registers and gdb's own backtrace of the coroutine that leaves; at
   all_parked, st-regs must show exactly the registers each parked coroutine
   had when it switched away, and st-bt the same frames (same pcs; at -O0
   the same text, arguments included).

--fp-strict (an -O0 build, frame pointers everywhere): the frame-pointer walk
must find exactly the frames gdb's unwinder finds.

Exit 0 on success, 1 on a failed check, 77 (skip) when gdb has no Python or
may not trace processes here.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

if len(sys.argv) < 5:
    print(__doc__)
    sys.exit(2)
GDB, TARGET, ST_PY, WORKDIR = sys.argv[1:5]
FP_STRICT = "--fp-strict" in sys.argv[5:]
# One directory per run, so that runs in parallel (meson test --repeat) do
# not share the core file; kept when a check fails.
RUNDIR = tempfile.mkdtemp(prefix="gdb-test-", dir=WORKDIR)
CORE = os.path.join(RUNDIR, "gdb_target.core")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)
    return cond


def gdb(args, commands, timeout=90, extra_env=None):
    """Run gdb in batch mode; returns its stdout+stderr."""
    argv = [GDB, "-batch", "-nx", "-iex", "set debuginfod enabled off",
            "-iex", "set disable-randomization off", "-iex", "set style enabled off",
            "-iex", "set width 0", "-iex", "set height 0"]
    for cmd in commands:
        argv += ["-ex", cmd]
    argv += args
    env = dict(os.environ, TERM="dumb", **(extra_env or {}))
    env.pop("DEBUGINFOD_URLS", None)
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout, env=env, universal_newlines=True)
    return proc.stdout


def sections(text):
    """Split output at `echo @@NAME` markers."""
    out = {}
    name = "_pre"
    for line in text.splitlines():
        m = re.match(r"^@@(\S+)$", line)
        if m:
            name = m.group(1)
            out[name] = []
        else:
            out.setdefault(name, []).append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def marker(name):
    return "echo @@%s\\n" % name


# ---------------------------------------------------------------------------
# Parsing st.py's output


def parse_list(text):
    """st-list rows keyed by start function name."""
    rows = {}
    for line in text.splitlines():
        if not re.match(r"^[ *]\d+\s+0x", line):
            continue
        cols = re.split(r"\s{2,}", line.strip())
        if len(cols) != 6:
            check(False, "st-list row does not have 6 columns: %r" % line)
            continue
        ident, addr, state, start, stack, wait = cols
        row = {
            "current": ident.startswith("*"),
            "id": int(ident.lstrip("*")),
            "addr": addr,
            "state": state.split(" ")[0],
            "marks": re.findall(r"\[([^\]]*)\]", state)[0].split(",") if "[" in state else [],
            "start": start,
            "stack": stack,
            "wait": wait,
        }
        check(start not in rows, "st-list: start function %s listed twice" % start)
        rows[start] = row
    return rows


FRAME = re.compile(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+) \(")


def parse_bt(text):
    """st-bt output: {start function: (state, [frame function names], raw text)}."""
    out = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^Coroutine #(\d+) (0x[0-9a-f]+) (\S+)(?: \[[^\]]*\])?, start (.*):$", line)
        if m:
            current = m.group(4)
            out[current] = {"state": m.group(3), "frames": [], "levels": [], "text": []}
            continue
        if current is None:
            continue
        out[current]["text"].append(line)
        f = FRAME.match(line)
        if f:
            out[current]["levels"].append(int(f.group(1)))
            # gdb shows st__name as st.name where it lacks debug info (clang's
            # assembler output): the same symbol.
            out[current]["frames"].append(re.sub(r"^st\.", "st__", f.group(2)))
    for entry in out.values():
        entry["text"] = "\n".join(entry["text"])
    return out


# ---------------------------------------------------------------------------
# Expectations for the program stopped in all_parked()

PRIMORDIAL = "(primordial: main)"
# start function -> (state, markers, call chain that must end the backtrace,
#                    one of these must appear above it)
PARKED = {
    PRIMORDIAL: ("RUNNING", {"current", "primordial"}, ["all_parked", "main"], None),
    "idle_main": ("RUNNABLE", {"idle"}, ["idle_main", "thread_main", "st__ctx_entry"], None),
    "sleeper_main": ("SLEEPING", set(),
                     ["sleeper_level2", "sleeper_level1", "sleeper_main", "thread_main",
                      "st__ctx_entry"], {"st_usleep"}),
    "cond_waiter": ("COND_WAIT", set(), ["cond_waiter", "thread_main", "st__ctx_entry"],
                    {"st_cond_wait", "st_cond_timedwait"}),
    "reader": ("IO_WAIT", set(), ["reader", "thread_main", "st__ctx_entry"],
               {"st_read", "io_retry", "st_netfd_poll", "st_poll"}),
    "lock_waiter": ("LOCK_WAIT", set(), ["lock_waiter", "thread_main", "st__ctx_entry"],
                    {"st_mutex_lock"}),
    # thread_main calls st_thread_exit (noreturn) last: optimised, its frame is gone.
    "zombie": ("ZOMBIE", set(), ["st__ctx_entry"], {"st_thread_exit"}),
}


def check_frames(where, name, entry, chain, api, suspended=True):
    frames = entry["frames"]
    text = entry["text"]
    check(frames, "%s: %s: no frames:\n%s" % (where, name, text))
    if not frames:
        return
    check(entry["levels"] == list(range(len(frames))),
          "%s: %s: frames not numbered 0..n: %s" % (where, name, entry["levels"]))
    check(frames[-len(chain):] == chain,
          "%s: %s: backtrace should end with %s, got %s" % (where, name, chain, frames))
    if api:
        check(api & set(frames), "%s: %s: none of %s in %s" % (where, name, sorted(api), frames))
    if suspended:
        check(frames[0] == "st__sched_switch",
              "%s: %s: a suspended coroutine's frame #0 should be st__sched_switch, got %s"
              % (where, name, frames))
    for bad in ("??", "Backtrace stopped", "corrupt stack", "Python Exception", "failed"):
        check(bad not in text, "%s: %s: %r in backtrace:\n%s" % (where, name, bad, text))
    for line in text.splitlines():
        if line.startswith("#"):
            check(FRAME.match(line), "%s: %s: malformed frame line %r" % (where, name, line))
    if suspended:
        # Nothing of the stopped pthread's own stack may leak in.
        for own in ("all_parked", "main"):
            check(own not in frames or (name == PRIMORDIAL and own == "main"),
                  "%s: %s: frame %s of the stopped pthread in its backtrace: %s"
                  % (where, name, own, frames))


def check_parked(where, out, globals_, expect_addrs=None):
    sec = sections(out)
    for name in ("ST-INFO", "ST-LIST", "ST-BT"):
        if not check(name in sec, "%s: section %s missing; gdb output:\n%s" % (where, name, out)):
            return None
    for bad in ("Python Exception", "Traceback", "Error occurred"):
        check(bad not in out, "%s: %r in gdb output:\n%s" % (where, bad, out))

    info = sec["ST-INFO"]
    check(re.search(r"backend:\s+(epoll|poll|select)\b", info), "%s: st-info backend:\n%s" % (where, info))
    for field, value in (("run queue", 0), ("io_q", 1), ("sleepers", 1), ("zombies", 1)):
        check(re.search(r"%s:\s+%d\b" % (field, value), info),
              "%s: st-info should say %s: %d:\n%s" % (where, field, value, info))
    check(re.search(r"coroutines:\s+7 listed", info), "%s: st-info count:\n%s" % (where, info))

    rows = parse_list(sec["ST-LIST"])
    check(set(rows) == set(PARKED),
          "%s: st-list start functions %s, expected %s" % (where, sorted(rows), sorted(PARKED)))
    check(sorted(r["id"] for r in rows.values()) == list(range(len(rows))),
          "%s: st-list ids not 0..n-1" % where)
    for name, (state, marks, _, _) in PARKED.items():
        row = rows.get(name)
        if row is None:
            continue
        check(row["state"] == state, "%s: %s state %s, expected %s" % (where, name, row["state"], state))
        check(marks <= set(row["marks"]) and "not-started" not in row["marks"],
              "%s: %s markers %s, expected %s" % (where, name, row["marks"], marks))
        check(row["current"] == (name == PRIMORDIAL), "%s: %s current marker wrong" % (where, name))
        if name == PRIMORDIAL:
            check(row["stack"] == "pthread stack", "%s: primordial stack %r" % (where, row["stack"]))
        else:
            m = re.match(r"0x([0-9a-f]+)-0x([0-9a-f]+) \(\d+ KiB\)$", row["stack"])
            check(m and int(m.group(1), 16) < int(row["addr"], 16) < int(m.group(2), 16),
                  "%s: %s stack %r should contain its object %s" % (where, name, row["stack"], row["addr"]))
    prim = rows.get(PRIMORDIAL, {}).get("id")
    expect_wait = {
        "sleeper_main": r"^sleep, deadline in (\d+\.\d+) s \(due \d+ us\)$",
        "cond_waiter": r"^cond %s$" % globals_["cond"],
        "reader": r"^poll fd %s POLLIN$" % globals_["reader_fd"],
        "lock_waiter": r"^mutex %s, owned by #%s \(0x[0-9a-f]+\)$" % (globals_["lock"], prim),
        "zombie": r"^exited, awaiting join \(retval 0x[0-9a-f]+\)$",
        "idle_main": r"^-$",
        PRIMORDIAL: r"^-$",
    }
    for name, pattern in expect_wait.items():
        row = rows.get(name)
        if row is None:
            continue
        m = re.match(pattern, row["wait"])
        check(m, "%s: %s waits on %r, expected /%s/" % (where, name, row["wait"], pattern))
        if m and name == "sleeper_main":
            check(0 < float(m.group(1)) <= 60, "%s: sleeper deadline %s s" % (where, m.group(1)))
    if expect_addrs is not None:
        got = {k: v["addr"] for k, v in rows.items()}
        check(got == expect_addrs, "%s: addresses differ from the live process: %s vs %s" % (where, got, expect_addrs))

    bts = parse_bt(sec["ST-BT"])
    check(set(bts) == set(PARKED), "%s: st-bt all covered %s" % (where, sorted(bts)))
    for name, (state, _, chain, api) in PARKED.items():
        if name in bts:
            check(bts[name]["state"] == state, "%s: st-bt header state of %s" % (where, name))
            check_frames(where + " st-bt", name, bts[name], chain, api, name != PRIMORDIAL)

    if "ST-BT-FP" in sec:
        fps = parse_bt(sec["ST-BT-FP"])
        check(set(fps) == set(PARKED), "%s: st-bt -fp all covered %s" % (where, sorted(fps)))
        for name, entry in fps.items():
            if name == PRIMORDIAL or name not in bts:
                continue  # the current coroutine gets gdb's bt either way
            check("frame-pointer walk" in entry["text"], "%s: -fp output of %s lacks its note" % (where, name))
            if FP_STRICT:
                check(entry["frames"] == bts[name]["frames"],
                      "%s: frame-pointer walk of %s found %s, the unwinder %s"
                      % (where, name, entry["frames"], bts[name]["frames"]))
            else:
                check(entry["frames"] and entry["frames"][0] == "st__sched_switch",
                      "%s: frame-pointer walk of %s: %s" % (where, name, entry["frames"]))
    return {k: v["addr"] for k, v in rows.items()}


def read_globals(text):
    out = {}
    for name in ("cond", "lock", "reader_fd"):
        m = re.search(r"^@@G-%s\n\$\d+ = (\S+)$" % name, text, re.M)
        out[name] = m.group(1) if m else "<missing>"
        check(m, "could not read global %s" % name)
    return out


GLOBALS = []
for g, expr in (("cond", "p/x (unsigned long)cond"), ("lock", "p/x (unsigned long)lock"),
                ("reader_fd", "p reader_fd")):
    GLOBALS += [marker("G-" + g), expr]

PARKED_CMDS = [
    marker("ST-INFO"), "st-info",
    marker("ST-LIST"), "st-list",
    marker("ST-BT"), "st-bt all",
    marker("ST-BT-FP"), "st-bt -fp all",
    marker("ST-ERRORS"), "st-bt 99", "st-bt nonsense",
] + GLOBALS


TRUTH_HELPER = r"""
import gdb

_truth = {}
_ctx_off = [f.bitpos // 8 for f in gdb.lookup_type("struct _st_thread").fields() if f.name == "ctx"][0]


class _SwitchBreakpoint(gdb.Breakpoint):
    def stop(self):
        frame = gdb.newest_frame()
        me = (int(frame.read_register("rdi")) & (2**64 - 1)) - _ctx_off
        rsp = int(frame.read_register("rsp")) & (2**64 - 1)
        regs = {n: int(frame.read_register(n)) & (2**64 - 1)
                for n in ("rbp", "rbx", "r12", "r13", "r14", "r15")}
        regs["rip"] = int(gdb.parse_and_eval("*(unsigned long *)$rsp")) & (2**64 - 1)
        regs["rsp"] = rsp + 8
        _truth[me] = (regs, gdb.execute("bt", to_string=True))
        return False


_SwitchBreakpoint("*st__ctx_switch", internal=True)


def st_test_dump_truth():
    for addr, (regs, bt) in sorted(_truth.items()):
        gdb.write("@@TRUTH-0x%x\n" % addr)
        for name, value in sorted(regs.items()):
            gdb.write("%s 0x%x\n" % (name, value))
        gdb.write(bt)
"""


def parse_regs(text):
    """st-regs output: {coroutine address: {register: value}}."""
    out = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^Coroutine #\d+ (0x[0-9a-f]+) ", line)
        if m:
            current = out.setdefault(m.group(1), {})
            continue
        m = re.match(r"^  (\w+)\s+(0x[0-9a-f]+)", line)
        if m and current is not None:
            current[m.group(1)] = int(m.group(2), 16)
    return out


def frame_lines(text, drop_first):
    """Frame lines of a bt, without their numbers (and without frame #0)."""
    out = []
    for line in text.splitlines():
        m = re.match(r"^#(\d+)\s+(.*)$", line)
        if m and not (drop_first and m.group(1) == "0"):
            out.append(m.group(2))
    return out


def frame_pcs(lines):
    return [(re.match(r"(0x[0-9a-f]+) in ", l) or re.match(r"()", l)).group(1) + " " +
            re.sub(r"^(?:0x[0-9a-f]+ in )?(\S+) \(.*$", r"\1", l) for l in lines]


def check_truth(out):
    sec = sections(out)
    truth = {}
    for name, text in sec.items():
        if name.startswith("TRUTH-"):
            lines = text.splitlines()
            regs = {}
            for line in lines:
                m = re.match(r"^(\w+) (0x[0-9a-f]+)$", line)
                if m:
                    regs[m.group(1)] = int(m.group(2), 16)
            truth[name[len("TRUTH-"):]] = (regs, frame_lines(text, True))
    rows = parse_list(sec.get("ST-LIST", ""))
    regs = parse_regs(sec.get("ST-REGS", ""))
    bts = parse_bt(sec.get("ST-BT", ""))
    compared = 0
    for name, row in rows.items():
        if row["current"]:
            continue
        addr = row["addr"]
        if not check(addr in truth, "truth: no recorded switch of %s (%s)" % (name, addr)):
            continue
        want_regs, want_frames = truth[addr]
        got_regs = regs.get(addr, {})
        for reg, value in want_regs.items():
            check(got_regs.get(reg) == value,
                  "truth: %s: st-regs %s = %s, it was 0x%x at the switch"
                  % (name, reg, hex(got_regs[reg]) if reg in got_regs else None, value))
        got_frames = frame_lines(bts.get(name, {}).get("text", ""), False)
        check(frame_pcs(got_frames) == frame_pcs(want_frames),
              "truth: %s: st-bt frames\n  %s\nbut at the switch gdb's bt had\n  %s"
              % (name, "\n  ".join(got_frames), "\n  ".join(want_frames)))
        if FP_STRICT:
            check(got_frames == want_frames,
                  "truth: %s: st-bt text differs from gdb's bt at the switch:\n  %s\nvs\n  %s"
                  % (name, "\n  ".join(got_frames), "\n  ".join(want_frames)))
        compared += 1
    sleeper = rows.get("sleeper_main")
    if FP_STRICT and sleeper is not None:
        # gdb_target loads these just before st_usleep; an -O0 library keeps them.
        magic = {"rbx": 0x0B0B0B0B0B0B0B0B, "r12": 0x1212121212121212, "r13": 0x1313131313131313,
                 "r14": 0x1414141414141414, "r15": 0x1515151515151515}
        got = regs.get(sleeper["addr"], {})
        check(all(got.get(k) == v for k, v in magic.items()),
              "truth: sleeper_main st-regs %s, expected %s"
              % ({k: hex(got.get(k, 0)) for k in magic}, {k: hex(v) for k, v in magic.items()}))
    check(compared == len(PARKED) - 1, "truth: compared %d coroutines, expected %d" % (compared, len(PARKED) - 1))


def main():
    probe = gdb([], ["python print('st-python-ok')"])
    if "st-python-ok" not in probe:
        print("SKIP: this gdb has no Python support:\n" + probe)
        shutil.rmtree(RUNDIR)
        return SKIP

    # 1. Live process stopped in all_parked().
    live = gdb([TARGET], ["source " + ST_PY, "break all_parked", "run",
                          marker("BT-BEFORE"), "bt", marker("UP"), "up"] + PARKED_CMDS
               + [marker("BT-AFTER"), "bt", marker("FRAME-AFTER"), "frame",
                  "gcore " + CORE, marker("CONTINUE"), "continue"])
    print("===== live session =====\n" + live)
    if re.search(r"ptrace: Operation not permitted|Could not trace the inferior|"
                 r"Couldn't get registers: Operation not permitted", live):
        print("SKIP: gdb may not trace processes here")
        shutil.rmtree(RUNDIR)
        return SKIP
    check("Breakpoint 1, all_parked ()" in live, "live: the breakpoint in all_parked was not hit")
    sec = sections(live)
    check(sec.get("BT-BEFORE") and sec.get("BT-BEFORE") == sec.get("BT-AFTER"),
          "live: plain bt changed after st-bt:\n%s\n---\n%s" % (sec.get("BT-BEFORE"), sec.get("BT-AFTER")))
    check(re.match(r"#1 .* in main \(", sec.get("FRAME-AFTER", "")),
          "live: the selected frame (#1 main) was not restored: %r" % sec.get("FRAME-AFTER"))
    errors = sec.get("ST-ERRORS", "")
    check("no coroutine 99" in errors and "not a coroutine id" in errors,
          "live: bad st-bt arguments not reported:\n" + errors)
    check("gdb_target: done" in live and re.search(r"\[Inferior 1 \(process \d+\) exited normally\]", live),
          "live: the program did not exit cleanly after st-bt")
    globals_ = read_globals(live)
    addrs = check_parked("live", live, globals_)

    # 2. The core file written at the same stop.
    if check(os.path.exists(CORE), "gcore wrote no core file at " + CORE):
        core = gdb([TARGET, CORE], ["source " + ST_PY] + PARKED_CMDS)
        print("===== core session =====\n" + core)
        check("all_parked" in core, "core: not stopped in all_parked")
        check_parked("core", core, read_globals(core), addrs)

    # 3. On io_uring the reader waits in a submitted operation, not a poll.
    uring = gdb([TARGET], ["source " + ST_PY, "break all_parked", "run", marker("ST-LIST"), "st-list",
                           "kill"], extra_env={"GDB_TARGET_EVENTSYS": "io_uring"})
    print("===== io_uring session =====\n" + uring)
    if "gdb_target: no io_uring" in uring:
        print("NOTE: io_uring part skipped: the target could not use io_uring here")
    else:
        for bad in ("Python Exception", "Traceback", "Error occurred"):
            check(bad not in uring, "io_uring: %r in gdb output" % bad)
        reader_row = parse_list(sections(uring).get("ST-LIST", "")).get("reader", {})
        check(reader_row.get("state") == "IO_WAIT" and
              re.match(r"^io_uring recv on fd \d+$", reader_row.get("wait", "")),
              "io_uring: the reader should wait in an io_uring recv: %s" % reader_row)

    # 4. Stopped inside a coroutine: the primordial is suspended.
    inside = gdb([TARGET], ["source " + ST_PY, "break sleeper_level2", "run",
                            marker("ST-LIST"), "st-list", marker("ST-BT"), "st-bt all", "kill"])
    print("===== inside-a-coroutine session =====\n" + inside)
    sec = sections(inside)
    rows = parse_list(sec.get("ST-LIST", ""))
    sleeper = rows.get("sleeper_main", {})
    check(sleeper.get("current") and sleeper.get("state") == "RUNNING",
          "inside: sleeper_main should be the current coroutine: %s" % sleeper)
    prim = rows.get(PRIMORDIAL, {})
    check(prim.get("state") == "SLEEPING" and "deadline in" in prim.get("wait", ""),
          "inside: the primordial should be sleeping with a deadline: %s" % prim)
    bts = parse_bt(sec.get("ST-BT", ""))
    if check(PRIMORDIAL in bts and "sleeper_main" in bts, "inside: st-bt all incomplete: %s" % sorted(bts)):
        check_frames("inside", PRIMORDIAL, bts[PRIMORDIAL], ["st_usleep", "main"], None)
        check_frames("inside", "sleeper_main", bts["sleeper_main"],
                     ["sleeper_level2", "sleeper_level1", "sleeper_main", "thread_main", "st__ctx_entry"],
                     None, suspended=False)
        for name in ("cond_waiter", "reader", "lock_waiter", "zombie"):
            check("not-started" in rows.get(name, {}).get("marks", []),
                  "inside: st-list should mark %s not-started: %s" % (name, rows.get(name)))
            check(name in bts and "not started yet: will call %s" % name in bts[name]["text"],
                  "inside: %s should be reported as not started yet" % name)

    # 5. Ground truth from the switches themselves.
    helper = os.path.join(RUNDIR, "gdb_truth_helper.py")
    with open(helper, "w") as f:
        f.write(TRUTH_HELPER)
    truth = gdb([TARGET], ["source " + ST_PY, "source " + helper, "break all_parked", "run",
                           marker("ST-LIST"), "st-list", marker("ST-REGS"), "st-regs all",
                           marker("ST-BT"), "st-bt all", "python st_test_dump_truth()", "kill"])
    print("===== ground-truth session =====\n" + truth)
    check_truth(truth)

    if failures:
        print("\n%d check(s) failed; core file and helper kept in %s" % (len(failures), RUNDIR))
        return 1
    shutil.rmtree(RUNDIR)
    print("\ngdb extension: all checks passed (live, core file, inside a coroutine, against the switches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
