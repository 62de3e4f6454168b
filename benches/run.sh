#!/bin/sh
# Builds tessera in release, compiles benches/bench.cpp against it (and
# against libtorch when TORCH_DIR points at an unpacked torch wheel's
# torch/ directory) and runs it. Arguments are passed to the bench
# (--quick, --filter TEXT). See benches/README.md.
#
#   TORCH_DIR=/path/to/unpacked/torch [CUDA_LIBS=dir:dir] [BENCH_LINK=both|shared|static] benches/run.sh
#
# By default the bench is built twice and run twice: linked to
# libtessera.so (what a C host gets from -ltessera or Tessera::tessera;
# the targets are judged on this run) and to libtessera.a.
# BENCH_LINK=shared or BENCH_LINK=static builds and runs one of them.
set -eu
cd "$(dirname "$0")/.."
root=$PWD
cargo build --profile dist --lib
lib=$root/target/dist
# Give the loader the library's SONAME (scripts/soname.sh) next to it.
ln -sf libtessera.so "$lib/$(scripts/soname.sh)"
flags="-O2 -Wall -Wextra -DNDEBUG -Iinclude -pthread"
if [ -n "${TORCH_DIR:-}" ]; then
    # libtorch_cpu.so needs libcudart.so.13 and libcupti.so.13 even without
    # a GPU: by default they are looked up in the nvidia/cu13/lib directory
    # next to torch/ (where the nvidia-cuda-runtime and nvidia-cuda-cupti
    # wheels unpack); CUDA_LIBS overrides it.
    cuda_libs=${CUDA_LIBS:-$(dirname "$TORCH_DIR")/nvidia/cu13/lib}
    echo "building the bench with libtorch from $TORCH_DIR (CUDA runtime libs: $cuda_libs)"
    LD_LIBRARY_PATH=$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export LD_LIBRARY_PATH
else
    echo "building the bench without libtorch (set TORCH_DIR to compare with it)"
fi

# build LINK: compiles $lib/tsr_bench_LINK.
build() {
    if [ "$1" = shared ]; then
        tessera="-L$lib -ltessera -Wl,-rpath,$lib"
    else
        # A Rust staticlib needs the system libraries std uses.
        tessera="$lib/libtessera.a -ldl -lm"
    fi
    if [ -n "${TORCH_DIR:-}" ]; then
        g++ -std=c++20 $flags -DTSR_BENCH_TORCH \
            -isystem "$TORCH_DIR/include" -isystem "$TORCH_DIR/include/torch/csrc/api/include" \
            benches/bench.cpp -o "$lib/tsr_bench_$1" \
            $tessera -L"$TORCH_DIR/lib" -ltorch_cpu -lc10 \
            -Wl,-rpath,"$TORCH_DIR/lib" -Wl,-rpath-link,"$cuda_libs"
    else
        g++ -std=c++17 $flags benches/bench.cpp -o "$lib/tsr_bench_$1" $tessera
    fi
}

case ${BENCH_LINK:-both} in
    both) links="shared static" ;;
    shared | static) links=$BENCH_LINK ;;
    *) echo "BENCH_LINK must be both, shared or static" >&2; exit 2 ;;
esac
for link in $links; do build "$link"; done
echo "machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)"
for link in $links; do
    echo
    echo "## linked to libtessera $( [ "$link" = shared ] && echo ".so (the targets are judged on this run)" || echo ".a")"
    echo
    "$lib/tsr_bench_$link" "$@"
done
