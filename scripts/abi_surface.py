#!/usr/bin/env python3
"""The ABI surface of tessera's C header, one item per line, for the ABI
check (.ci/abi-check.sh) and the per-release records in abi/<version>/.

    scripts/abi_surface.py declarations include/tessera.h   > declarations.txt
    scripts/abi_surface.py symbols target/debug/libtessera.so > symbols.txt

declarations: every function prototype, type definition (struct, union,
enum, typedef) and TSR_* constant of the header, as "KIND NAME<TAB>text"
with comments removed and whitespace collapsed, so that a line differs
exactly when the declaration changed. TSR_VERSION_* are left out (they
change with every release). Preprocessor conditionals are flattened: the
DLPack block, declared under dlpack.h's guard, is part of the surface.

symbols: the names a shared library exports (nm -D --defined-only),
without symbol versions.
"""
import re
import subprocess
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def declarations(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    # The extern "C" braces of C++ (on lines of their own) are not blocks.
    text = re.sub(r'(?m)^\s*extern "C"\s*\{\s*$', "", text)
    text = re.sub(r'(?m)^\s*\}\s*//\s*extern "C".*$', "", text)
    text = strip_comments(text)
    items = {}
    body = []
    # Conditionals on __cplusplus keep their C branch; other conditionals
    # are flattened (both branches kept).
    skipping = []  # per open #if: whether its current branch is C++-only
    continued = False
    for line in text.splitlines():
        directive = re.match(r"\s*#\s*(\w+)(.*)$", line)
        if continued or directive:
            continued = line.rstrip().endswith("\\")
            if directive and not continued:
                word, rest = directive.group(1), directive.group(2)
                if word in ("if", "ifdef", "ifndef"):
                    cpp = "__cplusplus" in rest
                    skip = cpp and word != "ifndef" and "!" not in rest
                    skipping.append([cpp, skip])
                elif word in ("else", "elif") and skipping and skipping[-1][0]:
                    skipping[-1][1] = not skipping[-1][1]
                elif word == "endif" and skipping:
                    skipping.pop()
            if directive and not any(skip for _, skip in skipping):
                m = re.match(r"\s*#\s*define\s+(TSR_[A-Z0-9_]+)\s+(.+)$", line)
                if m and not m.group(1).startswith("TSR_VERSION_"):
                    items["const " + m.group(1)] = " ".join(m.group(2).split())
            continue
        if not any(skip for _, skip in skipping):
            body.append(line)
    code = "\n".join(body)
    # Split into top-level statements (ending with ';' at brace depth 0).
    depth, start = 0, 0
    for i, c in enumerate(code):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            stmt = " ".join(code[start : i + 1].split())
            start = i + 1
            if not stmt or stmt == ";":
                continue
            if stmt.startswith("namespace"):  # the C++ registration helper
                continue
            key = classify(stmt)
            if key:
                items[key] = stmt
    return items


def classify(stmt):
    m = re.search(r"\b(tsr_[a-z0-9_]+)\s*\(", stmt)
    if m and not stmt.startswith("typedef"):
        return "function " + m.group(1)
    if stmt.startswith("typedef"):
        m = re.search(r"\}\s*([A-Za-z_]\w*)\s*;$", stmt)  # typedef struct {...} Name;
        if not m and "{" not in stmt:
            m = re.search(r"^typedef [^(]*\(\s*\*\s*([A-Za-z_]\w*)\s*\)", stmt)  # pointer
        if not m:
            m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*;$", stmt)
        return "type " + m.group(1)
    m = re.match(r"(struct|union|enum) ([A-Za-z_]\w*)", stmt)
    if m:
        return "%s %s" % (m.group(1), m.group(2))
    return None


def symbols(path):
    out = subprocess.run(
        ["nm", "-D", "--defined-only", path], check=True, capture_output=True, text=True
    ).stdout
    names = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    return sorted(names)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("declarations", "symbols"):
        sys.exit(__doc__)
    if sys.argv[1] == "declarations":
        for key, text in sorted(declarations(sys.argv[2]).items()):
            print("%s\t%s" % (key, text))
    else:
        for name in symbols(sys.argv[2]):
            print(name)


if __name__ == "__main__":
    main()
