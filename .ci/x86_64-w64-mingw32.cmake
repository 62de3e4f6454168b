# CMake toolchain file for the Windows stage (.ci/windows.sh): Debian's
# MinGW-w64 cross compilers (gcc-mingw-w64-x86-64, g++-mingw-w64-x86-64:
# the posix-threads g++, whose libstdc++ has std::thread) and wine64 to
# run what is built (CTest uses the emulator). Programs find tessera.dll
# and MinGW's runtime DLLs through WINEPATH, which the script sets.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)
set(CMAKE_C_COMPILER x86_64-w64-mingw32-gcc)
set(CMAKE_CXX_COMPILER x86_64-w64-mingw32-g++-posix)
set(CMAKE_RC_COMPILER x86_64-w64-mingw32-windres)
set(CMAKE_CROSSCOMPILING_EMULATOR /usr/lib/wine/wine64)
# Libraries and headers from MinGW-w64's tree; programs (cargo, rustc)
# and packages (an installed tessera, CMAKE_PREFIX_PATH) from the host
# paths as given.
set(CMAKE_FIND_ROOT_PATH /usr/x86_64-w64-mingw32)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
