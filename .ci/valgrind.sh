#!/usr/bin/env bash
# The C tests (every c_tests/test_*.c, through the cargo runner
# tests/c_api.rs) under valgrind memcheck; fails on any error and on
# definite or indirect leaks.
#
#   .ci/valgrind.sh                 # every C test, shared and static link
#   .ci/valgrind.sh oom caching     # some (runner filters)
#   VALGRIND_EXTRA=--track-origins=yes .ci/valgrind.sh   # slower, more detail
#
# "Possibly lost" blocks do not fail the run: rayon's worker threads live
# until the process exits and keep thread-local blocks that memcheck can
# only call possibly lost. "Still reachable" blocks (globals: the
# allocator registry, the thread pool) do not fail it either.
#
# Before the tests, a deliberately broken program must be caught (an
# invalid read, a definite leak): a setup that would miss them fails here.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if ! command -v valgrind >/dev/null; then
    sudo=()
    [[ $(id -u) -eq 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends valgrind
fi

# Forked children (c_tests/test_fork.c) run under memcheck too: a fork
# (no exec) stays under valgrind without --trace-children, and a child's
# errors and leaks make its exit status 99, which the test's parent
# checks. What only the parent's other threads referenced is lost in a
# child by construction: .ci/valgrind.supp matches it by the thread that
# allocated it, which needs whole stacks (--num-callers=50).
# TESSERA_C_TEST_VALGRIND makes test_fork use smaller tensors.
wrapper="valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite,indirect --show-leak-kinds=definite,indirect --num-callers=50 --suppressions=$root/.ci/valgrind.supp ${VALGRIND_EXTRA:-}"
export TESSERA_C_TEST_VALGRIND=1

# ---- self-check: memcheck catches what it must ------------------------------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/broken.c" <<'EOF'
#include <stdlib.h>
int main(int argc, char **argv) {
    (void)argv;
    char *p = malloc(8);
    int r = 0;
    if (argc == 2) r = p[8];        /* invalid read */
    if (argc == 3) p = malloc(16);  /* definite leak */
    free(p);
    return r & 0;
}
EOF
cc -g -O0 "$work/broken.c" -o "$work/broken"
# shellcheck disable=SC2086
$wrapper "$work/broken" >/dev/null 2>&1 || { echo "valgrind.sh: the clean self-check fails" >&2; exit 1; }
for args in "a" "a b"; do
    status=0
    # shellcheck disable=SC2086
    $wrapper "$work/broken" $args >"$work/log" 2>&1 || status=$?
    if [[ $status -ne 99 ]]; then
        echo "valgrind.sh: memcheck does not fail a planted bug ($args, exit $status):" >&2
        cat "$work/log" >&2
        exit 1
    fi
done
echo "valgrind.sh: memcheck fails an invalid read and a definite leak"

# ---- the suppressions file users get (README, Valgrind) --------------------------
# A program that runs a parallel kernel, under the README's line: exit 0
# with valgrind/tessera.supp, 99 without it (the pool's running worker
# threads are "possibly lost" at exit). Needs the quick start's
# target/release (with its SONAME link).
lib_dir=$root/target/release
if [[ ! -f $lib_dir/libtessera.so ]]; then
    echo "valgrind.sh: no $lib_dir/libtessera.so: run ./scripts/quickstart.sh first" >&2
    exit 1
fi
cat >"$work/pool.c" <<'EOF'
#include "tessera.h"
int main(void) {
    int64_t n = 1 << 20; /* above the grain size: the pool's threads run */
    TsrDevice cpu = {TSR_CPU, -1};
    TsrTensor *a = NULL, *b = NULL;
    if (tsr_tensor_empty(1, &n, TSR_FLOAT, cpu, &a) != TSR_OK) return 1;
    if (tsr_tensor_fill(a, tsr_scalar_float(1)) != TSR_OK) return 1;
    if (tsr_add(NULL, a, a, tsr_scalar_float(1), &b) != TSR_OK) return 1;
    tsr_tensor_decref(b);
    tsr_tensor_decref(a);
    return 0;
}
EOF
cc -std=c99 "$work/pool.c" -I"$root/include" -L"$lib_dir" -ltessera -Wl,-rpath,"$lib_dir" -o "$work/pool"
status=0
valgrind --error-exitcode=99 --leak-check=full "$work/pool" >"$work/log" 2>&1 || status=$?
if [[ $status -ne 99 ]]; then
    echo "valgrind.sh: without the suppressions the pool program exited $status, expected 99:" >&2
    cat "$work/log" >&2
    exit 1
fi
status=0
valgrind --error-exitcode=99 --leak-check=full --suppressions="$root/valgrind/tessera.supp" \
    "$work/pool" >"$work/log" 2>&1 || status=$?
if [[ $status -ne 0 ]]; then
    echo "valgrind.sh: with valgrind/tessera.supp the pool program exited $status, expected 0:" >&2
    cat "$work/log" >&2
    exit 1
fi
echo "valgrind.sh: valgrind/tessera.supp hides the pool's threads and only them"

# ---- the C tests ----------------------------------------------------------------
export TESSERA_C_TEST_WRAPPER=$wrapper
export TESSERA_CHECK_HEADER=${TESSERA_CHECK_HEADER:-1}
start=$SECONDS
cargo test --workspace --test c_api -- "$@"
echo "valgrind.sh: C tests clean under memcheck ($((SECONDS - start))s)"
