#!/usr/bin/env python3
"""Generates the bad-input test and table of tessera's C API.

Reads the prototypes of include/tessera.h and the cases of
c_tests/bad_input_table.txt, and writes:

- c_tests/test_bad_input.c: one C function per case, run between
  fx_setup() and fx_teardown() of c_tests/bad_input_fixtures.h; at run time
  it also parses include/tessera.h and FAILS if the header declares a
  function the table does not cover;
- docs/BAD_INPUT.md: the table, for people.

    python3 scripts/bad_input.py           # regenerate both files
    python3 scripts/bad_input.py --check   # fail if they are stale or a
                                           # function is not covered

Refuses to generate when the table misses an exported function, when a
function lacks a `null` case for one of its pointer parameters, or when a
parameter that takes a code or a dim (dtype, device, memory format, ndim,
dim, ...) has no `bad` case (or `skip` line saying why).

Table syntax (see the head of the table file): `fn NAME` starts a
function, followed by indented case lines:

    (`fn NAME [pending]`: a function not in the header yet, e.g. on
    another branch; its cases are used as soon as the header declares it)
    null PARAM: EXPECT             PARAM is NULL, the others their defaults
    bad P=VALUE[, P=VALUE]: EXPECT those parameters replaced (C expressions)
    call: EXPECT                   every parameter at its default
    skip PARAM: REASON             no out-of-range case for PARAM (doc only)
    note: TEXT                     a remark for the documentation

EXPECT is one of
    STATUS ["substring"]           a TsrStatus function returns TSR_ERR_STATUS
                                   (or OK), with a message "NAME: ..."
                                   containing the substring; a failing call
                                   leaves every out-pointer untouched
    => C_VALUE [MSG]               a value function returns C_VALUE
    check C_CONDITION [MSG]        a condition on the returned value `r`
    void [MSG]                     a void function returns
MSG is `+msg ["substring"]` (a message naming the function is recorded),
`?msg` (not checked) or nothing (no message is recorded). Any EXPECT may be
followed by `then C_STATEMENTS` (run after the checks: cleanup, more
checks) and ` -- text` (the result column of the documentation).
"""

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEADER = ROOT / "include" / "tessera.h"
TABLE = ROOT / "c_tests" / "bad_input_table.txt"
TEST = ROOT / "c_tests" / "test_bad_input.c"
DOC = ROOT / "docs" / "BAD_INPUT.md"

STATUSES = [
    "OK", "INVALID_ARGUMENT", "NULL_POINTER", "OUT_OF_MEMORY", "SHAPE", "DTYPE", "DEVICE",
    "OVERLAP", "NOT_RESIZABLE", "UNSUPPORTED", "INTERNAL", "DEAD_OBJECT", "ZERO_DIVISION",
    "READ_ONLY", "IO", "FORMAT", "CANCELLED",
]

