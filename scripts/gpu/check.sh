#!/usr/bin/env bash
# Runs every GPU check of tessera in one call (about 5 minutes at most) on
# a machine with an NVIDIA GPU, PyTorch (CUDA), a C++ compiler and the CUDA
# toolkit, and no Rust: what needs Rust was built beforehand by
# scripts/gpu/prepare.sh into gpu-carry/.
#
#   scripts/gpu/check.sh OUTDIR
#
# Writes under OUTDIR: summary.txt (one line per check, also printed),
# device.txt, tests.log, ctest.log, sanitizer.log, dlpack.log, bench.log,
# build.log, torch_tessera.log with torch_tessera/ (the figures as JSON and
# the memory snapshots of the PyTorch run) (and
# bench-gdb.log when the bench fails).
# Exit status: 0 when every check passed, 1 when one failed, 77 when this
# machine has no usable GPU (nothing run).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/gpu/check.sh OUTDIR}
mkdir -p "$out"
: >"$out/summary.txt"
failed=0
say() { # STATUS CHECK DETAIL
    echo "$1 $2: $3" | tee -a "$out/summary.txt"
    [ "$1" = FAIL ] && failed=1
    return 0
}

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "no GPU: nvidia-smi finds no NVIDIA GPU here; nothing was run" | tee -a "$out/summary.txt"
    exit 77
fi
for f in gpu-carry/libtessera.so gpu-carry/tessera-lib-tests; do
    [ -x "$f" ] || { say FAIL setup "missing $f: run scripts/gpu/prepare.sh where Rust is"; exit 1; }
done
PY=python3
[ -x /opt/torch/.venv/bin/python3 ] && PY=/opt/torch/.venv/bin/python3

{
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    nvidia-smi | sed -n 3p
    command -v nvcc >/dev/null && nvcc --version | tail -2
    "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
    uname -r
} >"$out/device.txt" 2>&1
say INFO device "$(head -1 "$out/device.txt")"

# 1. The library's CUDA tests (ignored elsewhere), one at a time: one of
#    them fills the GPU's memory.
timeout 240 gpu-carry/tessera-lib-tests --ignored --test-threads=1 allocator::cuda \
    >"$out/tests.log" 2>&1
rc=$?
line=$(grep -E '^test result:' "$out/tests.log" | tail -1)
if [ $rc -eq 0 ]; then say PASS cuda-tests "$line"; else say FAIL cuda-tests "rc $rc; $line"; fi

# 1b. The C API's CUDA test (c_tests/test_cuda.c runs its GPU part when
#     tsr_cuda_init succeeds), compiled here against the carried library.
ctest=$(mktemp -d)
ln -s "$PWD/gpu-carry/libtessera.so" "$ctest/$(objdump -p gpu-carry/libtessera.so | awk '/SONAME/ {print $2}')"
ln -s "$PWD/gpu-carry/libtessera.so" "$ctest/libtessera.so"
if cc -std=c11 -O1 -Iinclude -Ic_tests c_tests/test_cuda.c -L"$ctest" -ltessera \
    -Wl,-rpath,"$ctest" -o "$ctest/test_cuda" >"$out/ctest.log" 2>&1; then
    timeout 60 "$ctest/test_cuda" >>"$out/ctest.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then say PASS c-cuda-test "$(tail -1 "$out/ctest.log")"; else say FAIL c-cuda-test "rc $rc; $(tail -1 "$out/ctest.log")"; fi
else
    say FAIL c-cuda-test "compile failed (ctest.log)"
fi
rm -rf "$ctest"

# 1c. The same under compute-sanitizer (memcheck: device memory errors and
#     leaks of device memory at exit), but the test that fills the GPU.
if command -v compute-sanitizer >/dev/null 2>&1; then
    timeout 150 compute-sanitizer --tool memcheck --leak-check full --error-exitcode 99 \
        gpu-carry/tessera-lib-tests --ignored --test-threads=1 allocator::cuda \
        --skip out_of_memory >"$out/sanitizer.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then say PASS sanitizer "$(grep -E 'ERROR SUMMARY' "$out/sanitizer.log" | tail -1)"
    else say FAIL sanitizer "rc $rc; $(grep -E 'ERROR SUMMARY|test result' "$out/sanitizer.log" | tail -2 | tr '\n' ' ')"; fi
fi

# 2. DLPack with the PyTorch of this machine, both directions.
PYTHONUNBUFFERED=1 timeout 150 "$PY" scripts/gpu/dlpack_torch.py gpu-carry/libtessera.so \
    >"$out/dlpack.log" 2>&1
rc=$?
n_ok=$(grep -c '^ok ' "$out/dlpack.log")
n_fail=$(grep -c '^FAIL ' "$out/dlpack.log")
if [ $rc -eq 0 ]; then say PASS dlpack "$n_ok checks"; else say FAIL dlpack "rc $rc; $n_ok ok, $n_fail failed"; fi

# 2b. PyTorch (and CuPy) on tessera's CUDA allocator (issue 55): training
#     with CUDAPluggableAllocator (losses bit-identical to PyTorch's own
#     allocator), the hooks, MemPool, CuPy in the same pool, and the
#     varying-batch fragmentation against PyTorch's expandable segments.
PYTHONUNBUFFERED=1 timeout 210 "$PY" scripts/gpu/torch_tessera.py gpu-carry/libtessera.so \
    "$out/torch_tessera" >"$out/torch_tessera.log" 2>&1
rc=$?
grep -E '^(ok|FAIL|SKIP) ' "$out/torch_tessera.log" | while read -r status rest; do
    case $status in ok) s=PASS ;; *) s=$status ;; esac
    echo "$s torch-${rest}" | tee -a "$out/summary.txt"
done
if [ $rc -ne 0 ]; then say FAIL torch-tessera "rc $rc (torch_tessera.log)"; fi

# 3. The bench against torch's CUDA caching allocator, cudaMalloc,
#    cudaMallocAsync and torch's pinned memory (built here, outside OUTDIR).
build=$(mktemp -d)
if timeout 150 scripts/gpu/build_bench.sh "$build" >"$out/build.log" 2>&1; then
    timeout 150 "$build/bench" >"$out/bench.log" 2>&1
    rc=$?
    grep '^SUMMARY' "$out/bench.log" | sed 's/^SUMMARY //' | while read -r status rest; do
        echo "$status bench ${rest}" | tee -a "$out/summary.txt"
    done
    if [ $rc -ne 0 ]; then
        say FAIL bench "rc $rc (see bench.log; a quick rerun's backtrace in bench-gdb.log)"
        if command -v cuda-gdb >/dev/null 2>&1; then
            TSR_BENCH_QUICK=1 timeout 120 cuda-gdb -q -batch -ex run -ex "bt 40" \
                -ex "info sharedlibrary" --args "$build/bench" >"$out/bench-gdb.log" 2>&1
        fi
    fi
    grep -q '^SUMMARY FAIL' "$out/bench.log" && failed=1
else
    say FAIL bench-build "see build.log: $(tail -1 "$out/build.log")"
fi
rm -rf "$build"
exit $failed
