# Builds libtessera with cargo and stages the libraries for CMake.
#
# Run at build time by the tessera_cargo target (cmake -P), so that cargo
# decides what is up to date. Variables (-D):
#   CARGO          the cargo executable
#   SOURCE_DIR     the repository (where Cargo.toml is)
#   TARGET_DIR     cargo's --target-dir
#   PROFILE        cargo profile (release, dev, ...)
#   FEATURES       cargo features, comma-separated (may be empty)
#   STAGE_DIR      where the staged libraries go
#   VERSION        MAJOR.MINOR.PATCH
#   SONAME         the library's SONAME (libtessera.so.0.MINOR for 0.x)
#   EXPECTED_NATIVE_LIBS  the native libraries CMake was configured with
#
# Staged: libtessera.so.VERSION, the symlinks SONAME and libtessera.so,
# and libtessera.a.

foreach(var CARGO SOURCE_DIR TARGET_DIR PROFILE STAGE_DIR VERSION SONAME)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "CargoBuild.cmake: ${var} is not set")
    endif()
endforeach()

set(cargo_args rustc --lib --profile "${PROFILE}" --target-dir "${TARGET_DIR}")
if(FEATURES)
    list(APPEND cargo_args --features "${FEATURES}")
endif()
# rustc prints the native libraries a program linking the static library
# needs; cargo replays the note when the library is already up to date.
list(APPEND cargo_args -- --print native-static-libs)

execute_process(
    COMMAND "${CARGO}" ${cargo_args}
    WORKING_DIRECTORY "${SOURCE_DIR}"
    RESULT_VARIABLE result
    ERROR_VARIABLE cargo_stderr
    ECHO_ERROR_VARIABLE)
if(NOT result EQUAL 0)
    message(FATAL_ERROR "cargo ${cargo_args} failed (${result})")
endif()

# The native libraries must be those CMake was configured with: the
# installed TesseraConfig.cmake and tessera.pc list them.
string(REGEX MATCH "native-static-libs: ([^\n]*)" _ "${cargo_stderr}")
if(NOT CMAKE_MATCH_1)
    message(FATAL_ERROR "cargo did not print the native-static-libs note")
endif()
string(STRIP "${CMAKE_MATCH_1}" native_libs)
if(DEFINED EXPECTED_NATIVE_LIBS AND NOT native_libs STREQUAL EXPECTED_NATIVE_LIBS)
    message(FATAL_ERROR
        "libtessera.a needs the native libraries '${native_libs}' but CMake was configured "
        "with '${EXPECTED_NATIVE_LIBS}': set TESSERA_NATIVE_STATIC_LIBS to the former and "
        "reconfigure")
endif()

if(PROFILE STREQUAL "dev" OR PROFILE STREQUAL "test")
    set(profile_dir debug)
elseif(PROFILE STREQUAL "bench")
    set(profile_dir release)
else()
    set(profile_dir "${PROFILE}")
endif()
set(built "${TARGET_DIR}/${profile_dir}")

file(MAKE_DIRECTORY "${STAGE_DIR}")
# COPYONLY copies only when the content changed, so dependents do not
# relink needlessly.
configure_file("${built}/libtessera.so" "${STAGE_DIR}/libtessera.so.${VERSION}" COPYONLY)
configure_file("${built}/libtessera.a" "${STAGE_DIR}/libtessera.a" COPYONLY)
file(CREATE_LINK "libtessera.so.${VERSION}" "${STAGE_DIR}/${SONAME}" SYMBOLIC)
file(CREATE_LINK "${SONAME}" "${STAGE_DIR}/libtessera.so" SYMBOLIC)
