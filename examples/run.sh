#!/usr/bin/env bash
# Builds and runs the examples gallery without CMake, against the library
# cargo builds, and compares each program's output with
# examples/expected/<name>.txt (pointer values such as 0x7f3a... are masked
# on both sides). The CMake examples project does the same through CTest
# (examples/gallery.cmake).
#
#   examples/run.sh                # all examples
#   examples/run.sh kernel arena   # the examples whose name contains a word given
#   examples/run.sh --update       # rewrite the expected outputs from this run
#
# Every examples/*.c is built with cc -std=c99 and every examples/*.cpp with
# c++ -std=c++17, both with -Wall -Wextra -Werror -pedantic;
# examples/python/*.py run with python3 and the library's path. An example
# without an expected file must still exit with status 0.
#
# Environment: TESSERA_LIB_DIR (a directory holding libtessera.so: skips
# cargo build), TESSERA_EXAMPLES_DIR (scratch, default target/examples), CC,
# CXX.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

update=0
filters=()
for arg in "$@"; do
    case $arg in
    --update) update=1 ;;
    -*)
        echo "unknown option $arg" >&2
        exit 2
        ;;
    *) filters+=("$arg") ;;
    esac
done

lib_dir=${TESSERA_LIB_DIR:-}
if [[ -z $lib_dir ]]; then
    echo "building libtessera (cargo build)"
    cargo build --quiet --lib
    lib_dir=$root/target/debug
fi
work=${TESSERA_EXAMPLES_DIR:-$root/target/examples}
mkdir -p "$work/lib" "$work/bin"
# The library under its SONAME (scripts/soname.sh).
soname=$("$root/scripts/soname.sh")
cp "$lib_dir/libtessera.so" "$work/lib/$soname.tmp"
mv -f "$work/lib/$soname.tmp" "$work/lib/$soname"
ln -sf "$soname" "$work/lib/libtessera.so"

cc=${CC:-cc}
cxx=${CXX:-c++}
link=(-L"$work/lib" -ltessera -Wl,-rpath,"$work/lib" -pthread)
strict=(-Wall -Wextra -Werror -pedantic)

wanted() {
    [[ ${#filters[@]} -eq 0 ]] && return 0
    local f
    for f in "${filters[@]}"; do
        [[ $1 == *"$f"* ]] && return 0
    done
    return 1
}

# Masks what changes from run to run: pointer values.
normalize() {
    sed -E 's/0x[0-9a-fA-F]+/0x?/g'
}

passed=0
failures=()
unchecked=()

# check NAME: compares $work/out/NAME with examples/expected/NAME.txt.
check() {
    local name=$1 expected=examples/expected/$1.txt
    if [[ $update -eq 1 ]]; then
        mkdir -p examples/expected
        normalize <"$work/out/$name" >"$expected"
        echo "updated $expected"
        passed=$((passed + 1))
    elif [[ ! -f $expected ]]; then
        unchecked+=("$name")
        passed=$((passed + 1))
    elif diff -u <(normalize <"$expected") <(normalize <"$work/out/$name") >"$work/out/$name.diff"; then
        passed=$((passed + 1))
    else
        echo "FAILED: $name: output differs from $expected:"
        cat "$work/out/$name.diff"
        failures+=("$name")
    fi
}

mkdir -p "$work/out"
for source in examples/*.c examples/*.cpp; do
    [[ -e $source ]] || continue
    file=$(basename "$source")
    name=${file%.*}
    wanted "$name" || continue
    exe=$work/bin/$name
    if [[ $source == *.c ]]; then
        build=("$cc" -std=c99 "${strict[@]}" -Iinclude "$source" "${link[@]}" -o "$exe")
    else
        build=("$cxx" -std=c++17 "${strict[@]}" -Iinclude "$source" "${link[@]}" -o "$exe")
    fi
    if ! "${build[@]}"; then
        echo "FAILED: $name does not build"
        failures+=("$name (build)")
        continue
    fi
    echo "== $name"
    if ! "$exe" >"$work/out/$name"; then
        echo "FAILED: $name exited with an error; its output:"
        cat "$work/out/$name"
        failures+=("$name")
        continue
    fi
    check "$name"
done

for script in examples/python/*.py; do
    [[ -e $script ]] || continue
    name=$(basename "$script" .py)
    wanted "$name" || continue
    if ! command -v python3 >/dev/null 2>&1; then
        echo "note: python3 not installed, $name skipped"
        continue
    fi
    echo "== $name"
    if ! python3 "$script" "$work/lib/$soname" >"$work/out/$name"; then
        echo "FAILED: $name exited with an error; its output:"
        cat "$work/out/$name"
        failures+=("$name")
        continue
    fi
    if grep -q '^SKIP: ' "$work/out/$name"; then
        echo "note: $(cat "$work/out/$name")"
        continue
    fi
    check "$name"
done

echo
if [[ ${#unchecked[@]} -ne 0 ]]; then
    echo "note: no expected output for: ${unchecked[*]} (run with --update to record it)"
fi
if [[ ${#failures[@]} -ne 0 ]]; then
    echo "examples: ${#failures[@]} failed, $passed passed: ${failures[*]}"
    exit 1
fi
echo "examples: all $passed passed"
