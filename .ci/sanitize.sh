#!/usr/bin/env bash
# The C tests (every c_tests/test_*.c, through the cargo runner
# tests/c_api.rs) built with clang's AddressSanitizer and
# UndefinedBehaviorSanitizer and linked against libtessera; fails on any
# report, leaks included.
#
#   .ci/sanitize.sh                  # every C test, shared and static link
#   .ci/sanitize.sh bad_input oom    # some (runner filters)
#   SANITIZE_CC=gcc .ci/sanitize.sh  # gcc's -fsanitize instead of clang's
#
# The Rust library itself is not instrumented: ASan sees its heap through
# the interposed malloc/free (so leaks and overflows of tessera's own
# allocations are caught too), UBSan only the C side. See
# .ci/rust-sanitizers.sh for the instrumented Rust build.
#
# Before the tests, a deliberately broken program must be caught (a heap
# overflow, a leak, a signed overflow): a setup that would miss them fails
# here instead of passing silently.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cc=${SANITIZE_CC:-clang}

install_clang() {
    local sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || { echo "clang missing and no sudo" >&2; return 1; }
        sudo=(sudo)
    fi
    "${sudo[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends clang
    # clang's sanitizer runtimes (packaged apart from clang on Debian 12).
    local major
    major=$(clang --version | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
        "libclang-rt-$major-dev" || true
}

if ! command -v "$cc" >/dev/null; then
    [[ $cc == clang ]] || { echo "$cc not found" >&2; exit 1; }
    install_clang
fi

flags="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -g"
# detect_leaks: leaks fail the run. allocator_may_return_null: tessera is
# asked for huge allocations on purpose (test_bad_input: 2^62 bytes) and
# must see them fail (TSR_ERR_OUT_OF_MEMORY) instead of ASan aborting.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1:allocator_may_return_null=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

# ---- self-check: the sanitizers catch what they must -----------------------
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/broken.c" <<'EOF'
#include <limits.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv) {
    (void)argv;
    char *p = malloc(8);
    if (argc == 2) { memset(p, 0, 9); }          /* heap overflow */
    if (argc == 3) { p = malloc(16); }           /* leak */
    if (argc == 4) { int i = INT_MAX; i += argc; return i; } /* signed overflow */
    free(p);
    return 0;
}
EOF
# shellcheck disable=SC2086
"$cc" $flags "$work/broken.c" -o "$work/broken"
"$work/broken" >/dev/null 2>&1 || { echo "sanitize.sh: the self-check program fails clean" >&2; exit 1; }
for args in "a" "a b" "a b c"; do
    # shellcheck disable=SC2086
    if "$work/broken" $args >"$work/log" 2>&1; then
        echo "sanitize.sh: $cc $flags does not catch a planted bug ($args):" >&2
        cat "$work/log" >&2
        exit 1
    fi
done
echo "sanitize.sh: $cc catches a heap overflow, a leak and a signed overflow"

# ---- the C tests ----------------------------------------------------------------
export TESSERA_C_TEST_CC=$cc
export TESSERA_C_TEST_CFLAGS=$flags
export TESSERA_CHECK_HEADER=${TESSERA_CHECK_HEADER:-1}
start=$SECONDS
cargo test --workspace --test c_api -- "$@"
echo "sanitize.sh: C tests clean under ASan + UBSan ($((SECONDS - start))s)"
