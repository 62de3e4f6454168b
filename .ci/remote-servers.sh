#!/usr/bin/env bash
# Remote checkpoints against real servers (issue 66; tests/remote_servers.rs):
# nginx (Debian's, installed by install_tools) for HTTP Range and s3s-fs
# 0.14.1 from crates.io for S3 (a file-system S3 server in Rust; 0.17
# does not build with rustc 1.95), each started by the test on a free
# port of 127.0.0.1 and stopped after. s3s-fs is installed once into
# target/tools (kept across runs while target/ is; the background lane
# installs it, `install` here), and the test runs with
# TESSERA_REMOTE_SERVERS=required, so that a missing server fails the
# stage instead of skipping.
#
# Usage: .ci/remote-servers.sh [install]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
tools=$root/target/tools
install_s3s() {
    if [[ -x $tools/bin/s3s-fs ]]; then
        echo "s3s-fs: $("$tools/bin/s3s-fs" --version)"
        return
    fi
    # A test server: built unoptimized, without LTO, in many codegen
    # units, for the shortest build on CI's two cores (the tests move a
    # few MiB through it).
    CARGO_TARGET_DIR=$root/target/s3s-fs CARGO_PROFILE_RELEASE_OPT_LEVEL=0 \
        CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=256 \
        CARGO_PROFILE_RELEASE_DEBUG=false cargo install --locked --root "$tools" \
        s3s-fs --version 0.14.1 --features binary
    rm -rf "$root/target/s3s-fs"
}
install_s3s
if [[ ${1:-} == install ]]; then
    exit 0
fi
command -v nginx >/dev/null || PATH=$PATH:/usr/sbin
PATH=$tools/bin:$PATH TESSERA_REMOTE_SERVERS=required \
    cargo test --workspace --quiet --test remote_servers -- --nocapture
