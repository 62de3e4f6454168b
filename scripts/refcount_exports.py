#!/usr/bin/env python3
"""Writes src/ffi/refcount_exports.rs: the eleven refcount functions of each
refcounted handle type (tsr_X_incref, _decref, _use_count, _weak_use_count,
_downgrade and tsr_weak_X_lock, _incref, _decref, _expired, _use_count,
_weak_use_count), from the one table below.

cbindgen reads source as written (it does not expand macros), so the
exports are generated as plain functions, each a one-line call to its
shared body in src/ffi/refcount.rs. A new refcounted handle type is one
row here (and its RefTraits line in include/tessera/ref.hpp, its rows in
c_tests/bad_input_table.txt).

    python3 scripts/refcount_exports.py           # write the file
    python3 scripts/refcount_exports.py --check   # fail if it is stale (CI)
"""
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "ffi" / "refcount_exports.rs"

# (name, strong handle and its parameter name, weak handle and its
#  parameter name, what the last strong reference does, what "expired"
#  means)
HANDLES = [
    ("storage", "TsrStorage s", "TsrWeakStorage w",
     "frees the data (weak references keep only the object)",
     "its data is freed"),
    ("tensor", "TsrTensor t", "TsrWeakTensor w",
     "releases the tensor's storage reference",
     "its strong count reached 0"),
    ("allocator", "TsrAllocator a", "TsrWeakAllocator w",
     "releases the allocator (a plugin's release callback runs once no "
     "allocation needs it)",
     "its strong count reached 0"),
    ("object", "TsrObject obj", "TsrWeakObject weak",
     "runs release_resources (if weak references remain) or destroys the "
     "object",
     "its strong count reached 0"),
]

# (suffix, weak?, doc, safety, parameters after the handle, return type, body)
# {h}, {w}: the strong and weak handle parameters' names; {what}: the row's last-reference text;
# {expired}: the row's expiry text; {name}: the handle's name.
FUNCTIONS = [
    ("incref", False,
     "Adds a strong reference. Errors: TSR_ERR_NULL_POINTER, TSR_ERR_DEAD_OBJECT "
     "(the strong count already reached 0), TSR_ERR_INVALID_ARGUMENT (the count "
     "would pass 2^63).",
     "`{h}` NULL or a handle whose memory is alive.",
     "", "TsrStatus", "rc::incref(\"{fn}\", {h})"),
    ("decref", False,
     "Drops a strong reference; the last one {what}. Errors: TSR_ERR_NULL_POINTER, "
     "TSR_ERR_DEAD_OBJECT (the strong count is already 0: detectable while weak "
     "references keep the memory).",
     "`{h}` NULL or a live handle the caller owns a reference of.",
     "", "TsrStatus", "rc::decref(\"{fn}\", {h})"),
    ("use_count", False,
     "The strong count; 0 for NULL.",
     "`{h}` NULL or a handle whose memory is alive.",
     "", "usize", "rc::counts(\"{fn}\", {h}).0"),
    ("weak_use_count", False,
     "The raw weak count (weak references + 1 while the strong count is not 0); "
     "0 for NULL.",
     "`{h}` NULL or a handle whose memory is alive.",
     "", "usize", "rc::counts(\"{fn}\", {h}).1"),
    ("downgrade", False,
     "Writes a new weak reference to `*out`. Errors: TSR_ERR_NULL_POINTER, "
     "TSR_ERR_DEAD_OBJECT.",
     "`{h}` NULL or a live handle; `out` NULL or writable.",
     "out: *mut *mut {weak}", "TsrStatus", "rc::downgrade(\"{fn}\", {h}, out)"),
    ("lock", True,
     "Writes a new strong reference to `*out`, or NULL once the {name} expired "
     "(not an error). Errors: TSR_ERR_NULL_POINTER, TSR_ERR_INVALID_ARGUMENT (the "
     "strong count is at its limit, 2^63 - 1).",
     "`{w}` NULL or a live weak handle; `out` NULL or writable.",
     "out: *mut *mut {strong}", "TsrStatus", "rc::lock(\"{fn}\", {w}, out)"),
    ("incref", True,
     "Adds a weak reference. Errors: TSR_ERR_NULL_POINTER, TSR_ERR_DEAD_OBJECT.",
     "`{w}` NULL or a live weak handle.",
     "", "TsrStatus", "rc::weak_incref(\"{fn}\", {w})"),
    ("decref", True,
     "Drops a weak reference; the last reference of any kind frees the {name}'s "
     "memory. Errors: TSR_ERR_NULL_POINTER, TSR_ERR_DEAD_OBJECT.",
     "`{w}` NULL or a live weak handle the caller owns.",
     "", "TsrStatus", "rc::weak_decref(\"{fn}\", {w})"),
    ("expired", True,
     "Whether the {name} expired ({expired}); true for NULL.",
     "`{w}` NULL or a live weak handle.",
     "", "bool", "rc::expired(\"{fn}\", {w})"),
    ("use_count", True,
     "The strong count seen through a weak handle; 0 for NULL.",
     "`{w}` NULL or a live weak handle.",
     "", "usize", "rc::counts(\"{fn}\", {w}).0"),
    ("weak_use_count", True,
     "The raw weak count seen through a weak handle; 0 for NULL.",
     "`{w}` NULL or a live weak handle.",
     "", "usize", "rc::counts(\"{fn}\", {w}).1"),
]


