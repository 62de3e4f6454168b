#!/usr/bin/env bash
# Serialization interop with the real tools (issue 24):
#
#   - libtorch 2.15.0 (TORCH_VERSION) from the PyPI torch wheel (downloaded and unpacked by
#     .ci/get-libtorch.sh, as benches/README.md says; TORCH_DIR=/path/to/unpacked/torch
#     reuses one):
#     tests/interop/libtorch_interop.cpp reads tessera's torch-format files
#     with torch::pickle_load and writes files with torch::pickle_save that
#     tessera reads (storage, file, mapping); values, geometry and storage
#     sharing compared both ways.
#   - the safetensors PyPI package (numpy backend, pip-installed into the
#     cache): it reads a file tessera wrote, and tessera reads one it
#     wrote (tests/interop/safetensors_driver.c, safetensors_interop.py);
#     it reads tessera's sharded save (tests/interop/shards_safetensors_check.py).
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

# The shared library `cargo test --workspace` builds (target/debug/deps, as
# the C tests use), not a `cargo build` one: that builds the crate again
# with other features into the same unhashed deps/libtessera.so, and each
# `cargo test` below would build it a third time (both measured).
cargo test --workspace --quiet --no-run --test format_npy
lib=$root/target/debug/deps
# The C tests' copy of the shared library carries its SONAME as file name.
libdir=$work/lib
mkdir -p "$libdir"
soname=$(objdump -p "$lib/libtessera.so" | awk '/SONAME/ {print $2}')
cp "$lib/libtessera.so" "$libdir/$soname"
ln -sf "$soname" "$libdir/libtessera.so"

pip_get() { python3 -m pip "$@" --quiet --disable-pip-version-check; }

# ---- libtorch -------------------------------------------------------------
libtorch() {
    local torch rc=0
    torch=$("$root/.ci/get-libtorch.sh" "$cache") || rc=$?
    if ((rc == 3)); then
        echo "SKIPPED libtorch interop: $torch"
        return 0
    elif ((rc != 0)); then
        return "$rc"
    fi
    torch=$(tail -n 1 <<<"$torch")
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
    # Sharded saves (issue 53): tsr_save_sharded's shards and index read
    # by the safetensors package. The direction torch reads (DCP with
    # torch.distributed.checkpoint.load on 1 and 2 ranks) needs Python
    # torch and its CUDA wheels: see shards_torch.
    TESSERA_SHARDS_OUT=$work/shards cargo test --workspace --quiet --test format_shards \
        dcp_saves_round_trip
    PYTHONPATH=$py python3 tests/interop/shards_safetensors_check.py "$work/shards"
}

# ---- Sharded and DCP checkpoints read by Python torch ------------------------
# Only where Python torch imports already (CI does not install it: the
# CUDA wheels libtorch_cuda.so links are ~1.8 GB more to download and
# ~2.7 GB to unpack, minutes the CI budget lacks; docs/FORMATS.md,
# "Interop in CI"): torch.distributed.checkpoint.load of tessera's DCP
# directory on one process and on two gloo ranks into DTensors, the
# shards with the safetensors package and torch.load. The committed
# fixtures (tests/data/shards/, made by real torch) cover the other
# direction in `cargo test`.
shards_torch() {
    if ! python3 -c "import torch, safetensors" 2>/dev/null; then
        echo "SKIPPED sharded checkpoints read by torch: Python torch is not installed (by design: docs/FORMATS.md, Interop in CI)"
        return 0
    fi
    TESSERA_SHARDS_OUT=$work/shards_torch cargo test --workspace --quiet --test format_shards \
        dcp_saves_round_trip
    python3 scripts/make_shard_fixtures.py --check "$work/shards_torch"
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
    TESSERA_NPY_FIXTURES=$work/npy_numpy cargo test --workspace --quiet --test format_npy
    TESSERA_NPY_OUT=$work/npy_tessera cargo test --workspace --quiet --test format_npy \
        writes_reference_files
    PYTHONPATH=$py python3 scripts/make_npy_fixtures.py --check "$work/npy_tessera"
    # .npz: np.savez / np.savez_compressed write, tessera reads; tessera
    # writes, np.load reads (one small archive each way).
    PYTHONPATH=$py python3 scripts/make_npz_fixtures.py "$work/npz_numpy"
    TESSERA_NPZ_FIXTURES=$work/npz_numpy cargo test --workspace --quiet --test format_npz
    TESSERA_NPZ_OUT=$work/npz_tessera cargo test --workspace --quiet --test format_npz writes_reference_file
    PYTHONPATH=$py python3 scripts/make_npz_fixtures.py --check "$work/npz_tessera"
}

# ---- GGUF (the gguf package, llama.cpp's gguf-py) ---------------------------------
# GGUFWriter writes (scripts/make_gguf_fixtures.py: every plain type, five
# quantized types, every key-value type, alignment 64, version 2) and
# tessera's tests read them; tessera saves the loaded file again and
# GGUFReader reads and compares.
gguf_py() {
    local py=$cache/python
    if ! PYTHONPATH=$py python3 -c "import gguf, numpy" 2>/dev/null; then
        if ! pip_get install --target "$py" gguf numpy; then
            echo "SKIPPED gguf interop: pip could not install gguf"
            return 0
        fi
    fi
    PYTHONPATH=$py python3 scripts/make_gguf_fixtures.py "$work/gguf_py"
    TESSERA_GGUF_FIXTURES=$work/gguf_py cargo test --workspace --quiet --test format_gguf
    TESSERA_GGUF_OUT=$work/gguf_tessera cargo test --workspace --quiet --test format_gguf writes_reference_file
    PYTHONPATH=$py python3 scripts/make_gguf_fixtures.py --check "$work/gguf_tessera"
}

echo "--- libtorch"
libtorch
echo "--- safetensors"
safetensors_py
echo "--- NumPy .npy and .npz"
npy_py
echo "--- GGUF"
gguf_py
echo "--- sharded and DCP checkpoints read by Python torch"
shards_torch
echo "serialization interop: done"
