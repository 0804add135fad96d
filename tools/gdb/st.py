# gdb extension for st coroutines.
#
#   (gdb) source tools/gdb/st.py
#   (gdb) st-info                 the scheduler of the selected pthread
#   (gdb) st-list                 its coroutines: id, state, start function,
#                                 stack, what each one waits on
#   (gdb) st-bt N [BT-ARGS]       backtrace of coroutine N (an id from st-list)
#   (gdb) st-bt all [BT-ARGS]     ... of every coroutine
#   (gdb) st-bt -fp N|all         frame-pointer walk instead of gdb's unwinder
#   (gdb) st-regs N|all           the registers a suspended coroutine saved
#
# Works on a live process and on a core file: it only reads memory, never
# calls functions in the inferior. The scheduler is the thread-local
# st__this_sched of the selected pthread (use `thread N` to pick another);
# set $st_sched to a `struct st__sched *` to inspect one explicitly.
#
# How st-bt works: a suspended coroutine's registers are on its own stack
# (arch/x86_64/switch.S). While it prints, st-bt installs a gdb unwinder
# that makes frame 0 of the selected thread "return" into the coroutine's
# saved context, runs gdb's own `bt` (full DWARF unwinding, arguments, source
# lines), and drops that first frame. Nothing in the inferior is modified,
# so the same code serves core files.
#
# Needs the library's debug information (struct layouts, st__this_sched).

import re
import struct

import gdb

try:
    import gdb.unwinder

    _HAVE_UNWINDER = True
except ImportError:  # gdb built without the unwinder API
    _HAVE_UNWINDER = False

_SIZE_MAX = (1 << 64) - 1
_FLAGS = [
    (1 << 0, "primordial"),
    (1 << 1, "idle"),
    (1 << 2, "interrupted"),
    (1 << 3, "timedout"),
    (1 << 4, "exiting"),
    (1 << 5, "dead"),
]
# What an IO_WAIT coroutine's waiting_on points to (src/thread.h): flags
# saying an io_uring operation or a file I/O worker's call, else a pollq.
_FL_WAIT_URING_OP = 1 << 8
_FL_WAIT_FILE_CALL = 1 << 9
# enum st__io_kind (src/backend.h), as the operations are named.
_IO_KINDS = ["recv", "send", "recvmsg", "sendmsg", "accept", "connect", "read", "write",
             "readv", "writev", "fsync"]
_POLL_BITS = [
    (0x001, "POLLIN"),
    (0x002, "POLLPRI"),
    (0x004, "POLLOUT"),
    (0x008, "POLLERR"),
    (0x010, "POLLHUP"),
    (0x020, "POLLNVAL"),
    (0x040, "POLLRDNORM"),
    (0x080, "POLLRDBAND"),
    (0x100, "POLLWRNORM"),
    (0x200, "POLLWRBAND"),
    (0x2000, "POLLRDHUP"),
]

# ---------------------------------------------------------------------------
# Reading the scheduler


def _type(name):
    try:
        return gdb.lookup_type(name)
    except gdb.error:
        raise gdb.GdbError(
            "st: type '%s' not found: is the st library built with debug information (-g)?" % name
        )


def _offsetof(typ, member):
    for field in typ.strip_typedefs().fields():
        if field.name == member:
            return field.bitpos // 8
    raise gdb.GdbError("st: %s has no member %s" % (typ, member))


def _sched():
    """The struct st__sched of the selected pthread (or $st_sched)."""
    sched_ptr_t = _type("struct st__sched").pointer()
    value = gdb.convenience_variable("st_sched")
    if value is not None and value.type.code != gdb.TYPE_CODE_VOID:
        value = value.cast(sched_ptr_t)
    else:
        try:
            value = gdb.parse_and_eval("st__this_sched")
        except gdb.error as err:
            raise gdb.GdbError(
                "st: cannot read st__this_sched (%s); is a process or core loaded, linked with "
                "st and built with debug information? Or set $st_sched." % err
            )
    if int(value) == 0:
        raise gdb.GdbError(
            "st: this pthread has no st scheduler (st__this_sched is NULL); "
            "select the pthread that called st_init() with `thread N`"
        )
    sched = value.dereference()
    if not bool(sched["initialized"]):
        raise gdb.GdbError("st: the scheduler at 0x%x is not initialised (st_init not called)" % int(value))
    return sched


