"""The wheel's build: maturin's PEP 517 backend, after two steps maturin
cannot do for a cffi package (docs/PYTHON.md, "How the wheel is built").

1. The `tessera` command: `cargo rustc --release --bin tessera` (the cli
   feature's clap and indicatif are the command's, never the library's),
   symbols stripped, copied to python/tessera.data/scripts/tessera: the
   wheel's scripts, which pip installs into the environment's bin/ with
   the executable bit, as maturin's `bindings = "bin"` does (that mode
   cannot be combined with cffi).
2. tessera.numpy_allocator._handler, the NEP 49 handler (python/csrc/),
   compiled with the C compiler (CC, else cc) for CPython's limited API
   (one `_handler.abi3.so` for every CPython >= 3.10) against the NumPy
   of the build environment. It is not linked to libtessera: its tsr_*
   calls bind to the library the package already loaded
   (tessera.numpy_allocator loads it RTLD_GLOBAL first), so there is one
   copy of tessera's allocators and memory history in the process. With
   it, tessera._dlpack_capsule (python/csrc/_dlpack_capsule.c): DLPack
   capsules whose destructor is C.

pyproject.toml names this module as the build backend (backend-path), so
`pip install .` and `pip wheel .` run both steps; CI runs them with
`python3 python/build_backend/tessera_build.py [--target TRIPLE]` and then
`maturin build` (the same outputs, .gitignore'd).
"""
import argparse
import os
import shutil
import subprocess
import sys
import sysconfig

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSRC = os.path.join(ROOT, "python", "csrc")
SOURCES = ["_handler.c", "_frames.c", "_limited.c", "_exit_report.c"]
SCRIPT = os.path.join(ROOT, "python", "tessera.data", "scripts", "tessera")
HANDLER = os.path.join(ROOT, "python", "tessera", "numpy_allocator", "_handler.abi3.so")
CAPSULE = os.path.join(ROOT, "python", "tessera", "_dlpack_capsule.abi3.so")
CFLAGS = ["-std=c11", "-O2", "-fPIC", "-shared", "-Wall", "-Wextra", "-Werror",
          "-Wno-unused-parameter", "-Wno-missing-field-initializers",
          "-fvisibility=hidden", "-DPy_LIMITED_API=0x030A0000"]


def _run(cmd, **kw):
    print("tessera_build: " + " ".join(cmd), file=sys.stderr, flush=True)
    subprocess.run(cmd, check=True, cwd=ROOT, **kw)


def build_command(target=None):
    """Step 1: the `tessera` binary into the wheel's scripts."""
    cargo = os.environ.get("CARGO", "cargo")
    cmd = [cargo, "rustc", "--release", "--bin", "tessera", "--quiet"]
    if target:
        cmd += ["--target", target]
    _run(cmd + ["--", "-C", "strip=symbols"])
    target_dir = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    built = os.path.join(target_dir, *([target] if target else []), "release", "tessera")
    os.makedirs(os.path.dirname(SCRIPT), exist_ok=True)
    shutil.copyfile(built, SCRIPT)
    os.chmod(SCRIPT, 0o755)


def build_handler(cc=None):
    """Step 2: the NEP 49 handler, tessera.numpy_allocator._handler."""
    import numpy

    cc = (cc or os.environ.get("CC") or "cc").split()
    includes = [os.path.join(ROOT, "include"), numpy.get_include(),
                sysconfig.get_paths()["include"]]
    srcs = [os.path.join(CSRC, s) for s in SOURCES]
    flags = cc + CFLAGS + ["-I" + i for i in includes]
    _run(flags + srcs + ["-o", HANDLER])
    # DLPack capsules with a C destructor (tessera.Tensor.__dlpack__).
    _run(flags + [os.path.join(CSRC, "_dlpack_capsule.c"), "-o", CAPSULE])


def prepare(target=None, cc=None):
    build_command(target)
    build_handler(cc)


# ---- PEP 517: maturin's hooks, the wheel ones after prepare() ----------

def _maturin():
    import maturin

    return maturin


def get_requires_for_build_wheel(config_settings=None):
    return _maturin().get_requires_for_build_wheel(config_settings)


def get_requires_for_build_sdist(config_settings=None):
    return _maturin().get_requires_for_build_sdist(config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _maturin().prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_sdist(sdist_directory, config_settings=None):
    return _maturin().build_sdist(sdist_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    prepare()
    return _maturin().build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    prepare()
    return _maturin().build_editable(wheel_directory, config_settings, metadata_directory)

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", help="Rust target triple (default: the host's)")
    ap.add_argument("--cc", help="C compiler for the handler (default: CC, else cc)")
    args = ap.parse_args()
    prepare(args.target, args.cc)
