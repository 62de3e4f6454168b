#!/usr/bin/env bash
# Makes a cargo build of libtessera loadable by programs linked against it.
#
# cargo writes target/<profile>/libtessera.so, whose SONAME is
# libtessera.so.0.<MINOR> (scripts/soname.sh); a program linked with
# -ltessera records that name and the loader looks for it, but cargo does
# not create it. This script adds it next to the library, as a symbolic
# link to libtessera.so (which cargo replaces on each build, so the link
# stays current):
#
#   cargo build --release && scripts/link-soname.sh          # target/release
#   scripts/link-soname.sh target/debug
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dir=${1:-"$root/target/release"}
if [[ ! -f $dir/libtessera.so ]]; then
    echo "$0: no libtessera.so in $dir (run cargo build first)" >&2
    exit 1
fi
soname=$("$root/scripts/soname.sh")
ln -sfn libtessera.so "$dir/$soname"
echo "$dir/$soname -> libtessera.so"
