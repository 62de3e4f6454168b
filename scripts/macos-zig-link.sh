#!/usr/bin/env bash
# Links libtessera.dylib for macOS on Linux, without an SDK, with zig as
# the linker (issue 69; docs/PLATFORMS.md, "macOS"), and checks that it
# exports exactly tessera.h's functions. Run by hand, not by CI: it
# needs zig (the `ziglang` wheel from PyPI: ZIG="python3 -m ziglang",
# the default) and llvm-nm; nothing it builds is run (no macOS machine).
#
#   scripts/macos-zig-link.sh [aarch64|x86_64]      (default aarch64)
#
# rustc's link line for Apple targets names `-arch X` and
# `-mmacosx-version-min`, which zig takes from its own -target, and
# `-liconv` (Rust's std for Apple targets), which zig's macOS stubs do not
# carry and tessera does not call: the wrapper drops the three.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
arch=${1:-aarch64}
case $arch in
    aarch64 | x86_64) ;;
    *) echo "usage: $0 [aarch64|x86_64]" >&2; exit 2 ;;
esac
target=$arch-apple-darwin
out=${CARGO_TARGET_DIR:-$root/target}
wrapper=$out/zig-cc-$arch-macos.sh
mkdir -p "$out"
cat >"$wrapper" <<WRAPPER
#!/usr/bin/env bash
args=()
skip=0
for a in "\$@"; do
    if [[ \$skip == 1 ]]; then skip=0; continue; fi
    case \$a in
        -arch) skip=1 ;;
        -mmacosx-version-min=* | -liconv) ;;
        *) args+=("\$a") ;;
    esac
done
exec ${ZIG:-python3 -m ziglang} cc -target $arch-macos "\${args[@]}"
WRAPPER
chmod +x "$wrapper"
upper=$(echo "$target" | tr 'a-z-' 'A-Z_')
env "CARGO_TARGET_${upper}_LINKER=$wrapper" cargo build --lib --target "$target"
lib=$out/$target/debug/libtessera.dylib
file "$lib"
exported=$(llvm-nm --extern-only --defined-only "$lib" | awk '$3 ~ /^_tsr_/ {print substr($3, 2)}' | sort)
declared=$(grep -oE '\btsr_[a-z0-9_]+\(' include/tessera.h | tr -d '(' | sort -u)
if [[ "$exported" != "$declared" ]]; then
    diff <(echo "$declared") <(echo "$exported") >&2 || true
    echo "FAIL: $lib does not export exactly tessera.h's functions" >&2
    exit 1
fi
echo "ok: $lib links ($(echo "$exported" | wc -l) tsr_ functions, tessera.h's)"
