#!/usr/bin/env bash
# The Python package's manylinux aarch64 wheel (issue 67), cross-built on
# the x86_64 CI machine with the aarch64 stage's toolchain (Debian's
# aarch64-linux-gnu-gcc, rustup's aarch64-unknown-linux-gnu target:
# .ci/arm.sh --tools installs both), and checked:
#   - the manylinux policy with auditwheel (`auditwheel show`: the tag it
#     grants must be manylinux, and no library outside the policy needed);
#   - readelf: every ELF in the wheel is AArch64, the handler needs no
#     libtessera of its own and no libpython (abi3, bound at import);
#   - under qemu-user with Debian's arm64 sysroot: the wheel's `tessera`
#     command lists a fixture and its library (tessera/_native) is loaded
#     by an aarch64 C program that loads a checkpoint through it.
# Not run, and said so: importing the package and the NEP 49 handler in
# an aarch64 Python (CI has no aarch64 CPython to run under qemu).
#
# The build runs in a copy of the checkout (the files git tracks or does
# not ignore), so that its aarch64 outputs (the command, the handler)
# never meet an x86_64 build of python/ running at the same time.
#
# Usage: .ci/python-wheel-aarch64.sh [CACHE_DIR]   (default target/python-wheel-aarch64:
# its own, since .ci/run runs it beside .ci/python-package.sh)
# CARGO_TARGET_DIR: the cargo target directory (default target/arm).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${1:-$root/target/python-wheel-aarch64}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONDONTWRITEBYTECODE=1
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target/arm}
start=$SECONDS
step() { echo "--- [$((SECONDS - start))s] $*"; }
triple=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu
for tool in aarch64-linux-gnu-gcc qemu-aarch64 readelf; do
    if ! command -v "$tool" >/dev/null; then
        echo "SKIPPED aarch64 wheel: no $tool (.ci/arm.sh --tools installs it)"
        exit 0
    fi
done

tools=$cache/tools
if ! PYTHONPATH=$tools python3 -c "import maturin, cffi, auditwheel" 2>/dev/null; then
    if ! python3 -m pip install --quiet --disable-pip-version-check --target "$tools" \
        "maturin>=1.5,<2" "cffi>=1.15" "numpy>=2.0" auditwheel; then
        echo "SKIPPED aarch64 wheel: pip could not install maturin, cffi, numpy and auditwheel"
        exit 0
    fi
fi

step "the checkout copied"
src=$work/src
mkdir -p "$src"
git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src" 2>/dev/null || true
[[ -f $src/pyproject.toml ]] || { echo "FAIL: copying the checkout" >&2; exit 1; }

step "the command and the handler for $triple"
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
(cd "$src" && PYTHONPATH=$tools python3 python/build_backend/tessera_build.py \
    --target "$triple" --cc aarch64-linux-gnu-gcc)
step "maturin build --target $triple"
(cd "$src" && PYTHONPATH=$tools "$tools/bin/maturin" build --release --target "$triple" \
    --interpreter python3 --out "$work/wheels")
wheel=$(ls "$work"/wheels/tessera-*aarch64*.whl)
echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"

step "auditwheel show"
PYTHONPATH=$tools python3 -m auditwheel show "$wheel" | tee "$work/audit.txt"
grep -q 'consistent with the following platform tag: *"manylinux_' "$work/audit.txt" ||
    grep -q 'platform tag: "manylinux_' "$work/audit.txt" ||
    { echo "FAIL: auditwheel grants no manylinux tag" >&2; exit 1; }

step "readelf"
unz=$work/unz
python3 -m zipfile -e "$wheel" "$unz"
for f in $(find "$unz" -type f \( -name '*.so' -o -path '*/scripts/tessera' \)); do
    machine=$(readelf -h "$f" | sed -n 's/^ *Machine: *//p')
    needed=$(readelf -d "$f" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
    echo "${f#"$unz"/}: $machine; needs: $needed"
    [[ $machine == AArch64 ]] || { echo "FAIL: $f is $machine" >&2; exit 1; }
    case $needed in *python* | *tessera*)
        echo "FAIL: $f needs $needed" >&2; exit 1 ;;
    esac
done
chmod +x "$unz"/tessera-*.data/scripts/tessera

step "under qemu-aarch64: the command, and the library from a C program"
qemu() { QEMU_LD_PREFIX=$sysroot qemu-aarch64 "$@"; }
fixture=tests/data/values/checkpoint.pt
qemu "$unz"/tessera-*.data/scripts/tessera ls "$fixture" | tee "$work/ls.txt"
[[ -s $work/ls.txt ]] || { echo "FAIL: tessera ls printed nothing" >&2; exit 1; }
lib=$(ls "$unz"/tessera/_native/*.so)
cat >"$work/load.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include "tessera.h"
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 1; }
    TsrStatus (*load)(const char *, TsrFormat, uint32_t, struct TsrTensorDict **) =
        (TsrStatus (*)(const char *, TsrFormat, uint32_t, struct TsrTensorDict **))dlsym(h, "tsr_load");
    size_t (*size)(const struct TsrTensorDict *) =
        (size_t (*)(const struct TsrTensorDict *))dlsym(h, "tsr_dict_size");
    const char *(*version)(void) = (const char *(*)(void))dlsym(h, "tsr_version");
    const char *(*message)(void) = (const char *(*)(void))dlsym(h, "tsr_last_error_message");
    struct TsrTensorDict *d = NULL;
    if (!load || !size || !version || !message) return 1;
    if (load(argv[2], TSR_FORMAT_AUTO, TSR_LOAD_SKIP_UNKNOWN, &d) != TSR_OK) {
        fprintf(stderr, "%s\n", message());
        return 1;
    }
    printf("tessera %s: %zu tensors in %s\n", version(), size(d), argv[2]);
    return size(d) > 0 ? 0 : 1;
}
C
aarch64-linux-gnu-gcc -std=c11 -O1 -Iinclude "$work/load.c" -o "$work/load" -ldl
qemu "$work/load" "$lib" "$fixture"
echo "NOT RUN: import tessera / tessera.numpy_allocator in an aarch64 CPython (none in CI)"
step "done"
