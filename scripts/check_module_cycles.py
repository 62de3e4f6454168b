#!/usr/bin/env python3
"""Fails when src/'s modules depend on each other in a cycle.

Reads every .rs file under src/, takes each path that starts with
`crate::`, `super::` or `self::` (in `use` trees and in expressions; not in
comments or string literals) and resolves it to the module it names. Two
graphs are checked:

* top level: one node per module of the crate root (error, allocator,
  tensor, ffi, ...), an edge A -> B when a file of A names B;
* siblings: for each module with sub-modules, one node per direct
  sub-module, an edge a -> b when a file of a names its sibling b. Paths
  that name the parent itself (types it defines) are not edges: a parent
  owns its children. A path through a parent's `pub use` of a sub-module's
  item names that sub-module.

Unit-test code (files named tests.rs or *_tests.rs, and inline
`#[cfg(test)] mod ... { }` blocks) is left out: tests may exercise a lower
layer through a higher one.

Prints both layer orders (each module after everything it uses) and exits
1 naming the modules of every cycle found.

    python3 scripts/check_module_cycles.py [SRC_DIR]
"""

import os
import re
import sys


def strip_comments_and_strings(text):
    """Blanks out comments, string and char literals, keeping newlines."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    if text[i] == "\n":
                        out.append("\n")
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'r(#*)"', text[i:])
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}') or a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", text[i:])
            if m:
                out.append("' '")
                i += m.end()
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_test_modules(text):
    """Removes `#[cfg(test)] mod name { ... }` blocks (text already free of
    comments and strings, so braces balance)."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", text)
        if not m:
            return text
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        text = text[:m.start()] + "\n" * text.count("\n", m.start(), j) + text[j:]


def expand_use_tree(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e']."""
    tree = re.sub(r"\s+", "", tree)
    brace = tree.find("{")
    if brace < 0:
        return [re.sub(r"as\w+$", "", tree)] if tree else []
    prefix, body = tree[:brace], tree[brace + 1:tree.rfind("}")]
    parts, depth, start = [], 0, 0
    for k, ch in enumerate(body):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:k])
            start = k + 1
    parts.append(body[start:])
    paths = []
    for p in parts:
        for sub in expand_use_tree(p):
            paths.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return paths


def referenced_paths(text):
    """Every crate-, super- or self-relative path the code names."""
    paths = []
    for m in re.finditer(r"\buse\s+([^;]*);", text):
        paths.extend(p for p in expand_use_tree(m.group(1)) if re.match(r"(crate|super|self)\b", p))
    text = re.sub(r"\buse\s+[^;]*;", "", text)
    paths.extend(m.group(0) for m in re.finditer(r"\b(?:crate|super|self)(?:::\w+)+", text))
    return paths


def module_of_file(rel):
    """src-relative file -> module path as a tuple (lib.rs -> ())."""
    parts = rel[:-3].split(os.sep)
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return tuple(parts)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "src")
    src = os.path.normpath(src)
    files = {}
    for root, _, names in os.walk(src):
        for name in names:
            if name.endswith(".rs"):
                rel = os.path.relpath(os.path.join(root, name), src)
                files[rel] = module_of_file(rel)
    modules = set(files.values())
    # A module's children are also the inline `pub mod x { }` blocks; they
    # are not separate nodes, so a path into one resolves to the file's module.

    # Crate-root re-exports: crate::Tensor -> tensor.
    lib = strip_comments_and_strings(open(os.path.join(src, "lib.rs")).read())
    root_reexport = {}
    for m in re.finditer(r"\bpub\s+use\s+([^;]*);", lib):
        for p in expand_use_tree(m.group(1)):
            segs = p.split("::")
            root_reexport[segs[-1]] = segs[0]

    # Each module's re-exports of its sub-modules' items: iterator::Flags ->
    # iterator::config, so a path through a parent's re-export still names
    # the sub-module that defines the item.
    reexport = {}
    for rel, mod in files.items():
        text = strip_comments_and_strings(open(os.path.join(src, rel)).read())
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]*);", text):
            for p in expand_use_tree(m.group(1)):
                segs = [x for x in p.split("::") if x != "self"]
                if len(segs) >= 2 and mod + (segs[0],) in modules:
                    reexport.setdefault(mod, {})[segs[-1]] = mod + tuple(segs[:-1])

    def resolve(current, path):
        segs = path.split("::")
        if segs[0] == "crate":
            base, segs = (), segs[1:]
            if len(segs) == 1 and segs[0] in root_reexport:
                segs = [root_reexport[segs[0]]]
        else:
            base = current
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    base = base[:-1]
                segs = segs[1:]
        mod = base
        for s in segs:
            if mod + (s,) in modules:
                mod = mod + (s,)
            else:
                target = reexport.get(mod, {}).get(s)
                if target is not None:
                    while len(target) > len(mod) and target not in modules:
                        target = target[:-1]
                    mod = target
                break
        return mod

    edges = {}  # module -> set(module), at file granularity
    evidence = {}  # (module, module) -> ["file: path", ...]
    for rel, mod in sorted(files.items()):
        base = os.path.basename(rel)
        if base == "tests.rs" or base.endswith("_tests.rs"):
            continue
        text = strip_test_modules(strip_comments_and_strings(open(os.path.join(src, rel)).read()))
        for p in referenced_paths(text):
            target = resolve(mod, p)
            if target != mod:
                edges.setdefault(mod, set()).add(target)
                evidence.setdefault((mod, target), []).append(f"{rel}: {p}")

    failed = False

    def explain(a, b, depth):
        for (x, y), why in sorted(evidence.items()):
            if x[:depth + 1] == a and y[:depth + 1] == b:
                for w in sorted(set(why)):
                    print(f"    {w}")

    def check(title, nodes, graph, prefix=()):
        nonlocal failed
        order, state, cycles = [], {}, []

        def visit(n, stack):
            state[n] = 1
            stack.append(n)
            for m in sorted(graph.get(n, ())):
                if state.get(m) == 1:
                    cycles.append(stack[stack.index(m):] + [m])
                elif m not in state:
                    visit(m, stack)
            stack.pop()
            state[n] = 2
            order.append(n)

        for n in sorted(nodes):
            if n not in state:
                visit(n, [])
        if cycles:
            failed = True
            for c in cycles:
                print(f"CYCLE ({title}): " + " -> ".join(c))
                for a, b in zip(c, c[1:]):
                    print(f"  {a} -> {b}:")
                    explain(prefix + (a,), prefix + (b,), len(prefix))
        else:
            print(f"{title}: " + ", ".join(order))

    # Top level.
    top_nodes = {m[0] for m in modules if m}
    top = {}
    for a, targets in edges.items():
        for b in targets:
            if a and b and a[0] != b[0]:
                top.setdefault(a[0], set()).add(b[0])
    check("crate", top_nodes, top)

    # Siblings, for each module with sub-modules.
    parents = sorted({m[:-1] for m in modules if len(m) >= 2})
    for parent in parents:
        kids = {m[len(parent)] for m in modules if len(m) > len(parent) and m[:len(parent)] == parent}
        graph = {}
        for a, targets in edges.items():
            for b in targets:
                if (len(a) > len(parent) and len(b) > len(parent) and a[:len(parent)] == parent
                        and b[:len(parent)] == parent and a[len(parent)] != b[len(parent)]):
                    graph.setdefault(a[len(parent)], set()).add(b[len(parent)])
        check("::".join(parent), kids, graph, parent)

    if failed:
        print("module cycles found: break each one (see docs/ARCHITECTURE.md)")
        sys.exit(1)
    print("no module cycles")


if __name__ == "__main__":
    main()
