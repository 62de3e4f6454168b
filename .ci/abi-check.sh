#!/usr/bin/env bash
# The ABI check: compares a built libtessera and its header with the last
# release's, recorded in abi/<version>/ (symbols.txt: the exported names;
# declarations.txt: every function prototype, type and TSR_* constant of
# tessera.h, from scripts/abi_surface.py).
#
#   - an exported symbol or a declaration that was removed or changed is a
#     break: it fails, unless the version in Cargo.toml may break the ABI
#     (0.x: another MINOR than the release's; from 1.0: another MAJOR) and
#     CHANGELOG.md's section for that version names each broken item;
#   - additions are listed;
#   - CHANGELOG.md's first version section must be Cargo.toml's version.
#
# The baseline is the highest abi/<version> not above Cargo.toml's version.
# At a release, record its surface:  .ci/abi-check.sh --record LIBRARY
#
# Usage: .ci/abi-check.sh [--record] LIBRARY [HEADER]
set -euo pipefail
export LC_ALL=C
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
record=0
if [[ ${1:-} == --record ]]; then
    record=1
    shift
fi
if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 [--record] LIBRARY [HEADER]" >&2
    exit 2
fi
lib=$1
header=${2:-$root/include/tessera.h}
surface=$root/scripts/abi_surface.py
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$root/Cargo.toml" | head -n 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$surface" symbols "$lib" >"$work/symbols.txt"
python3 "$surface" declarations "$header" >"$work/declarations.txt"

if [[ $record == 1 ]]; then
    mkdir -p "$root/abi/$version"
    cp "$work/symbols.txt" "$work/declarations.txt" "$root/abi/$version/"
    echo "recorded abi/$version: $(wc -l <"$work/symbols.txt") symbols," \
        "$(wc -l <"$work/declarations.txt") declarations"
    exit 0
fi

# version_le A B: whether version A <= B.
version_le() { [[ $(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1) == "$1" ]]; }
baseline=
for dir in "$root"/abi/*/; do
    v=$(basename "$dir")
    if version_le "$v" "$version" && { [[ -z $baseline ]] || version_le "$baseline" "$v"; }; then
        baseline=$v
    fi
done
if [[ -z $baseline ]]; then
    echo "FAIL: no abi/<version> at or below $version to compare with" >&2
    exit 1
fi
base=$root/abi/$baseline

# CHANGELOG.md: the first "## [X.Y.Z]" section is this version's.
changelog=$root/CHANGELOG.md
top=$(sed -n 's/^## \[\([0-9][0-9.]*\)\].*/\1/p' "$changelog" | head -n 1)
if [[ $top != "$version" ]]; then
    echo "FAIL: CHANGELOG.md's first version is '${top:-none}', Cargo.toml's is $version" >&2
    exit 1
fi
awk -v v="$version" '/^## \[/ { inside = index($0, "## [" v "]") == 1; next } inside' \
    "$changelog" >"$work/section.txt"

IFS=. read -r major minor _ <<<"$version"
IFS=. read -r bmajor bminor _ <<<"$baseline"
if [[ $major == 0 && $bmajor == 0 ]]; then
    may_break=$([[ $minor != "$bminor" ]] && echo 1 || echo 0)
else
    may_break=$([[ $major != "$bmajor" ]] && echo 1 || echo 0)
fi

breaks=()
while read -r name; do
    breaks+=("symbol $name removed")
done < <(comm -23 "$base/symbols.txt" "$work/symbols.txt")
added_symbols=$(comm -13 "$base/symbols.txt" "$work/symbols.txt" | wc -l)
# Declarations: keys removed, or the same key with another text.
cut -f1 "$base/declarations.txt" | LC_ALL=C sort >"$work/base-keys"
cut -f1 "$work/declarations.txt" | LC_ALL=C sort >"$work/keys"
while read -r key; do
    breaks+=("$key removed")
done < <(comm -23 "$work/base-keys" "$work/keys")
while IFS=$'\t' read -r key was; do
    breaks+=("$key changed: was '$was'")
done < <(LC_ALL=C join -t $'\t' <(LC_ALL=C sort "$base/declarations.txt") \
    <(LC_ALL=C sort "$work/declarations.txt") | awk -F '\t' '$2 != $3 { print $1 "\t" $2 }')
added=$(comm -13 "$work/base-keys" "$work/keys")

echo "tessera $version against the $baseline release (abi/$baseline):"
echo "  exported symbols: $(wc -l <"$work/symbols.txt") ($added_symbols added)"
echo "  declarations: $(wc -l <"$work/declarations.txt") ($(grep -c . <<<"$added" || true) added)"
if [[ -n $added ]]; then
    sed 's/^/  added: /' <<<"$added"
fi
if [[ ${#breaks[@]} -eq 0 ]]; then
    echo "ok: nothing of $baseline's ABI removed or changed"
    exit 0
fi
status=0
for b in "${breaks[@]}"; do
    name=${b%% removed*}
    name=${name%% changed*}
    name=${name#* }
    if [[ $may_break == 1 ]] && grep -qw -- "$name" "$work/section.txt"; then
        echo "  break (in CHANGELOG.md $version): $b"
    else
        echo "FAIL: ABI break: $b" >&2
        status=1
    fi
done
if [[ $status != 0 ]]; then
    if [[ $may_break == 1 ]]; then
        echo "Each break must be named in CHANGELOG.md's $version section." >&2
    else
        echo "$version may not break $baseline's ABI: breaking needs the next" \
            "$([[ $major == 0 ]] && echo MINOR || echo MAJOR) version and a CHANGELOG.md entry" >&2
    fi
fi
exit $status
