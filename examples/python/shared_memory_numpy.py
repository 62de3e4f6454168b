#!/usr/bin/env python3
"""Handing a tessera tensor to another process through shared memory.

The parent makes a float tensor, moves its storage into shared memory in
place (tsr_storage_share_memory), gets a descriptor of the segment
(tsr_storage_share_fd) and sends it to a child process over a Unix socket
(SCM_RIGHTS, socket.send_fds). The child maps it (tsr_storage_from_fd),
views it as a tessera tensor and as a NumPy array, and writes into it; the
parent sees the writes, with nothing copied. Once both released it, the
segment is gone (the kernel frees an anonymous memfd with its last user).

tessera is a C library: this example loads libtessera.so with ctypes.

Usage: shared_memory_numpy.py [path/to/libtessera.so]
(default: $TESSERA_LIB, else target/debug or target/release of this
repository). Prints "SKIP: numpy not installed" and exits 0 without NumPy.
"""

import ctypes
import os
import socket
import subprocess
import sys


class TsrDevice(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int8), ("index", ctypes.c_int8)]


TSR_OK, TSR_CPU, TSR_FLOAT = 0, 0, 6
HANDLE = ctypes.c_void_p
OUT = ctypes.POINTER(ctypes.c_void_p)
SHAPE = (4, 3)


def load_tessera(path):
    lib = ctypes.CDLL(path)
    signatures = {
        "tsr_last_error_message": (ctypes.c_char_p, []),
        "tsr_tensor_empty": (ctypes.c_int32, [ctypes.c_int64, ctypes.POINTER(ctypes.c_int64),
                                              ctypes.c_int8, TsrDevice, OUT]),
        "tsr_tensor_from_storage": (ctypes.c_int32, [HANDLE, ctypes.c_int64, ctypes.c_int64,
                                                     ctypes.POINTER(ctypes.c_int64),
                                                     ctypes.POINTER(ctypes.c_int64),
                                                     ctypes.c_int8, OUT]),
        "tsr_tensor_data": (ctypes.c_void_p, [HANDLE]),
        "tsr_tensor_storage": (HANDLE, [HANDLE]),
        "tsr_tensor_decref": (ctypes.c_int32, [HANDLE]),
        "tsr_storage_data": (ctypes.c_void_p, [HANDLE]),
        "tsr_storage_nbytes": (ctypes.c_size_t, [HANDLE]),
        "tsr_storage_resizable": (ctypes.c_bool, [HANDLE]),
        "tsr_storage_decref": (ctypes.c_int32, [HANDLE]),
        "tsr_storage_share_memory": (ctypes.c_int32, [HANDLE]),
        "tsr_storage_is_shared": (ctypes.c_bool, [HANDLE]),
        "tsr_storage_share_fd": (ctypes.c_int32, [HANDLE, ctypes.POINTER(ctypes.c_int)]),
        "tsr_storage_from_fd": (ctypes.c_int32, [ctypes.c_int, ctypes.c_size_t, OUT]),
    }
    for name, (restype, argtypes) in signatures.items():
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = restype, argtypes
    return lib


def check(lib, status, what):
    if status != TSR_OK:
        raise RuntimeError(f"{what}: {lib.tsr_last_error_message().decode()}")


def as_numpy(np, lib, tensor):
    """A NumPy array over the tensor's memory (no copy)."""
    n = SHAPE[0] * SHAPE[1]
    buf = (ctypes.c_float * n).from_address(lib.tsr_tensor_data(tensor))
    return np.frombuffer(buf, dtype=np.float32).reshape(SHAPE)


def memfd_segments():
    """This process's descriptors of tessera's memfd segments (Linux)."""
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            count += os.readlink(f"/proc/self/fd/{fd}").startswith("/memfd:tessera")
        except OSError:
            pass
    return count


