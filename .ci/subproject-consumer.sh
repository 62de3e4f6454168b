#!/usr/bin/env bash
# Builds .ci/subproject-consumer, a project that includes tessera with
# FetchContent (from this repository's path) and then with
# add_subdirectory, and runs its programs (linked with Tessera::tessera and
# Tessera::tessera_static) through CTest.
#
# Usage: .ci/subproject-consumer.sh [CARGO_TARGET_DIR]
#   CARGO_TARGET_DIR: cargo's target directory to reuse (default: each
#   build's own, under the build tree).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc 2>/dev/null || echo 2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A copy outside the repository, as a user's project would be.
cp -r "$root/.ci/subproject-consumer" "$work/consumer"
target_dir=()
if [[ $# -ge 1 ]]; then
    target_dir=(-DTESSERA_CARGO_TARGET_DIR="$1")
fi
for via in fetchcontent subdirectory; do
    echo "--- tessera via $via"
    cmake -S "$work/consumer" -B "$work/build-$via" -DTESSERA_VIA="$via" \
        -DTESSERA_SOURCE="$root" "${target_dir[@]}"
    cmake --build "$work/build-$via" -j "$jobs"
    ctest --test-dir "$work/build-$via" --output-on-failure
    if ldd "$work/build-$via/hello_static" | grep -q libtessera; then
        echo "FAIL: hello_static ($via) links a shared libtessera" >&2
        exit 1
    fi
    if [[ -n $(find "$work/build-$via" -name 'CTestTestfile.cmake' -path '*tessera*' \
        -exec grep -l add_test {} +) ]]; then
        echo "FAIL: tessera ($via) registered its own tests in the consumer" >&2
        exit 1
    fi
done
echo "ok: FetchContent and add_subdirectory consumers build and run"
