"""Issue 66's rows: a ~1 GiB safetensors file (128 tensors of 8 MiB,
float32) loaded whole over HTTP from nginx on 127.0.0.1, and over S3
from s3s-fs on 127.0.0.1, into fresh CPU memory, sides interleaved round
by round, all in one run:

- tessera: tsr_load(URL) (index from the first bytes, then
  TSR_REMOTE_CONCURRENCY ranged GETs of TSR_REMOTE_CHUNK_BYTES into each
  tensor's storage);
- the server's limit: N threads (N = tessera's concurrency, 8) of
  ranged 8 MiB GETs with a plain client (http.client) read into fresh
  NumPy buffers (one a tensor), from a shared queue;
- runai-model-streamer's SafetensorsStreamer over s3:// (its S3 backend
  pointed at s3s-fs with AWS_ENDPOINT_URL), each tensor cloned; it has
  no http:// backend. Where it cannot run (its S3 backend is the
  separate runai-model-streamer-s3 package), the row says why.

Prints one markdown row per side and server: median, fastest and
slowest round, MiB/s, and tessera's ratio to the limit.

    /work/venv-torch/bin/python benches/remote_loads.py

ROUNDS=n (default 3); SERVERS=nginx,s3s-fs (default: both); BENCH_DIR=dir for the file (default $TMPDIR);
TESSERA_LIB=path (default target/release/libtessera.so); NGINX and
S3S_FS name the servers (default: on PATH, /usr/sbin/nginx,
target/tools/bin/s3s-fs). A server that is not installed is skipped,
saying so.
"""

import ctypes
import http.client
import os
import queue
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHUNK = 8 << 20
THREADS = 8
TENSORS = 128
ROUNDS = int(os.environ.get("ROUNDS", "3"))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(port):
    for _ in range(400):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("nothing listens on %d" % port)


def tool(env, *candidates):
    for c in [os.environ.get(env)] + list(candidates):
        if c and (shutil.which(c) or os.path.isfile(c)):
            return shutil.which(c) or c
    return None


def nginx(root, work):
    exe = tool("NGINX", "nginx", "/usr/sbin/nginx")
    if not exe:
        return None, None
    port = free_port()
    conf = os.path.join(work, "nginx.conf")
    with open(conf, "w") as f:
        f.write("pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n"
                "  access_log off;\n  sendfile on;\n  client_body_temp_path %s/b;\n"
                "  proxy_temp_path %s/p;\n  fastcgi_temp_path %s/f;\n  uwsgi_temp_path %s/u;\n"
                "  scgi_temp_path %s/s;\n  server { listen 127.0.0.1:%d; root %s; }\n}\n"
                % ((work,) * 7 + (port, root)))
    p = subprocess.Popen([exe, "-e", work + "/error.log", "-c", conf, "-p", work,
                          "-g", "daemon off;"], stderr=subprocess.DEVNULL)
    wait_for(port)
    return p, port


def s3s_fs(root):
    exe = tool("S3S_FS", "s3s-fs", os.path.join(ROOT, "target/tools/bin/s3s-fs"))
    if not exe:
        return None, None
    port = free_port()
    p = subprocess.Popen([exe, "--host", "127.0.0.1", "--port", str(port), "--access-key",
                          "bench", "--secret-key", "benchsecret", root],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port)
    return p, port


def open_tessera():
    path = os.environ.get("TESSERA_LIB", os.path.join(ROOT, "target/release/libtessera.so"))
    lib = ctypes.CDLL(path)
    vp = ctypes.c_void_p
    lib.tsr_load.argtypes = [ctypes.c_char_p, ctypes.c_int32, ctypes.c_uint32,
                             ctypes.POINTER(vp)]
    lib.tsr_load.restype = ctypes.c_int32
    lib.tsr_dict_size.argtypes, lib.tsr_dict_size.restype = [vp], ctypes.c_size_t
    lib.tsr_dict_free.argtypes, lib.tsr_dict_free.restype = [vp], None
    lib.tsr_last_error_message.restype = ctypes.c_char_p
    return lib


LIB = open_tessera()


def tessera(url):
    d = ctypes.c_void_p()
    if LIB.tsr_load(url.encode(), 0, 0, ctypes.byref(d)) != 0:
        raise RuntimeError(LIB.tsr_last_error_message().decode())
    n = LIB.tsr_dict_size(d)
    LIB.tsr_dict_free(d)
    assert n == TENSORS, n


def plain_client(port, path, size, header_len):
    """THREADS connections of ranged 8 MiB GETs into fresh buffers."""
    jobs = queue.Queue()
    start = 8 + header_len
    per = (size - start) // TENSORS
    bufs = [np.empty(per, dtype=np.uint8) for _ in range(TENSORS)]
    for t in range(TENSORS):
        for off in range(0, per, CHUNK):
            jobs.put((t, off, min(CHUNK, per - off)))

    errors = []

    def work():
        try:
            fetch()
        except Exception as e:  # raised on the calling thread below
            errors.append(e)

    def fetch():
        conn = http.client.HTTPConnection("127.0.0.1", port)
        while True:
            try:
                t, off, n = jobs.get_nowait()
            except queue.Empty:
                break
            a = start + t * per + off
            conn.request("GET", path, headers={"Range": "bytes=%d-%d" % (a, a + n - 1)})
            r = conn.getresponse()
            assert r.status == 206, r.status
            view = memoryview(bufs[t])[off:off + n]
            got = 0
            while got < n:
                k = r.readinto(view[got:])
                assert k, "short body"
                got += k
        conn.close()

    ts = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


