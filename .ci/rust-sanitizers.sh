#!/usr/bin/env bash
# Optional: tessera's own Rust tests with rustc's sanitizers (nightly,
# -Zbuild-std so the standard library is instrumented too; needs the
# nightly rust-src component, installed here if missing).
#
#   .ci/rust-sanitizers.sh            # ASan and TSan
#   .ci/rust-sanitizers.sh address    # one of them
#   RUST_SANITIZER_FULL=1 .ci/rust-sanitizers.sh   # + kernels, iterator, DLPack tests
#   RUST_SANITIZER_TESTS="--test fork" .ci/rust-sanitizers.sh thread   # some only
#
# - address: the library's unit tests, the stress tests (tests/stress.rs,
#   tests/stress_alloc.rs) under AddressSanitizer + LeakSanitizer: the
#   unsafe code of refcounts, storages, the iterator and the FFI.
# - thread: the unit tests and the stress tests under ThreadSanitizer: data
#   races in the refcounts, the registry, the caching allocator, loops.
# - both also run tests/fork.rs: children forked while threads work must
#   find tessera's locks free and its state whole.
#
# Each builds std and every dependency with the sanitizer into its own
# target directory (target/asan, target/tsan): about 4-5 minutes each from
# scratch on two cores, about 1.5 minutes each once built (the tests). Too
# slow for every CI run on two cores next to the rest unless the budget
# allows; run it nightly or before a release.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
toolchain=${RUST_SANITIZER_TOOLCHAIN:-nightly}
target=$(rustc -vV | sed -n 's/^host: //p')

if ! rustup "+$toolchain" component list --installed 2>/dev/null | grep -q '^rust-src'; then
    rustup component add rust-src --toolchain "$toolchain"
fi

export TESSERA_CHECK_HEADER=1
tests=(--lib --test stress --test stress_alloc --test fork)
if [[ -n ${RUST_SANITIZER_TESTS:-} ]]; then
    # Only these cargo test targets, e.g. RUST_SANITIZER_TESTS="--test fork".
    read -r -a tests <<<"$RUST_SANITIZER_TESTS"
elif [[ ${RUST_SANITIZER_FULL:-0} != 0 ]]; then
    # The kernels' SIMD paths, the iterator property test and DLPack too:
    # about 4 minutes more under ASan, 7 under TSan (two cores).
    tests+=(--test kernels --test iterator_traversal --test dlpack)
fi
sanitizers=("$@")
[[ ${#sanitizers[@]} -gt 0 ]] || sanitizers=(address thread)

for s in "${sanitizers[@]}"; do
    case $s in
    address)
        dir=target/asan
        export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
        ;;
    thread)
        dir=target/tsan
        # die_after_fork=0: tests/fork.rs forks a multi-threaded process
        # and its children start threads (the new pool), which TSan
        # otherwise refuses by killing the child.
        export TSAN_OPTIONS=${TSAN_OPTIONS:-halt_on_error=1:die_after_fork=0}
        ;;
    *)
        echo "unknown sanitizer '$s': expected address or thread" >&2
        exit 1
        ;;
    esac
    echo "==> cargo +$toolchain test with -Zsanitizer=$s"
    start=$SECONDS
    # Without the default features: the command's (clap, indicatif) and
    # remote's (object_store, tokio, hyper, rustls, ring) dependencies
    # hold none of tessera's unsafe code, and building them again with
    # the sanitizer and std was most of the stage's time.
    RUSTFLAGS="-Zsanitizer=$s" RUSTDOCFLAGS="-Zsanitizer=$s" CARGO_TARGET_DIR=$dir \
        cargo "+$toolchain" test -Zbuild-std --target "$target" -p tessera --no-default-features \
        "${tests[@]}"
    echo "<== -Zsanitizer=$s clean ($((SECONDS - start))s)"
done
