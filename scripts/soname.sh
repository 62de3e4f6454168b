#!/usr/bin/env bash
# Prints the SONAME of libtessera for the version in include/tessera.h
# (or the header given): libtessera.so.0.<MINOR> for a 0.x release (every
# 0.x minor release may break the ABI), libtessera.so.<MAJOR> from 1.0 on.
# docs/ABI.md ("ABI evolution") states the rule; build.rs, CMake and
# cargo-c apply the same one.
#
#   scripts/soname.sh [HEADER]     # e.g. libtessera.so.0.2
set -euo pipefail
header=${1:-"$(dirname "${BASH_SOURCE[0]}")/../include/tessera.h"}
major=$(sed -n 's/^#define TSR_VERSION_MAJOR \([0-9][0-9]*\)$/\1/p' "$header")
minor=$(sed -n 's/^#define TSR_VERSION_MINOR \([0-9][0-9]*\)$/\1/p' "$header")
if [[ -z $major || -z $minor ]]; then
    echo "$0: no TSR_VERSION_MAJOR/MINOR in $header" >&2
    exit 1
fi
if [[ $major == 0 ]]; then
    echo "libtessera.so.0.$minor"
else
    echo "libtessera.so.$major"
fi
