#!/usr/bin/env bash
# Disk full during a save (issue 36/37): tests/save_disk_full.rs mounts a
# 1 MiB tmpfs and saves a 2 MiB dict over a small file; the save must fail
# with Io naming ENOSPC, keep the old file byte for byte and leave no
# temporary file.
#
# Mounting takes root: as root the test runs directly; otherwise in a user
# and mount namespace (`unshare --user --map-root-user --mount`) where the
# kernel allows one. Where neither works the test prints SKIPPED with the
# reason (and so does this script).
#
# Usage: .ci/disk-full.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
run=(cargo test --workspace --test save_disk_full -- --nocapture)
if [[ $(id -u) == 0 ]]; then
    "${run[@]}"
elif command -v unshare >/dev/null && unshare --user --map-root-user --mount true 2>/dev/null; then
    # Build first as the real user, so the namespace only runs the test.
    cargo test --workspace --test save_disk_full --no-run
    unshare --user --map-root-user --mount "${run[@]}"
else
    echo "SKIPPED disk-full save test: not root and no user namespace (unshare -rm) for a tmpfs mount"
fi
