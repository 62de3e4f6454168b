#!/usr/bin/env bash
# Checks a built libtessera shared library:
#   - its SONAME is the one given (scripts/soname.sh: libtessera.so.0.<MINOR>
#     for 0.x releases);
#   - it exports only tsr_-prefixed symbols (nm -D --defined-only);
#   - with a header: it exports exactly the functions the header declares.
#
# Usage: .ci/check-shared-lib.sh LIBRARY SONAME [HEADER]
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
    echo "usage: $0 LIBRARY SONAME [HEADER]" >&2
    exit 2
fi
lib=$1
expected_soname=$2
header=${3:-}
status=0

soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [[ "$soname" != "$expected_soname" ]]; then
    echo "FAIL: $lib has SONAME '${soname:-<none>}', expected $expected_soname" >&2
    status=1
else
    echo "ok: SONAME $soname"
fi

# Symbol names without version suffixes (name@@VERSION).
exported=$(nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//' | sort -u)
if [[ -z "$exported" ]]; then
    echo "FAIL: $lib exports no symbols" >&2
    exit 1
fi
foreign=$(grep -v '^tsr_' <<<"$exported" || true)
if [[ -n "$foreign" ]]; then
    echo "FAIL: $lib exports symbols without the tsr_ prefix:" >&2
    sed 's/^/  /' <<<"$foreign" >&2
    status=1
else
    echo "ok: all $(wc -l <<<"$exported") exported symbols start with tsr_"
fi

if [[ -n "$header" ]]; then
    # Declarations start at column 0 in the generated header:
    # "TsrStatus tsr_foo(" or "struct TsrAllocator *tsr_bar(".
    declared=$(grep -E '^[A-Za-z].*[ *]tsr_[a-z0-9_]+\(' "$header" |
        sed -E 's/.*[ *](tsr_[a-z0-9_]+)\(.*/\1/' | sort -u)
    missing=$(comm -23 <(echo "$declared") <(echo "$exported"))
    extra=$(comm -13 <(echo "$declared") <(echo "$exported"))
    if [[ -n "$missing" ]]; then
        echo "FAIL: declared in $header but not exported:" >&2
        sed 's/^/  /' <<<"$missing" >&2
        status=1
    fi
    if [[ -n "$extra" ]]; then
        echo "FAIL: exported but not declared in $header:" >&2
        sed 's/^/  /' <<<"$extra" >&2
        status=1
    fi
    if [[ -z "$missing" && -z "$extra" ]]; then
        echo "ok: the $(wc -l <<<"$declared") functions of $(basename "$header") are exported"
    fi
fi
exit $status
