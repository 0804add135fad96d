#!/usr/bin/env python3
"""Generate st's man pages from docs/reference.md.

    md2man.py --list REFERENCE.md            print the page file names
    md2man.py -o DIR [--version V] REFERENCE.md
                                             write the pages into DIR

One page per function section (`### st_name` whose first code block declares
`st_name(`), named `st_name.3`, and one overview page `st.3` with the
introduction, the conventions, the types, the macros and the list of
functions by area. The markdown subset understood is the one reference.md
uses: `#`..`###` headings, paragraphs, `- ` lists (a `` `NAME`: text `` item
becomes a tagged paragraph), fenced code blocks, `code`, **bold**, *italic*
and [links](#anchor). In a function section, a paragraph that starts with
**Returns:**, **Errors:**, **State Threads:** or **See also:** starts the
man section of that name.

The output is deterministic: no dates, the same input gives the same pages.
"""
import argparse
import os
import re
import sys

FUNC_NAME = re.compile(r"^_?st_[a-z0-9_]+$")  # and State Threads' DEBUG functions, _st_*
LABELS = {
    "Returns:": "RETURN VALUE",
    "Errors:": "ERRORS",
    "State Threads:": "STATE THREADS",
    "See also:": "SEE ALSO",
}


# ---------------------------------------------------------------------------
# Markdown: a list of sections, each a heading and a list of blocks.

class Section:
    def __init__(self, level, title):
        self.level = level      # 1, 2 or 3 (0: text before the first heading)
        self.title = title
        self.blocks = []        # ('para', text) | ('list', [items]) | ('code', lang, text)
        self.children = []      # level-3 sections of a level-2 section

    @property
    def names(self):
        """The identifiers a heading documents (`### A, B` documents A and B)."""
        return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", self.title.replace("`", ""))

    def first_code(self):
        for block in self.blocks:
            if block[0] == "code":
                return block[2]
        return ""

    @property
    def is_function(self):
        if self.level != 3 or not FUNC_NAME.match(self.title.strip()):
            return False
        code = self.first_code().lstrip()
        if code.startswith(("typedef", "#")):
            return False
        return re.search(r"\b%s\s*\(" % re.escape(self.title.strip()), code) is not None


def parse_blocks(lines):
    """Split the lines of one section into paragraphs, lists and code blocks."""
    blocks = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        fence = re.match(r"^```(\w*)\s*$", line)
        if fence:
            body = []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            i += 1  # the closing fence
            blocks.append(("code", fence.group(1), "\n".join(body)))
            continue
        if line.startswith("- "):
            items = []
            while i < len(lines) and (lines[i].startswith("- ") or
                                      (lines[i].startswith("  ") and lines[i].strip())):
                if lines[i].startswith("- "):
                    items.append(lines[i][2:].strip())
                else:
                    items[-1] += " " + lines[i].strip()
                i += 1
            blocks.append(("list", items))
            continue
        para = []
        while (i < len(lines) and lines[i].strip() and not lines[i].startswith("```")
               and not lines[i].startswith("- ")):
            para.append(lines[i].strip())
            i += 1
        blocks.append(("para", " ".join(para)))
    return blocks


def parse(text):
    """The document as its sections in order: level 0 (intro), 1, 2 and 3."""
    sections = []
    current = Section(0, "")
    lines = []
    in_code = False
    for line in text.splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = None if in_code else re.match(r"^(#{1,3})\s+(.*?)\s*$", line)
        if heading:
            current.blocks = parse_blocks(lines)
            sections.append(current)
            current = Section(len(heading.group(1)), heading.group(2))
            lines = []
        else:
            lines.append(line)
    current.blocks = parse_blocks(lines)
    sections.append(current)
    parent = None
    for section in sections:
        if section.level == 2:
            parent = section
        elif section.level == 3 and parent is not None:
            parent.children.append(section)
    return sections


def functions(sections):
    return [s for s in sections if s.is_function]


def page_names(sections):
    return ["st.3"] + ["%s.3" % s.title.strip() for s in functions(sections)]


# ---------------------------------------------------------------------------
# roff

