#!/usr/bin/env bash
# tessera.h with the newest upstream dlpack.h a package registry has:
# DLPack 1.3, from PyPI's apache-tvm-ffi wheel (tvm_ffi/include/dlpack/
# dlpack.h, Apache-2.0; Debian's libdlpack-dev is 0.6). docs/PLATFORMS.md
# ("DLPack header") says what each include order gives; this checks it:
#
#   - both orders compile as C99, C11 and C++17 (-Wall -Wextra -Werror),
#     using tessera's DLPack functions;
#   - dlpack.h first: tessera's functions take dlpack.h's types and all of
#     dlpack.h is visible (DLPACK_MINOR_VERSION 3, DLPackExchangeAPI);
#   - every name tessera's DLPack block declares (enumerators, flags,
#     struct sizes and offsets) has the same value in dlpack.h 1.3;
#   - tessera.h first: dlpack.h is skipped and DLPACK_MINOR_VERSION is 1,
#     the one difference the documentation states.
#
# The wheel is downloaded once (pip, pinned) into the cache directory;
# where pip cannot reach PyPI the stage says SKIPPED instead of failing.
#
# Usage: .ci/dlpack-upstream.sh [CACHE_DIR]   (default target/dlpack-upstream)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${1:-$root/target/dlpack-upstream}
wheel_version=0.1.15.post2
cc=${CC:-cc}
cxx=${CXX:-c++}
mkdir -p "$cache"
header=$cache/include/dlpack/dlpack.h
if [[ ! -f $header ]]; then
    if ! python3 -m pip download --quiet --no-deps --only-binary=:all: \
        --python-version 3.11 --platform manylinux_2_28_x86_64 \
        -d "$cache/wheel" "apache-tvm-ffi==$wheel_version"; then
        echo "SKIPPED: apache-tvm-ffi $wheel_version cannot be downloaded from PyPI here"
        exit 0
    fi
    python3 - "$cache" <<'PY'
