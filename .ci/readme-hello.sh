#!/usr/bin/env bash
# Compiles and runs README.md's "Hello tensor" program with the README's
# own build command, as written, and compares its output with the README's.
# Needs the cargo release build the quick start makes (target/release with
# the SONAME link of scripts/link-soname.sh).
#
# The program is the first ```c block after "## Hello tensor", the command
# the first ```sh block after it, the expected output the first ```text
# block. They run in a scratch directory laid out like the repository root
# (include/ and target/release are links to this repository's).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# block LANG: the first fenced block of LANG after the Hello tensor heading.
block() {
    awk -v lang="$1" '
        /^## Hello tensor/ { inside = 1; next }
        inside && /^## / { exit }
        inside && !done && $0 == "```" lang { grab = 1; next }
        grab && $0 == "```" { grab = 0; done = 1; next }
        grab { print }
    ' "$root/README.md"
}
block c >"$work/hello.c"
command=$(block sh)
expected=$(block text)
for what in hello.c command expected; do
    if [[ $what == hello.c && ! -s $work/hello.c ]] || [[ $what == command && -z $command ]] ||
        [[ $what == expected && -z $expected ]]; then
        echo "FAIL: README.md's Hello tensor section has no $what block" >&2
        exit 1
    fi
done
if [[ ! -f $root/target/release/libtessera.so ]]; then
    echo "FAIL: no target/release/libtessera.so: run ./scripts/quickstart.sh first" >&2
    exit 1
fi
echo "README.md: hello.c is $(wc -l <"$work/hello.c") lines; command: $command"
ln -s "$root/include" "$work/include"
mkdir -p "$work/target"
ln -s "$root/target/release" "$work/target/release"
cd "$work"
# As written in the README, warnings on top (the command must not need to
# change for a program that compiles cleanly).
actual=$(CFLAGS= bash -euo pipefail -c "$command")
if [[ $actual != "$expected" ]]; then
    echo "FAIL: hello printed '$actual', README.md says '$expected'" >&2
    exit 1
fi
# The program is also clean under strict warnings.
cc -std=c99 -Wall -Wextra -Werror -pedantic -fsyntax-only -Iinclude hello.c
echo "ok: README.md's hello tensor builds and prints '$actual'"
