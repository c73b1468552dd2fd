#!/usr/bin/env python3
"""Every reference to a section of the project's pages names a heading that
exists: `README, "Benchmarks"`, `bench/RESULTS.md, "Symmetric buffers"`,
`docs/algorithms.md, "Across hosts"`, in code comments and in the pages
themselves (a reference may wrap across comment lines). A heading matches
when it is the quoted name or begins with it ("Symmetric buffers" finds
"## Symmetric buffers (issue 16)").

Usage: section_refs.py SOURCE_ROOT. Checks itself first: a reference to a
section that does not exist must be reported.
"""
import pathlib
import re
import sys

PAGES = {
    "README": "README.md",
    "RESULTS": "bench/RESULTS.md",
    "design.md": "docs/design.md",
    "history.md": "docs/history.md",
    "algorithms.md": "docs/algorithms.md",
    "errors.md": "docs/errors.md",
}
# the page, then up to a few words ("section", "'s"), then the quoted name
REF = re.compile(r'\b(README|RESULTS|design\.md|history\.md|algorithms\.md|errors\.md)(?:\.md)?'
                 r'(?:,|:)\s+(?:section\s+)?["\u201c]([^"\u201d\n]{2,80})["\u201d]')
COMMENT = re.compile(r'\n[ \t]*(?://+|#+(?!#*\s*include)|\*)[ \t]?')
SOURCES = ["include", "src", "tools", "tests", "bench", "python", "examples", "scripts", "docs", "README.md"]
SUFFIXES = {".hpp", ".cpp", ".cu", ".h", ".py", ".sh", ".md", ".build", ".txt", ""}


def headings(text):
    """Markdown headings, and the bold leads of paragraphs ("**Which torch.** ...")."""
    heads = [m.group(1).strip() for m in re.finditer(r'^#{1,6}\s+(.+?)\s*#*$', text, re.M)]
    return heads + [m.group(1).rstrip(".:") for m in re.finditer(r'^(?:- )?\*\*([^*\n]+)\*\*', text, re.M)]


def refs(text):
    """(line, page key, name) of every reference; comment markers at line starts are
    ignored so that a reference may wrap."""
    flat = COMMENT.sub(" ", text)
    # map offsets back to lines: count newlines removed before each match
    out = []
    for m in REF.finditer(flat):
        line = flat.count("\n", 0, m.start()) + 1
        out.append((line, m.group(1), " ".join(m.group(2).split())))
    return out


def problems(files, pages):
    found = []
    for path, text in files:
        for line, page, name in refs(text):
            heads = pages[page]
            if not any(h == name or h.startswith(name) for h in heads):
                found.append(f"{path}: names {PAGES[page]} section \"{name}\", which has no such heading")
    return found


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    pages = {k: headings((root / v).read_text()) for k, v in PAGES.items()}
    broken = problems([("self-test", '// see README, "No such section of the readme"\n')], pages)
    good = problems([("self-test", '// see bench/RESULTS.md,\n// "' + pages["RESULTS"][1] + '"\n')], pages)
    if len(broken) != 1 or good:
        sys.exit("section_refs.py: the check itself is broken (it missed a bad reference or refused a good one)")
    files = []
    for s in SOURCES:
        p = root / s
        paths = [p] if p.is_file() else [q for q in p.rglob("*") if q.is_file() and q.suffix in SUFFIXES]
        for q in paths:
            if "/build" in str(q.relative_to(root)) or q.name.startswith(".") or q.resolve() == pathlib.Path(__file__).resolve():
                continue
            try:
                files.append((str(q.relative_to(root)), q.read_text()))
            except (UnicodeDecodeError, OSError):
                continue
    found = problems(files, pages)
    for f in found:
        print(f)
    n = sum(len(refs(t)) for _, t in files)
    if found:
        sys.exit(f"{len(found)} of {n} section references name no heading")
    print(f"{n} section references, each names a heading that exists")


if __name__ == "__main__":
    main()
