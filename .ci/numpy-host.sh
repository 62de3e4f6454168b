#!/usr/bin/env bash
# NumPy host (issue 40): tessera.numpy_allocator, a NEP 49 data-memory
# handler that gives NumPy arrays their data from tessera's CPU allocator
# (python/csrc/, built into the tessera package; formerly tessera_numpy).
#
#   - numpy, pytest, hypothesis, setuptools, meson and ninja are
#     pip-installed into the cache (NUMPY_VERSION, default 2.4.6; about
#     35 MB, once), and the tessera package's wheel is built as
#     .ci/python-package.sh builds it (python/build_backend/tessera_build.py,
#     then maturin, with cffi, from the cache's tools: their release
#     builds reused) and installed there;
#   - tests/python/test_numpy_host.py: the handler's behaviour and its bad
#     input (installing twice, uninstalling with live blocks, a failing
#     allocator plugin giving MemoryError with nothing lost), the Python
#     lines of NumPy allocations in snapshots;
#   - the viewer on a NumPy workload's snapshot in headless Chromium, when
#     chromium is installed: a block's Python stack opened on a click;
#   - NumPy's own tests from the wheel, NUMPY_SUITE (default: the subset
#     below, which fits the stage's few minutes on 2 cores), run twice:
#     with NumPy's default handler and with tessera's installed for the
#     whole run (-p tessera.numpy_allocator.pytest_plugin). The passed / skipped /
#     xfailed / xpassed / failed / error counts must be equal, and tessera's
#     statistics must show the run's allocations.
#
# pip failing to download prints SKIPPED with the reason; anything else
# failing fails the stage.
#
# Usage: .ci/numpy-host.sh [CACHE_DIR]   (default target/numpy-host)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${1:-$root/target/numpy-host}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

numpy_version=${NUMPY_VERSION:-2.4.6}
py=$cache/python
export PYTHONPATH=$py${PYTHONPATH:+:$PYTHONPATH}
# meson, ninja and numpy-config: NumPy's tests call them (test_mem_policy
# builds its NEP 49 test extension with meson).
export PATH=$py/bin:$PATH
export PYTHONDONTWRITEBYTECODE=1
pip_get() { python3 -m pip "$@" --quiet --disable-pip-version-check; }

if ! python3 -c "import numpy, pytest, hypothesis, setuptools, mesonbuild, ninja
assert numpy.__version__ == '$numpy_version'" 2>/dev/null; then
    if ! pip_get install --target "$py" --upgrade "numpy==$numpy_version" pytest hypothesis \
        setuptools meson ninja; then
        echo "SKIPPED numpy host: pip could not install numpy==$numpy_version, pytest," \
            "hypothesis, setuptools, meson and ninja"
        exit 0
    fi
fi
python3 -c "import numpy, pytest; print('numpy', numpy.__version__, 'pytest', pytest.__version__)"

# The tessera package: its wheel (the library, tessera.numpy_allocator's
# handler, the command) into the cache, without its dependencies (NumPy
# stays the one above); cffi beside it.
tools=$cache/tools
if ! PYTHONPATH=$tools python3 -c "import maturin, cffi" 2>/dev/null; then
    if ! pip_get install --target "$tools" "maturin>=1.5,<2" "cffi>=1.15"; then
        echo "SKIPPED numpy host: pip could not install maturin and cffi"
        exit 0
    fi
fi
PYTHONPATH=$tools:$PYTHONPATH python3 python/build_backend/tessera_build.py
# target/wheel: as .ci/python-package.sh, which built it already.
PYTHONPATH=$tools "$tools/bin/maturin" build --quiet --release --interpreter python3 \
    --target-dir "$root/target/wheel" --out "$work/wheels"
pip_get install --target "$py" --upgrade --no-deps "$work"/wheels/tessera-*.whl
if ! python3 -c "import cffi" 2>/dev/null; then
    pip_get install --target "$py" "cffi>=1.15" || {
        echo "SKIPPED numpy host: pip could not install cffi"
        exit 0
    }
fi

echo "--- tests/python/test_numpy_host.py"
python3 -m pytest -q -p no:cacheprovider tests/python/test_numpy_host.py

# The viewer on a NumPy workload's snapshot (python/examples/numpy_snapshot.py),
# in headless Chromium: the page's figures against .ci/viewer_check.py's, a
# block named after its Python line whose row, clicked, opens its whole
# stack (.ci/viewer_cdp.py --site); the picture is $NUMPY_VIEWER_OUT/stack.png
# (default $CACHE_DIR/viewer), what docs/images/numpy_memory.png shows.
echo "--- the viewer on a NumPy snapshot (headless Chromium)"
browser=$(command -v chromium || command -v chromium-browser || true)
if [[ -z $browser ]]; then
    echo "SKIPPED the viewer step: no chromium (apt-get install chromium)"
