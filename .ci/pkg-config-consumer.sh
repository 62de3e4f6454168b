#!/usr/bin/env bash
# Builds and runs examples/quickstart.c against an installed tessera found
# with pkg-config, linked with the shared library and with the static one.
# Works with the .pc file of the CMake install and with cargo-c's.
#
# Usage: .ci/pkg-config-consumer.sh PREFIX
#
# Cross builds (.ci/arm.sh): CC is the cross compiler, RUNNER the command
# that runs a program of the target (qemu-aarch64 -L SYSROOT) and LDD the
# one that lists the libraries it loads (default ldd); split on spaces.
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
prefix=$1
root=$(cd "$(dirname "$0")/.." && pwd)
cc=${CC:-cc}
read -r -a runner <<<"${RUNNER:-}"
read -r -a ldd <<<"${LDD:-ldd}"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
pkg-config --exists --print-errors tessera
echo "tessera $(pkg-config --modversion tessera): cflags '$(pkg-config --cflags tessera)'," \
    "libs '$(pkg-config --libs tessera)'"
libdir=$(pkg-config --variable=libdir tessera)
strict=(-std=c99 -Wall -Wextra -Werror -pedantic)

# Shared: -ltessera, found at run time through the rpath.
# shellcheck disable=SC2046 # pkg-config output is meant to be split
"$cc" "${strict[@]}" "$root/examples/quickstart.c" $(pkg-config --cflags --libs tessera) \
    -Wl,-rpath,"$libdir" -o "$out/quickstart_shared"
"${runner[@]}" "$out/quickstart_shared"
loaded=$("${ldd[@]}" "$out/quickstart_shared" | awk '/libtessera/ {print $3}')
if [[ -z "$loaded" || "$(realpath "$(dirname "$loaded")")" != "$(realpath "$libdir")" ]]; then
    echo "FAIL: quickstart_shared loads libtessera from '${loaded:-nowhere}', not $libdir" >&2
    exit 1
fi

# Static: libtessera.a and the native libraries the .pc file lists in
# Libs.private (pkg-config --static; -ltessera itself would pick the .so).
static_libs=$(pkg-config --static --libs tessera | sed 's/\(^\| \)-ltessera\( \|$\)/ /')
# shellcheck disable=SC2046,SC2086
"$cc" "${strict[@]}" "$root/examples/quickstart.c" $(pkg-config --cflags tessera) \
    "$libdir/libtessera.a" $static_libs -o "$out/quickstart_static"
"${runner[@]}" "$out/quickstart_static"
if "${ldd[@]}" "$out/quickstart_static" | grep -q libtessera; then
    echo "FAIL: quickstart_static depends on a shared libtessera" >&2
    exit 1
fi
echo "ok: pkg-config consumer, shared and static"