def escape(text):
    return text.replace("\\", "\\e")


def protect_line_starts(text):
    """A line that starts with . or ' would be a roff request."""
    return "\n".join("\\&" + l if l.startswith((".", "'")) else l for l in text.split("\n"))


def inline(text):
    """Markdown inline markup to roff font escapes."""
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)  # links: keep the text
    codes = []

    def stash(match):
        codes.append(escape(match.group(1)).replace("-", "\\-"))
        return "\0%d\0" % (len(codes) - 1)

    def unstash(part, font):
        return re.sub("\0(\\d+)\0",
                      lambda m: (font + codes[int(m.group(1))] + "\\fR") if font
                      else codes[int(m.group(1))], part)

    text = escape(re.sub(r"`([^`]*)`", stash, text))
    # Bold and italic spans; code inside them takes their font.
    text = re.sub(r"\*\*(.+?)\*\*", lambda m: "\\fB" + unstash(m.group(1), "") + "\\fR", text)
    text = re.sub(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])",
                  lambda m: "\\fI" + unstash(m.group(1), "") + "\\fR", text)
    return protect_line_starts(unstash(text, "\\fB"))


def plain(text):
    """Inline markup removed (for the NAME line)."""
    text = re.sub(r"\[([^\]]+)\]\([^)]*\)", r"\1", text)
    return text.replace("**", "").replace("`", "")


def code_block(text):
    lines = [escape(l).replace("-", "\\-") for l in text.split("\n")]
    return [".PP", ".RS 4", ".nf", protect_line_starts("\n".join(lines)), ".fi", ".RE"]


def blocks_to_roff(blocks):
    out = []
    for block in blocks:
        if block[0] == "para":
            out += [".PP", inline(block[1])]
        elif block[0] == "code":
            out += code_block(block[2])
        elif block[0] == "list":
            tag = re.compile(r"^`([^`]+)`:\s*(.*)$")
            has_tags = any(tag.match(item) for item in block[1])
            for item in block[1]:
                tagged = tag.match(item)
                if tagged:
                    out += [".TP", ".B " + escape(tagged.group(1)), inline(tagged.group(2))]
                elif has_tags:  # a bullet as the tag keeps the list's indent
                    out += [".TP", "\\(bu", inline(item)]
                else:
                    out += [".IP \\(bu 2", inline(item)]
    return out


def th(name, version):
    return ['.TH %s 3 "" "st %s" "st Library Functions"' % (name.upper(), version)]


HEADER = ['.\\" Generated from docs/reference.md by tools/man/md2man.py: edit that file.']
LIBRARY = [".SH LIBRARY", "st coroutine library (\\fIlibst\\fR, \\fB\\-lst\\fR;"
           " \\fBpkg\\-config \\-\\-cflags \\-\\-libs st\\fR)"]


def summary(section):
    """The NAME line: the first sentence of the first paragraph, lower-cased."""
    para = next((b[1] for b in section.blocks if b[0] == "para"), "")
    para = re.sub(r"^\*\*Extension\.\*\*\s*", "", para)
    sentence = re.split(r"(?<=[.;])\s+(?=[A-Z`*])", plain(para))[0].strip()
    sentence = sentence.rstrip(".")
    if sentence[:1].isupper() and not sentence[1:2].isupper():
        sentence = sentence[0].lower() + sentence[1:]
    return escape(sentence).replace("-", "\\-")


def see_also(text, exclude):
    names = re.findall(r"\[(st_[a-z0-9_]+)\]", text) or re.findall(r"`(st_[a-z0-9_]+)`", text)
    names = [n for n in dict.fromkeys(names) if n != exclude] + ["st"]
    return [".BR %s (3)%s" % (n, "," if i < len(names) - 1 else "") for i, n in enumerate(names)]


