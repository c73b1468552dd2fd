#!/usr/bin/env python3
"""Which way dependencies point (docs/design.md), as rules on the includes
of include/ringtree/, so that a change cannot break them silently:

1. Every folder stands on one floor; a header includes headers of its own
   folder or of lower floors, never of a higher one.
2. Above transport/, only the transport concept may be included from it
   (transport.hpp, topology.hpp, exchange.hpp): algorithms, tuning, the
   simulator, the trace, the communicator and train are written against
   the concept, never a particular transport. The front doors and teach/
   (which runs calls on local_world) may name transports.
3. Every folder and top-level header has a floor here: a new one must be
   placed before it can be used.

Usage: include_rules.py SOURCE_ROOT. Before checking the tree it checks
itself: an upward include and a transport named above the concept, added
to a copy of the graph, must both be reported.
"""
import pathlib
import re
import sys

# Low to high. Folders on one floor may not include each other.
FLOORS = {
    "core": 0,
    "memory": 1,
    "transport": 2,
    "algorithms": 3,
    "tuning": 4,
    "sim": 5,
    "trace": 6,
    "communicator": 7,
    "train": 8,
    "teach": 8,
}
# Top-level headers: the communicator's front door and the doors above it.
TOP = {
    "communicator.hpp": ("communicator", 7),
    "communicator-inl.hpp": ("communicator", 7),
    "mpi.hpp": ("front door", 9),
    "any_communicator.hpp": ("front door", 9),
    "any_communicator-inl.hpp": ("front door", 9),
    "prebuilt.hpp": ("front door", 9),
    "ringtree.hpp": ("front door", 9),
}
CONCEPT = {"transport/transport.hpp", "transport/topology.hpp", "transport/exchange.hpp"}
MAY_NAME_TRANSPORTS = {"teach", "front door"}
INCLUDE = re.compile(r'^\s*#\s*include\s*<ringtree/([^>]+)>', re.M)


def place(header):
    """(room, floor) of a header path relative to include/ringtree."""
    parts = header.split("/")
    if len(parts) == 1:
        return TOP.get(header, (None, None))
    return parts[0], FLOORS.get(parts[0])


def problems(graph):
    """graph: header -> included headers (both relative to include/ringtree)."""
    out = []
    for h, incs in sorted(graph.items()):
        room, floor = place(h)
        if floor is None:
            out.append(f"{h}: its folder or name has no floor in tests/package/include_rules.py (place it)")
            continue
        for inc in incs:
            if inc not in graph:
                out.append(f"{h}: includes <ringtree/{inc}>, which does not exist")
                continue
            iroom, ifloor = place(inc)
            if ifloor is None:
                continue  # reported as itself
            if iroom != room and ifloor >= floor:
                out.append(f"{h} ({room}, floor {floor}) includes {inc} ({iroom}, floor {ifloor}): "
                           "includes point down only")
            elif (iroom == "transport" and room != "transport" and inc not in CONCEPT
                  and room not in MAY_NAME_TRANSPORTS):
                out.append(f"{h} ({room}) includes {inc}: above transport/, only the concept "
                           f"({', '.join(sorted(CONCEPT))}) may be included")
    return out


def graph_of(root):
    base = root / "include" / "ringtree"
    return {str(p.relative_to(base)): INCLUDE.findall(p.read_text()) for p in base.rglob("*.hpp")}


def self_test(graph):
    broken_up = {h: list(v) for h, v in graph.items()}
    broken_up["core/error.hpp"].append("communicator.hpp")
    named = {h: list(v) for h, v in graph.items()}
    named["algorithms/ring.hpp"].append("transport/local.hpp")
    unplaced = dict(graph)
    unplaced["newroom/thing.hpp"] = []
    for what, g, needle in [("an upward include", broken_up, "core/error.hpp"),
                            ("a transport named by an algorithm", named, "algorithms/ring.hpp"),
                            ("a folder without a floor", unplaced, "newroom/thing.hpp")]:
        if not any(p.startswith(needle) for p in problems(g)):
            sys.exit(f"include_rules.py does not notice {what}: the check itself is broken")


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    graph = graph_of(root)
    for need in ["core/error.hpp", "algorithms/ring.hpp", "communicator.hpp", "transport/local.hpp"]:
        if need not in graph:
            sys.exit(f"include_rules.py: {need} is missing under {root}/include/ringtree (wrong root?)")
    self_test(graph)
    found = problems(graph)
    for p in found:
        print(p)
    if found:
        sys.exit(f"{len(found)} include(s) break the layering (docs/design.md, 'Which way dependencies point')")
    print(f"{len(graph)} headers, {sum(len(v) for v in graph.values())} includes: every one points down")


if __name__ == "__main__":
    main()
