#!/usr/bin/env python3
"""The crate's import graph, file by file: how many files, import circles, floors, and
imports that run from a lower floor back up.

Usage: python3 tools/imports.py [--edges] [--back] [--no-tests]   (from any directory)

Nodes are the files under src/ (a `mod.rs` or `lib.rs` stands for its module's own
items). An arrow A -> B means that A names an item of B: a `use` of a `crate::`,
`super::`, `self::` or child-module path, or such a path written inline in A's code
(`$crate::` paths in a macro count for the file that defines the macro). A path
resolves to the longest prefix that is a file, so a re-export through `scope/mod.rs`
is followed to the file that defines the item. `lib.rs` and `prelude.rs` (the
crate's facade) are left out: they sit above everything by design. A file's test
modules count as part of it (`--no-tests` leaves out a `#[cfg(test)]` or
`#[cfg(all(test, ...))]` module and everything after it).

Circles are the strongly connected components with more than one file. Floors come
from an order of the files that puts as few arrows as it can against it (the greedy
heuristic of Eades, Lin and Smyth): the arrows against the order are the arrows *back
up*; without them the graph has no cycle, and a file's floor is the length of the
longest path below it. The order is a heuristic, so the count of back arrows is an
upper bound on the fewest any order would give.
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
FACADE = {"lib.rs", "prelude.rs"}


def module_of(rel):
    """src-relative file path -> module path tuple ('lib.rs' -> ())."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def load():
    files = {}
    for dirpath, _, names in os.walk(ROOT):
        for n in names:
            if n.endswith(".rs"):
                full = os.path.join(dirpath, n)
                rel = os.path.relpath(full, ROOT).replace(os.sep, "/")
                with open(full, encoding="utf-8") as f:
                    files[rel] = f.read()
    return files


def strip(text):
    """Removes comments, string literals, and a trailing test module."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(\\.|[^"\\])*"', '""', text)
    if "--no-tests" in sys.argv:
        m = re.search(r"#\[cfg\((all\()?test\b[^\]]*\]\s*mod\s+\w+\s*\{", text)
        if m:
            text = text[: m.start()]
    return text


def expand_use(tree):
    """'a::{b, c::{d, e}}' -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+as\s+", "@", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:i])
                start = i + 1
        items.append(s[start:])
        for it in items:
            if not it:
                continue
            if "{" in it:
                head, rest = it.split("{", 1)
                walk(prefix + head, rest[: rest.rindex("}")])
            else:
                out.append(prefix + it.split("@")[0])

    walk("", tree)
    return out


def absolute(rel, modules, path):
    """A `use` path written in file `rel` as an absolute module path, or None."""
    me = module_of(rel)
    children = {m[-1] for m in modules if len(m) == len(me) + 1 and m[: len(me)] == me}
    segs = [s for s in path.split("::") if s]
    if segs and segs[-1] == "self":
        segs = segs[:-1]
    if not segs:
        return None
    if segs[0] in ("crate", "$crate"):
        return segs[1:]
    if segs[0] == "super":
        base = list(me)
        while segs and segs[0] == "super":
            base = base[:-1]
            segs = segs[1:]
        return base + segs
    if segs[0] == "self":
        return list(me) + segs[1:]
    if segs[0] in children:
        return list(me) + segs
    return None


def resolve(target, modules, reexports, depth=0):
    """The file that defines the item at absolute path `target`, following re-exports."""
    for k in range(len(target), -1, -1):
        mod = tuple(target[:k])
        if mod in modules:
            rel = modules[mod]
            rest = target[k:]
            if rest and depth < 8 and rest[0] in reexports.get(rel, {}):
                return resolve(reexports[rel][rest[0]] + rest[1:], modules, reexports, depth + 1)
            return rel
    return None


