#!/usr/bin/env bash
# Builds the API reference (HTML) from include/tessera.h,
# include/tessera.hpp and include/tessera/*.hpp with Doxygen:
#
#   docs/build.sh [OUTPUT_DIR]     # default: build/docs; open OUTPUT_DIR/html/index.html
#
# Fails when Doxygen is missing (Debian/Ubuntu: apt-get install doxygen) or
# prints any warning (an undocumented public entity, a broken reference)
# that docs/doxygen-known-warnings.txt does not list.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=${1:-$root/build/docs}
mkdir -p "$out"
out=$(cd "$out" && pwd)

if ! command -v doxygen >/dev/null 2>&1; then
    echo "doxygen is not installed (Debian/Ubuntu: apt-get install doxygen)" >&2
    exit 2
fi

# The version is the crate's: [package] version in Cargo.toml.
version=$(sed -n '/^\[package\]/,/^\[/s/^version *= *"\(.*\)"/\1/p' "$root/Cargo.toml" | head -n 1)

rm -rf "$out/html"
log=$out/doxygen-warnings.log
rm -f "$log"
(cd "$root" && TESSERA_ROOT="$root" TESSERA_DOCS_OUT="$out" TESSERA_VERSION="$version" \
    doxygen docs/Doxyfile)

# Warnings without their "path:line: warning: " prefix, compared with the
# known ones.
known=$(grep -v '^#' "$root/docs/doxygen-known-warnings.txt" | sed '/^$/d' || true)
warnings=$(sed -n 's/^.*: warning: //p' "$log" || true)
new=$(grep -vxF -f <(printf '%s\n' "$known") <<<"$warnings" | sed '/^$/d' || true)
stale=$(grep -vxF -f <(printf '%s\n' "$warnings") <<<"$known" | sed '/^$/d' || true)
others=$(grep -v ': warning: ' "$log" | sed '/^$/d' || true)

known_count=0
if [[ -n $known && -n $warnings ]]; then
    known_count=$(grep -cxF -f <(printf '%s\n' "$known") <<<"$warnings" || true)
fi
if [[ -n $stale ]]; then
    echo "note: these known warnings no longer occur; remove them from docs/doxygen-known-warnings.txt:"
    printf '  %s\n' "$stale"
fi
if [[ -n $new || -n $others ]]; then
    echo "Doxygen warnings (fix the comments in the headers):" >&2
    [[ -z $new ]] || grep -F -f <(printf '%s\n' "$new") "$log" >&2 || true
    [[ -z $others ]] || printf '%s\n' "$others" >&2
    exit 1
fi
echo "API reference: $out/html/index.html (0 new warnings, $known_count known in tessera.h)"
