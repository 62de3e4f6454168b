# Runs one example and compares its standard output with an expected file
# (CTest helper of examples/gallery.cmake):
#
#   cmake -DPROGRAM=<exe> [-DARG1=<a> -DARG2=<b>] -DEXPECTED=<file>
#         [-DALLOW_SKIP=ON] [-DEMULATOR=<command>] -P check_output.cmake
#
# EMULATOR (a cross build's, e.g. "qemu-aarch64 -L /usr/aarch64-linux-gnu",
# split on spaces) runs the program.
#
# Pointer values (0x...) are masked on both sides, line endings unified.
# With ALLOW_SKIP, an output starting with "SKIP: " (an example whose
# optional dependency is missing) is printed and accepted; the test's
# SKIP_REGULAR_EXPRESSION then marks it skipped.
cmake_minimum_required(VERSION 3.18)

foreach(var PROGRAM EXPECTED)
    if(NOT DEFINED ${var})
        message(FATAL_ERROR "check_output.cmake: ${var} is not set")
    endif()
endforeach()

set(emulator "")
if(EMULATOR)
    separate_arguments(emulator UNIX_COMMAND "${EMULATOR}")
endif()
execute_process(
    COMMAND ${emulator} "${PROGRAM}" ${ARG1} ${ARG2}
    OUTPUT_VARIABLE actual
    ERROR_VARIABLE errors
    RESULT_VARIABLE status)

if(ALLOW_SKIP AND actual MATCHES "^SKIP: ")
    message("${actual}")
    return()
endif()
if(NOT status EQUAL 0)
    message(FATAL_ERROR "${PROGRAM} failed (${status}):\n${actual}\n${errors}")
endif()

file(READ "${EXPECTED}" expected)
foreach(text actual expected)
    string(REPLACE "\r\n" "\n" ${text} "${${text}}")
    string(REGEX REPLACE "0x[0-9a-fA-F]+" "0x?" ${text} "${${text}}")
endforeach()
if(NOT actual STREQUAL expected)
    message(FATAL_ERROR "the output of ${PROGRAM} differs from ${EXPECTED}\n"
        "---- expected ----\n${expected}---- actual ----\n${actual}${errors}")
endif()
message("output matches ${EXPECTED}")
