#!/usr/bin/env bash
# The Python package (docs/PYTHON.md): the wheel built with maturin (after
# python/build_backend/tessera_build.py: the `tessera` command and the
# NEP 49 handler) from a clean state of python/tessera, installed into a new virtual
# environment that has only the wheel, NumPy, cffi and the test tools
# (pytest, ml_dtypes, safetensors, gguf: the reference readers), with no
# compiler on PATH, and python/tests run there: every fixture against
# np.load, gguf-py and safetensors, the torch fixtures against what
# torch.load gave, and the PyPI corpus when .ci/corpus.sh fetched it
# (target/corpus, or CORPUS_DIR); the command the wheel installs
# (python/tests/test_command.py) and tessera.numpy_allocator's tests
# (tests/python/test_numpy_host.py) too. Each step's seconds are printed.
#
# maturin and cffi (to build) are pip-installed into the cache; pip
# failing to download prints SKIPPED with the reason; anything else
# failing fails the stage.
#
# Usage: .ci/python-package.sh [CACHE_DIR]   (default target/python-package)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${1:-$root/target/python-package}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export PYTHONDONTWRITEBYTECODE=1
pip_get() { "$@" --quiet --disable-pip-version-check; }

tools=$cache/tools
start=$SECONDS
step() { echo "--- [$((SECONDS - start))s] $*"; }
if ! PYTHONPATH=$tools python3 -c "import maturin, cffi, numpy" 2>/dev/null; then
    if ! pip_get python3 -m pip install --target "$tools" "maturin>=1.5,<2" "cffi>=1.15" \
        "numpy>=2.0"; then
        echo "SKIPPED python package: pip could not install maturin, cffi and numpy"
        exit 0
    fi
fi
step "the command and the NEP 49 handler (python/build_backend/tessera_build.py)"
PYTHONPATH=$tools python3 python/build_backend/tessera_build.py
# maturin runs python3 with cffi to write the bindings: both from the cache.
# Its own target directory: the library without the cli feature writes the
# same unhashed files (deps/libtessera.{so,rlib,a}) as the command's build
# of it with the feature, so in one directory each build undid the other's
# and every later build rebuilt the library (measured: numpy-host.sh
# rebuilt it twice after this stage). target/wheel keeps maturin's.
step "maturin build"
PYTHONPATH=$tools "$tools/bin/maturin" build --release --interpreter python3 \
    --target-dir "$root/target/wheel" --out "$work/wheels"
wheel=$(ls "$work"/wheels/tessera-*.whl)
echo "wheel: $(basename "$wheel") ($(du -k "$wheel" | cut -f1) KiB)"
python3 -m zipfile -l "$wheel" | awk 'NR > 1 && $NF > 20000 {print "  " $1 ": " $NF " bytes"}'
step "a new venv with the wheel"

python3 -m venv "$work/venv"
venv=$work/venv/bin
if ! pip_get "$venv/python" -m pip install "$wheel" pytest ml_dtypes safetensors gguf; then
    echo "SKIPPED python package tests: pip could not install the test tools"
    exit 0
fi
# No compiler where the package runs: PATH is the environment's own.
if PATH=$venv command -v cc gcc clang >/dev/null 2>&1; then
    echo "FAIL: a compiler is on the test environment's PATH" >&2
    exit 1
fi
corpus=${CORPUS_DIR:-$root/target/corpus}
[[ -d $corpus/files ]] || corpus=
# From outside the checkout: the installed package is imported, not
# python/tessera.
cd "$work"
step "pytest python/tests tests/python/test_numpy_host.py"
env -i HOME="$work" PATH="$venv" PYTHONDONTWRITEBYTECODE=1 \
    ${corpus:+TESSERA_CORPUS_DIR="$corpus"} \
    "$venv/python" -m pytest -q -p no:cacheprovider "$root/python/tests" \
    "$root/tests/python/test_numpy_host.py" -rs
step "tessera ls, from the environment's bin/"
env -i HOME="$work" PATH="$venv" tessera ls "$root/tests/data/values/checkpoint.pt" | head -n 5
step "done"
