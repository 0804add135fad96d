#!/usr/bin/env python3
"""Source references in README.md and docs/*.md point at code that exists.

Checks, in every document:

1. A line reference, `path/to/file.ext:LINE` or `file.ext:LINE-LINE`
   (anywhere, code blocks included): the file exists (a bare file name must
   name a file somewhere in the tree) and has at least LINE lines.
2. A line reference that names its function, as a backtrace frame does
   (`#3 0x... in thread_main (arg=...) at src/thread.c:22`,
   `#0 0x... in misbehave tests/debug/use_after_return.c:21`): the function
   is defined in that file and the line lies inside its body, so a sample
   backtrace cannot drift away from the code it shows.
3. A source path in an inline code span (`` `src/stack.c` ``,
   `` `tools/gdb/` ``, `` `src/sched.[ch]` ``) outside fenced code blocks:
   the file, directory or glob exists. Paths without an extension (build
   outputs such as `tools/bench/st_bench`) are not checked.

Each failure is printed as `document:line: reference: what is wrong`; the
exit status is 1 when there is any.

usage: check_refs.py --root SOURCE_ROOT [DOCUMENT...]
"""
import argparse
import glob
import os
import re
import sys

# Extensions of files a document may cite by line.
EXTENSIONS = ("c", "h", "S", "s", "py", "sh", "md", "build", "txt", "ini", "wrap", "map", "in")
EXT = "|".join(EXTENSIONS)
LINE_REF = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.(?:" + EXT + r")):(\d+)(?:-(\d+))?(?![\w:-]|\.\w)"
)
# A backtrace frame naming its function just before the reference:
# gdb `#1 0x... in f (args) at file:N`, `#0 f (args) at file:N`,
# ASan `#0 0x... in f file:N`.
FRAME = re.compile(
    r"#\d+\s+(?:0x[0-9a-fA-F]+\s+in\s+)?([A-Za-z_]\w*)\s*(?:\([^()]*\)\s*at\s+|\s+)$"
)
CODE_SPAN = re.compile(r"`([^`\s]+)`")
SOURCE_DIRS = ("src/", "include/", "tests/", "tools/", "docs/", "arch/", ".ci/")
# Files a document tells its reader to create, by document.
TO_BE_CREATED = {
    "docs/porting.md": {
        "arch/loongarch64/switch.S",
        "tests/arch/regs/loongarch64.S",
        "tools/cross/loongarch64.ini",
    },
}


def skip_dir(name):
    return name.startswith(".") or name.startswith("build") or name == "subprojects"


def all_files(root):
    """Relative paths of the files in the tree, build directories left out."""
    found = []
    for top, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not skip_dir(d)
                   and not os.path.exists(os.path.join(top, d, "meson-private"))]
        for name in files:
            found.append(os.path.relpath(os.path.join(top, name), root))
    return found