import glob, os, sys, zipfile
cache = sys.argv[1]
wheel = glob.glob(os.path.join(cache, "wheel", "apache_tvm_ffi-*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    data = z.read("tvm_ffi/include/dlpack/dlpack.h")
os.makedirs(os.path.join(cache, "include", "dlpack"), exist_ok=True)
with open(os.path.join(cache, "include", "dlpack", "dlpack.h"), "wb") as f:
    f.write(data)
PY
fi
major=$(sed -n 's/^#define DLPACK_MAJOR_VERSION \([0-9]*\)$/\1/p' "$header")
minor=$(sed -n 's/^#define DLPACK_MINOR_VERSION \([0-9]*\)$/\1/p' "$header")
echo "upstream dlpack.h $major.$minor (apache-tvm-ffi $wheel_version)"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
includes=(-I "$root/include" -I "$cache/include")
tessera='#include "tessera.h"'
dlpack='#include <dlpack/dlpack.h>'
probe='
int probe(DLManagedTensorVersioned *m, DLManagedTensor *l, TsrTensor **out);
int probe(DLManagedTensorVersioned *m, DLManagedTensor *l, TsrTensor **out) {
    DLDevice d = {kDLCPU, 0};
    (void)d;
    if (m->version.major != DLPACK_MAJOR_VERSION) return -1;
    return tsr_tensor_from_dlpack(m, out) + tsr_tensor_from_dlpack_legacy(l, out);
}'
# dlpack.h first: the whole upstream header is visible.
upstream_only='
#if DLPACK_MINOR_VERSION < 3
#error "dlpack.h first: expected the upstream minor version"
#endif
typedef DLPackExchangeAPI upstream_api_is_visible;'
for lang in c99 c11 c++17; do
    if [[ $lang == c++* ]]; then
        compiler=$cxx ext=cpp
    else
        compiler=$cc ext=c
    fi
    printf '%s\n%s\n%s\n%s\n' "$dlpack" "$tessera" "$probe" "$upstream_only" >"$work/dlpack_first.$ext"
    printf '%s\n%s\n%s\n' "$tessera" "$dlpack" "$probe" >"$work/tessera_first.$ext"
    for order in dlpack_first tessera_first; do
        "$compiler" -std="$lang" -Wall -Wextra -Werror -fsyntax-only "${includes[@]}" \
            "$work/$order.$ext"
    done
    echo "ok: both include orders compile as $lang"
done

# The values and layouts of every name in tessera's DLPack block, printed
# once from tessera.h alone and once with dlpack.h 1.3 in front.
names=$(sed -n '/^#ifndef DLPACK_DLPACK_H_$/,/^#endif  \/\* DLPACK_DLPACK_H_ \*\/$/p' \
    "$root/include/tessera.h" | grep -o '\bkDL[A-Za-z0-9_]*\b' | sort -u)
flags=$(sed -n 's/^#define \(DLPACK_FLAG_BITMASK_[A-Z_]*\) .*/\1/p' "$root/include/tessera.h")
{
    echo '#include <stdio.h>'
    echo '#include <stddef.h>'
    echo '#define P(e) printf("%s %lu\n", #e, (unsigned long)(e))'
    echo 'int main(void) {'
    for n in $names $flags DLPACK_MAJOR_VERSION; do echo "    P($n);"; done
    for s in DLDevice DLDataType DLPackVersion DLTensor DLManagedTensor DLManagedTensorVersioned; do
        echo "    P(sizeof($s));"
    done
    for f in 'DLDevice, device_id' 'DLDataType, bits' 'DLDataType, lanes' 'DLTensor, device' \
        'DLTensor, ndim' 'DLTensor, dtype' 'DLTensor, shape' 'DLTensor, strides' \
        'DLTensor, byte_offset' 'DLManagedTensor, manager_ctx' 'DLManagedTensor, deleter' \
        'DLManagedTensorVersioned, manager_ctx' 'DLManagedTensorVersioned, deleter' \
        'DLManagedTensorVersioned, flags' 'DLManagedTensorVersioned, dl_tensor'; do
        echo "    P(offsetof($f));"
    done
    echo '    P(DLPACK_MINOR_VERSION);'
    echo '    return 0;'
    echo '}'
} >"$work/values.c"
"$cc" -std=c99 -I "$root/include" -include tessera.h "$work/values.c" -o "$work/values_tessera"
"$cc" -std=c99 "${includes[@]}" -include dlpack/dlpack.h -include tessera.h "$work/values.c" \
    -o "$work/values_upstream"
"$cc" -std=c99 "${includes[@]}" -include tessera.h -include dlpack/dlpack.h "$work/values.c" \
    -o "$work/values_tessera_first"
"$work/values_tessera" >"$work/tessera.txt"
"$work/values_upstream" >"$work/upstream.txt"
"$work/values_tessera_first" >"$work/tessera_first.txt"
if ! diff <(grep -v '^DLPACK_MINOR_VERSION ' "$work/tessera.txt") \
    <(grep -v '^DLPACK_MINOR_VERSION ' "$work/upstream.txt"); then
    echo "FAIL: tessera's DLPack block differs from dlpack.h $major.$minor (above)" >&2
    exit 1
fi
echo "ok: the $(wc -l <"$work/tessera.txt") values and layouts of tessera's DLPack block" \
    "equal dlpack.h $major.$minor's"
if ! grep -qx 'DLPACK_MINOR_VERSION 1' "$work/tessera_first.txt"; then
    echo "FAIL: tessera.h first: expected dlpack.h skipped (DLPACK_MINOR_VERSION 1):" >&2
    grep DLPACK_MINOR_VERSION "$work/tessera_first.txt" >&2
    exit 1
fi
echo "ok: tessera.h first: dlpack.h $major.$minor is skipped (DLPACK_MINOR_VERSION 1)," \
    "as docs/PLATFORMS.md says"
