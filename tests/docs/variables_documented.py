#!/usr/bin/env python3
"""Every RINGTREE_* variable of the library's table (env_variables in
include/ringtree/core/config.hpp) is in README's table of variables and has
its error row in docs/errors.md, and neither document names a RINGTREE_*
variable that no code reads. README's table is generated from the same
table (docs/figures.sh); this keeps docs/errors.md, written by hand,
beside it.

Usage: variables_documented.py SOURCE_ROOT. It checks itself first: a
variable added to a copy of the table must be reported.
"""
import pathlib
import re
import sys


def table(config_text):
    return re.findall(r'^\s*\{"(RINGTREE_[A-Z0-9_]+)"', config_text, re.M)


def problems(names, errors_md, readme, code):
    out = []
    for n in names:
        if n not in errors_md:
            out.append(f"docs/errors.md: no row names {n} (env_variables has it)")
        if f"`{n}`" not in readme:
            out.append(f"README.md: the table of variables has no `{n}`")
    for doc, text in (("docs/errors.md", errors_md), ("README.md", readme)):
        for n in sorted(set(re.findall(r'\bRINGTREE_[A-Z0-9_]*[A-Z0-9]\b', text))):
            if n not in code:
                out.append(f"{doc} names {n}, which no code reads")
    return out


def main():
    root = pathlib.Path(sys.argv[1])
    config = (root / "include/ringtree/core/config.hpp").read_text()
    errors_md = (root / "docs/errors.md").read_text()
    readme = (root / "README.md").read_text()
    code = "\n".join(p.read_text(errors="replace") for d in ("include", "src", "python", "tools", "scripts", "tests")
                     for p in (root / d).rglob("*") if p.is_file() and p.suffix in (".hpp", ".cpp", ".py", ".sh", ".cu", "")
                     and "docs" not in p.parts)
    names = table(config)
    if len(names) < 10:
        sys.exit(f"FAIL: found only {len(names)} variables in env_variables: has the table's form changed?")
    # self-check: a variable in the table that the docs lack must be reported
    if not problems(names + ["RINGTREE_NOT_DOCUMENTED"], errors_md, readme, code):
        sys.exit("FAIL: the self-check found nothing missing for RINGTREE_NOT_DOCUMENTED")
    out = problems(names, errors_md, readme, code)
    for p in out:
        print("FAIL:", p)
    if out:
        sys.exit(1)
    print(f"{len(names)} variables of env_variables, each in README's table and docs/errors.md")


main()
