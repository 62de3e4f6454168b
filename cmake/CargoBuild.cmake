# Builds libtessera with cargo and stages the libraries for CMake.
#
# Run at build time by the tessera_cargo target (cmake -P), so that cargo
# decides what is up to date. Variables (-D):
#   CARGO          the cargo executable
#   SOURCE_DIR     the repository (where Cargo.toml is)
#   TARGET_DIR     cargo's --target-dir
#   PROFILE        cargo profile (release, dev, ...)
#   FEATURES       cargo features, comma-separated (may be empty)
#   TARGET         cargo --target, a Rust target triple (empty: the host)
#   STAGE_DIR      where the staged libraries go
#   VERSION        MAJOR.MINOR.PATCH
#   SONAME         the library's SONAME (libtessera.so.0.MINOR for 0.x)
#   EXPECTED_NATIVE_LIBS  the native libraries CMake was configured with
#   CLI_PATH       where to stage the tessera command (empty: not built)
#   WINDOWS        true for a Windows target (MinGW-w64)
#
# Staged: libtessera.so.VERSION, the symlinks SONAME and libtessera.so
# (on Windows tessera.dll and its import library libtessera.dll.a),
# libtessera.a, and the tessera command when CLI_PATH is set.

foreach(var CARGO SOURCE_DIR TARGET_DIR PROFILE STAGE_DIR VERSION SONAME)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "CargoBuild.cmake: ${var} is not set")
    endif()
endforeach()

# `cargo build`, exactly as `cargo build --release` (the quick start) runs
# it for the release profile: the same command line keeps cargo's
# fingerprint, so a CMake build pointed at the quick start's target/ reuses
# its library and the reverse (asking rustc to print native-static-libs
# through `cargo rustc -- --print ...` changed the fingerprint and rebuilt
# the crate both ways).
set(cargo_args build --lib --profile "${PROFILE}" --target-dir "${TARGET_DIR}"
    --message-format=json-render-diagnostics)
if(FEATURES)
    list(APPEND cargo_args --features "${FEATURES}")
endif()
# The command (cli/, the crate's default feature cli) in the same cargo
# run: one lock of the target directory, the library built once.
if(CLI_PATH)
    list(APPEND cargo_args --bin tessera)
endif()
# A cross build (TESSERA_CARGO_TARGET): cargo puts it under the triple.
set(target_subdir "")
if(TARGET)
    list(APPEND cargo_args --target "${TARGET}")
    set(target_subdir "/${TARGET}")
endif()

execute_process(
    COMMAND "${CARGO}" ${cargo_args}
    WORKING_DIRECTORY "${SOURCE_DIR}"
    RESULT_VARIABLE result
    OUTPUT_VARIABLE cargo_stdout
    ERROR_VARIABLE cargo_stderr
    ECHO_ERROR_VARIABLE)
if(NOT result EQUAL 0)
    message(FATAL_ERROR "cargo ${cargo_args} failed (${result})")
endif()

# libtessera.a needs the native libraries of Rust's std (what CMake was
# configured with: the installed TesseraConfig.cmake and tessera.pc list
# them) plus any a dependency's build script links, but for static ones
# (`static=NAME`: rustc bundles them into the archive, as aws-lc's crypto
# library for the remote feature): none today, and a new one fails here,
# naming it, instead of at a consumer's link.
string(REPLACE "\n" ";" messages "${cargo_stdout}")
set(extra_libs "")
foreach(msg IN LISTS messages)
    if(NOT msg MATCHES "\"reason\":\"build-script-executed\"")
        continue()
    endif()
    string(JSON package GET "${msg}" package_id)
    string(JSON nlibs LENGTH "${msg}" linked_libs)
    if(nlibs GREATER 0)
        math(EXPR last "${nlibs} - 1")
        foreach(i RANGE ${last})
            string(JSON lib GET "${msg}" linked_libs ${i})
            if(NOT lib MATCHES "^static=")
                list(APPEND extra_libs "${lib} (${package})")
            endif()
        endforeach()
    endif()
endforeach()
if(extra_libs)
    message(FATAL_ERROR
        "libtessera.a needs native libraries beyond Rust's std (${EXPECTED_NATIVE_LIBS}): "
        "${extra_libs}: add them to TESSERA_NATIVE_STATIC_LIBS and reconfigure")
endif()

if(PROFILE STREQUAL "dev" OR PROFILE STREQUAL "test")
    set(profile_dir debug)
elseif(PROFILE STREQUAL "bench")
    set(profile_dir release)
else()
    set(profile_dir "${PROFILE}")
endif()
set(built "${TARGET_DIR}${target_subdir}/${profile_dir}")

file(MAKE_DIRECTORY "${STAGE_DIR}")
# COPYONLY copies only when the content changed, so dependents do not
# relink needlessly.
configure_file("${built}/libtessera.a" "${STAGE_DIR}/libtessera.a" COPYONLY)
if(WINDOWS)
    configure_file("${built}/tessera.dll" "${STAGE_DIR}/tessera.dll" COPYONLY)
    configure_file("${built}/libtessera.dll.a" "${STAGE_DIR}/libtessera.dll.a" COPYONLY)
    set(exe_suffix .exe)
else()
    configure_file("${built}/libtessera.so" "${STAGE_DIR}/libtessera.so.${VERSION}" COPYONLY)
    file(CREATE_LINK "libtessera.so.${VERSION}" "${STAGE_DIR}/${SONAME}" SYMBOLIC)
    file(CREATE_LINK "${SONAME}" "${STAGE_DIR}/libtessera.so" SYMBOLIC)
    set(exe_suffix "")
endif()
if(CLI_PATH)
    configure_file("${built}/tessera${exe_suffix}" "${CLI_PATH}" COPYONLY)
endif()