def read_lines(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def function_span(lines, name, path):
    """First and last line (1-based) of function `name` in a C or assembly
    file, or None when the file does not define it."""
    if path.endswith((".S", ".s")):
        start = re.compile(r"^" + re.escape(name) + r":")
        end = re.compile(r"^\s*(\.cfi_endproc|\.size\s+" + re.escape(name) + r"\b)")
    else:
        # A definition starts in column 0 and is not a declaration.
        start = re.compile(r"^[A-Za-z_].*\b" + re.escape(name) + r"\s*\((?!.*;\s*$)")
        end = re.compile(r"^}")
    for i, text in enumerate(lines):
        if start.search(text):
            for j in range(i + 1, len(lines)):
                if end.search(lines[j]):
                    return i + 1, j + 1
            return i + 1, len(lines)
    return None


class Checker:
    def __init__(self, root):
        self.root = root
        self.files = all_files(root)
        self.cache = {}
        self.errors = []

    def lines_of(self, rel):
        if rel not in self.cache:
            self.cache[rel] = read_lines(os.path.join(self.root, rel))
        return self.cache[rel]

    def resolve(self, ref, doc_dir):
        """Candidate files for a referenced path: the path from the source
        root or the document's directory, or for a bare name every file of
        that name."""
        out = []
        for base in ("", doc_dir):
            rel = os.path.normpath(os.path.join(base, ref))
            if os.path.isfile(os.path.join(self.root, rel)) and rel not in out:
                out.append(rel)
        if not out and "/" not in ref:
            out = [f for f in self.files if os.path.basename(f) == ref]
        return out

    def fail(self, doc, lineno, ref, why):
        self.errors.append("%s:%d: %s: %s" % (doc, lineno, ref, why))

    def check_line_ref(self, doc, lineno, text, m, doc_dir):
        path, first, last = m.group(1), int(m.group(2)), m.group(3)
        ref = m.group(0)
        last = int(last) if last else first
        if last < first:
            self.fail(doc, lineno, ref, "the range ends before it starts")
            return
        candidates = self.resolve(path, doc_dir)
        if not candidates:
            self.fail(doc, lineno, ref, "no such file")
            return
        long_enough = [c for c in candidates if len(self.lines_of(c)) >= last]
        if not long_enough:
            self.fail(doc, lineno, ref, "%s has only %d lines"
                      % (candidates[0], len(self.lines_of(candidates[0]))))
            return
        frame = FRAME.search(text[: m.start()])
        if frame is None:
            return
        func = frame.group(1)
        spans = [(c, function_span(self.lines_of(c), func, c)) for c in long_enough]
        defined = [(c, s) for c, s in spans if s is not None]
        if not defined:
            self.fail(doc, lineno, ref, "%s does not define %s()" % (long_enough[0], func))
            return
        if not any(s[0] <= first and last <= s[1] for _, s in defined):
            c, s = defined[0]
            self.fail(doc, lineno, ref, "line %d is outside %s(), which is %s:%d-%d"
                      % (first, func, c, s[0], s[1]))

    def check_code_span(self, doc, lineno, path, doc_dir):
        if not path.startswith(SOURCE_DIRS) or "<" in path or "..." in path:
            return
        if LINE_REF.fullmatch(path):
            return  # checked as a line reference
        if any(ch in path for ch in "[*?"):
            if not glob.glob(os.path.join(self.root, path)):
                self.fail(doc, lineno, path, "matches no file")
            return
        if path.endswith("/"):
            if not os.path.isdir(os.path.join(self.root, path)):
                self.fail(doc, lineno, path, "no such directory")
            return
        if not re.search(r"\.\w+$", os.path.basename(path)):
            return  # a build output or a directory named without its slash
        if not self.resolve(path, doc_dir) and path not in TO_BE_CREATED.get(doc, ()):
            self.fail(doc, lineno, path, "no such file")

    def check_document(self, doc):
        rel_doc = os.path.relpath(doc, self.root)
        doc_dir = os.path.dirname(rel_doc)
        in_fence = False
        for lineno, text in enumerate(read_lines(doc), 1):
            if text.lstrip().startswith(("```", "~~~")):
                in_fence = not in_fence
                continue
            for m in LINE_REF.finditer(text):
                self.check_line_ref(rel_doc, lineno, text, m, doc_dir)
            if not in_fence:
                for m in CODE_SPAN.finditer(text):
                    self.check_code_span(rel_doc, lineno, m.group(1), doc_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="the source tree")
    parser.add_argument("documents", nargs="*",
                        help="documents to check (default: README.md and docs/*.md)")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    docs = args.documents or ([os.path.join(root, "README.md")]
                              + sorted(glob.glob(os.path.join(root, "docs", "*.md"))))
    checker = Checker(root)
    for doc in docs:
        checker.check_document(doc)
    for error in checker.errors:
        print(error)
    if checker.errors:
        print("%d broken source reference(s) in %d document(s)" % (len(checker.errors), len(docs)))
        return 1
    print("source references: all %d documents OK" % len(docs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