def function_page(section, version):
    name = section.title.strip()
    out = HEADER + th(name, version)
    out += [".SH NAME", "%s \\- %s" % (name, summary(section))]
    out += LIBRARY
    out += [".SH SYNOPSIS", ".nf", ".B #include <st.h>", ".PP",
            protect_line_starts(escape(section.first_code()).replace("-", "\\-")), ".fi"]
    parts = {"DESCRIPTION": []}
    order = ["DESCRIPTION"]
    current = "DESCRIPTION"
    skipped_synopsis = False
    for block in section.blocks:
        if block[0] == "code" and not skipped_synopsis:
            skipped_synopsis = True
            continue
        if block[0] == "para":
            label = re.match(r"^\*\*([^*]+)\*\*\s*(.*)$", block[1])
            if label and label.group(1) in LABELS:
                current = LABELS[label.group(1)]
                parts.setdefault(current, [])
                if current not in order:
                    order.append(current)
                rest = label.group(2).strip()
                if rest[:1].islower():
                    rest = rest[0].upper() + rest[1:]  # a section starts a sentence
                if rest:
                    parts[current].append(("para", rest))
                continue
        parts[current].append(block)
    for title in order:
        if title == "SEE ALSO":
            text = " ".join(b[1] for b in parts[title] if b[0] == "para")
            out += [".SH \"SEE ALSO\""] + see_also(text, name)
            continue
        body = blocks_to_roff(parts[title])
        if body and body[0] == ".PP":
            body = body[1:]
        out += ['.SH "%s"' % title if " " in title else ".SH " + title] + body
    if "SEE ALSO" not in order:
        out += ['.SH "SEE ALSO"', ".BR st (3)"]
    return "\n".join(out) + "\n"


def overview_page(sections, version):
    out = HEADER + th("st", version)
    out += [".SH NAME", "st \\- State Threads compatible coroutine library for network servers"]
    out += LIBRARY
    out += [".SH SYNOPSIS", ".nf", ".B #include <st.h>", ".fi"]
    first_para = True
    out += [".SH DESCRIPTION"]
    for s in sections:
        if s.level == 1:
            # The title's own paragraphs are the introduction, minus the list
            # of areas (FUNCTIONS below says the same with summaries).
            blocks = [b for b in s.blocks if b[0] != "list" and b[1] != "Areas:"]
            body = blocks_to_roff(blocks)
            if first_para and body and body[0] == ".PP":
                body = body[1:]
            first_para = False
            out += body
    for s in sections:
        if s.level != 2:
            continue
        funcs = [c for c in s.children if c.is_function]
        if funcs:
            continue
        out += ['.SH "%s"' % s.title.upper()]
        body = blocks_to_roff(s.blocks)
        if body and body[0] == ".PP":
            body = body[1:]
        out += body
        for child in s.children:
            out += [".SS \"%s\"" % escape(child.title.replace("`", ""))]
            body = blocks_to_roff(child.blocks)
            if body and body[0] == ".PP":
                body = body[1:]
            out += body
    out += [".SH FUNCTIONS"]
    for s in sections:
        if s.level != 2:
            continue
        funcs = [c for c in s.children if c.is_function]
        if not funcs:
            continue
        out += ['.SS "%s"' % escape(s.title)]
        out += blocks_to_roff(s.blocks)
        for f in funcs:
            out += [".TP", ".BR %s (3)" % f.title.strip(), summary(f)]
    names = [f.title.strip() for f in functions(sections)]
    out += ['.SH "SEE ALSO"', ", ".join("\\fB%s\\fR(3)" % n for n in names)]
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reference")
    ap.add_argument("--list", action="store_true", help="print the page names and exit")
    ap.add_argument("-o", "--outdir", help="where to write the pages")
    ap.add_argument("--version", default="", help="the library version for the page footers")
    args = ap.parse_args()
    with open(args.reference, encoding="utf-8") as f:
        sections = parse(f.read())
    if args.list:
        print("\n".join(page_names(sections)))
        return 0
    if not args.outdir:
        ap.error("either --list or -o DIR")
    os.makedirs(args.outdir, exist_ok=True)
    pages = {"st.3": overview_page(sections, args.version)}
    for s in functions(sections):
        pages["%s.3" % s.title.strip()] = function_page(s, args.version)
    for name, text in pages.items():
        path = os.path.join(args.outdir, name)
        with open(path + ".tmp", "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(path + ".tmp", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
