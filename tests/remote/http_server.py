#!/usr/bin/env python3
"""An HTTP server for tessera's remote tests (tests/remote.rs): serves the
files under --root with Range, HEAD, ETag, Last-Modified and If-Match, and
misbehaves on request: the first path segment picks how.

  /ok/FILE           correct (206 + Content-Range for a range)
  /norange/FILE      ignores Range: 200 and the whole body
  /badrange/FILE     206 with a Content-Range one byte off
  /short/FILE        206 with the right Content-Range, half the body and a
                     Content-Length saying so
  /long/FILE         206 with the right Content-Range and twice the bytes
  /reset/FILE        206 promising the range, half sent, connection closed
  /drip/FILE         the body one byte every 0.2 s
  /loop/FILE         a redirect to itself, forever
  /hugeheader/FILE   a 1 MiB response header
  /changing/FILE     a new ETag (and Last-Modified) on every GET (HEAD: the
                     first one)
  /flaky/FILE        a 503 for the first GET of each range (a retry
                     succeeds)
  /slow/FILE         correct, each answer 20 ms late (an object store's
                     first-byte latency, for benches)
  /stats             the GETs of files answered so far: "gets N"

Prints "PORT <n>" on stdout once listening on 127.0.0.1 (--port 0: a free
one). Python's standard library only.
"""

import argparse
import email.utils
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODES = {"ok", "norange", "badrange", "short", "long", "reset", "drip",
         "loop", "hugeheader", "changing", "flaky", "slow"}
COUNT = {"gets": 0}
FAILED = set()
LOCK = threading.Lock()


def parse_range(header, size):
    """(start, end_inclusive) of a single 'bytes=a-b' range, else None."""
    if not header or not header.startswith("bytes="):
        return None
    spec = header[len("bytes="):]
    if "," in spec:
        return None
    a, _, b = spec.partition("-")
    if a == "":
        n = int(b)
        return (max(0, size - n), size - 1)
    start = int(a)
    end = int(b) if b else size - 1
    return (start, min(end, size - 1))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    root = "."

    def log_message(self, *args):
        pass

    def locate(self):
        parts = self.path.split("?")[0].lstrip("/").split("/", 1)
        if len(parts) != 2 or parts[0] not in MODES:
            return None, None
        path = os.path.realpath(os.path.join(self.root, parts[1]))
        if not path.startswith(os.path.realpath(self.root) + os.sep):
            return parts[0], None
        return parts[0], path

    def do_HEAD(self):
        self.serve(head=True)

    def do_GET(self):
        self.serve(head=False)

    def fail(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def serve(self, head):
        if self.path == "/stats":
            with LOCK:
                body = b"gets %d" % COUNT["gets"]
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body)
            return
        mode, path = self.locate()
        if mode is None or path is None or not os.path.isfile(path):
            return self.fail(404)
        with LOCK:
            COUNT["gets"] += 0 if head else 1
            n = COUNT["gets"]
        if mode == "slow":
            time.sleep(0.02)
        if mode == "loop":
            self.send_response(302)
            self.send_header("Location", self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if mode == "flaky" and not head:
            asked = (self.path, self.headers.get("Range"))
            with LOCK:
                first = asked not in FAILED
                FAILED.add(asked)
            if first:
                return self.fail(503)
        st = os.stat(path)
        size = st.st_size
        version = int(st.st_mtime)
        if mode == "changing" and not head:
            version += n
        etag = '"%x-%x"' % (size, version)
        match = self.headers.get("If-Match")
        if match and match != etag and mode != "changing":
            return self.fail(412)
        rng = parse_range(self.headers.get("Range"), size)
        if mode == "norange":
            rng = None
        with open(path, "rb") as f:
            if rng is None:
                start, end = 0, size - 1
            else:
                start, end = rng
            f.seek(start)
            body = f.read(end - start + 1)
        if rng is None:
            self.send_response(200)
        else:
            self.send_response(206)
            shown = (start + 1, end + 1) if mode == "badrange" else (start, end)
            self.send_header("Content-Range", "bytes %d-%d/%d" % (shown[0], shown[1], size))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", etag)
        self.send_header("Last-Modified", email.utils.formatdate(version, usegmt=True))
        if mode == "hugeheader":
            self.send_header("X-Huge", "x" * (1 << 20))
        if mode == "short" and not head:
            body = body[: len(body) // 2]
        if mode == "long" and not head:
            body = body * 2
        length = len(body)
        if mode == "reset":
            length = len(body)
            body = body[: len(body) // 2]
        self.send_header("Content-Length", str(length))
        self.end_headers()
        if head:
            return
        try:
            if mode == "drip":
                for i in range(len(body)):
                    self.wfile.write(body[i:i + 1])
                    self.wfile.flush()
                    time.sleep(0.2)
            else:
                self.wfile.write(body)
            if mode == "reset":
                self.wfile.flush()
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           b"\x01\x00\x00\x00\x00\x00\x00\x00")
                self.close_connection = True
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    Handler.root = args.root
    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    print("PORT %d" % server.server_address[1], flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