# Default argument of a parameter: (type regex, name regex, C expression).
# An optional fourth item limits the entry to the functions whose name
# matches it. The first match wins. Handles are live fixtures, out-pointers point into
# the scratch struct S, arrays and numbers describe F.t (float [2, 3]).
DEFAULTS = [
    (r"const char \*", r"name", '"/tessera-no-such-segment"', r"tsr_storage_open_shared"),
    (r"const char \*", r"path", '"/nonexistent/tessera.bin"', r"tsr_storage_from_file"),
    (r"const char \*", r"path", 'fx_snapshot_path()', r"tsr_memory_snapshot"),
    (r"struct TsrTensor \*\*", r".*", "&S.tensor"),
    (r"(const )?struct TsrTensor \*", r".*", "F.t"),
    (r"struct TsrStorage \*\*", r".*", "&S.storage"),
    (r"(const )?struct TsrStorage \*", r".*", "F.s"),
    (r"struct TsrAllocator \*\*", r".*", "&S.allocator"),
    (r"(const )?struct TsrAllocator \*", r".*", "F.ca",
     r"tsr_caching_allocator_(memory_stats|reset_accumulated|set_memory_fraction)"),
    (r"(const )?struct TsrAllocator \*", r".*", "F.a"),
    (r"struct TsrObject \*\*", r".*", "&S.object"),
    (r"(const )?struct TsrObject \*", r".*", "F.o"),
    (r"struct TsrWeakTensor \*\*", r".*", "&S.weak_tensor"),
    (r"(const )?struct TsrWeakTensor \*", r".*", "F.wt"),
    (r"struct TsrWeakStorage \*\*", r".*", "&S.weak_storage"),
    (r"(const )?struct TsrWeakStorage \*", r".*", "F.ws"),
    (r"struct TsrWeakAllocator \*\*", r".*", "&S.weak_allocator"),
    (r"(const )?struct TsrWeakAllocator \*", r".*", "F.wa"),
    (r"struct TsrWeakObject \*\*", r".*", "&S.weak_object"),
    (r"(const )?struct TsrWeakObject \*", r".*", "F.wo"),
    (r"struct TsrIterConfig \*\*", r".*", "&S.config"),
    (r"struct TsrIterConfig \*", r".*", "F.cfg"),
    (r"struct TsrIter \*\*", r".*", "&S.iter"),
    (r"(const )?struct TsrIter \*", r".*", "F.it"),
    (r"struct TsrDataPtr \*", r"out|old_out", "&S.data_ptr"),
    (r"(const )?struct TsrDataPtr \*", r".*", "&F.dp"),
    (r"struct TsrAllocatorStats \*", r".*", "&S.astats"),
    (r"struct TsrCachingStats \*", r".*", "&S.cstats"),
    (r"struct TsrScalar \*", r".*", "&S.scalar"),
    (r"struct TsrCachingMemoryStats \*", r".*", "&S.mstats"),
    (r"const struct TsrDevice \*", r".*", "&FX_CPU"),
    (r"const struct TsrAllocatorVTable \*", r".*", "&FX_VTABLE"),
    (r"const struct TsrObjectVTable \*", r".*", "&FX_OBJECT_VTABLE"),
    (r"const struct TsrCachingOptions \*", r".*", "&F.copts"),
    (r"const struct TsrTensorDesc \*", r".*", "&FX_DESC"),
    (r"DLManagedTensorVersioned \*\*", r".*", "&S.dl"),
    (r"DLManagedTensorVersioned \*", r".*", "fx_dl()"),
    (r"DLManagedTensor \*\*", r".*", "&S.dl_legacy"),
    (r"DLManagedTensor \*", r".*", "fx_dl_legacy()"),
    (r"struct TsrCheckpoint \*\*", r".*", "&S.ckpt"),
    (r"(const )?struct TsrCheckpoint \*", r".*", "F.ckpt"),
    (r"const char \*const \*", r"names", "FX_NAMES"),
    (r"const struct TsrLoadOptions \*", r".*", "&FX_LOAD_OPTS"),
    (r"const struct TsrSetting \*", r"settings", "FX_SETTINGS"),
    (r"size_t", r"n_settings", "2"),
    (r"size_t", r"n", "1", r"tsr_checkpoint_load_many.*"),
    (r"size_t \*", r"out", "&S.index"),
    (r"int64_t", r"start", "1", r"tsr_checkpoint_load_rows"),
    (r"int64_t", r"stop", "3", r"tsr_checkpoint_load_rows"),
    (r"struct TsrTensorDict \*\*", r".*", "&S.dict"),
    (r"(const )?struct TsrTensorDict \*", r".*", "F.dict"),
    (r"const char \*", r"name", '"step"', r"tsr_dict_(set_)?value_json"),
    (r"const char \*", r"json", '"5"'),
    (r"const char \*", r"name", '"w"'),
    (r"const char \*", r"host", '"fixture"'),
    (r"const char \*", r"enter", '"main"'),
    (r"const char \*", r"key", '"k"'),
    (r"const char \*", r"value", '"v"'),
    (r"const char \*", r"path", "fx_path()"),
    (r"const char \*", r"directory", "fx_shard_dir()"),
    (r"TsrFormat", r".*", "TSR_FORMAT_TORCH"),
    (r"uint32_t", r"flags", "0"),
    (r"TsrDType \*", r".*", "&S.dtype"),
    (r"bool \*", r".*", "&S.flag"),
    (r"void \*\*", r".*", "&S.ptr"),
    (r"int \*", r"fd_out", "&S.fd"),
    (r"int", r"fd", "-1"),
    (r"int", r"device", "0"),
    (r"ptrdiff_t", r"size", "16"),
    (r"char \*", r"buf", "F.buf"),
    (r"const int64_t \*", r"sizes|shape", "FX_SIZES"),
    (r"const int64_t \*", r"strides", "FX_STRIDES"),
    (r"const int64_t \*", r"dims", "FX_DIMS"),
    (r"const int64_t \*", r"squash_dims", "FX_DIMS"),
    (r"const char \*", r"message", '"a plugin message"'),
    (r"TsrFileMode", r".*", "TSR_FILE_READ_ONLY"),
    (r"void \*", r"acc", "&F.acc"),
    (r"void \*", r"dst", "F.buf"),
    (r"const void \*", r"src", "F.buf2"),
    (r"const void \*", r"data", "F.buf2", r"tsr_tensor_from_data"),
    (r"void \*", r"ptr|self_|user", "NULL"),
    (r"void \*", r"stream", "NULL"),
    (r"int32_t", r"device", "0"),
    (r"ptrdiff_t", r"stream", "-1"),
    (r"TsrLoop2d", r".*", "fx_loop"),
    (r"TsrLoop2dN", r".*", "fx_loop_n"),
    (r"TsrReduceLoop", r".*", "fx_reduce_loop"),
    (r"TsrReduceCombine", r".*", "fx_combine"),
    (r"TsrSubIterFn", r".*", "fx_sub"),
    (r"TsrMemoryReportFn", r".*", "fx_reporter"),
    (r"TsrOomObserverFn", r".*", "fx_oom_observer"),
    (r"TsrOomInfoObserverFn", r".*", "fx_oom_info_observer"),
    (r"TsrHostFramesFn", r".*", "fx_host_frames"),
    (r"const struct TsrHistoryOptions \*", r".*", "&FX_HISTORY"),
    (r"TsrSnapshotFormat", r".*", "TSR_SNAPSHOT_JSON"),
    (r"TsrDeleterFn", r".*", "fx_deleter"),
    (r"TsrDType", r".*", "TSR_FLOAT"),
    (r"TsrDeviceType", r".*", "TSR_PRIVATE_USE1"),
    (r"struct TsrDevice", r".*", "FX_CPU"),
    (r"TsrMemoryFormat", r".*", "TSR_CONTIGUOUS"),
    (r"TsrStatus", r".*", "TSR_ERR_SHAPE"),
    (r"TsrRoundingMode", r".*", "TSR_ROUNDING_TRUNC"),
    (r"struct TsrScalar", r".*", "tsr_scalar_float(1.5)"),
    (r"int64_t", r"ndims?", "2"),
    (r"int64_t", r"dim1|end_dim|length", "1"),
    (r"int64_t", r"end", "6"),
    (r"int64_t", r"value", "7"),
    (r"int64_t", r".*", "0"),
    (r"size_t", r"nbytes", "16"),
    (r"size_t", r".*", "8"),
    (r"uint8_t", r".*", "0"),
    (r"bool", r"parallelize", "false"),
    (r"bool", r".*", "true"),
    (r"int32_t", r"n", "tsr_get_num_threads()"),
    (r"int8_t", r".*", "-1"),
    (r"double", r"im", "2.0"),
    (r"double", r"fraction", "0.0"),
    (r"double", r".*", "1.5"),
    (r"uint64_t", r".*", "7"),
]

