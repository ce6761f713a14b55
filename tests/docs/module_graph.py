#!/usr/bin/env python3
"""The module picture of docs/architecture.md, checked against the includes.

A room is a folder under harness/: a top-level one (core, layout, compare, ...), or one of the
named parts inside core/, train/, ops/ and backends/ (core/io, train/check, backends/exec, ...).
A file belongs to the room of its folder; `#include "validate/..."` resolves to the room whose
include/ holds the header, a quoted relative include to the room of the file it names, and any
other quoted include to the room of the one private header of that name. An include
from one room into another is an arrow. The architecture promises the arrows never close a
circle; the one pair allowed to point both ways is compare and train/check, which are one library
(validate::compare) kept in two folders (docs/architecture.md, "The comparison's rooms").

Prints the rooms, the floors (the longest chain of arrows from a room down to one that uses
nothing) and the arrows, and exits 1 on any other circle.

    module_graph.py REPO [--list]
"""
import collections
import os
import re
import sys

SPLIT = ("core", "train", "ops", "backends")  # folders whose parts are rooms of their own
ONE_LIBRARY = {frozenset({"compare", "train/check"})}
SOURCES = (".cpp", ".hpp", ".cu", ".cuh", ".inc")


def room_of(harness, path):
    parts = os.path.relpath(path, harness).split(os.sep)
    if parts[0] in SPLIT and len(parts) > 2 and parts[1] not in ("include", "src"):
        return parts[0] + "/" + parts[1]
    return parts[0]


def walk(harness):
    for folder, _, files in os.walk(harness):
        for name in sorted(files):
            yield os.path.join(folder, name)


def arrows(harness):
    headers, private = {}, collections.defaultdict(set)
    for path in walk(harness):
        m = re.search(r"/include/(validate/.+)$", path)
        if m:
            headers[m.group(1)] = room_of(harness, path)
        elif path.endswith((".hpp", ".cuh", ".inc")):
            private[os.path.basename(path)].add(room_of(harness, path))
    edges, rooms = collections.defaultdict(set), set()
    for path in walk(harness):
        if not path.endswith(SOURCES):
            continue
        room = room_of(harness, path)
        rooms.add(room)
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for inc in re.findall(r'^\s*#\s*include "([^"]+)"', text, re.M):
            target = headers.get(inc)
            if target is None and not inc.startswith("validate/"):
                local = os.path.normpath(os.path.join(os.path.dirname(path), inc))
                if os.path.exists(local):
                    target = room_of(harness, local)
                elif len(private[os.path.basename(inc)]) == 1:  # found through an include directory
                    target = next(iter(private[os.path.basename(inc)]))
            if target and target != room:
                edges[room].add(target)
    return rooms, edges


def circles(rooms, edges):
    """Every arrow that closes a circle, as the circle it closes."""
    found, state = [], {}

    def visit(u, stack):
        state[u] = 1
        stack.append(u)
        for v in sorted(edges[u]):
            if state.get(v) == 1:
                found.append(stack[stack.index(v):] + [v])
            elif v not in state:
                visit(v, stack)
        stack.pop()
        state[u] = 2

    for u in sorted(rooms):
        if u not in state:
            visit(u, [])
    return found


def floors(rooms, edges, allowed):
    memo = {}

    def floor(u, seen):
        if u in memo:
            return memo[u]
        below = [floor(v, seen | {u}) for v in edges[u] if v not in seen and frozenset({u, v}) not in allowed]
        memo[u] = 1 + max(below, default=0)
        return memo[u]

    return {u: floor(u, frozenset()) for u in rooms}


def main():
    repo = sys.argv[1]
    harness = os.path.join(repo, "harness")
    rooms, edges = arrows(harness)
    bad = [c for c in circles(rooms, edges) if not (len(c) == 3 and frozenset(c) in ONE_LIBRARY)]
    level = floors(rooms, edges, ONE_LIBRARY)
    n_arrows = sum(len(v) for v in edges.values())
    print(f"module_graph: {len(rooms)} rooms, {max(level.values())} floors, {n_arrows} arrows, "
          f"{len(bad)} circle(s) (compare <-> train/check is one library)")
    if "--list" in sys.argv:
        for u in sorted(rooms, key=lambda r: (level[r], r)):
            print(f"  {level[u]:2d} {u} -> {' '.join(sorted(edges[u]))}")
    for c in bad:
        print("module_graph: an include closes a circle: " + " -> ".join(c), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
