"""Issue 66's rows: a ~1 GiB safetensors file (128 tensors of 8 MiB,
float32) loaded whole over HTTP from nginx on 127.0.0.1, and one of
256 MiB (S3_TENSORS=32 tensors) over S3 from s3s-fs and moto on
127.0.0.1 (both answer a ranged GET in time that grows with the object:
7-13 MiB/s for 1 GiB here), into fresh CPU memory, sides interleaved
round by round (in a new order each round), all in one run:

- tessera: tsr_load(URL) (index from the first bytes, then
  TSR_REMOTE_CONCURRENCY ranged GETs of TSR_REMOTE_CHUNK_BYTES into each
  tensor's storage), once for each setting of SETTINGS;
- the server's limit: N threads (N = tessera's default concurrency, 8)
  of ranged 8 MiB GETs with a plain client (http.client over HTTP,
  boto3's get_object over S3) read into fresh NumPy buffers (one a
  tensor), from a shared queue;
- over HTTP, the peer a user has without a streamer: the file downloaded
  by the same 8 ranged GETs into a local file (on /dev/shm where it is
  writable), then
  safetensors.numpy.load_file (which maps it and copies each tensor out);
- over S3, runai-model-streamer's SafetensorsStreamer over s3:// (its S3
  backend pointed at s3s-fs with AWS_ENDPOINT_URL), each tensor cloned;
  it has no http:// backend. Where it cannot run, the row says why.

Prints one markdown row per side and server: median, fastest and
slowest round, MiB/s, and tessera's ratio to the limit and the peer.

    /work/venv-torch/bin/python benches/remote_loads.py

ROUNDS=n (default 3); SERVERS=nginx,s3s-fs,moto (default: the three;
moto is moto's S3 server from PyPI, `pip install "moto[server]"`, in
memory: 2-30x s3s-fs's speed here);
SETTINGS=CxM,... tessera's settings to race, C requests of M MiB
(default: 8x8, the built-in defaults; e.g. 4x8,8x8,16x8,8x2,8x32 to
choose them); BENCH_DIR=dir for the file (default $TMPDIR);
TESSERA_LIB=path (default target/release/libtessera.so); NGINX and
S3S_FS name the servers (default: on PATH, /usr/sbin/nginx,
target/tools/bin/s3s-fs: build it optimized for this bench, CI's is
not) and MOTO_SERVER (default: moto_server on PATH or beside this
Python). A server that is not installed is skipped, saying so.
"""

import ctypes
import http.client
import os
import queue
import random
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
# The S3 servers here answer a ranged GET in time that grows with the
# object (7-13 MiB/s for 1 GiB): their file is smaller.
S3_TENSORS = int(os.environ.get("S3_TENSORS", "32"))


