#!/usr/bin/env bash
# The C++ test suite of include/tessera.hpp.
#
#   cpp_tests/run.sh            # builds libtessera (cargo build), then tests
#
# For every compiler (g++, and clang++ when installed) and both error modes
# (exceptions; -fno-exceptions -DTESSERA_NO_EXCEPTIONS):
# - tessera.hpp compiles alone (as the first and only include, twice) with
#   -std=c++17 and -std=c++20, also in the two partial no-exception
#   configurations (-fno-exceptions alone, TESSERA_NO_EXCEPTIONS alone);
# - so does every part of it in include/tessera/ (each includes what it
#   uses), with -std=c++17 and -std=c++20 in both error modes, and
#   tessera.hpp includes every one of them;
# - every cpp_tests/test_*.cpp is built with -std=c++17 -Wall -Wextra
#   -Werror -pedantic against the shared library and run;
# - discarding a Result is a compile error under -Werror (results mode);
# - a program linking one translation unit of each mode works (the modes
#   live in different inline namespaces);
# - every ```cpp block of README.md (its #include lines on top, the rest
#   the body of main) is built in both modes and run.
#
# Environment:
#   TESSERA_LIB_DIR          directory holding libtessera.so (skips cargo build)
#   TESSERA_CPP_TEST_DIR     scratch directory (default: target/cpp_tests)
#   TESSERA_CPP_COMPILERS    compilers to use (default: "g++ clang++", missing ones skipped)
#   TESSERA_CPP_TEST_JOBS    test programs compiled at once (default: the CPUs)
#   TESSERA_CPP_TEST_FILTER  only test programs whose name contains this
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

lib_dir=${TESSERA_LIB_DIR:-}
if [[ -z $lib_dir ]]; then
    echo "building libtessera (cargo build)"
    cargo build --quiet --lib
    lib_dir=$root/target/debug
fi
if [[ ! -f $lib_dir/libtessera.so ]]; then
    echo "no libtessera.so in $lib_dir" >&2
    exit 2
fi

work=${TESSERA_CPP_TEST_DIR:-$root/target/cpp_tests}
mkdir -p "$work/lib" "$work/bin"
# Give the loader the library's SONAME (scripts/soname.sh) and the linker
# the unversioned name.
soname=$("$root/scripts/soname.sh")
cp "$lib_dir/libtessera.so" "$work/lib/$soname.tmp"
mv -f "$work/lib/$soname.tmp" "$work/lib/$soname"
ln -sf "$soname" "$work/lib/libtessera.so"

compilers=()
for cxx in ${TESSERA_CPP_COMPILERS:-g++ clang++}; do
    if command -v "$cxx" >/dev/null 2>&1; then
        compilers+=("$cxx")
    else
        echo "note: $cxx not installed, skipped"
    fi