def _entries(head, typ, member, limit=1000000):
    """The `typ` objects (as pointers) linked through `member` on list `head`."""
    offset = _offsetof(typ, member)
    ptr_t = typ.pointer()
    head_addr = int(head.address)
    link = head["next"]
    count = 0
    while int(link) != head_addr:
        if int(link) == 0 or count >= limit:
            raise gdb.GdbError("st: list at 0x%x looks corrupt" % head_addr)
        yield gdb.Value(int(link) - offset).cast(ptr_t)
        link = link["next"]
        count += 1


def _list_len(head):
    head_addr = int(head.address)
    link = head["next"]
    count = 0
    while int(link) != head_addr:
        if int(link) == 0 or count >= 1000000:
            return -1
        link = link["next"]
        count += 1
    return count


def _info_symbol(addr):
    try:
        out = gdb.execute("info symbol 0x%x" % addr, to_string=True).strip()
    except gdb.error:
        return None
    m = re.match(r"(\S+)(?: \+ \d+)? in section", out)
    return m.group(1) if m else None


def _symbol(addr):
    """Function name at code address `addr`, or a hex address."""
    if addr == 0:
        return "0x0"
    try:
        block = gdb.block_for_pc(addr)
        while block is not None and block.function is None:
            block = block.superblock
        if block is not None and block.function is not None:
            return block.function.print_name
    except RuntimeError:
        pass
    name = _info_symbol(addr)
    if name is not None and "." in name:
        # gdb "demangles" st's internal st__name symbols to st.name when it
        # has no debug information for them; ask for the raw name.
        demangle = gdb.parameter("print demangle")
        gdb.execute("set print demangle off", to_string=True)
        try:
            raw = _info_symbol(addr)
        finally:
            gdb.execute("set print demangle %s" % ("on" if demangle else "off"), to_string=True)
        if raw is not None and raw.startswith("st__"):
            name = raw
    return name if name is not None else "0x%x" % addr


