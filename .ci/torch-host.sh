#!/usr/bin/env bash
# libtorch as a tessera host (issue 40), with libtorch 2.15.0 from the PyPI
# torch wheel (.ci/get-libtorch.sh: the same cache as
# .ci/serialization-interop.sh; TORCH_DIR=/path/to/unpacked/torch reuses one):
#
#   - builds libtessera_torch.so (hosts/torch/tessera_torch.cpp) and checks
#     that loading it (dlopen, as Python's ctypes.CDLL) installs tessera's
#     CPU allocator in libtorch;
#   - tests/hosts/torch_train.cpp: trains a small network with c10's
#     allocator and again with tessera's: losses and parameters
#     bit-identical, every allocation counted by tessera, nothing live at
#     the end, a memory snapshot (JSON and memory_viz pickle) listing the
#     blocks; then the bad-input cases (installing twice, switching while
#     blocks live, a failing plugin, unaligned blocks, caching over a plugin);
#   - the memory_viz pickle is read back with Python's pickle;
#   - benches/torch_host.cpp: tessera / c10 time ratios (printed, not gated:
#     TORCH_HOST_MAX_RATIO=1.0 makes a median above it fail the stage).
#
# When the wheel cannot be downloaded (no network, no wheel for this
# platform) it prints SKIPPED with the reason; anything else failing fails
# the stage.
#
# Usage: .ci/torch-host.sh [CACHE_DIR]   (default target/interop)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${1:-$root/target/interop}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rc=0
torch=$("$root/.ci/get-libtorch.sh" "$cache") || rc=$?
if ((rc == 3)); then
    echo "SKIPPED torch host: $torch"
    exit 0
elif ((rc != 0)); then
    exit "$rc"
fi
torch=$(tail -n 1 <<<"$torch")
cuda_libs=${CUDA_LIBS:-$(dirname "$torch")/nvidia/cu13/lib}
echo "libtorch from $torch (CUDA runtime libs: $cuda_libs)"

cargo build --quiet --release --lib
# The programs' copy of the shared library carries its SONAME as file name.
libdir=$work/lib
mkdir -p "$libdir"
soname=$(objdump -p target/release/libtessera.so | awk '/SONAME/ {print $2}')
cp target/release/libtessera.so "$libdir/$soname"
ln -sf "$soname" "$libdir/libtessera.so"

# libtorch's headers are heavy: one translation unit per program, -O1 for
# the tests (-O2 for the bench), no debug information.
cxx=(g++ -std=c++20 -Wall -Wextra -Werror -isystem "$torch/include"
    -isystem "$torch/include/torch/csrc/api/include" -I include)
link=(-L"$libdir" -ltessera -Wl,-rpath,"$libdir"
    -L"$torch/lib" -ltorch_cpu -lc10 -Wl,-rpath,"$torch/lib" -Wl,-rpath-link,"$cuda_libs")
export LD_LIBRARY_PATH=$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

echo "--- build"
"${cxx[@]}" -O2 -fPIC -shared -fvisibility=hidden hosts/torch/tessera_torch.cpp \
    -o "$work/libtessera_torch.so" "${link[@]}" &
"${cxx[@]}" -O2 benches/torch_host.cpp -o "$work/torch_host" "${link[@]}" &
"${cxx[@]}" -O1 tests/hosts/torch_train.cpp -o "$work/torch_train" "${link[@]}" -ldl
wait %1
wait %2

echo "--- libtessera_torch.so"
"$work/torch_train" dlopen "$work/libtessera_torch.so"

echo "--- training"
"$work/torch_train" c10 "$work/c10.bin"
"$work/torch_train" tessera "$work/tessera.bin" "$work/c10.bin" "$work/snapshot"
# TORCH_HOST_SNAPSHOT=PATH keeps the JSON snapshot (for the README's
# picture: scripts/viewer_screenshot.sh PATH docs/images/libtorch_memory.png).
if [[ -n ${TORCH_HOST_SNAPSHOT:-} ]]; then
    cp "$work/snapshot.json" "$TORCH_HOST_SNAPSHOT"
fi
python3 - "$work/snapshot.pickle" <<'EOF'
import pickle, sys
with open(sys.argv[1], "rb") as f:
    snap = pickle.load(f)
segments = snap["segments"]
blocks = [b for s in segments for b in s["blocks"] if b["state"] == "active_allocated"]
assert blocks, "no allocated block in the memory_viz snapshot"
assert all(b["size"] > 0 for b in blocks), "a block without a size"
traces = [e for t in snap["device_traces"] for e in t]
assert any(e["action"] == "alloc" for e in traces), "no alloc event"
print(f"memory_viz pickle: {len(segments)} segments, {len(blocks)} allocated blocks, "
      f"{sum(b['size'] for b in blocks)} bytes, {len(traces)} trace events")
EOF

echo "--- bad input"
"$work/torch_train" bad-input

echo "--- bench"
if [[ -n ${TORCH_HOST_MAX_RATIO:-} ]]; then
    "$work/torch_host" "${TORCH_HOST_ROUNDS:-31}" "$TORCH_HOST_MAX_RATIO"
else
    "$work/torch_host" "${TORCH_HOST_ROUNDS:-31}"
fi
echo "torch host: done"