class File:
    """One safetensors file of `tensors` tensors of 8 MiB."""

    def __init__(self, path, tensors, rng):
        save_file({"t%03d" % i: rng.random(CHUNK // 4, dtype=np.float32)
                   for i in range(tensors)}, path)
        os.chmod(path, 0o644)  # readable by nginx's workers
        self.path, self.key, self.tensors = path, os.path.basename(path), tensors
        self.size = os.path.getsize(path)
        with open(path, "rb") as f:
            self.header_len = int.from_bytes(f.read(8), "little")
        self.mib = self.size / (1 << 20)
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


def moto(files):
    """moto's S3 server (PyPI, in memory), the file put into its bucket."""
    exe = tool("MOTO_SERVER", "moto_server", os.path.join(os.path.dirname(sys.executable),
                                                         "moto_server"))
    if not exe:
        return None, None
    port = free_port()
    p = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(port)
    c = s3_get(port, "bucket", "")[0]()
    c.create_bucket(Bucket="bucket")
    for f in files:
        c.upload_file(f.path, "bucket", f.key)
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


def tessera(url, setting, tensors):
    conc, mib = setting
    os.environ["TSR_REMOTE_CONCURRENCY"] = str(conc)
    os.environ["TSR_REMOTE_CHUNK_BYTES"] = str(mib << 20)
    d = ctypes.c_void_p()
    if LIB.tsr_load(url.encode(), 0, 0, ctypes.byref(d)) != 0:
        raise RuntimeError(LIB.tsr_last_error_message().decode())
    n = LIB.tsr_dict_size(d)
    LIB.tsr_dict_free(d)
    assert n == tensors, n


def in_threads(jobs, opener, fetch):
    """THREADS threads, each with its own connection from `opener`,
    running `fetch(conn, job)` on the jobs of the queue."""
    errors = []

    def work():
        try:
            conn = opener()
            while True:
                try:
                    job = jobs.get_nowait()
                except queue.Empty:
                    break
                fetch(conn, job)
        except Exception as e:  # raised on the calling thread below
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(THREADS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]


def read_full(body, view):
    got = 0
    while got < len(view):
        k = body.readinto(view[got:])
        assert k, "short body"
        got += k


def http_get(port, path):
    """A fetch of (offset, view) jobs by ranged GETs over http.client."""
    def opener():
        return http.client.HTTPConnection("127.0.0.1", port)

    def fetch(conn, job):
        a, view = job
        conn.request("GET", path, headers={"Range": "bytes=%d-%d" % (a, a + len(view) - 1)})
        r = conn.getresponse()
        assert r.status == 206, r.status
        read_full(r, view)
    return opener, fetch


def s3_get(port, bucket, key):
    """The same over S3, by boto3's get_object with a Range."""
    import boto3
    import botocore.config

    def opener():
        return boto3.session.Session().client(
            "s3", endpoint_url="http://127.0.0.1:%d" % port, region_name="us-east-1",
            aws_access_key_id="bench", aws_secret_access_key="benchsecret",
            config=botocore.config.Config(s3={"addressing_style": "path"}))

    def fetch(conn, job):
        a, view = job
        r = conn.get_object(Bucket=bucket, Key=key, Range="bytes=%d-%d" % (a, a + len(view) - 1))
        read_full(r["Body"]._raw_stream, view)
    return opener, fetch


def plain_client(get, f):
    """THREADS connections of ranged 8 MiB GETs into fresh buffers, one
    a tensor."""
    jobs = queue.Queue()
    start = 8 + f.header_len
    per = (f.size - start) // f.tensors
    bufs = [np.empty(per, dtype=np.uint8) for _ in range(f.tensors)]
    for t in range(f.tensors):
        for off in range(0, per, CHUNK):
            jobs.put((start + t * per + off, memoryview(bufs[t])[off:off + min(CHUNK, per - off)]))
    in_threads(jobs, *get)


def download_then_load(get, f, local):
    """The whole file by THREADS ranged GETs into a local file, then
    safetensors.numpy.load_file of it."""
    from safetensors.numpy import load_file
    fd = os.open(local, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.ftruncate(fd, f.size)
        jobs = queue.Queue()
        bufs = []
        for a in range(0, f.size, CHUNK):
            bufs.append(bytearray(min(CHUNK, f.size - a)))
            jobs.put((a, memoryview(bufs[-1])))
        opener, fetch = get

        def fetch_and_write(conn, job):
            fetch(conn, job)
            os.pwrite(fd, job[1], job[0])
        in_threads(jobs, opener, fetch_and_write)
    finally:
        os.close(fd)
    n = len(load_file(local))
    os.unlink(local)
    assert n == f.tensors, n


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


def runai(url, tensors):
    """In a process of its own, RUNAI_TIMEOUT s at most (its S3 backend
    retries without end against a server it cannot use); its import
    and start-up are in the time (a few ms against the load's seconds)."""
    r = subprocess.run([sys.executable, "-c", RUNAI % (url, tensors)], capture_output=True,
                       text=True, timeout=float(os.environ.get("RUNAI_TIMEOUT", "60")))
    if r.returncode != 0:
        raise RuntimeError((r.stderr.strip().splitlines() or ["exit %d" % r.returncode])[-1])


def main():
    base = os.environ.get("BENCH_DIR", tempfile.gettempdir())
    work = tempfile.mkdtemp(dir=base, prefix="tessera-remote-bench-")
    os.chmod(work, 0o755)  # nginx's workers run as another user
    procs = []
    try:
        root = os.path.join(work, "root")
        os.makedirs(os.path.join(root, "bucket"))
        for d in (root, os.path.join(root, "bucket")):  # readable by nginx's workers
            os.chmod(d, 0o755)
        servers = os.environ.get("SERVERS", "nginx,s3s-fs,moto").split(",")
        rng = np.random.default_rng(0)
        big = File(os.path.join(root, "bucket", "model.safetensors"), TENSORS, rng)
        small = File(os.path.join(root, "bucket", "s3model.safetensors"), S3_TENSORS, rng)
        print("files: %.0f MiB in %d tensors (HTTP), %.0f MiB in %d (S3); %d rounds; "
              "%d requests of %d MiB in flight"
              % (big.mib, big.tensors, small.mib, small.tensors, ROUNDS, THREADS, CHUNK >> 20))
        ng, ng_port = nginx(root, work) if "nginx" in servers else (None, None)
        s3, s3_port = s3s_fs(root) if "s3s-fs" in servers else (None, None)
        mo, mo_port = moto([small]) if "moto" in servers else (None, None)
        procs = [p for p in (ng, s3, mo) if p]
        # The peer's download on tmpfs where there is one: no disk
        # writeback in its time.
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else work
        download = os.path.join(shm, "tessera-remote-bench-%d.safetensors" % os.getpid())
        settings = [tuple(int(x) for x in c.split("x"))
                    for c in os.environ.get("SETTINGS", "8x8").split(",")]

        def tessera_sides(server, url, f):
            return [("%s: tessera tsr_load %d x %d MiB" % (server, c, m), f,
                     lambda c=c, m=m: tessera(url, (c, m), f.tensors)) for c, m in settings]
        sides = []  # (name, file, fn)
        limits = {}
        if ng:
            url = "http://127.0.0.1:%d/bucket/%s" % (ng_port, big.key)
            get = http_get(ng_port, "/bucket/" + big.key)
            limits["nginx"] = ("nginx: limit (%d plain ranged GETs)" % THREADS,
                               "nginx: download + safetensors load_file")
            sides += tessera_sides("nginx", url, big)
            sides += [(limits["nginx"][0], big, lambda get=get: plain_client(get, big)),
                      (limits["nginx"][1], big,
                       lambda get=get: download_then_load(get, big, download))]
        elif "nginx" in servers:
            print("SKIPPED nginx: not installed")
        os.environ.update({
            "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "benchsecret",
            "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true",
            "RUNAI_STREAMER_S3_USE_VIRTUAL_ADDRESSING": "0", "AWS_EC2_METADATA_DISABLED": "true"})
        for server, proc, port in [("s3s-fs", s3, s3_port), ("moto", mo, mo_port)]:
            if not proc:
                if server in servers:
                    print("SKIPPED %s: not installed" % server)
                continue

            def at(fn, port=port):
                """fn with AWS_ENDPOINT_URL this server's (read at each open)."""
                def side():
                    os.environ["AWS_ENDPOINT_URL"] = "http://127.0.0.1:%d" % port
                    return fn()
                return side
            s3url = "s3://bucket/" + small.key
            get = s3_get(port, "bucket", small.key)
            limits[server] = ("%s: limit (%d boto3 ranged GETs)" % (server, THREADS),
                              "%s: runai-model-streamer" % server)
            sides += [(n, f, at(fn)) for n, f, fn in tessera_sides(server, s3url, small)]
            sides += [(limits[server][0], small, lambda get=get: plain_client(get, small)),
                      (limits[server][1], small,
                       at(lambda u=s3url: runai(u, small.tensors)))]
        times = {name: [] for name, _, _ in sides}
        failed = {}
        for r in range(ROUNDS):
            # A new order each round: the side after a process that gave
            # back its memory (runai's) pays for fresh pages here.
            order = list(sides)
            random.Random(r).shuffle(order)
            for name, _, fn in order:
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
        print("\n| side | MiB | median s | fastest | slowest | MiB/s |")
        print("|---|---|---|---|---|---|")
        for name, f, _ in sides:
            if name in failed:
                print("| %s | %.0f | failed: %s | | | |" % (name, f.mib, failed[name]))
                continue
            ts = times[name]
            med = statistics.median(ts)
            print("| %s | %.0f | %.3f | %.3f | %.3f | %.0f |"
                  % (name, f.mib, med, min(ts), max(ts), f.mib / med))
        for server, (limit, peer) in limits.items():
            for name, _, _ in sides:
                if not name.startswith(server + ": tessera") or not times[name]:
                    continue
                ours = statistics.median(times[name])
                shown = ["%s: %s" % (server, name.split(": ")[1])]
                for other in (limit, peer):
                    if times.get(other):
                        shown.append("/ %s = %.2fx" % (other.split(": ")[1],
                                     ours / statistics.median(times[other])))
                print(" ".join(shown))
    finally:
        for p in procs:  # SIGTERM: nginx's master stops its workers
            p.terminate()
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