def main():
    files = load()
    modules = {module_of(rel): rel for rel in files}
    # Items a module re-exports (`pub use` / `pub(crate) use`), by name: where they live.
    reexports = defaultdict(dict)
    for rel, raw in files.items():
        for m in re.finditer(r"\bpub(?:\([\w:]+\))?\s+use\s+([^;]+);", strip(raw)):
            for p in expand_use(m.group(1)):
                full = absolute(rel, modules, p)
                if full:
                    name = re.split(r"@", m.group(0))[0]
                    alias = p.split("::")[-1]
                    reexports[rel][alias] = full
    edges = defaultdict(set)
    for rel, raw in files.items():
        if rel in FACADE:
            continue
        me = module_of(rel)
        text = strip(raw)
        # Inside an inline test module, `super::` names the file's own module.
        m = re.search(r"#\[cfg\((all\()?test\b[^\]]*\]\s*mod\s+\w+\s*\{", text)
        if m:
            head, tests = text[: m.start()], text[m.start() :]
            text = head + re.sub(r"\bsuper::", "self::", tests)
        children = {m[-1] for m in modules if len(m) == len(me) + 1 and m[: len(me)] == me}
        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths.extend(expand_use(m.group(1)))
        code = re.sub(r"\buse\s+[^;]+;", "", text)
        paths.extend(re.findall(r"(?<![\w:])(?:\$?crate|super)(?:::\w+)+", code))
        for p in paths:
            segs = [s for s in p.split("::") if s]
            if not segs:
                continue
            if segs[0] in ("crate", "$crate"):
                target = segs[1:]
            elif segs[0] == "super":
                base = list(me)
                while segs and segs[0] == "super":
                    base = base[:-1]
                    segs = segs[1:]
                target = base + segs
            elif segs[0] == "self":
                target = list(me) + segs[1:]
            elif segs[0] in children:
                target = list(me) + segs
            else:
                continue
            best = resolve(target, modules, reexports)
            if best and best != rel and best not in FACADE:
                edges[rel].add(best)
    nodes = sorted(r for r in files if r not in FACADE)
    arrows = sorted((a, b) for a in edges for b in edges[a])

    # Strongly connected components (Tarjan).
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            strong(v)
    circles = [sorted(c) for c in comps if len(c) > 1]

    # Eades-Lin-Smyth: an order with few arrows against it (sources first).
    out_e = {v: set(edges[v]) for v in nodes}
    in_e = defaultdict(set)
    for a, b in arrows:
        in_e[b].add(a)
    left = set(nodes)
    head, tail = [], []
    while left:
        changed = True
        while changed:
            changed = False
            for v in sorted(left):
                if not (out_e[v] & left):  # a sink: imports nothing left -> lowest
                    tail.insert(0, v)
                    left.discard(v)
                    changed = True
            for v in sorted(left):
                if not (in_e[v] & left):  # a source: imported by nothing left -> highest
                    head.append(v)
                    left.discard(v)
                    changed = True
        if left:
            v = max(sorted(left), key=lambda u: len(out_e[u] & left) - len(in_e[u] & left))
            head.append(v)  # imports many that remain, imported by few: keep it high
            left.discard(v)
    order = head + tail  # highest first

    # Sifting: move each file to the place in the order that puts the fewest of its
    # arrows against it, while that helps.
    def against(order):
        pos = {v: i for i, v in enumerate(order)}
        return sum(1 for a, b in arrows if pos[a] > pos[b])

    improved = True
    while improved:
        improved = False
        for v in list(order):
            rest = [u for u in order if u != v]
            best_i, best_cost = None, None
            for i in range(len(rest) + 1):
                # arrows against the order: into v from below it, out of v to above it
                cost = sum(1 for u in rest[i:] if v in edges[u]) + sum(1 for u in rest[:i] if u in edges[v])
                if best_cost is None or cost < best_cost:
                    best_i, best_cost = i, cost
            cur = order.index(v)
            cur_cost = sum(1 for u in order[cur + 1 :] if v in edges[u]) + sum(1 for u in order[:cur] if u in edges[v])
            if best_cost < cur_cost:
                order = rest[:best_i] + [v] + rest[best_i:]
                improved = True
    pos = {v: i for i, v in enumerate(order)}
    back = sorted((a, b) for a, b in arrows if pos[a] > pos[b])
    down = defaultdict(set)
    for a, b in arrows:
        if pos[a] < pos[b]:
            down[a].add(b)
    floor = {}
    for v in reversed(order):
        floor[v] = 1 + max((floor[w] for w in down[v]), default=-1)

    print(f"files: {len(nodes)} (lib.rs and prelude.rs left out)")
    print(f"import arrows: {len(arrows)}")
    print(f"floors: {max(floor.values()) + 1}")
    print(f"import circles: {len(circles)}")
    for c in circles:
        print(f"  {len(c)} files: {' '.join(c)}")
    print(f"arrows back up: {len(back)}")
    if "--back" in sys.argv:
        for a, b in back:
            print(f"  {a} (floor {floor[a]}) -> {b} (floor {floor[b]})")
    if "--edges" in sys.argv:
        for a, b in arrows:
            print(f"  {a} -> {b}")


if __name__ == "__main__":
    main()
