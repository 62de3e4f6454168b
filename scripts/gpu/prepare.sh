#!/usr/bin/env bash
# Builds, on a machine with Rust, what scripts/gpu/check.sh runs on a GPU
# machine that may have no Rust toolchain, into gpu-carry/ (git-ignored;
# pass it as the device tool's `carry`, at most 64 MiB):
#   gpu-carry/libtessera.so      the library with the cuda feature (dist)
#   gpu-carry/tessera-lib-tests  the library's unit tests with the cuda
#                                feature (release), GPU tests included
# Both are stripped of debug information (size).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=gpu-carry
rm -rf "$out"
mkdir -p "$out"
cargo build --lib --features cuda --profile dist
cp target/dist/libtessera.so "$out/libtessera.so"
tests=$(cargo test --lib --features cuda --release --no-run --message-format=json 2>/dev/null |
    python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] == ["lib"] or \
       m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == "tessera" and m["profile"]["test"]:
        print(m["executable"])' | tail -1)
test -n "$tests" || { echo "prepare.sh: no test executable found" >&2; exit 1; }
cp "$tests" "$out/tessera-lib-tests"
strip --strip-debug "$out/libtessera.so" "$out/tessera-lib-tests"
du -ch "$out"/* | tail -1