POINTER_TYPEDEFS = {
    "TsrLoop2d", "TsrLoop2dN", "TsrHostFramesFn", "TsrReduceLoop", "TsrReduceCombine",
    "TsrSubIterFn", "TsrMemoryReportFn",
    "TsrDeleterFn",
}
# Parameters that take a code or a dim: each needs a `bad` case or a `skip`.
RANGE_TYPES = {
    "TsrDType", "TsrDeviceType", "struct TsrDevice", "TsrMemoryFormat", "TsrRoundingMode",
    "TsrFormat",
}
RANGE_NAMES = {"ndim", "ndims", "dim", "dim0", "dim1", "start_dim", "end_dim", "arg", "i", "index"}


class TableError(Exception):
    pass


def exported_functions(text):
    """The tsr_ prototypes of the header: name -> (return type, [(type, name)]).

    Mirrors the run-time scan of test_bad_input.c: every identifier
    tsr_... followed by '(' outside comments and preprocessor lines whose
    preceding non-blank character is a letter, digit, '_' or '*' (a return
    type), i.e. a declaration rather than a call like (void)tsr_x(...).
    """
    start = text.index('extern "C" {\n#endif // __cplusplus')
    end = text.index('}  // extern "C"')
    body = re.sub(r"/\*.*?\*/", " ", text[start:end], flags=re.S)
    body = re.sub(r"//[^\n]*", " ", body)
    out = {}
    for m in re.finditer(r"^([A-Za-z_][\w \*]*?[\w\*])\s*(tsr_\w+)\(([^)]*)\);", body, re.M):
        ret, name, args = m.group(1).strip(), m.group(2), " ".join(m.group(3).split())
        params = []
        if args != "void":
            for a in args.split(","):
                pm = re.match(r"(.*?)(\w+)$", a.strip())
                params.append((" ".join(pm.group(1).split()).replace(" *", " *").strip(),
                               pm.group(2)))
        out[name] = (ret, params)
    # Cross-check with the simple scan the C test uses at run time.
    scanned = set(scan_like_c(text))
    if scanned != set(out):
        raise TableError(f"header scan mismatch: {sorted(scanned ^ set(out))}")
    return out