class _Coroutine:
    def __init__(self, index, ptr, sched):
        self.id = index
        self.ptr = ptr
        self.addr = int(ptr)
        self.t = ptr.dereference()
        self.flags = int(self.t["flags"])
        self.state = str(self.t["state"])
        if self.state.startswith("ST__"):
            self.state = self.state[4:]
        self.is_current = self.addr == int(sched["current"])
        self.is_idle = self.addr == int(sched["idle"]) or (self.flags & 2) != 0
        self.is_primordial = self.addr == int(sched["primordial"]) or (self.flags & 1) != 0

    def markers(self):
        marks = []
        if self.is_current:
            marks.append("current")
        for bit, name in _FLAGS:
            if self.flags & bit:
                marks.append(name)
        if self.is_idle and "idle" not in marks:
            marks.append("idle")
        if self.is_primordial and "primordial" not in marks:
            marks.append("primordial")
        if self.not_started():
            marks.append("not-started")
        return marks

    def not_started(self):
        """Created but never run: its context still points at the trampoline."""
        if self.is_current or self.is_primordial or int(self.t["ctx"]["sp"]) == 0:
            return False
        try:
            if _arch_name() != "i386:x86-64":
                return False
            entry = _entry_addr()
            return entry is not None and _saved_regs(self)["rip"] == entry
        except (gdb.error, gdb.MemoryError):
            return False

    def start_name(self):
        if self.is_primordial:
            # The pthread that called st_init(): main() on the main thread.
            return "(primordial: main)" if _on_main_thread() else "(primordial)"
        return _symbol(int(self.t["start"]))

    def stack_desc(self):
        stack = self.t["stack"]
        if int(stack) == 0:
            return "pthread stack"
        bottom = int(stack["bottom"])
        top = int(stack["top"])
        return "0x%x-0x%x (%d KiB)" % (bottom, top, (top - bottom) // 1024)

    def stack_bounds(self):
        stack = self.t["stack"]
        if int(stack) == 0:
            return None
        return int(stack["bottom"]), int(stack["top"])


def _on_main_thread():
    thread = gdb.selected_thread()
    return thread is not None and thread.ptid[1] == gdb.selected_inferior().pid


def _coroutines(sched):
    thread_t = _type("struct _st_thread")
    return [
        _Coroutine(i, ptr, sched)
        for i, ptr in enumerate(_entries(sched["threads"], thread_t, "all_links"))
    ]


def _poll_events(events):
    names = [name for bit, name in _POLL_BITS if events & bit]
    rest = events & ~sum(bit for bit, _ in _POLL_BITS)
    if rest:
        names.append("0x%x" % rest)
    return "|".join(names) if names else "0"


def _ref(by_addr, addr):
    co = by_addr.get(addr)
    return "#%d (0x%x)" % (co.id, addr) if co is not None else "0x%x" % addr


def _io_kind(kind):
    return _IO_KINDS[kind] if 0 <= kind < len(_IO_KINDS) else "operation %d" % kind


def _call_desc(flags, waiting_on):
    """An io_uring operation (struct st__uring_op) or a worker's call (struct st__work)."""
    try:
        if flags & _FL_WAIT_URING_OP:
            op = gdb.Value(waiting_on).cast(_type("struct st__uring_op").pointer()).dereference()
            desc = "io_uring %s on fd %d" % (_io_kind(int(op["kind"])), int(op["fd"]))
            if int(op["cancels"]) > 0 or bool(op["draining"]):
                desc += ", being cancelled"
            return desc
        work = gdb.Value(waiting_on).cast(_type("struct st__work").pointer()).dereference()
        state = str(work["state"])
        state = state[len("ST__WORK_"):].lower() if state.startswith("ST__WORK_") else state
        return "file I/O %s on fd %d by a worker (%s)" % (
            _io_kind(int(work["req"]["kind"])), int(work["osfd"]), state)
    except gdb.error:
        # A library built without the type's debug information.
        what = "an io_uring operation" if flags & _FL_WAIT_URING_OP else "a file I/O worker"
        return "%s (0x%x)" % (what, waiting_on)


def _wait_desc(co, sched, by_addr):
    t = co.t
    waiting_on = int(t["waiting_on"])
    parts = []
    state = co.state
    if state == "COND_WAIT":
        desc = "cond 0x%x" % waiting_on if waiting_on else "a cond"
        for other in by_addr.values():
            if waiting_on and int(other.t["term_cond"].address) == waiting_on:
                desc += " (joining #%d)" % other.id
                break
        parts.append(desc)
    elif state == "LOCK_WAIT":
        if waiting_on:
            mutex = gdb.Value(waiting_on).cast(_type("struct _st_mutex").pointer()).dereference()
            owner = int(mutex["owner"])
            parts.append(
                "mutex 0x%x, owned by %s" % (waiting_on, _ref(by_addr, owner) if owner else "nobody")
            )
        else:
            parts.append("a mutex")
    elif state == "IO_WAIT" and waiting_on and co.flags & (_FL_WAIT_URING_OP | _FL_WAIT_FILE_CALL):
        parts.append(_call_desc(co.flags, waiting_on))
    elif state == "IO_WAIT":
        if waiting_on:
            pq = gdb.Value(waiting_on).cast(_type("struct st__pollq").pointer()).dereference()
            npds = int(pq["npds"])
            pds = pq["pds"]
            fds = []
            for i in range(min(npds, 16)):
                pd = pds[i]
                fds.append("fd %d %s" % (int(pd["fd"]), _poll_events(int(pd["events"]))))
            if npds > 16:
                fds.append("... %d more" % (npds - 16))
            parts.append("poll " + ", ".join(fds) if fds else "poll (no fds)")
        else:
            parts.append("I/O")
    elif state == "ZOMBIE":
        parts.append("exited, awaiting join (retval 0x%x)" % int(t["retval"]))
    elif state == "SLEEPING":
        parts.append("sleep")
    timer = t["timer"]
    if int(timer["index"]) != _SIZE_MAX:
        due = int(timer["due"])
        left = due - int(sched["last_clock"])
        parts.append("deadline in %.3f s (due %d us)" % (left / 1e6, due))
    elif state == "SLEEPING":
        parts.append("forever")
    return ", ".join(parts) if parts else "-"


# ---------------------------------------------------------------------------
# Commands


class StInfo(gdb.Command):
    """Summary of the st scheduler of the selected pthread.

Usage: st-info
Shows the event backend, the coroutine counts, the lengths of the run queue,
the I/O wait queue, the sleep heap and the zombie queue, and the clock."""

    def __init__(self):
        super().__init__("st-info", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        sched = _sched()
        coroutines = _coroutines(sched)
        by_addr = {co.addr: co for co in coroutines}
        backend = sched["backend"]
        name = backend["name"].string() if int(backend) else "none"
        pool = sched["stacks"]
        mode = str(pool["mode"]).replace("ST__STACK_", "").lower()
        lines = [
            "st scheduler at 0x%x" % int(sched.address),
            "  backend:       %s" % name,
            "  current:       %s" % _ref(by_addr, int(sched["current"])),
            "  coroutines:    %d listed, thread_count %d, active_count %d"
            % (len(coroutines), int(sched["thread_count"]), int(sched["active_count"])),
            "  run queue:     %d" % _list_len(sched["run_q"]),
            "  io_q:          %d" % _list_len(sched["io_q"]),
            "  sleepers:      %d (sleep_q.size)" % int(sched["sleep_q"]["size"]),
            "  zombies:       %d" % _list_len(sched["zombie_q"]),
            "  last_clock:    %d us" % int(sched["last_clock"]),
            "  stack pool:    %s mode, guard pages %s"
            % (mode, "on" if bool(pool["guard_pages"]) else "off"),
        ]
        gdb.write("\n".join(lines) + "\n")


class StList(gdb.Command):
    """List the st coroutines of the selected pthread.

Usage: st-list
For each coroutine: its id (for st-bt; the index in the scheduler's list,
stable while the program is stopped), address, state and markers (current,
idle, primordial, interrupted...), start function, stack range and what it
waits on (cond, mutex and owner, polled fds and events, deadline)."""

    def __init__(self):
        super().__init__("st-list", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        sched = _sched()
        coroutines = _coroutines(sched)
        by_addr = {co.addr: co for co in coroutines}
        rows = []
        for co in coroutines:
            ident = ("*" if co.is_current else " ") + str(co.id)
            try:
                marks = co.markers()
                state = co.state + (" [" + ",".join(marks) + "]" if marks else "")
                rows.append(
                    (
                        ident,
                        "0x%x" % co.addr,
                        state,
                        co.start_name(),
                        co.stack_desc(),
                        _wait_desc(co, sched, by_addr),
                    )
                )
            except gdb.MemoryError as err:
                rows.append((ident, "0x%x" % co.addr, "?", "?", "?", "unreadable: %s" % err))
        header = ("Id", "Address", "State", "Start function", "Stack", "Waiting on")
        widths = [max(len(r[i]) for r in rows + [header]) for i in range(5)]
        fmt = "  ".join("%%-%ds" % w for w in widths) + "  %s\n"
        gdb.write(
            "%d coroutines on st scheduler 0x%x (%s)\n"
            % (len(coroutines), int(sched.address), _thread_desc())
        )
        gdb.write(fmt % header)
        for row in rows:
            gdb.write(fmt % row)


def _thread_desc():
    thread = gdb.selected_thread()
    if thread is None:
        return "no thread"
    return "pthread %d, LWP %d" % (thread.num, thread.ptid[1])


# ---------------------------------------------------------------------------
# Backtraces of suspended coroutines (x86_64)

# Saved by st__ctx_switch, from ctx.sp upwards (arch/x86_64/switch.S).
_X86_64_SLOTS = ("fpctl", "r15", "r14", "r13", "r12", "rbx", "rbp", "rip")
_X86_64_FRAME = 8 * len(_X86_64_SLOTS)
# What the coroutine's innermost frame gets: the slots, and rsp after the pops.
_X86_64_UNWOUND = [name for name in _X86_64_SLOTS if name != "fpctl"] + ["rsp"]


def _arch_name():
    try:
        return gdb.selected_inferior().architecture().name()
    except (AttributeError, gdb.error, RuntimeError):
        return gdb.newest_frame().architecture().name()


def _saved_regs(co):
    sp = int(co.t["ctx"]["sp"])
    if sp == 0:
        return None
    mem = gdb.selected_inferior().read_memory(sp, _X86_64_FRAME)
    values = struct.unpack("<8Q", bytes(mem))
    regs = dict(zip(_X86_64_SLOTS, values))
    regs["rsp"] = sp + _X86_64_FRAME
    regs["_ctx_sp"] = sp
    return regs


class _FrameId:
    # gdb 13 wants gdb.Value attributes here (gdb 14 has gdb.unwinder.FrameId).
    def __init__(self, sp, pc):
        self.sp = gdb.Value(sp)
        self.pc = gdb.Value(pc)


if _HAVE_UNWINDER:

    class _CoroutineUnwinder(gdb.unwinder.Unwinder):
        """While st-bt runs: frame 0 "returns" into a coroutine's saved context."""

        def __init__(self):
            super().__init__("st-coroutine")
            self.regs = None
            self.claimed_level = None

        def __call__(self, pending_frame):
            # One shot: the first frame gdb unwinds after st-bt armed us
            # (frame 0, or the first non-inline frame) "returns" into the
            # coroutine's context.
            regs = self.regs
            if regs is None:
                return None
            self.regs = None
            self.claimed_level = pending_frame.level()
            pc = pending_frame.read_register("rip")
            # Any id works for this frame as long as it is inner to (below)
            # the coroutine's frames: the saved stack pointer is.
            info = pending_frame.create_unwind_info(_FrameId(regs["_ctx_sp"], int(pc)))
            for name in _X86_64_UNWOUND:
                reg_type = pending_frame.read_register(name).type
                info.add_saved_register(name, gdb.Value(regs[name]).cast(reg_type))
            return info

    _UNWINDER = _CoroutineUnwinder()
    gdb.unwinder.register_unwinder(None, _UNWINDER, replace=True)
else:
    _UNWINDER = None


_FRAME_LINE = re.compile(r"^#(\d+)\s+")


def _renumber(text, claimed):
    """Drop the selected thread's own frames (levels 0..claimed) from `bt`
    output and renumber the coroutine's frames from 0."""
    out = []
    skipping = True
    for line in text.splitlines():
        m = _FRAME_LINE.match(line)
        if m:
            level = int(m.group(1))
            skipping = level <= claimed
            if not skipping:
                line = "#%-2d %s" % (level - claimed - 1, line[m.end():])
        if not skipping:
            out.append(line)
    return "\n".join(out) + ("\n" if out else "")


def _selected_level():
    try:
        return gdb.selected_frame().level()
    except gdb.error:
        return None


def _reselect(level):
    if level is None:
        return
    try:
        frame = gdb.newest_frame()
        while frame is not None and frame.level() < level:
            frame = frame.older()
        if frame is not None:
            frame.select()
    except gdb.error:
        pass


def _bt_unwinder(regs, bt_args):
    level = _selected_level()
    _UNWINDER.claimed_level = None
    _UNWINDER.regs = regs
    gdb.invalidate_cached_frames()
    try:
        text = gdb.execute(("bt " + bt_args).strip(), to_string=True)
    finally:
        _UNWINDER.regs = None
        gdb.invalidate_cached_frames()
        _reselect(level)
    if _UNWINDER.claimed_level is None:
        raise gdb.error("the st-coroutine unwinder was not consulted")
    return _renumber(text, _UNWINDER.claimed_level)


def _frame_line(level, pc, is_return_address):
    # A return address may be the first byte after the function that made
    # the call (a call to a noreturn function): look up the call itself.
    lookup = pc - 1 if is_return_address else pc
    name = _symbol(lookup)
    sal = gdb.find_pc_line(lookup)
    where = ""
    if sal.symtab is not None and sal.line:
        where = " at %s:%d" % (sal.symtab.filename, sal.line)
    return "#%-2d 0x%016x in %s ()%s\n" % (level, pc, name, where)


def _bt_frame_pointers(co, regs):
    """Walk the rbp chain from the saved context (works without the unwinder API)."""
    inferior = gdb.selected_inferior()
    bounds = co.stack_bounds()
    out = [_frame_line(0, regs["rip"], True)]
    rbp = regs["rbp"]
    low = regs["rsp"]
    entry = _entry_addr()
    level = 1
    while rbp != 0 and level < 256:
        if rbp < low or rbp % 8 != 0 or (bounds is not None and not bounds[0] <= rbp < bounds[1]):
            out.append("(frame-pointer chain leaves the stack at rbp=0x%x)\n" % rbp)
            break
        next_rbp, ret = struct.unpack("<2Q", bytes(inferior.read_memory(rbp, 16)))
        if ret == 0:
            break
        out.append(_frame_line(level, ret, True))
        level += 1
        if (entry is not None and entry <= ret < entry + 16) or _symbol(ret - 1) == "main":
            break
        low = rbp + 16
        rbp = next_rbp
    out.append(
        "(frame-pointer walk: frames of code built without frame pointers may be missing)\n"
    )
    return "".join(out)


def _entry_addr():
    """Address of the entry trampoline (where a new coroutine's context points)."""
    try:
        return int(gdb.parse_and_eval("(unsigned long)&st__ctx_entry"))
    except gdb.error:
        pass
    try:
        out = gdb.execute("info address st__ctx_entry", to_string=True)
    except gdb.error:
        return None
    m = re.search(r"\bat (?:address )?(0x[0-9a-fA-F]+)", out)
    return int(m.group(1), 16) if m else None


def _select(which, command):
    """The coroutines named by `N` or `all`, and the scheduler."""
    sched = _sched()
    coroutines = _coroutines(sched)
    if which == "all":
        return coroutines
    try:
        index = int(which, 0)
    except ValueError:
        raise gdb.GdbError("%s: '%s' is not a coroutine id (see st-list) or 'all'" % (command, which))
    if not 0 <= index < len(coroutines):
        raise gdb.GdbError(
            "%s: no coroutine %d (there are %d, see st-list)" % (command, index, len(coroutines))
        )
    return [coroutines[index]]


def _header(co):
    marks = co.markers()
    return "\nCoroutine #%d 0x%x %s%s, start %s:\n" % (
        co.id,
        co.addr,
        co.state,
        " [" + ",".join(marks) + "]" if marks else "",
        co.start_name(),
    )


class StRegs(gdb.Command):
    """Registers of suspended st coroutines, as saved by their last switch.

Usage: st-regs N|all
What st-bt starts unwinding from: the return address (rip), the stack
pointer after the switch returns (rsp), the callee-saved registers, MXCSR
and the x87 control word. x86_64 only for now."""

    def __init__(self):
        super().__init__("st-regs", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        args = gdb.string_to_argv(arg)
        if len(args) != 1:
            raise gdb.GdbError("usage: st-regs N|all")
        selected = _select(args[0], "st-regs")
        arch = _arch_name()
        for co in selected:
            gdb.write(_header(co))
            if co.is_current:
                gdb.write("(running: see `info registers`)\n")
            elif arch != "i386:x86-64":
                gdb.write("st-regs: not supported on %s yet\n" % arch)
            else:
                regs = _saved_regs(co)
                if regs is None:
                    gdb.write("(no saved context)\n")
                    continue
                rip = regs["rip"]
                sym = _symbol(rip if rip == _entry_addr() else rip - 1)
                gdb.write("  rip    0x%016x  %s\n" % (regs["rip"], sym))
                for name in ("rsp", "rbp", "rbx", "r12", "r13", "r14", "r15"):
                    gdb.write("  %-5s  0x%016x\n" % (name, regs[name]))
                gdb.write("  mxcsr  0x%x\n  fpcw   0x%x\n" % (regs["fpctl"] & 0xFFFFFFFF, (regs["fpctl"] >> 32) & 0xFFFF))


class StBt(gdb.Command):
    """Backtrace of st coroutines of the selected pthread.

Usage: st-bt [-fp] N|all [BT-ARGS]
N is an id from st-list; `all` does every coroutine. BT-ARGS are passed to
gdb's `bt` (for example `full` or `-frame-arguments all`). The current
coroutine gets the plain `bt` of the selected pthread; a suspended one is
unwound from the registers it saved when it switched away. -fp walks the
frame-pointer chain instead of using gdb's unwinder (it may skip frames of
code built without frame pointers). x86_64 only for now."""

    def __init__(self):
        super().__init__("st-bt", gdb.COMMAND_STACK)

    def invoke(self, arg, from_tty):
        args = gdb.string_to_argv(arg)
        use_fp = False
        if args and args[0] == "-fp":
            use_fp = True
            args = args[1:]
        if not args:
            raise gdb.GdbError("usage: st-bt [-fp] N|all [BT-ARGS]")
        which, bt_args = args[0], " ".join(args[1:])
        selected = _select(which, "st-bt")
        arch = _arch_name()
        for co in selected:
            gdb.write(_header(co))
            gdb.write(self._one(co, arch, use_fp, bt_args))

    def _one(self, co, arch, use_fp, bt_args):
        if co.is_current:
            return gdb.execute(("bt " + bt_args).strip(), to_string=True)
        if arch != "i386:x86-64":
            return "st-bt: not supported on %s yet (see arch/<cpu>/switch.S for the saved layout)\n" % arch
        regs = _saved_regs(co)
        if regs is None:
            return "(no saved context)\n"
        entry = _entry_addr()
        if entry is not None and regs["rip"] == entry:
            return "#0  st__ctx_entry (not started yet: will call %s)\n" % co.start_name()
        if use_fp or _UNWINDER is None:
            return _bt_frame_pointers(co, regs)
        try:
            return _bt_unwinder(regs, bt_args)
        except gdb.error as err:
            return "(gdb's unwinder failed: %s; frame-pointer walk instead)\n%s" % (
                err,
                _bt_frame_pointers(co, regs),
            )


StInfo()
StList()
StBt()
StRegs()
