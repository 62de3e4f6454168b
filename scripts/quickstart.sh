#!/usr/bin/env bash
# Quick start: builds libtessera (cargo, release), compiles
# examples/quickstart.c against it with the system C compiler and runs it.
# Needs only Rust and a C compiler. Prints each command it runs.
set -euo pipefail
cd "$(dirname "$0")/.."

run() {
    echo "+ $*" >&2
    "$@"
}

run cargo build --release

# The shared library's SONAME is libtessera.so.<MAJOR>: programs look for
# that name at run time, so give the loader a directory that has it.
major=$(sed -n 's/^#define TSR_VERSION_MAJOR \([0-9][0-9]*\)$/\1/p' include/tessera.h)
libdir=target/quickstart/lib
run mkdir -p "$libdir"
run ln -sf "$PWD/target/release/libtessera.so" "$libdir/libtessera.so.$major"

run "${CC:-cc}" -std=c99 -Wall -Wextra -Werror -pedantic -Iinclude examples/quickstart.c \
    -Ltarget/release -ltessera -Wl,-rpath,"$PWD/$libdir" -o target/quickstart/quickstart
run target/quickstart/quickstart
