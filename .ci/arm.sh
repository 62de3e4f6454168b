#!/usr/bin/env bash
# CI stage "aarch64 under qemu" (issue 43): tessera cross-built for 64-bit
# Arm Linux (aarch64-unknown-linux-gnu) with Debian's cross toolchain and
# run under qemu-user (user-mode emulation of the aarch64 binaries on the
# x86_64 CI machine, with Debian's arm64 sysroot as its -L root).
#
#   .ci/arm.sh            (from .ci/run, or alone from anywhere)
#   .ci/arm.sh --tools    only step 1 (.ci/run installs the tools first, so
#                         that its background arm stage runs no apt-get or
#                         rustup beside the other stages' installs)
#
# The target directory: CARGO_TARGET_DIR (default target/). .ci/run gives
# it target/arm, so that its cargo locks never meet the other stages'
# (cargo locks the host's target/debug too when it cross-builds).
#
# What runs, in this order (each step prints the seconds since the start):
#   1. tools: gcc/g++-aarch64-linux-gnu, libc6-dev-arm64-cross and
#      qemu-user with apt-get (as .ci/run's install_tools: only what is
#      missing), rustup's aarch64-unknown-linux-gnu target;
#   2. the whole workspace's tests (`cargo test --workspace`) under qemu:
#      the unit tests, the integration tests (the oracles: dtypes, dtype
#      pairs, float8, iterator, tensor views, PyTorch fixtures; kernels,
#      memory history, serialization, stress, the ABI layout test ...),
#      and tests/c_api.rs, which compiles every c_tests/test_*.c with
#      aarch64-linux-gnu-gcc, links it with the shared and with the
#      static library and runs it under qemu-aarch64;
#   3. the dtype, float8 and oracle tests again on an emulated Cortex-A72
#      (no FEAT_FP16: the half crate's software conversions);
#   4. a CMake cross build (toolchain file .ci/aarch64-linux-gnu.cmake,
#      TESSERA_CARGO_TARGET) installed into a prefix: the CMake package
#      and the pkg-config file; the thread slot through dlopen; examples/
#      built against the prefix with find_package (shared and static, C
#      and C++) by the cross compilers and run by CTest under qemu, and
#      the pkg-config consumer (.ci/pkg-config-consumer.sh) built and run
#      the same way;
#   5. (full CI runs only, TESSERA_CI_FULL=1) cargo-c's cross install (`cargo cinstall --target`) into another
#      prefix, with the same pkg-config consumer.
#
# Left out, and why (docs/PLATFORMS.md has the same list):
#   - the fork tests (tests/fork.rs, c_tests/test_fork.c: a fork after
#     the pool ran, and busy forks): when a process with threads forks
#     and its child starts a thread, qemu-user itself aborts (an
#     assertion in its cpu_exec, qemu 7.2), not tessera. This script sets
#     TESSERA_TEST_QEMU_USER=1 and those tests print that they skip; they
#     are for real Arm hardware. The fork while recording memory history
#     (tests/memory_history.rs: the child starts no thread) runs.
#   - tests/cpp_api.rs (cpp_tests/run.sh, examples/run.sh): they build
#     with the host's compilers; with TESSERA_TEST_QEMU_USER it skips.
#     The examples run in step 4 instead; the C++ layer's own tests
#     (every header alone, both error modes: about 100 s of compiling)
#     stay on x86_64: header-only C++ over the C ABI checked here.
#   - the exhaustive float8 check (every f32 bit pattern,
#     exhaustive/):
#     2^32 conversions per format under emulation, far beyond the budget;
#     the default float8 tests (every one-byte pattern, the rounding
#     cases) run in steps 2 and 3.
#   - loom, the sanitizers, valgrind, fuzzing and the libtorch / NumPy
#     hosts: x86_64 stages of .ci/run over the same source.
#
# Profiles: the tests use the dev profile at opt-level 1
# (CARGO_PROFILE_DEV_OPT_LEVEL=1), debug assertions and overflow checks
# on. Measured on the 2-core machine, shared (2026-11-27): at opt-level 0
# the build took 3.2 min of CPU but the kernels tests ran for minutes
# under emulation (over 5 min, stopped); at opt-level 1 the build takes
# 7.6 min of CPU and the whole suite runs in under 2 min. The installs
# (steps 4 and 5) use the same dev profile: they check the packaging
# (SONAME, links, CMake and pkg-config files, consumers), which does not
# depend on the profile, and the CMake build shares the tests'
# dependencies (release cost about 5 min more).
#
# Budget: one clean run (no target/aarch64-unknown-linux-gnu) took 1027 s
# with ARM_JOBS=1 on the shared 2-core machine (load about 8: three other
# builds), 14.8 CPU-minutes: test build 630 s, tests 103 s, Cortex-A72
# pass 1 s, CMake build + install 100 s, examples 17 s, cargo-c 174 s
# (it rebuilds every dependency with its own flags: the first step to
# drop if the stage must shrink). With both cores to itself the CPU time
# fits about 10 minutes; that was not measured.
#
# Times printed here are emulated: they are not performance figures.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
target=aarch64-unknown-linux-gnu
sysroot=/usr/aarch64-linux-gnu
qemu=(qemu-aarch64 -L "$sysroot")
jobs=${ARM_JOBS:-$(nproc 2>/dev/null || echo 2)}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export CARGO_TERM_COLOR=never
export CARGO_INCREMENTAL=0
export CARGO_PROFILE_DEV_DEBUG=line-tables-only
# The tests' profile: dev (debug assertions, overflow checks) at opt-level
# 1 (see Profiles at the top).
export CARGO_PROFILE_DEV_OPT_LEVEL=1
export TESSERA_CHECK_HEADER=1
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
mkdir -p "$CARGO_TARGET_DIR"
CARGO_TARGET_DIR=$(cd "$CARGO_TARGET_DIR" && pwd)
# The cross toolchain for cargo (linker, runner) and for the cc crate
# (build scripts and tests/c_api.rs compiling C for the target).
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="${qemu[*]}"
export CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc
export CXX_aarch64_unknown_linux_gnu=aarch64-linux-gnu-g++
export AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar

