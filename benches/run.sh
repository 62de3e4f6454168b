#!/bin/sh
# Builds tessera in release, compiles benches/bench.cpp against it (and
# against libtorch when TORCH_DIR points at an unpacked torch wheel's
# torch/ directory) and runs it. Arguments are passed to the bench
# (--quick, --filter TEXT). See benches/README.md.
#
#   TORCH_DIR=/path/to/unpacked/torch [CUDA_LIBS=dir:dir] [BENCH_LINK=shared] benches/run.sh
#
# The bench links libtessera.a by default, as a host that cares about
# per-call cost would; BENCH_LINK=shared links libtessera.so instead (each
# call then goes through the PLT: about +0.4 ns per call, which shows in
# the refcount rows).
set -eu
cd "$(dirname "$0")/.."
root=$PWD
cargo build --release --lib
lib=$root/target/release
# Give the loader the library's SONAME (scripts/soname.sh) next to it.
ln -sf libtessera.so "$lib/$(scripts/soname.sh)"
out=$lib/tsr_bench
flags="-O2 -Wall -Wextra -DNDEBUG -Iinclude -pthread"
if [ "${BENCH_LINK:-static}" = shared ]; then
    tessera="-L$lib -ltessera -Wl,-rpath,$lib"
else
    # A Rust staticlib needs the system libraries std uses.
    tessera="$lib/libtessera.a -ldl -lm"
fi
echo "linking libtessera ${BENCH_LINK:-static}"
if [ -n "${TORCH_DIR:-}" ]; then
    # libtorch_cpu.so needs libcudart.so.13 and libcupti.so.13 even without
    # a GPU: by default they are looked up in the nvidia/cu13/lib directory
    # next to torch/ (where the nvidia-cuda-runtime and nvidia-cuda-cupti
    # wheels unpack); CUDA_LIBS overrides it.
    cuda_libs=${CUDA_LIBS:-$(dirname "$TORCH_DIR")/nvidia/cu13/lib}
    echo "building the bench with libtorch from $TORCH_DIR (CUDA runtime libs: $cuda_libs)"
    g++ -std=c++20 $flags -DTSR_BENCH_TORCH \
        -isystem "$TORCH_DIR/include" -isystem "$TORCH_DIR/include/torch/csrc/api/include" \
        benches/bench.cpp -o "$out" \
        $tessera -L"$TORCH_DIR/lib" -ltorch_cpu -lc10 \
        -Wl,-rpath,"$TORCH_DIR/lib" -Wl,-rpath-link,"$cuda_libs"
    LD_LIBRARY_PATH=$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
else
    echo "building the bench without libtorch (set TORCH_DIR to compare with it)"
    g++ -std=c++17 $flags benches/bench.cpp -o "$out" $tessera
fi
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
exec "$out" "$@"
