#!/usr/bin/env bash
# Quick start: builds libtessera and the tessera command (cargo, release),
# compiles examples/quickstart.c against the library with the system C
# compiler and runs it, then lists the file it saved with `tessera ls`.
# Needs only Rust and a C compiler. Prints each command it runs.
set -euo pipefail
cd "$(dirname "$0")/.."

run() {
    echo "+ $*" >&2
    "$@"
}

run cargo build --release

# Programs linked with -ltessera look for the library's SONAME
# (libtessera.so.0.<MINOR>) at run time, which cargo does not create:
# scripts/link-soname.sh adds it next to target/release/libtessera.so.
run scripts/link-soname.sh target/release

run mkdir -p target/quickstart
run "${CC:-cc}" -std=c99 -Wall -Wextra -Werror -pedantic -Iinclude examples/quickstart.c \
    -Ltarget/release -ltessera -Wl,-rpath,"$PWD/target/release" -o target/quickstart/quickstart
run target/quickstart/quickstart target/quickstart/sums.safetensors
run target/release/tessera ls target/quickstart/sums.safetensors