step_start=$SECONDS
step() {
    echo "--- $* (emulated run; $((SECONDS - step_start))s since the start)"
}

install_tools() {
    local missing=()
    command -v aarch64-linux-gnu-gcc >/dev/null || missing+=(gcc-aarch64-linux-gnu)
    command -v aarch64-linux-gnu-g++ >/dev/null || missing+=(g++-aarch64-linux-gnu)
    [[ -f $sysroot/include/stdio.h ]] || missing+=(libc6-dev-arm64-cross)
    command -v qemu-aarch64 >/dev/null || missing+=(qemu-user)
    if [[ ${#missing[@]} -gt 0 ]]; then
        local sudo=()
        if [[ $(id -u) -ne 0 ]]; then
            if command -v sudo >/dev/null; then
                sudo=(sudo)
            else
                echo "missing ${missing[*]}, and not root without sudo to install them" >&2
                return 1
            fi
        fi
        echo "installing ${missing[*]}"
        "${sudo[@]}" apt-get update -qq
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
            "${missing[@]}"
    fi
    if ! rustup target list --installed | grep -qx "$target"; then
        rustup target add "$target"
    fi
    aarch64-linux-gnu-gcc --version | head -n 1
    qemu-aarch64 --version | head -n 1
}

rust_and_c_tests() {
    step "building the workspace's tests for $target (dev, opt-level 1)"
    nice -n 10 cargo test --workspace --target "$target" -j "$jobs" --no-run
    step "running them under ${qemu[*]}"
    # TESSERA_TEST_QEMU_USER: the fork tests skip, and tests/cpp_api.rs,
    # which builds with the host's compilers (see the top). No test
    # arguments: ctest's main (abi-test) would take them as filters.
    # TESSERA_TEST_RUNNER: tests that run their own program again as a
    # child (alloc_conf, save_kill, c_tests/test_shm.c) run it through
    # qemu: the kernel cannot execute an aarch64 program itself.
    # TESSERA_C_TEST_*: tests/c_api.rs compiles with the cross compiler and
    # runs each C program under qemu (a new qemu per program).
    TESSERA_TEST_QEMU_USER=1 \
        TESSERA_TEST_RUNNER="${qemu[*]}" \
        TESSERA_C_TEST_CC=aarch64-linux-gnu-gcc \
        TESSERA_C_TEST_WRAPPER="${qemu[*]}" \
        TESSERA_C_TEST_JOBS="$jobs" \
        cargo test --workspace --target "$target" -j "$jobs"

    # qemu-user emulates its "max" CPU, which has FEAT_FP16: the half
    # crate converts f16 with the FP16 instructions there. The dtype and
    # oracle tests again on a Cortex-A72 (ARMv8.0, no FEAT_FP16): the
    # software conversions, bit-exact against the same oracles.
    step "dtype, float8 and oracle tests again as a Cortex-A72 (no FEAT_FP16)"
    CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -cpu cortex-a72 -L $sysroot" \
        cargo test --workspace --target "$target" -j "$jobs" --test dtype_pairs --test dtype_table \
        --test float8_copy --test float8_formats --test bcomplex32 --test oracle_iterator \
        --test oracle_tensor --test torch_fixtures
}

# The library's consumers, built by the cross compilers against an
# installed tessera and run under qemu.
cmake_install_and_consumers() {
    local prefix=$work/cmake-prefix
    step "CMake cross build (dev profile, as the tests) and install into a prefix"
    cmake -S . -B "$work/build" -DCMAKE_TOOLCHAIN_FILE="$root/.ci/aarch64-linux-gnu.cmake" \
        -DTESSERA_CARGO_TARGET="$target" -DTESSERA_CARGO_PROFILE=dev \
        -DTESSERA_CARGO_TARGET_DIR="$CARGO_TARGET_DIR" -DTESSERA_BUILD_TESTS=OFF >/dev/null
    nice -n 10 cmake --build "$work/build" -j "$jobs"
    cmake --install "$work/build" --prefix "$prefix" >/dev/null
    local soname
    soname=$(scripts/soname.sh)
    .ci/check-shared-lib.sh "$prefix/lib/$soname" "$soname" "$prefix/include/tessera.h"
    readelf -h "$prefix/lib/$soname" | grep -q 'Machine:.*AArch64' ||
        { echo "FAIL: the installed library is not an aarch64 ELF" >&2; return 1; }

    step "thread slot through dlopen (static TLS, then dynamic TLS)"
    # c_tests/dlopen_thread_slot.c (CTest runs it on x86_64, where the slot
    # has its own TLS-descriptor path): here the portable thread_local!
    # slot of a dlopen-ed library, four threads checking each other's
    # blocks, with glibc's static TLS and without any to spare.
    aarch64-linux-gnu-gcc -std=c99 -Wall -Wextra -Werror -pedantic -pthread -Iinclude \
        c_tests/dlopen_thread_slot.c -ldl -o "$work/dlopen_thread_slot"
    "${qemu[@]}" "$work/dlopen_thread_slot" "$prefix/lib/$soname"
    GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0 \
        "${qemu[@]}" "$work/dlopen_thread_slot" "$prefix/lib/$soname"

    step "examples/ via find_package (shared + static), run by CTest under qemu"
    cp -r examples "$work/examples"
    cmake -S "$work/examples" -B "$work/examples-build" \
        -DCMAKE_TOOLCHAIN_FILE="$root/.ci/aarch64-linux-gnu.cmake" \
        -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
    nice -n 10 cmake --build "$work/examples-build" -j "$jobs"
    ctest --test-dir "$work/examples-build" --output-on-failure -j "$jobs"

    step "pkg-config consumer (shared + static) of the CMake install"
    cross_consumer "$prefix"
}

# cross_consumer PREFIX: .ci/pkg-config-consumer.sh with the cross compiler,
# qemu to run, and the aarch64 dynamic loader to list libraries.
cross_consumer() {
    CC=aarch64-linux-gnu-gcc RUNNER="${qemu[*]}" \
        LDD="${qemu[*]} $sysroot/lib/ld-linux-aarch64.so.1 --list" \
        .ci/pkg-config-consumer.sh "$1"
}

cargo_c_install() {
    local prefix=$work/cargo-c-prefix
    # Full CI runs only (.ci/run's full_only): CMake's cross install above
    # checks aarch64's package.
    if [[ ${TESSERA_CI_FULL:-0} != 1 ]]; then
        echo "SKIPPED: the cargo-c cross install runs in full CI runs (TESSERA_CI_FULL=1)"
        return 0
    fi
    if ! cargo cinstall --version >/dev/null 2>&1; then
        # .ci/cargo-c.sh installs the pinned cargo-c when missing.
        echo "SKIPPED: cargo-c is not installed (.ci/cargo-c.sh installs it)"
        return 0
    fi
    step "cargo-c cross install (cargo cinstall --target $target --profile dev)"
    nice -n 10 cargo cinstall --target "$target" --profile dev --prefix "$prefix" --libdir lib \
        -j "$jobs" >/dev/null
    local soname
    soname=$(scripts/soname.sh)
    .ci/check-shared-lib.sh "$prefix/lib/$soname" "$soname" "$prefix/include/tessera.h"
    step "pkg-config consumer (shared + static) of cargo-c's install"
    cross_consumer "$prefix"
}

step "tools"
install_tools
if [[ ${1:-} == --tools ]]; then
    exit 0
fi
rust_and_c_tests
cmake_install_and_consumers
cargo_c_install
step "done"