def scan_like_c(text):
    """What test_bad_input.c's run-time scan finds (see there)."""
    names, i, n = [], 0, len(text)
    line_start = True
    in_pp = False
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            i = n if j < 0 else j + 2
            continue
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c == "\n":
            in_pp = in_pp and i > 0 and text[i - 1] == "\\"
            line_start = True
            i += 1
            continue
        if line_start and c == "#":
            in_pp = True
        if not c.isspace():
            line_start = False
        if (not in_pp and text.startswith("tsr_", i)
                and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_"))):
            j = i
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            k = j
            while k < n and text[k] in " \t\n":
                k += 1
            p = i - 1
            while p >= 0 and text[p] in " \t\n":
                p -= 1
            prev = text[p] if p >= 0 else ""
            if k < n and text[k] == "(" and (prev.isalnum() or prev in "_*"):
                names.append(text[i:j])
            i = j
            continue
        i += 1
    return names


def is_pointer(ptype):
    return "*" in ptype or ptype in POINTER_TYPEDEFS


def default_arg(fname, ptype, pname):
    for tre, nre, expr, *only in DEFAULTS:
        if only and not re.fullmatch(only[0], fname):
            continue
        if re.fullmatch(tre, ptype) and re.fullmatch(nre, pname):
            return expr
    raise TableError(f"{fname}: no default for parameter '{ptype} {pname}': add one to DEFAULTS")


def split_top(s, sep):
    """Splits s on sep outside parentheses, brackets, braces and quotes."""
    parts, depth, cur, quote = [], 0, "", None
    for ch in s:
        if quote:
            cur += ch
            if ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return parts


def parse_expect(text, where):
    """-> dict(kind, value, msg, substr, then, doc)."""
    doc = None
    if " -- " in text:
        text, doc = text.split(" -- ", 1)
        doc = doc.strip()
    then = None
    m = re.search(r"\bthen\b", text)
    if m:
        text, then = text[: m.start()], text[m.end():].strip()
    text = text.strip()
    e = {"doc": doc, "then": then, "msg": "none", "substr": None, "value": None}

    def take_msg(rest):
        rest = rest.strip()
        mm = re.search(r'(\+msg|\?msg)(\s+"([^"]*)")?\s*$', rest)
        if mm:
            e["msg"] = "named" if mm.group(1) == "+msg" else "any"
            e["substr"] = mm.group(3)
            rest = rest[: mm.start()].strip()
        return rest

    if text.startswith("=>"):
        e["kind"] = "value"
        e["value"] = take_msg(text[2:])
    elif text.startswith("check "):
        e["kind"] = "check"
        e["value"] = take_msg(text[6:])
    elif text == "void" or text.startswith("void "):
        e["kind"] = "void"
        take_msg(text[4:])
    else:
        m = re.fullmatch(r'(?:TSR_ERR_)?([A-Z_]+)(\s+"([^"]*)")?', text)
        if not m or m.group(1) not in STATUSES:
            raise TableError(f"{where}: cannot read the expectation '{text}'")
        e["kind"] = "status"
        e["value"] = m.group(1)
        e["substr"] = m.group(3)
    return e


def parse_table(text):
    """-> [(section, [entries])], entry = dict(name, cases, skips, notes)."""
    sections, entry = [], None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        where = f"{TABLE.name}:{lineno}"
        if not line.strip() or line.lstrip().startswith("#") and not line.startswith("##"):
            continue
        if line.startswith("## "):
            sections.append((line[3:].strip(), []))
            entry = None
            continue
        if line.startswith("fn "):
            if not sections:
                raise TableError(f"{where}: a function before the first '## section'")
            name, _, mark = line[3:].strip().partition(" ")
            if mark not in ("", "[pending]"):
                raise TableError(f"{where}: expected 'fn NAME' or 'fn NAME [pending]'")
            entry = {"name": name, "cases": [], "skips": [], "notes": [], "line": lineno,
                     "pending": bool(mark)}
            sections[-1][1].append(entry)
            continue
        if not raw.startswith(" ") or entry is None:
            raise TableError(f"{where}: expected '## section', 'fn NAME' or an indented case")
        body = line.strip()
        if body.startswith("note:"):
            entry["notes"].append(body[5:].strip())
            continue
        m = re.match(r"skip (\w+):\s*(.*)$", body)
        if m:
            entry["skips"].append((m.group(1), m.group(2)))
            continue
        head, sep, rest = body.partition(": ")
        if not sep:
            raise TableError(f"{where}: expected 'WHAT: EXPECT'")
        if head == "call":
            case = {"kind": "call", "args": {}}
        elif head.startswith("null "):
            case = {"kind": "null", "param": head[5:].strip(), "args": {}}
        elif head.startswith("bad "):
            args = {}
            for part in split_top(head[4:], ","):
                k, eq, v = part.strip().partition("=")
                if not eq:
                    raise TableError(f"{where}: expected 'bad PARAM=VALUE, ...'")
                args[k.strip()] = v.strip()
            case = {"kind": "bad", "args": args}
        else:
            raise TableError(f"{where}: unknown case '{head}'")
        case["expect"] = parse_expect(rest, where)
        case["line"] = lineno
        entry["cases"].append(case)
    return sections


def c_string(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def label(case):
    if case["kind"] == "call":
        return "call"
    if case["kind"] == "null":
        return f"{case['param']} = NULL"
    return ", ".join(f"{k} = {v}" for k, v in case["args"].items())


def generate(header_text, table_text):
    """-> (sections with the entries to generate, prototypes, pending names)."""
    protos = exported_functions(header_text)
    sections = parse_table(table_text)
    pending = [e["name"] for _, es in sections for e in es
               if e["pending"] and e["name"] not in protos]
    sections = [(title, [e for e in es if e["name"] not in pending]) for title, es in sections]
    sections = [(title, es) for title, es in sections if es]
    seen, problems = {}, []
    for _, entries in sections:
        for e in entries:
            if e["name"] in seen:
                problems.append(f"{e['name']}: listed twice (lines {seen[e['name']]} and {e['line']})")
            seen[e["name"]] = e["line"]
            if e["name"] not in protos:
                problems.append(f"{e['name']} (line {e['line']}): not declared in include/tessera.h")
                continue
            ret, params = protos[e["name"]]
            pnames = [p for _, p in params]
            for c in e["cases"]:
                for k in list(c["args"]) + ([c["param"]] if c["kind"] == "null" else []):
                    if k not in pnames:
                        problems.append(f"{e['name']} (line {c['line']}): no parameter '{k}'")
                kind = c["expect"]["kind"]
                allowed = ({"status", "value", "check"} if ret == "TsrStatus"
                           else {"void"} if ret == "void" else {"value", "check"})
                if kind not in allowed:
                    problems.append(f"{e['name']} (line {c['line']}): expectation '{kind}' "
                                    f"does not suit a function returning {ret}")
            nulls = {c["param"] for c in e["cases"] if c["kind"] == "null"}
            for ptype, pname in params:
                if is_pointer(ptype) and pname not in nulls:
                    problems.append(f"{e['name']}: no 'null {pname}' case ({ptype})")
                needs_range = ptype in RANGE_TYPES or (ptype == "int64_t" and pname in RANGE_NAMES)
                bads = {k for c in e["cases"] if c["kind"] == "bad" for k in c["args"]}
                skips = {k for k, _ in e["skips"]}
                if needs_range and pname not in bads | skips:
                    problems.append(f"{e['name']}: no 'bad {pname}=...' case (or 'skip {pname}:')")
            if not e["cases"]:
                problems.append(f"{e['name']}: no case (add 'call: ...' at least)")
            for default_check in params:
                default_arg(e["name"], *default_check)
    missing = [n for n in protos if n not in seen]
    for n in missing:
        ret, params = protos[n]
        sig = ", ".join(f"{t} {p}" for t, p in params) or "void"
        problems.append(f"{n}: exported by include/tessera.h but not in the table "
                        f"({ret} {n}({sig}))")
    if problems:
        raise TableError("the bad-input table is incomplete:\n  " + "\n  ".join(problems))
    return sections, protos, pending


def c_call(name, params, case):
    args = []
    for ptype, pname in params:
        if case["kind"] == "null" and case["param"] == pname:
            args.append("NULL")
        elif pname in case["args"]:
            args.append(case["args"][pname])
        else:
            args.append(default_arg(name, ptype, pname))
    return f"{name}({', '.join(args)})"


def c_case(name, ret, params, case):
    e = case["expect"]
    call = c_call(name, params, case)
    substr = c_string(e["substr"]) if e["substr"] is not None else "NULL"
    msg = {"none": "FX_MSG_NONE", "named": "FX_MSG_NAMED", "any": "FX_MSG_ANY"}[e["msg"]]
    if e["kind"] == "status":
        body = f"fx_expect_status({call}, TSR_{'ERR_' if e['value'] != 'OK' else ''}{e['value']}, {substr});"
    elif e["kind"] == "void":
        body = f"{call}; fx_expect_message({msg}, {substr});"
    else:
        cond = f"r == ({e['value']})" if e["kind"] == "value" else e["value"]
        body = (f"{ret} r = {call}; FX_CHECK({cond}, {c_string(e['value'])}); "
                f"fx_expect_message({msg}, {substr});")
        if e["kind"] == "check" and not re.search(r"\br\b", e["value"]):
            raise TableError(f"{name} (line {case['line']}): a check must test r")
    if e["then"]:
        body += " " + e["then"]
    return body


TEST_HEAD = """\
/*
 * test_bad_input.c: GENERATED by scripts/bad_input.py from
 * c_tests/bad_input_table.txt -- do not edit; edit the table and run
 *   python3 scripts/bad_input.py
 *
 * Calls every exported function of include/tessera.h with NULL for each
 * pointer parameter and with out-of-range values, and checks the status
 * (or returned value), the message naming the function, untouched
 * out-pointers, and (fx_teardown) unchanged reference counts and freed
 * resources. At run time it also scans include/tessera.h and fails when
 * the header declares a function this file does not cover.
 */
#include "bad_input_fixtures.h"

/* ---- the header scan (the same rule as scripts/bad_input.py) ------------- */

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf != NULL && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (bigger == NULL) free(buf);
            buf = bigger;
        }
    }
    fclose(f);
    if (buf != NULL) buf[len] = '\\0';
    return buf;
}

static int is_ident(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

static int covered(const char *name, size_t n);

/* Scans the header for declarations tsr_x( (outside comments and
   preprocessor lines, preceded by a return type) and reports every one the
   cases below do not cover. Returns the number of functions found. */
static int check_header_coverage(const char *text) {
    int found = 0, missing = 0, line_start = 1, in_pp = 0;
    for (const char *p = text; *p != '\\0';) {
        if (p[0] == '/' && p[1] == '*') {
            const char *e = strstr(p + 2, "*/");
            p = e == NULL ? p + strlen(p) : e + 2;
            continue;
        }
        if (p[0] == '/' && p[1] == '/') {
            while (*p != '\\0' && *p != '\\n') p++;
            continue;
        }
        if (*p == '\\n') {
            in_pp = in_pp && p > text && p[-1] == '\\\\';
            line_start = 1;
            p++;
            continue;
        }
        if (line_start && *p == '#') in_pp = 1;
        if (*p != ' ' && *p != '\\t' && *p != '\\r') line_start = 0;
        if (!in_pp && strncmp(p, "tsr_", 4) == 0 && (p == text || !is_ident(p[-1]))) {
            const char *e = p;
            while (is_ident(*e)) e++;
            const char *k = e;
            while (*k == ' ' || *k == '\\t' || *k == '\\n') k++;
            const char *b = p - 1;
            while (b >= text && (*b == ' ' || *b == '\\t' || *b == '\\n')) b--;
            if (*k == '(' && b >= text && (is_ident(*b) || *b == '*')) {
                found++;
                if (!covered(p, (size_t)(e - p))) {
                    fprintf(stderr, "not covered by the bad-input table: %.*s (add it to "
                            "c_tests/bad_input_table.txt, run scripts/bad_input.py)\\n",
                            (int)(e - p), p);
                    missing++;
                }
            }
            p = e;
            continue;
        }
        p++;
    }
    CHECK_EQ(missing, 0);
    return found;
}

/* include/tessera.h next to this file's directory (from __FILE__), or
   $TESSERA_HEADER. */
static char *read_header(void) {
    const char *env = getenv("TESSERA_HEADER");
    if (env != NULL && env[0] != '\\0') return read_file(env);
    static char path[4096];
    const char *file = __FILE__;
    const char *slash = strrchr(file, '/');
    if (slash == NULL) {
        snprintf(path, sizeof path, "../include/tessera.h");
    } else {
        snprintf(path, sizeof path, "%.*s/../include/tessera.h", (int)(slash - file), file);
    }
    return read_file(path);
}

/* ---- the cases ------------------------------------------------------------ */
"""


def render_test(sections, protos):
    out = [TEST_HEAD]
    rows = []
    n = 0
    for title, entries in sections:
        out.append(f"\n/* {title} */\n")
        for e in entries:
            ret, params = protos[e["name"]]
            for c in e["cases"]:
                n += 1
                out.append(f"static void c{n}(void) {{ {c_case(e['name'], ret, params, c)} }}\n")
                rows.append(f"    {{{c_string(e['name'])}, {c_string(label(c))}, c{n}}},\n")
    names = sorted({e["name"] for _, entries in sections for e in entries})
    out.append("\ntypedef struct {\n    const char *fname, *label;\n    void (*run)(void);\n} Case;\n\n")
    out.append("static const Case CASES[] = {\n")
    out.extend(rows)
    out.append("};\n\n")
    out.append("static const char *const COVERED[] = {\n")
    out.extend(f"    {c_string(nm)},\n" for nm in names)
    out.append("};\n")
    out.append(f"""
static int covered(const char *name, size_t n) {{
    for (size_t i = 0; i < sizeof COVERED / sizeof COVERED[0]; i++) {{
        if (strlen(COVERED[i]) == n && strncmp(COVERED[i], name, n) == 0) return 1;
    }}
    return 0;
}}

int main(void) {{
    char *header = read_header();
    if (header == NULL) {{
        fprintf(stderr, "cannot read include/tessera.h (from __FILE__ = %s); set TESSERA_HEADER\\n",
                __FILE__);
        return 1;
    }}
    int exported = check_header_coverage(header);
    free(header);
    size_t ncases = sizeof CASES / sizeof CASES[0];
    for (size_t i = 0; i < ncases; i++) {{
        fx_fname = CASES[i].fname;
        fx_label = CASES[i].label;
        fx_setup();
        CASES[i].run();
        fx_teardown();
    }}
    CHECK_EQ(exported, (int)(sizeof COVERED / sizeof COVERED[0]));
    CHECK_EQ(fx_failures, 0);
    printf("bad input: %d of %d exported functions covered, %d cases, %d checks\\n",
           (int)(sizeof COVERED / sizeof COVERED[0]), exported, (int)ncases, tsr_test_checks);
    return 0;
}}
""")
    return "".join(out), n


def doc_result(name, ret, case):
    e = case["expect"]
    if e["doc"]:
        text = e["doc"]
    elif e["kind"] == "status":
        text = "accepted (`TSR_OK`)" if e["value"] == "OK" else f"`TSR_ERR_{e['value']}`"
        if e["substr"]:
            text += f' ("…{e["substr"]}…")'
    elif e["kind"] == "value":
        text = f"returns `{e['value']}`"
    elif e["kind"] == "check":
        text = f"returns r with `{e['value']}`"
    else:
        text = "returns (no effect)"
    if e["kind"] != "status" and e["msg"] == "named":
        text += ", records a message"
    return text.replace("|", "\\|")


DOC_HEAD = """\
# Bad input: what each C function detects

GENERATED by `scripts/bad_input.py` from `c_tests/bad_input_table.txt` (do
not edit; edit the table and run `python3 scripts/bad_input.py`).
`c_tests/test_bad_input.c`, generated from the same table, performs every
row below and is run by the C test suite (also under valgrind and
AddressSanitizer + UndefinedBehaviorSanitizer).

**Coverage: {covered} of {exported} exported functions ({cases} cases).** The
test scans `include/tessera.h` when it runs and fails if the header
declares a function the table does not cover, so a new function cannot be
added without its row.

For every row the test checks, besides the result shown:

- a call returning `TsrStatus` that fails returns exactly that status,
  records a message that starts with the function's name (`tsr_x: ...`,
  naming the bad value), and leaves every out-pointer untouched;
- a value-returning or `void` function returns the documented value and
  records a message naming it where the row says so, and no message
  otherwise;
- nothing crashes (the run is repeated under valgrind and ASan/UBSan), and
  afterwards every fixture object has the strong and weak counts it had
  before the call (no reference leaked or dropped on an error path), every
  `TsrDataPtr` and DLPack tensor handed over was freed exactly once, and
  the test allocator has no live allocation.

Unless a row says otherwise, arguments are valid: live handles (a float
tensor of sizes `[2, 3]` on a 24-byte storage, the CPU allocator, ...),
writable out-pointers, `ndim` 2 with sizes `{{2, 3}}`, device `{{TSR_CPU, -1}}`.
A "dead" handle (`F.dead_t`, ...) is one whose strong count reached 0 while
a weak reference keeps its memory: tessera detects its use
(`TSR_ERR_DEAD_OBJECT`).

Names in the rows (`c_tests/bad_input_fixtures.h`): `F.t` float `[2, 3]` on
the 24-byte storage `F.s`; `F.t1` float `[3]`; `F.t4` float `[4]`; `F.su` a
16-byte storage nobody else holds; `F.fixed` a storage of external memory;
`F.a` the CPU allocator, `F.ca` a caching allocator over it, `F.pa` a C
plugin allocator; `F.cfg` a config with an input, `F.cfg_empty` one without
operands, `F.cfg_bad` one with `promote_integer_inputs_to_float` alone;
`F.dp` a `TsrDataPtr` of 64 bytes; `FX_SIZES_3_3` `{{3, 3}}`, `FX_NEG_SIZES`
`{{-1, 3}}`, `FX_NEG2_SIZES` `{{-2, 3}}`, `FX_HUGE_SIZES` `{{INT64_MAX, 2}}`,
`FX_TWO_INFERRED` `{{-1, -1}}`, `FX_DIMS_REPEATED` `{{0, 0}}`, `FX_DIMS_OUT`
`{{0, 2}}`, `FX_SIZES_64` 65 zeros; `fx_dl_with(major, flags, ndim, code,
lanes)` a DLPack tensor with those fields; `fx_scalar(d)` a scalar tagged
`d`; `fx_device(type, index)`.

## Misuse that cannot be detected

A C library cannot tell these from valid calls; they are undefined
behaviour, as in any C API:

- **A handle used after its memory was freed** (its last strong and weak
  references dropped), or released twice once its memory is gone. While a
  weak reference keeps the memory, a dead handle is detected
  (`TSR_ERR_DEAD_OBJECT`).
- **A pointer that is not a tessera handle of that type** (a random
  address, a `TsrStorage*` cast to `TsrTensor*`, a weak handle cast to a
  strong one): handles are plain addresses without a tag.
- **Arrays shorter than their length argument** (`sizes` with fewer than
  `ndim` values), **buffers smaller than `nbytes`** (`tsr_allocator_copy_data`,
  `tsr_storage_from_data_ptr`, DLPack data that does not span its view),
  **strings without a terminator**, and **plugin tables smaller than their
  `struct_size`**.
- **Concurrent mutation of one object's metadata**: `tsr_tensor_set`,
  `tsr_storage_resize`, `tsr_storage_share_external`, outputs resized by an
  iterator build, and every `TsrIterConfig` call, while another thread uses
  the same object. Counts, locks, reads and loops are thread-safe.
- **Stale borrowed pointers**: the arrays of `tsr_tensor_sizes` /
  `tsr_tensor_strides` / `tsr_iter_shape` / `tsr_iter_strides` after the
  object changed or died; data pointers of a storage after
  `tsr_storage_resize`; sub-iterators passed to callbacks, kept after the
  callback.
- **Callbacks that break their contract**: a deleter run twice by the
  host, an allocator plugin returning `TSR_OK` with an invalid
  `TsrDataPtr`, a loop body writing outside the elements it was given, a
  C++ exception thrown through tessera.
- **Freeing through the wrong allocator**: `tsr_allocator_raw_deallocate`
  with an address another allocator (or malloc) returned is detected for
  plugin allocators only (`TSR_ERR_INVALID_ARGUMENT`); for the built-in
  CPU allocator it is undefined.

"""


def render_doc(sections, protos, ncases, pending):
    exported = len(protos)
    covered = len({e["name"] for _, es in sections for e in es})
    out = [DOC_HEAD.format(covered=covered, exported=exported, cases=ncases)]
    if pending:
        out.append("The table also holds rows for functions not in this header yet ("
                   + ", ".join(f"`{n}`" for n in pending)
                   + "); they take effect when the header declares them.\n\n")
    for title, entries in sections:
        out.append(f"## {title}\n\n| Function | Misuse | Result |\n|---|---|---|\n")
        for e in entries:
            ret, _ = protos[e["name"]]
            first = True
            for c in e["cases"]:
                fn = f"`{e['name']}`" if first else ""
                first = False
                what = label(c).replace("|", "\\|")
                out.append(f"| {fn} | `{what}` | {doc_result(e['name'], ret, c)} |\n")
            for p, why in e["skips"]:
                out.append(f"| | `{p}` out of range | not checked: {why} |\n")
            for note in e["notes"]:
                out.append(f"| | | {note} |\n")
        out.append("\n")
    return "".join(out)


# Pages that quote the coverage ("N of N exported functions, M cases", or
# "N of N functions, M cases" in a table cell): rewritten with the table's
# own figures, and checked by --check, so no page keeps an old count.
FIGURE_PAGES = ("README.md", "docs/RELIABILITY.md", "docs/CONTRIBUTING.md")
FIGURE = re.compile(r"\d+ of \d+ (exported functions|functions), \d+ cases")


def with_figures(text, covered, exported, ncases):
    return FIGURE.sub(lambda m: f"{covered} of {exported} {m.group(1)}, {ncases} cases", text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="fail if the generated files are stale or coverage is incomplete")
    args = ap.parse_args()
    try:
        sections, protos, pending = generate(HEADER.read_text(), TABLE.read_text())
        test, ncases = render_test(sections, protos)
        doc = render_doc(sections, protos, ncases, pending)
    except TableError as e:
        print(f"bad_input.py: {e}", file=sys.stderr)
        return 1
    covered = len({e["name"] for _, es in sections for e in es})
    summary = f"{covered} of {len(protos)} exported functions covered, {ncases} cases"
    if pending:
        summary += f" ({len(pending)} pending rows for functions not in the header: " \
            + ", ".join(pending) + ")"
    pages = []
    for name in FIGURE_PAGES:
        page = ROOT / name
        old = page.read_text()
        if not FIGURE.search(old):
            print(f"bad_input.py: {name} quotes no coverage figure", file=sys.stderr)
            return 1
        pages.append((page, with_figures(old, covered, len(protos), ncases)))
    if args.check:
        stale = [p for p, text in [(TEST, test), (DOC, doc)] + pages
                 if not p.exists() or p.read_text() != text]
        if stale:
            print("bad_input.py: stale: " + ", ".join(str(p.relative_to(ROOT)) for p in stale)
                  + " (run python3 scripts/bad_input.py)", file=sys.stderr)
            return 1
        print(f"bad_input.py: up to date; {summary}")
        return 0
    DOC.parent.mkdir(parents=True, exist_ok=True)
    TEST.write_text(test)
    DOC.write_text(doc)
    for page, text in pages:
        page.write_text(text)
    print(f"bad_input.py: wrote {TEST.relative_to(ROOT)} and {DOC.relative_to(ROOT)}, "
          f"figures in {', '.join(FIGURE_PAGES)}; {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