RUNAI = """
from runai_model_streamer import SafetensorsStreamer
n = 0
with SafetensorsStreamer() as s:
    s.stream_file(%r)
    for _, t in s.get_tensors():
        t.clone()
        n += 1
assert n == %d, n
"""


def runai(url):
    """In a process of its own, RUNAI_TIMEOUT s at most (its S3 backend
    retries without end against a server it cannot use); its import
    and start-up are in the time (a few ms against the load's seconds)."""
    r = subprocess.run([sys.executable, "-c", RUNAI % (url, TENSORS)], capture_output=True,
                       text=True, timeout=float(os.environ.get("RUNAI_TIMEOUT", "60")))
    if r.returncode != 0:
        raise RuntimeError((r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])


def main():
    base = os.environ.get("BENCH_DIR", tempfile.gettempdir())
    work = tempfile.mkdtemp(dir=base, prefix="tessera-remote-bench-")
    os.chmod(work, 0o755)  # nginx's workers run as another user
    try:
        root = os.path.join(work, "root")
        os.makedirs(os.path.join(root, "bucket"))
        path = os.path.join(root, "bucket", "model.safetensors")
        rng = np.random.default_rng(0)
        save_file({"t%03d" % i: rng.random(CHUNK // 4, dtype=np.float32)
                   for i in range(TENSORS)}, path)
        for d in (root, os.path.dirname(path)):  # readable by nginx's workers
            os.chmod(d, 0o755)
        os.chmod(path, 0o644)
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            header_len = int.from_bytes(f.read(8), "little")
        mib = size / (1 << 20)
        print("file: %.0f MiB, %d tensors; %d rounds; %d requests of %d MiB in flight"
              % (mib, TENSORS, ROUNDS, THREADS, CHUNK >> 20))
        rows = []
        servers = os.environ.get("SERVERS", "nginx,s3s-fs").split(",")
        ng, ng_port = nginx(root, work) if "nginx" in servers else (None, None)
        s3, s3_port = s3s_fs(root) if "s3s-fs" in servers else (None, None)
        sides = []
        if ng:
            url = "http://127.0.0.1:%d/bucket/model.safetensors" % ng_port
            sides += [("nginx: tessera tsr_load", lambda: tessera(url)),
                      ("nginx: limit (%d plain ranged GETs)" % THREADS,
                       lambda: plain_client(ng_port, "/bucket/model.safetensors", size,
                                            header_len))]
        elif "nginx" in servers:
            print("SKIPPED nginx: not installed")
        if s3:
            os.environ.update({
                "AWS_ENDPOINT_URL": "http://127.0.0.1:%d" % s3_port,
                "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "benchsecret",
                "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
                "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0", "AWS_EC2_METADATA_DISABLED": "true"})
            s3url = "s3://bucket/model.safetensors"
            sides += [("s3s-fs: tessera tsr_load", lambda: tessera(s3url)),
                      ("s3s-fs: runai-model-streamer", lambda: runai(s3url))]
        elif "s3s-fs" in servers:
            print("SKIPPED s3s-fs: not installed")
        times = {name: [] for name, _ in sides}
        failed = {}
        for _ in range(ROUNDS):
            for name, fn in sides:
                if name in failed:
                    continue
                t0 = time.perf_counter()
                try:
                    fn()
                except Exception as e:  # a peer that cannot run: said in its row
                    failed[name] = ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:160]
                    print("  %s: failed: %s" % (name, failed[name]), flush=True)
                    continue
                times[name].append(time.perf_counter() - t0)
                print("  %s: %.3f s" % (name, times[name][-1]), flush=True)
        print("\n| side | median s | fastest | slowest | MiB/s |")
        print("|---|---|---|---|---|")
        for name, _ in sides:
            if name in failed:
                print("| %s | failed: %s | | | |" % (name, failed[name]))
                continue
            ts = times[name]
            med = statistics.median(ts)
            print("| %s | %.3f | %.3f | %.3f | %.0f |" % (name, med, min(ts), max(ts), mib / med))
        for server, a, b in [("nginx", "nginx: tessera tsr_load",
                              "nginx: limit (%d plain ranged GETs)" % THREADS),
                             ("s3s-fs", "s3s-fs: tessera tsr_load",
                              "s3s-fs: runai-model-streamer")]:
            if times.get(a) and times.get(b):
                print("%s: tessera / %s = %.2fx" % (server, b.split(": ")[1],
                      statistics.median(times[a]) / statistics.median(times[b])))
        for p in (ng, s3):
            if p:
                p.kill()
                p.wait()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
