"""The wheel's `tessera` command (the crate's binary, installed by pip
into the environment's bin/ beside its python)."""

import os
import shutil
import subprocess
import sys

import tessera


def _command():
    return shutil.which("tessera", path=os.path.dirname(sys.executable))


def test_the_package_installs_the_command(fixtures):
    command = _command()
    assert command, f"no tessera command beside {sys.executable}"
    path = fixtures / "data" / "values" / "checkpoint.pt"
    run = subprocess.run([command, "ls", str(path)], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    names = tessera.open(path).keys()
    assert names and all(name in run.stdout for name in names)
    # The binary, not a Python entry point: an ELF file.
    with open(command, "rb") as f:
        assert f.read(4) == b"\x7fELF"


def test_the_command_reports_errors_with_tessera_message(tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    run = subprocess.run([_command(), "ls", str(bad)], capture_output=True, text=True)
    assert run.returncode != 0
    try:
        tessera.load(bad)
    except tessera.TesseraFormatError as e:
        # The same library's message, after the name of the call
        # ("tsr_load: " in Python, "tessera ls: " from the command).
        assert str(e).split(": ", 1)[1] in run.stderr
    else:
        raise AssertionError("tessera.load accepted a broken header")