else
    shots=${NUMPY_VIEWER_OUT:-$cache/viewer}
    mkdir -p "$shots"
    python3 python/examples/numpy_snapshot.py "$work/numpy"
    python3 scripts/snapshot_report.py "$work/numpy.json" "$work/numpy.html"
    timeout 120 "$browser" --headless --no-sandbox --disable-gpu --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$work/profile" --virtual-time-budget=10000 \
        --dump-dom "file://$work/numpy.html" >"$work/numpy.dom.html" 2>/dev/null
    python3 .ci/viewer_check.py compare "$work/numpy.json" "$work/numpy.dom.html"
    # The line that keeps a float32 copy of each frame: the largest site.
    line=$(grep -n "frames.append(f.astype" python/examples/numpy_snapshot.py | cut -d: -f1)
    timeout 300 python3 .ci/viewer_cdp.py "$browser" "$work/numpy.json" "$work/numpy.html" \
        docs/memory_viewer.html "$shots" --site "numpy_snapshot.py:$line"
    echo "the viewer with a block's Python stack open: $shots/stack.png"
fi

# NumPy's suite: the test directories named here (relative to the numpy
# package), tests marked slow left out: the array core (_core: creation,
# ufuncs, casting, indexing, and test_mem_policy, NEP 49's own tests, run
# with tessera's handler as the original one), lib (copies, resizes,
# np.fromiter's realloc, file I/O) and ma: 44,230 tests, about 145 s a run
# on 2 cores, both runs at once (the stage about 3 minutes). The full suite (f2py left out)
# takes about 8 minutes per run there: too long for two runs in CI.
# NUMPY_SUITE="_core/tests lib/tests ma/tests linalg/tests ..." and
# NUMPY_MARKS="" widen it.
# NPY_AVAILABLE_MEM fixes what NumPy's requires_memory tests believe is
# free, so that both runs skip the same ones whatever the machine is doing.
suite=${NUMPY_SUITE:-"_core/tests lib/tests ma/tests"}
marks=${NUMPY_MARKS:-"not slow"}
export NPY_AVAILABLE_MEM=${NPY_AVAILABLE_MEM:-"4 GB"}
npdir=$(python3 -c "import numpy, os; print(os.path.dirname(numpy.__file__))")
paths=()
for d in $suite; do paths+=("$npdir/$d"); done

counts() {
    # The final summary line, e.g. "3 failed, 3400 passed, 20 skipped, 9
    # warnings in 60s", as sorted "N word" pairs, without the time and the
    # warnings (which need not be equal).
    tail -n 1 "$1" | tr -d '=' | sed 's/ in [0-9.]*s.*//' | tr ',' '\n' |
        sed 's/^ *//' | grep -v -e '^$' -e 'warning' | sort -k2
}
run_suite() {
    local name=$1 start=$SECONDS status=0
    shift
    # Failures are compared, not fatal: the exit status is only shown.
    # --rootdir: numpy/conftest.py (its fixtures and options) applies.
    python3 -m pytest -q -p no:cacheprovider --rootdir="$npdir" -m "$marks" "$@" \
        "${paths[@]}" >"$work/$name.log" 2>&1 || status=$?
    tail -n 1 "$work/$name.log"
    echo "($name: exit status $status, $((SECONDS - start))s)"
    if ! tail -n 1 "$work/$name.log" | grep -q ' passed'; then
        tail -n 30 "$work/$name.log"
        echo "numpy host: NumPy's tests did not run ($name)"
        return 1
    fi
}

# The two runs go side by side (each is one single-threaded process; on
# the 2-core CI machine the stage takes one run's time, not two).
echo "--- NumPy's tests ($suite), with NumPy's default handler and with tessera's" \
    "(-p tessera.numpy_allocator.pytest_plugin), side by side"
run_suite default >"$work/default.out" 2>&1 &
default_pid=$!
TESSERA_NUMPY_STATS_JSON=$work/stats.json TESSERA_NUMPY_EXIT_STATS=$work/exit.json \
    run_suite tessera -p tessera.numpy_allocator.pytest_plugin >"$work/tessera.out" 2>&1 &
tessera_pid=$!
default_status=0 tessera_status=0
wait "$default_pid" || default_status=$?
wait "$tessera_pid" || tessera_status=$?
echo "default handler:" && cat "$work/default.out"
echo "tessera's handler:" && cat "$work/tessera.out"
((default_status == 0 && tessera_status == 0))
grep -A2 "tessera NumPy handler" "$work/tessera.log" || true
echo "at process exit: $(cat "$work/exit.json")"

if ! diff <(counts "$work/default.log") <(counts "$work/tessera.log"); then
    echo "numpy host: the counts differ (< default, > tessera); failures with tessera:"
    grep -E '^(FAILED|ERROR)' "$work/tessera.log" | head -50 || true
    exit 1
fi
python3 - "$work/stats.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
end = s["at_session_end"]
made = end["allocations"] - s["at_configure"]["allocations"]
print(f"tessera served {made} NumPy allocations; at the session's end "
      f"{end['live_blocks']} blocks / {end['current_bytes']} bytes live, peak {end['peak_bytes']}")
if made < 1000 or not s["installed_at_end"]:
    sys.exit("numpy host: tessera's handler did not serve the suite "
             f"(allocations {made}, installed at the end: {s['installed_at_end']})")
if end["bad_frees"]:
    sys.exit(f"numpy host: {end['bad_frees']} frees of blocks the handler did not make")
EOF
echo "numpy host: done"
