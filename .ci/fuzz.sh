#!/usr/bin/env bash
# Fuzz smoke run: builds the cargo-fuzz targets of fuzz/ (nightly,
# AddressSanitizer + libFuzzer) and runs each for FUZZ_SECONDS (default 60),
# starting from the committed corpus fuzz/corpus/<target>/. Fails on the
# first crash, assertion failure, leak or timeout; the input that caused it
# is left in fuzz/artifacts/<target>/ (reproduce with
# `cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>`).
#
#   FUZZ_SECONDS=60 .ci/fuzz.sh            # every target
#   FUZZ_TOTAL_SECONDS=96 .ci/fuzz.sh      # every target, 96 s of wall time
#   FUZZ_JOBS=1 .ci/fuzz.sh               # one target at a time
#   FUZZ_SECONDS=600 .ci/fuzz.sh views     # some targets, longer
#   FUZZ_QUICK_BUILD=1 .ci/fuzz.sh          # a cheaper build (see below)
#
# New inputs found during the run go to a temporary directory, so the
# committed corpus only changes when someone minimizes and commits it
# (see fuzz/README.md). Prints the executions per target at the end.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root/fuzz"
seconds=${FUZZ_SECONDS:-60}
toolchain=${FUZZ_TOOLCHAIN:-nightly}

if ! cargo "+$toolchain" --version >/dev/null 2>&1; then
    echo "installing the $toolchain toolchain"
    rustup toolchain install "$toolchain" --profile minimal
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
    mapfile -t targets < <(cargo "+$toolchain" fuzz list)
fi
# FUZZ_TOTAL_SECONDS: one wall-clock budget shared by the targets, which
# run FUZZ_JOBS at a time (at least 10 s each), so a new target does not
# lengthen CI; it overrides FUZZ_SECONDS.
# FUZZ_JOBS targets at a time (default: the CPUs): libFuzzer runs one
# process on one core, so on the 2-core CI machine two targets side by
# side take the wall time of one.
fuzz_jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 2)}
((fuzz_jobs >= 1)) || fuzz_jobs=1
if [[ -n ${FUZZ_TOTAL_SECONDS:-} ]]; then
    batches=$(((${#targets[@]} + fuzz_jobs - 1) / fuzz_jobs))
    seconds=$((FUZZ_TOTAL_SECONDS / batches))
    ((seconds >= 10)) || seconds=10
fi

# TESSERA_CHECK_HEADER: the fuzz build must not rewrite include/tessera.h.
export TESSERA_CHECK_HEADER=1
# The fuzz crate is its own workspace: the repository's fmt and clippy
# stages do not see it. FUZZ_LINT=0 skips this (about a minute on a fresh
# checkout).
if [[ ${FUZZ_LINT:-1} != 0 ]]; then
    cargo "+$toolchain" fmt --check
    cargo "+$toolchain" clippy --all-targets -- -D warnings
fi
# FUZZ_QUICK_BUILD=1 (CI's smoke run, where the build is most of the
# stage): opt-level 1 and 16 codegen units instead of cargo-fuzz's
# release build in one codegen unit. The targets execute fewer inputs a
# second, which a smoke run of seconds a target can spare; a long run
# leaves it unset.
build=(-O)
if [[ ${FUZZ_QUICK_BUILD:-0} != 0 ]]; then
    export CARGO_PROFILE_RELEASE_OPT_LEVEL=1
    build+=(--codegen-units 16)
fi
cargo "+$toolchain" fuzz build "${build[@]}"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Allocations tessera is asked for may be huge (a tensor of 2^40
# elements): the sanitizer's allocator must fail them (tessera then
# reports TSR_ERR_OUT_OF_MEMORY) instead of aborting, and libFuzzer must
# not count a single large request as running out of memory.
export ASAN_OPTIONS=${ASAN_OPTIONS:-allocator_may_return_null=1:detect_leaks=1}
# fuzz_one TARGET: one target's run; its log in $work/TARGET.log, its exit
# status in $work/TARGET.status.
fuzz_one() {
    local t=$1 status=0
    mkdir -p "$work/$t" "corpus/$t"
    cargo "+$toolchain" fuzz run "${build[@]}" "$t" "$work/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=30 -rss_limit_mb=4096 \
        -malloc_limit_mb=2147483647 -print_final_stats=1 >"$work/$t.log" 2>&1 || status=$?
    echo "$status" >"$work/$t.status"
}

summary=()
failed=0
for ((i = 0; i < ${#targets[@]}; i += fuzz_jobs)); do
    batch=("${targets[@]:i:fuzz_jobs}")
    echo "==> fuzzing ${batch[*]} for ${seconds}s"
    pids=()
    for t in "${batch[@]}"; do
        fuzz_one "$t" &
        pids+=($!)
    done
    wait "${pids[@]}"
    for t in "${batch[@]}"; do
        log="$work/$t.log"
        status=$(cat "$work/$t.status")
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
        if [[ $status -ne 0 ]]; then
            tail -n 80 "$log"
            echo "FAIL: fuzz target $t (exit $status); the input is in fuzz/artifacts/$t/" >&2
            failed=1
            continue
        fi
        grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1 || true
        summary+=("$(printf '%-18s %10s executions in %ss' "$t" "${execs:-?}" "$seconds")")
    done
    ((failed == 0)) || exit 1
done
echo
echo "fuzz: no crash"
printf '%s\n' "${summary[@]}"
