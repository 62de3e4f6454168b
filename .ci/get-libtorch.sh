#!/usr/bin/env bash
# Gets libtorch (TORCH_VERSION, default 2.15.0) from the PyPI torch wheel, the
# way benches/README.md describes, into CACHE_DIR/torch_wheel/unpacked/torch
# (shared by every stage that needs libtorch; its headers and CPU
# libraries), with the CUDA runtime wheels libtorch_cpu.so links against
# (their sonames only; no GPU is needed).
#
# Usage: .ci/get-libtorch.sh CACHE_DIR
# On success prints the torch directory (include/, lib/) as the last line of
# stdout and exits 0; TORCH_DIR=/path/to/unpacked/torch skips the download.
# When pip cannot download a wheel (no network, no wheel for this platform)
# it prints the reason on stdout and exits 3, so callers can print SKIPPED;
# any other failure exits with its own status.
set -euo pipefail
if [[ -n ${TORCH_DIR:-} ]]; then
    echo "$TORCH_DIR"
    exit 0
fi
cache=${1:?usage: get-libtorch.sh CACHE_DIR}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
dl=$cache/torch_wheel
torch=$dl/unpacked/torch
if [[ -f $torch/lib/libtorch_cpu.so ]]; then
    echo "$torch"
    exit 0
fi
pip_get() { python3 -m pip "$@" --quiet --disable-pip-version-check >&2; }
mkdir -p "$dl/meta"
if ! pip_get download --no-deps --only-binary=:all: --python-version 3.11 \
    --platform manylinux_2_28_x86_64 "torch==${TORCH_VERSION:-2.15.0}" -d "$dl"; then
    echo "pip could not download the torch wheel"
    exit 3
fi
req=$(unzip -p "$dl"/torch-*.whl '*/METADATA' |
    sed -n 's/^Requires-Dist: \(cuda-toolkit[^;]*\).*/\1/p' | head -1 | tr -d ' ')
if [[ -z $req ]]; then
    echo "the torch wheel names no cuda-toolkit requirement"
    exit 3
fi
req=${req/\[*\]/}
if ! pip_get download --no-deps --only-binary=:all: "$req" -d "$dl/meta"; then
    echo "pip could not download $req"
    exit 3
fi
pins=$(unzip -p "$dl"/meta/cuda_toolkit-*.whl '*/METADATA' |
    sed -n 's/^Requires-Dist: \(nvidia-cuda-\(runtime\|cupti\)\)[^=]*==\([0-9.*]*\).*/\1==\3/p' |
    sort -u)
# pip takes --platform literally (no older manylinux tags), and these wheels
# are tagged manylinux_2_25 and manylinux_2_17 / manylinux2014: list every tag
# this glibc accepts.
platforms=()
for tag in manylinux_2_28 manylinux_2_27 manylinux_2_25 manylinux_2_17 manylinux2014; do
    platforms+=(--platform "${tag}_x86_64")
done
# shellcheck disable=SC2086
if [[ -z $pins ]] || ! pip_get download --no-deps --only-binary=:all: \
    --python-version 3.11 "${platforms[@]}" $pins -d "$dl"; then
    echo "pip could not download the CUDA runtime wheels ($pins)"
    exit 3
fi
# Only what a C++ program linking -ltorch_cpu -lc10 uses: torch/include,
# torch/lib without the CUDA and Python libraries (about 550 MB that
# nothing here loads: libtorch_cpu.so needs only libc10, libgomp and the
# two CUDA runtime libraries' sonames), and the CUDA runtime wheels. The
# wheels go once unpacked: a CI machine's disk can be short (a run failed
# with "No space left on device" with 1.7 GB in this directory).
mkdir -p "$dl/unpacked"
(
    cd "$dl/unpacked"
    unzip -q -o ../torch-*.whl 'torch/include/*' 'torch/lib/*' \
        -x 'torch/lib/libtorch_cuda*' 'torch/lib/libc10_cuda.so' 'torch/lib/libtorch_python.so' \
        'torch/lib/libtorch_nvshmem.so' 'torch/lib/libcaffe2_nvrtc.so'
    for w in ../nvidia_*.whl; do unzip -q -o "$w"; done
)
rm -f "$dl"/*.whl "$dl"/meta/*.whl
echo "$torch"