done
if [[ ${#compilers[@]} -eq 0 ]]; then
    echo "no C++ compiler found" >&2
    exit 2
fi

strict=(-Wall -Wextra -Werror -pedantic)
build_jobs=${TESSERA_CPP_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
link=(-L"$work/lib" -ltessera -Wl,-rpath,"$work/lib" -pthread)
failures=()
passed=0

# record NAME STATUS: counts a result.
record() {
    if [[ $2 -eq 0 ]]; then
        passed=$((passed + 1))
    else
        failures+=("$1")
        echo "FAILED: $1"
    fi
}

mode_flags() {
    case $1 in
    exceptions) echo "" ;;
    results) echo "-fno-exceptions -DTESSERA_NO_EXCEPTIONS" ;;
    esac
}

# The parts of tessera.hpp: every header of include/tessera/ except
# c10_allocator.hpp, which is for hosts built against libtorch (it needs
# c10's headers; .ci/torch-host.sh compiles and runs it, not this script).
parts=()
for header in include/tessera/*.hpp; do
    [[ $header == include/tessera/c10_allocator.hpp ]] || parts+=("$header")
done

# The umbrella includes every part.
for header in "${parts[@]}"; do
    part=${header#include/}
    if grep -qxF "#include \"$part\"" include/tessera.hpp; then
        record "tessera.hpp includes $part" 0
    else
        record "tessera.hpp includes $part" 1
    fi
done

for cxx in "${compilers[@]}"; do
    tag=$(basename "$cxx")

    # The header alone, in every configuration.
    for std in c++17 c++20; do
        for flags in "" "-fno-exceptions" "-DTESSERA_NO_EXCEPTIONS" \
            "-fno-exceptions -DTESSERA_NO_EXCEPTIONS"; do
            name="header alone: $tag -std=$std ${flags:-(exceptions)}"
            # shellcheck disable=SC2086
            if printf '#include "tessera.hpp"\n#include "tessera.hpp"\n' |
                "$cxx" -std="$std" "${strict[@]}" $flags -Iinclude -fsyntax-only -x c++ -; then
                record "$name" 0
            else
                record "$name" 1
            fi
        done
    done

    # Every part alone (twice, for its include guard), in both modes.
    for header in "${parts[@]}"; do
        part=${header#include/}
        for std in c++17 c++20; do
            for mode in exceptions results; do
                name="$part alone: $tag -std=$std ($mode)"
                # shellcheck disable=SC2046
                if printf '#include "%s"\n#include "%s"\n' "$part" "$part" |
                    "$cxx" -std="$std" "${strict[@]}" $(mode_flags $mode) -Iinclude \
                        -fsyntax-only -x c++ -; then
                    record "$name" 0
                else
                    record "$name" 1
                fi
            done
        done
    done

    # A discarded Result must not compile silently.
    name="discarded Result is an error: $tag"
    if printf '#include "tessera.hpp"\nvoid f() { tessera::Tensor::empty({2}); }\n' |
        "$cxx" -std=c++17 "${strict[@]}" -fno-exceptions -DTESSERA_NO_EXCEPTIONS -Iinclude \
            -fsyntax-only -x c++ - 2>/dev/null; then
        record "$name" 1
    else
        record "$name" 0
    fi

    # One program, one translation unit of each mode.
    name="both modes in one program: $tag"
    exe=$work/bin/mixed_modes-$tag
    if "$cxx" -std=c++17 "${strict[@]}" -Iinclude -c cpp_tests/mixed_modes/exceptions.cpp \
        -o "$work/bin/mixed_exceptions-$tag.o" &&
        "$cxx" -std=c++17 "${strict[@]}" -fno-exceptions -DTESSERA_NO_EXCEPTIONS -Iinclude \
            -c cpp_tests/mixed_modes/results.cpp -o "$work/bin/mixed_results-$tag.o" &&
        "$cxx" -std=c++17 "${strict[@]}" -Iinclude cpp_tests/mixed_modes/main.cpp \
            "$work/bin/mixed_exceptions-$tag.o" "$work/bin/mixed_results-$tag.o" \
            "${link[@]}" -o "$exe" && "$exe"; then
        record "$name" 0
    else
        record "$name" 1
    fi

    # README.md's C++ snippets, as a reader would paste them, in both modes
    # (unused variables allowed: a snippet shows a value it does not use).
    snippet=0
    while IFS= read -r -d '' block; do
        snippet=$((snippet + 1))
        src=$work/bin/readme_snippet_$snippet.cpp
        {
            grep '^#include' <<<"$block" || true
            echo 'int main() {'
            grep -v '^#include' <<<"$block" || true
            echo 'return 0;'
            echo '}'
        } >"$src"
        for mode in exceptions results; do
            name="README.md C++ snippet $snippet: $tag ($mode)"
            exe=$work/bin/readme_snippet_$snippet-$tag-$mode
            # shellcheck disable=SC2046
            if "$cxx" -std=c++17 "${strict[@]}" -Wno-unused-variable $(mode_flags $mode) \
                -Iinclude "$src" "${link[@]}" -o "$exe" && "$exe"; then
                record "$name" 0
            else
                record "$name" 1
            fi
        done
    done < <(awk '
        $0 == "```cpp" { grab = 1; text = ""; next }
        grab && $0 == "```" { grab = 0; printf "%s%c", text, 0; next }
        grab { text = text $0 "\n" }
    ' README.md)
    if [[ $snippet -eq 0 ]]; then
        record "README.md has a C++ snippet: $tag" 1
    fi

    # The test programs: built TESSERA_CPP_TEST_JOBS at a time (default:
    # the CPUs), then run one by one in a fixed order.
    built=()
    for source in cpp_tests/test_*.cpp; do
        test=$(basename "$source" .cpp)
        if [[ -n ${TESSERA_CPP_TEST_FILTER:-} && $test != *"$TESSERA_CPP_TEST_FILTER"* ]]; then
            continue
        fi
        for mode in exceptions results; do
            exe=$work/bin/$test-$tag-$mode
            while [[ $(jobs -rp | wc -l) -ge $build_jobs ]]; do
                wait -n || true
            done
            (
                status=0
                # shellcheck disable=SC2046
                "$cxx" -std=c++17 "${strict[@]}" $(mode_flags $mode) -Iinclude -Icpp_tests \
                    "$source" "${link[@]}" -o "$exe" >"$exe.log" 2>&1 || status=$?
                echo "$status" >"$exe.status"
            ) &
            built+=("$test ($tag, $mode)|$exe")
        done
    done
    wait
    for entry in "${built[@]}"; do
        name=${entry%%|*}
        exe=${entry#*|}
        if [[ $(cat "$exe.status") -ne 0 ]]; then
            cat "$exe.log"
            record "$name: build" 1
            continue
        fi
        echo "== $name"
        if "$exe"; then
            record "$name" 0
        else
            record "$name" 1
        fi
    done
done

echo
if [[ ${#failures[@]} -ne 0 ]]; then
    echo "cpp_tests: ${#failures[@]} failed, $passed passed:"
    printf '  %s\n' "${failures[@]}"
    exit 1
fi
echo "cpp_tests: all $passed passed (compilers: ${compilers[*]})"
