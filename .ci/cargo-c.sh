#!/usr/bin/env bash
# Installs tessera with cargo-c (`cargo cinstall`) into a scratch prefix,
# checks what it installed (library, SONAME, links, headers, .pc) and
# builds and runs the pkg-config consumer (shared and static) against it.
#
# cargo-c comes from crates.io (`cargo install`), skipped when `cargo
# cinstall` already runs. The version is pinned: cargo-c 0.10.25 and later
# need a newer rustc than this project's CI toolchain (0.10.24 builds with
# rustc 1.95).
#
# Usage: .ci/cargo-c.sh [PREFIX]     (default: a temporary directory)
#        .ci/cargo-c.sh --install   (only installs cargo-c when missing)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cargo_c_version=${CARGO_C_VERSION:-0.10.24}

if cargo cinstall --version >/dev/null 2>&1; then
    echo "cargo-c already installed: $(cargo cinstall --version 2>&1 | head -n 1)"
else
    start=$SECONDS
    cargo install cargo-c --version "$cargo_c_version" --locked
    echo "cargo-c $cargo_c_version installed in $((SECONDS - start))s"
fi

# --install: only the install above (.ci/run's first stage, so that the
# background aarch64 stage finds cargo-c).
if [[ ${1:-} == --install ]]; then
    exit 0
fi
if [[ $# -ge 1 ]]; then
    prefix=$1
else
    prefix=$(mktemp -d)
    trap 'rm -rf "$prefix"' EXIT
fi
# The dist profile's settings but 16 codegen units: a packaging check,
# not the tuned build (CMake's stage builds that one, and icount counts
# it); one unit made this stage's crate build run on one core for
# minutes.
CARGO_PROFILE_DIST_CODEGEN_UNITS=16 cargo cinstall --profile dist --prefix "$prefix" --libdir lib

soname=$(scripts/soname.sh)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
lib=$prefix/lib
for f in "libtessera.so.$version" "$soname" libtessera.so libtessera.a pkgconfig/tessera.pc; do
    [[ -e "$lib/$f" ]] || {
        echo "FAIL: cargo cinstall did not install $lib/$f" >&2
        exit 1
    }
    # The dist profile strips debug info from the shared library
    # (Cargo.toml): no .debug_ section. The archive keeps the line tables
    # that the precompiled std objects inside it carry (rustc's strip does
    # not touch a staticlib): README says so.
    if [[ $f == libtessera.so.* ]] && readelf -S --wide "$lib/$f" | grep -q '\.debug_'; then
        echo "FAIL: cargo cinstall installed $lib/$f with debug info" >&2
        exit 1
    fi
done
# Every committed header, at the same place as the CMake install's.
(cd include && find . -type f) | while read -r h; do
    cmp "include/$h" "$prefix/include/$h"
done
echo "ok: cargo cinstall installed lib/libtessera.so.$version, $soname, libtessera.a," \
    "tessera.pc and include/"
.ci/check-shared-lib.sh "$lib/libtessera.so.$version" "$soname" "$prefix/include/tessera.h"
.ci/pkg-config-consumer.sh "$prefix"
