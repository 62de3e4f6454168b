# Output checks of the examples gallery, for the examples project
# (examples/CMakeLists.txt includes this file after it has defined the
# programs <name>_shared and <name>_static):
#
# - for every examples/<name>.c or .cpp with an expected output
#   examples/expected/<name>.txt, the tests <name>_shared_output and
#   <name>_static_output run the program and compare what it prints with
#   that file (examples/check_output.cmake; pointer values are masked);
# - examples/python/<name>.py runs with python3 and the installed shared
#   library (test <name>_output), skipped when python3 or NumPy is missing.
#
# Record a new expected output with examples/run.sh --update <name>.
set(tessera_gallery_dir "${CMAKE_CURRENT_LIST_DIR}")
set(tessera_gallery_check "${tessera_gallery_dir}/check_output.cmake")

file(GLOB tessera_gallery_sources CONFIGURE_DEPENDS
    "${tessera_gallery_dir}/*.c" "${tessera_gallery_dir}/*.cpp")
# A cross build runs the programs through the toolchain's emulator
# (CMAKE_CROSSCOMPILING_EMULATOR, a list: passed as one string).
string(REPLACE ";" " " tessera_gallery_emulator "${CMAKE_CROSSCOMPILING_EMULATOR}")
foreach(source IN LISTS tessera_gallery_sources)
    get_filename_component(name "${source}" NAME_WE)
    set(expected "${tessera_gallery_dir}/expected/${name}.txt")
    if(NOT EXISTS "${expected}")
        continue()
    endif()
    foreach(kind shared static)
        if(TARGET ${name}_${kind})
            add_test(NAME ${name}_${kind}_output
                COMMAND "${CMAKE_COMMAND}"
                    "-DPROGRAM=$<TARGET_FILE:${name}_${kind}>"
                    "-DEMULATOR=${tessera_gallery_emulator}"
                    "-DEXPECTED=${expected}"
                    -P "${tessera_gallery_check}")
        endif()
    endforeach()
endforeach()

find_package(Python3 COMPONENTS Interpreter)
file(GLOB tessera_gallery_scripts CONFIGURE_DEPENDS "${tessera_gallery_dir}/python/*.py")
foreach(script IN LISTS tessera_gallery_scripts)
    get_filename_component(name "${script}" NAME_WE)
    set(expected "${tessera_gallery_dir}/expected/${name}.txt")
    if(NOT Python3_Interpreter_FOUND)
        message(STATUS "python3 not found: example ${name} not tested")
    elseif(CMAKE_CROSSCOMPILING)
        message(STATUS "cross build: example ${name} not tested (the host's python3 cannot load the target's library)")
    elseif(EXISTS "${expected}")
        add_test(NAME ${name}_output
            COMMAND "${CMAKE_COMMAND}"
                "-DPROGRAM=${Python3_EXECUTABLE}"
                "-DARG1=${script}"
                "-DARG2=$<TARGET_FILE:Tessera::tessera>"
                "-DEXPECTED=${expected}"
                -DALLOW_SKIP=ON
                -P "${tessera_gallery_check}")
        set_tests_properties(${name}_output PROPERTIES SKIP_REGULAR_EXPRESSION "SKIP: ")
    endif()
endforeach()
