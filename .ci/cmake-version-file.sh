#!/usr/bin/env bash
# Checks the installed TesseraConfigVersion.cmake: while the version is
# 0.x, find_package(Tessera 0.MINOR) accepts only the same 0.MINOR
# (docs/ABI.md, "ABI evolution"). Evaluates the version file the way
# find_package does, for requests of the same and of other versions.
#
# Usage: .ci/cmake-version-file.sh PREFIX
set -euo pipefail
if [[ $# -ne 1 ]]; then
    echo "usage: $0 PREFIX" >&2
    exit 2
fi
file=$1/lib/cmake/Tessera/TesseraConfigVersion.cmake
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
IFS=. read -r major minor patch <<<"$version"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/check.cmake" <<'CMAKE'
string(REPLACE "." ";" parts "${REQUEST}")
list(LENGTH parts n)
set(PACKAGE_FIND_VERSION "${REQUEST}")
list(GET parts 0 PACKAGE_FIND_VERSION_MAJOR)
set(PACKAGE_FIND_VERSION_MINOR 0)
set(PACKAGE_FIND_VERSION_PATCH 0)
if(n GREATER 1)
    list(GET parts 1 PACKAGE_FIND_VERSION_MINOR)
endif()
if(n GREATER 2)
    list(GET parts 2 PACKAGE_FIND_VERSION_PATCH)
endif()
set(PACKAGE_FIND_VERSION_COUNT ${n})
include("${VERSION_FILE}")
if(PACKAGE_VERSION_COMPATIBLE)
    message("compatible")
else()
    message("incompatible")
endif()
CMAKE
status=0
# request -> expected answer
check() {
    local got
    got=$(cmake -DREQUEST="$1" -DVERSION_FILE="$file" -P "$work/check.cmake" 2>&1)
    if [[ $got == "$2" ]]; then
        echo "ok: find_package(Tessera $1) with $version installed: $got"
    else
        echo "FAIL: find_package(Tessera $1) with $version installed: $got, expected $2" >&2
        status=1
    fi
}
check "$major.$minor" compatible
check "$major.$minor.0" compatible
if [[ $major == 0 ]]; then
    check "0.$((minor + 1))" incompatible
    [[ $minor -gt 0 ]] && check "0.$((minor - 1))" incompatible
    check 1.0 incompatible
else
    check "$major.$((minor + 1))" incompatible
    check "$((major + 1)).0" incompatible
fi
exit $status
