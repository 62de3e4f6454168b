#!/usr/bin/env bash
# Serialization interop with the real tools (issue 24):
#
#   - libtorch 2.15.0 (TORCH_VERSION) from the PyPI torch wheel (downloaded and unpacked as
#     benches/README.md says; TORCH_DIR=/path/to/unpacked/torch reuses one):
#     tests/interop/libtorch_interop.cpp reads tessera's torch-format files
#     with torch::pickle_load and writes files with torch::pickle_save that
#     tessera reads (storage, file, mapping); values, geometry and storage
#     sharing compared both ways.
#   - the safetensors PyPI package (numpy backend, pip-installed into the
#     cache): it reads a file tessera wrote, and tessera reads one it
#     wrote (tests/interop/safetensors_driver.c, safetensors_interop.py).
#
# A part whose tool cannot be installed (no network, no wheel for this
# platform) prints SKIPPED with the reason; anything else failing fails
# the stage.
#
# Usage: .ci/serialization-interop.sh [CACHE_DIR]   (default target/interop)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${1:-$root/target/interop}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cargo build --quiet --lib
lib=$root/target/debug
# The C tests' copy of the shared library carries its SONAME as file name.
libdir=$work/lib
mkdir -p "$libdir"
soname=$(objdump -p "$lib/libtessera.so" | awk '/SONAME/ {print $2}')
cp "$lib/libtessera.so" "$libdir/$soname"
ln -sf "$soname" "$libdir/libtessera.so"

pip_get() { python3 -m pip "$@" --quiet --disable-pip-version-check; }

# ---- libtorch -------------------------------------------------------------
libtorch() {
    local torch=${TORCH_DIR:-}
    if [[ -z $torch ]]; then
        torch=$cache/torch_wheel/unpacked/torch
        if [[ ! -f $torch/lib/libtorch_cpu.so ]]; then
            local dl=$cache/torch_wheel
            mkdir -p "$dl/meta"
            if ! pip_get download --no-deps --only-binary=:all: --python-version 3.11 \
                --platform manylinux_2_28_x86_64 "torch==${TORCH_VERSION:-2.15.0}" -d "$dl"; then
                echo "SKIPPED libtorch interop: pip could not download the torch wheel"
                return 0
            fi
            local req
            req=$(unzip -p "$dl"/torch-*.whl '*/METADATA' |
                sed -n 's/^Requires-Dist: \(cuda-toolkit[^;]*\).*/\1/p' | head -1 | tr -d ' ')
            if [[ -z $req ]]; then
                echo "SKIPPED libtorch interop: the torch wheel names no cuda-toolkit requirement"
                return 0
            fi
            req=${req/\[*\]/}
            if ! pip_get download --no-deps --only-binary=:all: "$req" -d "$dl/meta"; then
                echo "SKIPPED libtorch interop: pip could not download $req"
                return 0
            fi
            local pins
            pins=$(unzip -p "$dl"/meta/cuda_toolkit-*.whl '*/METADATA' |
                sed -n 's/^Requires-Dist: \(nvidia-cuda-\(runtime\|cupti\)\)[^=]*==\([0-9.*]*\).*/\1==\3/p' |
                sort -u)
            # shellcheck disable=SC2086
            # pip takes --platform literally (no older manylinux tags), and
            # these wheels are tagged manylinux_2_25 and manylinux_2_17 /
            # manylinux2014: list every tag this glibc accepts.
            local platforms=()
            for tag in manylinux_2_28 manylinux_2_27 manylinux_2_25 manylinux_2_17 manylinux2014; do
                platforms+=(--platform "${tag}_x86_64")
            done
            if [[ -z $pins ]] || ! pip_get download --no-deps --only-binary=:all: \
                --python-version 3.11 "${platforms[@]}" $pins -d "$dl"; then
                echo "SKIPPED libtorch interop: pip could not download the CUDA runtime wheels ($pins)"
                return 0
            fi
            mkdir -p "$dl/unpacked"
            (cd "$dl/unpacked" && for w in ../*.whl; do unzip -q -o "$w"; done)
        fi
    fi
    local cuda_libs=${CUDA_LIBS:-$(dirname "$torch")/nvidia/cu13/lib}
    echo "libtorch from $torch (CUDA runtime libs: $cuda_libs)"
    g++ -std=c++20 -O1 -Wall -Wextra \
        -isystem "$torch/include" -isystem "$torch/include/torch/csrc/api/include" \
        -I include tests/interop/libtorch_interop.cpp -o "$work/libtorch_interop" \
        -L"$libdir" -ltessera -Wl,-rpath,"$libdir" \
        -L"$torch/lib" -ltorch_cpu -lc10 -Wl,-rpath,"$torch/lib" -Wl,-rpath-link,"$cuda_libs"
    LD_LIBRARY_PATH=$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$work/libtorch_interop" "$work"
}

# ---- safetensors (Python) -------------------------------------------------
safetensors_py() {
    local py=$cache/python
    if ! PYTHONPATH=$py python3 -c "import safetensors.numpy, numpy" 2>/dev/null; then
        if ! pip_get install --target "$py" --upgrade safetensors numpy; then
            echo "SKIPPED safetensors interop: pip could not install safetensors and numpy"
            return 0
        fi
    fi
    PYTHONPATH=$py python3 -c \
        "import safetensors, numpy; print('safetensors', safetensors.__version__, 'numpy', numpy.__version__)"
    cc -std=c99 -Wall -Wextra -Werror -pedantic -I include tests/interop/safetensors_driver.c \
        -o "$work/safetensors_driver" -L"$libdir" -ltessera -Wl,-rpath,"$libdir"
    "$work/safetensors_driver" write "$work/from_tessera.safetensors"
    PYTHONPATH=$py python3 tests/interop/safetensors_interop.py check "$work/from_tessera.safetensors"
    PYTHONPATH=$py python3 tests/interop/safetensors_interop.py write "$work/from_python.safetensors"
    "$work/safetensors_driver" check "$work/from_python.safetensors"
}

# ---- NumPy .npy (Python) -----------------------------------------------------
# NumPy writes (scripts/make_npy_fixtures.py: every dtype with a c10 twin, C
# and Fortran order, big-endian, 0-d, empty, version 2.0) and tessera's
# tests read those files instead of the committed copies; tessera writes
# (the test writes_reference_files) and NumPy reads and compares.
npy_py() {
    local py=$cache/python
    if ! PYTHONPATH=$py python3 -c "import numpy" 2>/dev/null; then
        echo "SKIPPED npy interop: numpy is not installed (see the safetensors part)"
        return 0
    fi
    PYTHONPATH=$py python3 scripts/make_npy_fixtures.py "$work/npy_numpy"
    TESSERA_NPY_FIXTURES=$work/npy_numpy cargo test --quiet --lib serialize::tests_npy
    TESSERA_NPY_OUT=$work/npy_tessera cargo test --quiet --lib \
        serialize::tests_npy::writes_reference_files
    PYTHONPATH=$py python3 scripts/make_npy_fixtures.py --check "$work/npy_tessera"
}

echo "--- libtorch"
libtorch
echo "--- safetensors"
safetensors_py
echo "--- NumPy .npy"
npy_py
echo "serialization interop: done"
