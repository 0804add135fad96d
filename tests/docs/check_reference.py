#!/usr/bin/env python3
"""Check that docs/reference.md documents all of include/st.h.

    check_reference.py [--root DIR] [--header st.h] [--reference reference.md]
                       [--man-dir DIR]

Fails (exit 1), listing every problem, when:
  - a function declared in st.h has no `### name` section in the reference,
    or its section's first code block is not the declaration in st.h, or it
    has no **Returns:** or **Errors:** paragraph;
  - a macro (`#define`, the include guard aside) or a typedef of st.h is not
    named by any section heading;
  - a function or macro that State Threads 1.9.3 does not have is not marked
    "Extension" in its section;
  - a section is named after an st_ function or type that st.h lacks;
  - with --man-dir: a function's man page (NAME.3) or st.3 is missing or
    empty, or, when groff is installed, a page gives groff warnings.
Prints one line per checked item group and a final verdict.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys

# State Threads 1.9.3's API (the functions and macros of its st.h; the last
# two functions only under DEBUG). Anything else in st.h is an extension and
# its section must say so.
ST_FUNCTIONS = set("""
st_init st_getfdlimit st_set_eventsys st_get_eventsys st_get_eventsys_name
st_set_switch_in_cb st_set_switch_out_cb st_thread_self st_thread_exit
st_thread_join st_thread_interrupt st_thread_yield st_thread_create
st_randomize_stacks st_set_utime_function st_utime st_utime_last_clock
st_timecache_set st_time st_usleep st_sleep st_cond_new st_cond_destroy
st_cond_timedwait st_cond_wait st_cond_signal st_cond_broadcast st_mutex_new
st_mutex_destroy st_mutex_lock st_mutex_unlock st_mutex_trylock st_key_create
st_key_getlimit st_thread_setspecific st_thread_getspecific st_netfd_open
st_netfd_open_socket st_netfd_free st_netfd_close st_netfd_fileno
st_netfd_setspecific st_netfd_getspecific st_netfd_serialize_accept
st_netfd_poll st_poll st_accept st_connect st_read st_read_fully
st_read_resid st_readv st_readv_resid st_write st_write_resid st_writev
st_writev_resid st_recvfrom st_sendto st_recvmsg st_sendmsg st_open
st_destroy st_thread_setspecific2 st_set_primordial_stack
_st_show_thread_stack _st_iterate_threads
""".split())
ST_MACROS = set("""
ST_VERSION ST_VERSION_MAJOR ST_VERSION_MINOR ST_VERSION_PATCH ST_SWITCH_CB
ETIME ST_UTIME_NO_TIMEOUT ST_UTIME_NO_WAIT ST_EVENTSYS_DEFAULT
ST_EVENTSYS_SELECT ST_EVENTSYS_POLL ST_EVENTSYS_ALT
""".split())

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "man"))
import md2man  # noqa: E402  (the generator's parser: one reading of the markdown)


def normalize(decl):
    """A declaration without ST_EXPORT, comments and layout."""
    decl = re.sub(r"/\*.*?\*/", " ", decl, flags=re.S)
    decl = re.sub(r"\bST_EXPORT\b", " ", decl)
    decl = re.sub(r"\s+", " ", decl).strip()
    decl = re.sub(r"\s*([(),;*])\s*", r"\1", decl)
    return decl.rstrip(";")


def parse_header(text):
    """(functions {name: declaration}, macros [names], typedefs [names])."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    directives = re.findall(r"^\s*#\s*(\w+)\s*(\w*)", text, flags=re.M)
    guard = None
    for i, (d, name) in enumerate(directives[:-1]):
        if d == "ifndef":
            nd, nname = directives[i + 1]
            if nd == "define" and nname == name:
                guard = name
            break
    macros = []
    for d, name in directives:
        if d == "define" and name != guard and name not in macros:
            macros.append(name)
    # Declarations: the text without preprocessor lines, split at ';'.
    code = re.sub(r"^\s*#.*?(?<!\\)$", " ", text, flags=re.M | re.S)
    code = code.replace('extern "C" {', " ")
    functions = {}
    typedefs = []
    for stmt in code.split(";"):
        stmt = stmt.replace("{", " ").replace("}", " ").strip()
        if not stmt:
            continue
        if stmt.startswith("typedef"):
            m = re.search(r"\(\s*\*\s*(\w+)\s*\)", stmt) or re.search(r"(\w+)\s*$", stmt)
            typedefs.append(m.group(1))
            continue
        m = re.search(r"\b([A-Za-z_]\w*)\s*\(", stmt)
        if m:  # the first identifier followed by '(' is the function's name
            functions[m.group(1)] = normalize(stmt)
    return functions, macros, typedefs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    root = os.path.normpath(os.path.join(HERE, "..", ".."))
    ap.add_argument("--root", default=root)
    ap.add_argument("--header")
    ap.add_argument("--reference")
    ap.add_argument("--man-dir")
    args = ap.parse_args()
    header = args.header or os.path.join(args.root, "include", "st.h")
    reference = args.reference or os.path.join(args.root, "docs", "reference.md")

    with open(header, encoding="utf-8") as f:
        functions, macros, typedefs = parse_header(f.read())
    with open(reference, encoding="utf-8") as f:
        sections = md2man.parse(f.read())

    problems = []
    by_name = {}
    for s in sections:
        if s.level == 3:
            for name in s.names:
                by_name.setdefault(name, s)

    def section_text(s):
        parts = []
        for block in s.blocks:
            if block[0] == "para":
                parts.append(block[1])
            elif block[0] == "list":
                parts.extend(block[1])
            else:
                parts.append(block[2])
        return "\n".join(parts)

    # Functions.
    documented = 0
    for name, decl in functions.items():
        s = by_name.get(name)
        if s is None or not s.is_function or s.title.strip() != name:
            problems.append("function %s: no '### %s' section" % (name, name))
            continue
        documented += 1
        code = s.first_code()
        if normalize(code) != decl:
            problems.append("function %s: the section's declaration differs from st.h:\n"
                            "    st.h:      %s\n    reference: %s" % (name, decl, normalize(code)))
        text = section_text(s)
        for label in ("**Returns:**", "**Errors:**"):
            if label not in text:
                problems.append("function %s: no %s paragraph" % (name, label))
        if name not in ST_FUNCTIONS and "Extension" not in text:
            problems.append("function %s: not in State Threads 1.9.3, "
                            "but its section does not say 'Extension'" % name)
    print("functions: %d in st.h, %d with a section" % (len(functions), documented))

    # Macros and typedefs.
    for kind, names in (("macro", macros), ("typedef", typedefs)):
        missing = [n for n in names if n not in by_name]
        for n in missing:
            problems.append("%s %s: no section names it" % (kind, n))
        print("%ss: %d in st.h, %d named by a section" % (kind, len(names), len(names) - len(missing)))
    for n in macros:
        s = by_name.get(n)
        if s is not None and n not in ST_MACROS and "Extension" not in section_text(s):
            problems.append("macro %s: not in State Threads 1.9.3, "
                            "but its section does not say 'Extension'" % n)

    # Stale sections: named after st_ functions or types that st.h lacks.
    known = set(functions) | set(macros) | set(typedefs)
    for s in sections:
        if s.level != 3:
            continue
        for n in s.names:
            if (n.startswith(("st_", "ST_")) or s.is_function) and n not in known:
                problems.append("section '%s': %s is not in st.h" % (s.title, n))

    # Man pages.
    if args.man_dir:
        pages = ["st.3"] + ["%s.3" % n for n in functions]
        missing = [p for p in pages
                   if not os.path.isfile(os.path.join(args.man_dir, p))
                   or os.path.getsize(os.path.join(args.man_dir, p)) == 0]
        for p in missing:
            problems.append("man page %s: missing in %s" % (p, args.man_dir))
        print("man pages: %d expected, %d present" % (len(pages), len(pages) - len(missing)))
        groff = shutil.which("groff")
        present = [os.path.join(args.man_dir, p) for p in pages if p not in missing]
        if groff and present:
            # One groff run over every page; its warnings name the file.
            r = subprocess.run([groff, "-man", "-Tutf8", "-ww", "-z"] + present,
                               capture_output=True, text=True, check=False)
            warnings = [l for l in r.stderr.splitlines() if l.strip()]
            for w in warnings:
                problems.append("man pages: groff says: " + w)
            if r.returncode != 0 and not warnings:
                problems.append("man pages: groff exited with %d" % r.returncode)
            print("man pages: rendered with groff, %d warning(s)" % len(warnings))
        elif not groff:
            print("man pages: groff not installed, rendering not checked")

    if problems:
        print("\n%d problem(s):" % len(problems))
        for p in problems:
            print("  - " + p)
        print("FAIL")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
