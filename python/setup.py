"""Builds tessera_numpy._handler against an already built libtessera.

Where the library is looked for, first found wins:
  TESSERA_LIB_DIR (a directory with libtessera.so), then the repository's
  target/release and target/debug (cargo build --release --lib).
The header comes from TESSERA_INCLUDE_DIR, else the repository's include/.
The extension is linked with an rpath to that directory; for a cargo
build, the SONAME link cargo does not create (libtessera.so.0.<MINOR>) is
added next to libtessera.so, as scripts/link-soname.sh does.
"""
import os
import subprocess
import sys

import numpy
from setuptools import Extension, setup

here = os.path.dirname(os.path.abspath(__file__))
repo = os.path.dirname(here)


def fail(msg):
    sys.exit(f"tessera-numpy setup.py: {msg}")


def soname_of(lib):
    try:
        out = subprocess.run(["objdump", "-p", lib], check=True, capture_output=True,
                             text=True).stdout
    except (OSError, subprocess.CalledProcessError):
        script = os.path.join(repo, "scripts", "soname.sh")
        if not os.path.exists(script):
            return None
        return subprocess.run(["bash", script], check=True, capture_output=True,
                              text=True).stdout.strip() or None
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "SONAME":
            return parts[1]
    return None


def find_lib_dir():
    env = os.environ.get("TESSERA_LIB_DIR")
    if env:
        if not os.path.exists(os.path.join(env, "libtessera.so")):
            fail(f"TESSERA_LIB_DIR={env!r} has no libtessera.so")
        return os.path.abspath(env)
    for profile in ("release", "debug"):
        d = os.path.join(repo, "target", profile)
        if os.path.exists(os.path.join(d, "libtessera.so")):
            return d
    fail(f"no libtessera.so in TESSERA_LIB_DIR, {repo}/target/release or {repo}/target/debug; "
         "build it first: cargo build --release --lib")


lib_dir = find_lib_dir()
soname = soname_of(os.path.join(lib_dir, "libtessera.so"))
if soname and soname != "libtessera.so":
    link = os.path.join(lib_dir, soname)
    if not os.path.exists(link):
        os.symlink("libtessera.so", link)

include_dir = os.environ.get("TESSERA_INCLUDE_DIR", os.path.join(repo, "include"))
if not os.path.exists(os.path.join(include_dir, "tessera.h")):
    fail(f"no tessera.h in {include_dir!r} (set TESSERA_INCLUDE_DIR)")

setup(
    ext_modules=[
        Extension(
            "tessera_numpy._handler",
            sources=[
                "tessera_numpy/_handler.c",
                "tessera_numpy/_frames.c",
                "tessera_numpy/_limited.c",
                "tessera_numpy/_exit_report.c",
            ],
            include_dirs=[include_dir, numpy.get_include()],
            library_dirs=[lib_dir],
            libraries=["tessera"],
            runtime_library_dirs=[lib_dir],
            extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers"],
        )
    ],
)
