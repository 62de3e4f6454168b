#!/usr/bin/env bash
# Runs the build-and-run commands written in the examples' header comments,
# as written, from the repository root: every examples/*.c and *.cpp whose
# comment says "Build and run (from the repository root, after
# ./scripts/quickstart.sh" has its command lines (the comment lines that
# follow, indented "*   ", backslash continuations joined) run with bash.
# Needs the quick start's target/release (with the SONAME link).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
if [[ ! -f target/release/libtessera.so ]]; then
    echo "FAIL: no target/release/libtessera.so: run ./scripts/quickstart.sh first" >&2
    exit 1
fi
ran=0
for f in examples/*.c examples/*.cpp; do
    grep -q 'Build and run (from the repository root, after ./scripts/quickstart.sh' "$f" || continue
    # The command lines: " *   cmd" after the marker, up to the first
    # comment line that is not one; continuations joined.
    commands=$(awk '
        /Build and run \(from the repository root, after \.\/scripts\/quickstart\.sh/ { on = 1; next }
        on && /^ \*   / { sub(/^ \*   /, ""); line = line $0; if (line ~ /\\$/) { sub(/\\$/, " ", line) } else { print line; line = "" }; next }
        on && /^ \* / && !started { next }
        on { exit }
    ' "$f" | sed 's/^ *//')
    if [[ -z $commands ]]; then
        echo "FAIL: $f: no command lines after its Build and run line" >&2
        exit 1
    fi
    echo "== $f"
    while IFS= read -r cmd; do
        echo "+ $cmd"
        bash -euo pipefail -c "$cmd" >"$root/target/example-comment.out" 2>&1 || {
            cat "$root/target/example-comment.out" >&2
            echo "FAIL: $f: '$cmd' failed" >&2
            exit 1
        }
    done <<<"$commands"
    ran=$((ran + 1))
done
rm -f "$root/target/example-comment.out"
if [[ $ran -lt 6 ]]; then
    echo "FAIL: only $ran examples carry build comments (expected at least 6)" >&2
    exit 1
fi
echo "ok: the build comments of $ran examples work as written"