def child(np, lib, sock_fd):
    sock = socket.socket(fileno=sock_fd)
    _, fds, _, _ = socket.recv_fds(sock, 16, 1)
    storage = ctypes.c_void_p()
    check(lib, lib.tsr_storage_from_fd(fds[0], 0, ctypes.byref(storage)), "tsr_storage_from_fd")
    os.close(fds[0])  # borrowed: the storage keeps its own descriptor
    sizes = (ctypes.c_int64 * 2)(*SHAPE)
    tensor = ctypes.c_void_p()
    check(lib, lib.tsr_tensor_from_storage(storage, 0, 2, sizes, None, TSR_FLOAT,
                                           ctypes.byref(tensor)), "tsr_tensor_from_storage")
    nbytes = lib.tsr_storage_nbytes(storage)
    check(lib, lib.tsr_storage_decref(storage), "tsr_storage_decref")  # the tensor holds it
    array = as_numpy(np, lib, tensor)
    print(f"child:  mapped {nbytes} bytes; row 1 reads {array[1].tolist()}", flush=True)
    array[1] *= -1
    array[:, 2] = 100
    print("child:  negated row 1 and set column 2 to 100", flush=True)
    del array
    check(lib, lib.tsr_tensor_decref(tensor), "tsr_tensor_decref")
    sock.sendall(b"done")
    return 0


def parent(np, lib, path):
    sizes = (ctypes.c_int64 * 2)(*SHAPE)
    tensor = ctypes.c_void_p()
    check(lib, lib.tsr_tensor_empty(2, sizes, TSR_FLOAT, TsrDevice(TSR_CPU, -1),
                                    ctypes.byref(tensor)), "tsr_tensor_empty")
    array = as_numpy(np, lib, tensor)
    array[:] = np.arange(12, dtype=np.float32).reshape(SHAPE)
    del array
    storage = lib.tsr_tensor_storage(tensor)
    before = lib.tsr_storage_data(storage)
    print(f"parent: tensor {list(SHAPE)} float; shared: {lib.tsr_storage_is_shared(storage)}")

    check(lib, lib.tsr_storage_share_memory(storage), "tsr_storage_share_memory")
    print(f"parent: share_memory: shared {lib.tsr_storage_is_shared(storage)}, moved "
          f"{lib.tsr_storage_data(storage) != before}, resizable "
          f"{lib.tsr_storage_resizable(storage)}; values kept "
          f"{as_numpy(np, lib, tensor).sum() == 66}")
    fd = ctypes.c_int(-1)
    check(lib, lib.tsr_storage_share_fd(storage, ctypes.byref(fd)), "tsr_storage_share_fd")
    check(lib, lib.tsr_storage_decref(storage), "tsr_storage_decref")

    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), path,
                             "--child", str(theirs.fileno())], pass_fds=[theirs.fileno()])
    theirs.close()
    socket.send_fds(mine, [b"x"], [fd.value])
    os.close(fd.value)  # the child has its own now
    reply = mine.recv(16)
    mine.close()
    print(f"parent: child says {reply.decode()!r}, exit status {proc.wait()}")
    print(f"parent: sees {as_numpy(np, lib, tensor).tolist()}")
    print(f"parent: segments held while the tensor lives: {memfd_segments()}")
    check(lib, lib.tsr_tensor_decref(tensor), "tsr_tensor_decref")
    print(f"parent: tensor released; segments held: {memfd_segments()}")
    return 0


def default_library():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for profile in ("debug", "release"):
        path = os.path.join(root, "target", profile, "libtessera.so")
        if os.path.exists(path):
            return path
    return "libtessera.so"


def main():
    try:
        import numpy as np
    except ImportError:
        print("SKIP: numpy not installed")
        return 0
    args = sys.argv[1:]
    path = args[0] if args and args[0] != "--child" else (
        os.environ.get("TESSERA_LIB") or default_library())
    lib = load_tessera(path)
    if "--child" in args:
        return child(np, lib, int(args[args.index("--child") + 1]))
    return parent(np, lib, path)


if __name__ == "__main__":
    sys.exit(main())