def wrap(text, prefix, width=80):
    """Greedy word wrap of `text` into lines starting with `prefix`."""
    lines, line = [], prefix
    for word in text.split():
        candidate = word if line == prefix else " " + word
        if len(line) + len(candidate) > width and line != prefix:
            lines.append(line)
            line = prefix + word
        else:
            line += candidate
    lines.append(line)
    return lines


def export(name, strong, weak, what, expired, f):
    suffix, is_weak, doc, safety, extra, ret, body = f
    fn = f"tsr_weak_{name}_{suffix}" if is_weak else f"tsr_{name}_{suffix}"
    (strong, h), (weak, w) = strong.split(), weak.split()
    fmt = dict(fn=fn, name=name, what=what, expired=expired, strong=strong, weak=weak, h=h, w=w)
    const = suffix in ("use_count", "weak_use_count", "expired")
    handle_type = weak if is_weak else strong
    param = w if is_weak else h
    args = [f"{param}: {'*const' if const else '*mut'} {handle_type}"]
    if extra:
        args.append(extra.format(**fmt))
    out = wrap(doc.format(**fmt), "/// ")
    out += ["///", "/// # Safety"] + wrap(safety.format(**fmt), "/// ")
    out.append("#[no_mangle]")
    signature = f'pub unsafe extern "C" fn {fn}({", ".join(args)}) -> {ret} {{'
    if len(signature) > 100:
        out.append(f'pub unsafe extern "C" fn {fn}(')
        out += [f"    {a}," for a in args]
        out.append(f") -> {ret} {{")
    else:
        out.append(signature)
    out += [
        "    // SAFETY: the handle contract of ffi/handle.rs, passed on; NULL",
        "    // is checked inside.",
        f"    unsafe {{ {body.format(**fmt)} }}",
        "}",
    ]
    return "\n".join(out)


def generate():
    parts = [
        "//! The refcount functions of every refcounted handle type. GENERATED by",
        "//! scripts/refcount_exports.py from its table: edit the table, run the",
        "//! script (CI fails on a stale file). Each is a one-line call to its",
        "//! shared body in ffi/refcount.rs.",
        "",
        "use super::refcount as rc;",
        "use super::types::*;",
    ]
    for row in HANDLES:
        parts.append("")
        parts.append(f"// ---- {row[1].split()[0]} and {row[2].split()[0]} ----")
        for f in FUNCTIONS:
            parts.append("")
            parts.append(export(*row, f))
    return "\n".join(parts) + "\n"


def main():
    text = generate()
    if sys.argv[1:] == ["--check"]:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python3 scripts/refcount_exports.py",
                  file=sys.stderr)
            return 1
        print(f"{OUT.relative_to(ROOT)} is fresh ({len(HANDLES) * len(FUNCTIONS)} exports)")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}: {len(HANDLES) * len(FUNCTIONS)} exports")
    return 0


if __name__ == "__main__":
    sys.exit(main())
