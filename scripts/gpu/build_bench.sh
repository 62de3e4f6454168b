#!/usr/bin/env bash
# Builds scripts/gpu/bench.cpp into OUTDIR/bench (g++, host code only).
#
#   scripts/gpu/build_bench.sh OUTDIR
#
# Links:
#   -ltessera  from $TESSERA_LIB_DIR (default: <repo>/gpu-carry), header from
#              <repo>/include; rpath to that directory
#   libtorch   (-ltorch_cuda -ltorch_cpu -lc10_cuda -lc10) from $TORCH_DIR/lib
#              (default: the torch package of $PYTHON); rpath to it
#   cudart     from $CUDA_DIR (default: the nvidia/cu13 or nvidia/cuda_runtime
#              wheel next to torch, else nvcc's toolkit); rpath to it
#
# Environment overrides: PYTHON, TORCH_DIR, CUDA_DIR, TESSERA_LIB_DIR, CXX,
# CXX11_ABI (0/1; default: asked from torch, else 1).
# --allow-shlib-undefined: the libraries libtorch_cuda needs (cublas, cudnn,
# ...) are found at run time through its own RUNPATH, not at link time.
set -euo pipefail

die() { echo "build_bench.sh: ERROR: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 OUTDIR"
OUTDIR=$1
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SRC=$HERE/bench.cpp
CXX=${CXX:-g++}
command -v "$CXX" >/dev/null 2>&1 || die "compiler '$CXX' not found"
[ -f "$SRC" ] || die "missing $SRC"
[ -f "$ROOT/include/tessera.h" ] || die "missing $ROOT/include/tessera.h"

# ---- python (for locating torch), optional when TORCH_DIR and CUDA_DIR are set
if [ -z "${PYTHON:-}" ]; then
    for p in /opt/torch/.venv/bin/python3 python3; do
        if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then
            PYTHON=$p
            break
        fi
    done
fi
PYTHON=${PYTHON:-python3}

# ---- torch
if [ -z "${TORCH_DIR:-}" ]; then
    TORCH_DIR=$("$PYTHON" -c 'import torch, os; print(os.path.dirname(torch.__file__))' 2>/dev/null) \
        || die "cannot import torch with '$PYTHON' (set TORCH_DIR or PYTHON)"
fi
[ -d "$TORCH_DIR/include" ] && [ -d "$TORCH_DIR/lib" ] \
    || die "TORCH_DIR=$TORCH_DIR has no include/ and lib/"
for l in torch_cuda torch_cpu c10_cuda c10; do
    [ -e "$TORCH_DIR/lib/lib$l.so" ] || die "missing $TORCH_DIR/lib/lib$l.so (a CUDA build of torch is needed)"
done
[ -f "$TORCH_DIR/include/c10/cuda/CUDACachingAllocator.h" ] \
    || die "missing $TORCH_DIR/include/c10/cuda/CUDACachingAllocator.h"

if [ -z "${CXX11_ABI:-}" ]; then
    CXX11_ABI=$("$PYTHON" -c 'import torch; print(int(torch.compiled_with_cxx11_abi()))' 2>/dev/null || echo 1)
fi

# ---- CUDA runtime: headers + libcudart from one place
cuda_ok() {  # DIR -> true when it has include/cuda_runtime.h and a libcudart
    local d=$1
    [ -f "$d/include/cuda_runtime.h" ] && [ -f "$d/include/crt/host_config.h" ] || return 1
    for l in lib64 lib lib/x64 targets/x86_64-linux/lib; do
        ls "$d/$l"/libcudart.so* >/dev/null 2>&1 && return 0
    done
    return 1
}
if [ -z "${CUDA_DIR:-}" ]; then
    cands=()
    SP=$(dirname "$TORCH_DIR")
    cands+=("$SP/nvidia/cu13" "$SP/nvidia/cuda_runtime")
    NV=$("$PYTHON" -c 'import nvidia; print(list(nvidia.__path__)[0])' 2>/dev/null || true)
    [ -n "$NV" ] && cands+=("$NV/cu13" "$NV/cuda_runtime")
    if command -v nvcc >/dev/null 2>&1; then
        cands+=("$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")")
    fi
    cands+=(/usr/local/cuda)
    for c in "${cands[@]}"; do
        if cuda_ok "$c"; then CUDA_DIR=$c; break; fi
    done
    [ -n "${CUDA_DIR:-}" ] || die "no CUDA runtime found (cuda_runtime.h + libcudart) in: ${cands[*]}; set CUDA_DIR"
fi
cuda_ok "$CUDA_DIR" || die "CUDA_DIR=$CUDA_DIR lacks include/cuda_runtime.h or libcudart.so*"
CUDA_LIB=
for l in lib64 lib lib/x64 targets/x86_64-linux/lib; do
    if ls "$CUDA_DIR/$l"/libcudart.so* >/dev/null 2>&1; then CUDA_LIB=$CUDA_DIR/$l; break; fi
done
if [ -e "$CUDA_LIB/libcudart.so" ]; then
    CUDART=(-L"$CUDA_LIB" -lcudart)
else
    # wheels ship only libcudart.so.<major>: link the file itself
    f=$(ls "$CUDA_LIB"/libcudart.so.* | sort -V | head -n 1)
    CUDART=("$f")
fi

# ---- tessera
TESSERA_LIB_DIR=${TESSERA_LIB_DIR:-$ROOT/gpu-carry}
TESSERA_LIB_DIR=$(cd "$TESSERA_LIB_DIR" 2>/dev/null && pwd) || die "no directory ${TESSERA_LIB_DIR}"
[ -f "$TESSERA_LIB_DIR/libtessera.so" ] || die "missing $TESSERA_LIB_DIR/libtessera.so"

mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
OUTABS=$(cd "$OUTDIR" && pwd)
OUT=$OUTABS/bench

# The binary records libtessera's SONAME (libtessera.so.MAJOR.MINOR); when
# the directory holds only libtessera.so, give the loader that name in
# OUTDIR/lib (searched first).
TESSERA_RPATH=$TESSERA_LIB_DIR
SONAME=$(readelf -d "$TESSERA_LIB_DIR/libtessera.so" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
if [ -n "$SONAME" ] && [ ! -e "$TESSERA_LIB_DIR/$SONAME" ]; then
    mkdir -p "$OUTABS/lib"
    ln -sfn "$TESSERA_LIB_DIR/libtessera.so" "$OUTABS/lib/$SONAME"
    TESSERA_RPATH=$OUTABS/lib:$TESSERA_LIB_DIR
    echo "build_bench.sh: $OUTABS/lib/$SONAME -> $TESSERA_LIB_DIR/libtessera.so"
fi

echo "build_bench.sh: torch=$TORCH_DIR cuda=$CUDA_DIR (lib $CUDA_LIB) tessera=$TESSERA_LIB_DIR cxx11_abi=$CXX11_ABI"
set -x
"$CXX" -std=c++20 -O2 -g0 -w -D_GLIBCXX_USE_CXX11_ABI="$CXX11_ABI" \
    -I"$ROOT/include" \
    -I"$TORCH_DIR/include" -I"$TORCH_DIR/include/torch/csrc/api/include" \
    -I"$CUDA_DIR/include" \
    "$SRC" -o "$OUT" \
    -L"$TESSERA_LIB_DIR" -ltessera -Wl,-rpath,"$TESSERA_RPATH" \
    -L"$TORCH_DIR/lib" -Wl,--no-as-needed -ltorch_cuda -ltorch_cpu -lc10_cuda -lc10 -Wl,--as-needed \
    -Wl,-rpath,"$TORCH_DIR/lib" \
    "${CUDART[@]}" -Wl,-rpath,"$CUDA_LIB" \
    -lpthread -ldl -Wl,--allow-shlib-undefined \
    || { set +x; die "compile/link of $SRC failed"; }
set +x
echo "build_bench.sh: built $OUT"
