/*
 * tessera.numpy_allocator._handler: a NEP 49 data-memory handler (PyDataMem_Handler)
 * whose blocks come from a tessera allocator (include/tessera.h).
 *
 * Block layout: every block NumPy receives is preceded by a 64-byte
 * header inside the same tessera allocation:
 *
 *     base (from tsr_allocator_allocate, 64-byte aligned for tessera's
 *     built-in CPU allocator)
 *     | BlockHeader: ctx, deleter, size, magic ... (64 bytes)
 *     | the bytes NumPy asked for          <- the pointer NumPy gets
 *
 * The header keeps what freeing needs (the TsrDataPtr's deleter and its
 * context) and the requested size, which NEP 49's realloc does not pass
 * (it must copy min(old, new) bytes). 64 bytes keep the data at the
 * allocator's own alignment (64 for the CPU allocator; NumPy needs 16).
 *
 * The hot paths (malloc, free) touch no Python API: NumPy may call them
 * without the GIL.
 *
 * Python frames: the module registers _frames.c's walker with tessera
 * (tsr_memory_set_host_frames), which calls it on the allocating thread
 * for each allocation memory history records with backtraces, and only
 * then: the Python stack (file, line, function) joins the allocation's
 * stack in snapshots, as in PyTorch's memory history.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#define NPY_TARGET_VERSION NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tessera.h"
#include "_frames.h"
#include "_limited.h"

#define HEADER_BYTES 64
/* calloc of this many bytes or more zeroes whole pages with madvise. */
#define LAZY_ZERO_MIN ((size_t)1 << 20)

static long page_size = 4096;
#define BLOCK_MAGIC UINT64_C(0x7e55e7a0da7a0b1c)
#define FREED_MAGIC UINT64_C(0xdeadf7eeda7a0b1c)

typedef struct {
    void *ctx;
    TsrDeleterFn deleter;
    size_t size;
    uint64_t magic;
    char pad[HEADER_BYTES - 2 * sizeof(void *) - sizeof(size_t) - sizeof(uint64_t)];
} BlockHeader;

_Static_assert(sizeof(BlockHeader) == HEADER_BYTES, "BlockHeader must be 64 bytes");

/* What the handler capsule's allocator.ctx points to. Freed by the
 * capsule's destructor, i.e. once no array uses the handler any more
 * (every array holds a reference to its handler, NEP 49). */
typedef struct {
    TsrAllocator *allocator; /* one reference, dropped with the context */
    /* The allocator is tessera's built-in CPU one, whose blocks are
     * private anonymous memory (malloc / posix_memalign): calloc may zero
     * whole pages with madvise(MADV_DONTNEED) instead of writing them. */
    int anonymous_memory;
    /* The built-in allocator's blocks are also raw allocations: their
     * context is their address and their deleter the same function. Once
     * a first block showed that deleter (set by any thread, always the
     * same value), malloc takes tsr_allocator_raw_allocate's bare address
     * (no TsrDataPtr to fill and copy) and frees it with this deleter. */
    int raw;
    _Atomic(TsrDeleterFn) raw_deleter;
    /* Blocks freed whose header was not ours (wrong magic): left alone. */
    atomic_ulong bad_frees;
    /* free() calls whose size differed from the allocated size. */
    atomic_ulong size_mismatches;
} HandlerCtx;

/* ---- the handler ------------------------------------------------------ */

static void *tsr_numpy_block_alloc(HandlerCtx *hc, size_t size) {
    if (size > SIZE_MAX - HEADER_BYTES) {
        return NULL;
    }
    TsrDeleterFn raw = atomic_load_explicit(&hc->raw_deleter, memory_order_relaxed);
    if (raw != NULL) {
        void *base = NULL;
        if (tsr_allocator_raw_allocate(hc->allocator, HEADER_BYTES + size, &base) != TSR_OK ||
            base == NULL) {
            return NULL;
        }
        BlockHeader *h = (BlockHeader *)base;
        h->ctx = base;
        h->deleter = raw;
        h->size = size;
        h->magic = BLOCK_MAGIC;
        return (char *)base + HEADER_BYTES;
    }
    TsrDataPtr dp;
    if (tsr_allocator_allocate(hc->allocator, HEADER_BYTES + size, &dp) != TSR_OK) {
        return NULL;
    }
    if (dp.data == NULL) { /* not expected for a non-zero request */
        tsr_data_ptr_free(&dp);
        return NULL;
    }
    if (hc->raw && dp.ctx == dp.data && dp.deleter != NULL) {
        atomic_store_explicit(&hc->raw_deleter, dp.deleter, memory_order_relaxed);
    }
    BlockHeader *h = (BlockHeader *)dp.data;
    h->ctx = dp.ctx;
    h->deleter = dp.deleter;
    h->size = size;
    h->magic = BLOCK_MAGIC;
    return (char *)dp.data + HEADER_BYTES;
}

static void tsr_numpy_block_release(HandlerCtx *hc, BlockHeader *h) {
    if (h->magic != BLOCK_MAGIC) {
        atomic_fetch_add(&hc->bad_frees, 1);
        return;
    }
    h->magic = FREED_MAGIC;
    TsrDeleterFn deleter = h->deleter;
    void *ctx = h->ctx;
    if (deleter != NULL && ctx != NULL) {
        deleter(ctx);
    }
}

static void *tsr_numpy_malloc(void *ctx, size_t size) {
    return tsr_numpy_block_alloc((HandlerCtx *)ctx, size);
}

/* Zeroes [p, p + size). Large blocks of private anonymous memory get
 * their whole pages dropped with MADV_DONTNEED instead: they read as zero
 * and are only committed when written, as with calloc's fresh pages (so
 * np.zeros of a large array does not touch all of its memory: NumPy's own
 * tests allocate some that are never read in full). */
static void tsr_numpy_zero_block(HandlerCtx *hc, char *p, size_t size) {
    if (hc->anonymous_memory && size >= LAZY_ZERO_MIN) {
        uintptr_t page = (uintptr_t)page_size;
        uintptr_t first = ((uintptr_t)p + page - 1) & ~(page - 1);
        uintptr_t last = ((uintptr_t)p + size) & ~(page - 1);
        if (last > first && madvise((void *)first, last - first, MADV_DONTNEED) == 0) {
            memset(p, 0, first - (uintptr_t)p);
            memset((void *)last, 0, (uintptr_t)p + size - last);
            return;
        }
    }
    memset(p, 0, size);
}

static void *tsr_numpy_calloc(void *ctx, size_t nelem, size_t elsize) {
    if (elsize != 0 && nelem > SIZE_MAX / elsize) {
        return NULL;
    }
    size_t size = nelem * elsize;
    HandlerCtx *hc = (HandlerCtx *)ctx;
    void *p = tsr_numpy_block_alloc(hc, size);
    if (p != NULL) {
        tsr_numpy_zero_block(hc, p, size);
    }
    return p;
}

static void *tsr_numpy_realloc(void *ctx, void *ptr, size_t new_size) {
    HandlerCtx *hc = (HandlerCtx *)ctx;
    if (ptr == NULL) {
        return tsr_numpy_block_alloc(hc, new_size);
    }
    BlockHeader *old = (BlockHeader *)((char *)ptr - HEADER_BYTES);
    if (old->magic != BLOCK_MAGIC) {
        atomic_fetch_add(&hc->bad_frees, 1);
        return NULL;
    }
    if (new_size == old->size) {
        return ptr;
    }
    void *p = tsr_numpy_block_alloc(hc, new_size);
    if (p == NULL) {
        return NULL; /* the old block stays valid, as realloc's contract */
    }
    memcpy(p, ptr, old->size < new_size ? old->size : new_size);
    tsr_numpy_block_release(hc, old);
    return p;
}

static void tsr_numpy_free(void *ctx, void *ptr, size_t size) {
    if (ptr == NULL) {
        return;
    }
    HandlerCtx *hc = (HandlerCtx *)ctx;
    BlockHeader *h = (BlockHeader *)((char *)ptr - HEADER_BYTES);
    if (h->magic == BLOCK_MAGIC && h->size != size) {
        atomic_fetch_add(&hc->size_mismatches, 1);
    }
    tsr_numpy_block_release(hc, h);
}

/* ---- module state ----------------------------------------------------- */

#define CAPSULE_NAME "mem_handler"

/* The handler for the registry's CPU allocator, made on first install and
 * kept for the life of the process (a strong reference). */
static PyObject *default_capsule = NULL;

static void capsule_destructor(PyObject *capsule) {
    PyDataMem_Handler *h = (PyDataMem_Handler *)PyCapsule_GetPointer(capsule, CAPSULE_NAME);
    if (h == NULL) {
        PyErr_Clear();
        return;
    }
    HandlerCtx *hc = (HandlerCtx *)h->allocator.ctx;
    tsr_allocator_decref(hc->allocator);
    free(hc);
    free(h);
}

/* A new handler capsule over `allocator` (takes over the caller's
 * reference, also on error). */
static PyObject *make_capsule(TsrAllocator *allocator, const char *name) {
    TsrAllocator *builtin = tsr_cpu_allocator();
    int anonymous = builtin != NULL && builtin == allocator;
    if (builtin != NULL) {
        tsr_allocator_decref(builtin);
    }
    PyDataMem_Handler *h = calloc(1, sizeof *h);
    HandlerCtx *hc = calloc(1, sizeof *hc);
    if (h == NULL || hc == NULL) {
        free(h);
        free(hc);
        tsr_allocator_decref(allocator);
        return PyErr_NoMemory();
    }
    hc->allocator = allocator;
    hc->anonymous_memory = anonymous;
    hc->raw = anonymous;
    snprintf(h->name, sizeof h->name, "%s", name);
    h->version = 1;
    h->allocator.ctx = hc;
    h->allocator.malloc = tsr_numpy_malloc;
    h->allocator.calloc = tsr_numpy_calloc;
    h->allocator.realloc = tsr_numpy_realloc;
    h->allocator.free = tsr_numpy_free;
    PyObject *capsule = PyCapsule_New(h, CAPSULE_NAME, capsule_destructor);
    if (capsule == NULL) {
        free(h);
        free(hc);
        tsr_allocator_decref(allocator);
        return NULL;
    }
    return capsule;
}

static PyObject *raise_tsr(const char *func, TsrStatus status, const char *what) {
    PyErr_Format(status == TSR_ERR_OUT_OF_MEMORY ? PyExc_MemoryError : PyExc_RuntimeError,
                 "%s: %s failed with %s: %s", func, what, tsr_status_name(status),
                 tsr_last_error_message());
    return NULL;
}

static PyObject *new_limited_capsule(size_t limit, const char *kind) {
    char name[64];
    snprintf(name, sizeof name, "tessera_numpy_%s", kind);
    TsrAllocator *a = NULL;
    TsrStatus st = tsr_numpy_limited_new(limit, name, &a);
    if (st != TSR_OK) {
        return raise_tsr("tessera.numpy_allocator.install", st, "tsr_allocator_new");
    }
    char hname[127];
    snprintf(hname, sizeof hname, "tessera(%s)", name);
    return make_capsule(a, hname);
}

/* _handler.install(kind, limit) -> previous handler capsule */
static PyObject *mod_install(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"allocator", "limit_bytes", NULL};
    const char *kind = "registry";
    PyObject *limit_obj = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|sO:install", kwlist, &kind, &limit_obj)) {
        return NULL;
    }
    PyObject *capsule = NULL;
    if (strcmp(kind, "registry") == 0 || strcmp(kind, "cpu") == 0) {
        if (limit_obj != Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "tessera.numpy_allocator.install: limit_bytes=%R is only for allocator='limited'",
                         limit_obj);
            return NULL;
        }
        if (strcmp(kind, "registry") == 0) {
            if (default_capsule == NULL) {
                TsrAllocator *a = tsr_get_allocator(TSR_CPU);
                if (a == NULL) {
                    return raise_tsr("tessera.numpy_allocator.install", TSR_ERR_INVALID_ARGUMENT,
                                     "tsr_get_allocator(TSR_CPU)");
                }
                default_capsule = make_capsule(a, "tessera");
                if (default_capsule == NULL) {
                    return NULL;
                }
            }
            capsule = default_capsule;
            Py_INCREF(capsule);
        } else {
            TsrAllocator *a = tsr_cpu_allocator();
            if (a == NULL) {
                return raise_tsr("tessera.numpy_allocator.install", TSR_ERR_INVALID_ARGUMENT,
                                 "tsr_cpu_allocator()");
            }
            capsule = make_capsule(a, "tessera(cpu)");
            if (capsule == NULL) {
                return NULL;
            }
        }
    } else if (strcmp(kind, "failing") == 0) {
        if (limit_obj != Py_None) {
            PyErr_Format(PyExc_ValueError,
                         "tessera.numpy_allocator.install: limit_bytes=%R is only for allocator='limited'",
                         limit_obj);
            return NULL;
        }
        capsule = new_limited_capsule(0, "failing");
    } else if (strcmp(kind, "limited") == 0) {
        if (limit_obj == Py_None || !PyLong_Check(limit_obj)) {
            PyErr_Format(PyExc_TypeError,
                         "tessera.numpy_allocator.install: allocator='limited' needs limit_bytes, an int >= 0, "
                         "got %R",
                         limit_obj);
            return NULL;
        }
        size_t limit = PyLong_AsSize_t(limit_obj);
        if (limit == (size_t)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            PyErr_Format(PyExc_ValueError,
                         "tessera.numpy_allocator.install: limit_bytes=%R is out of range, expected 0 .. %zu",
                         limit_obj, (size_t)SIZE_MAX - 1);
            return NULL;
        }
        capsule = new_limited_capsule(limit, "limited");
    } else {
        PyErr_Format(PyExc_ValueError,
                     "tessera.numpy_allocator.install: allocator='%s' is unknown, expected 'registry', "
                     "'cpu', 'failing' or 'limited'",
                     kind);
        return NULL;
    }
    if (capsule == NULL) {
        return NULL;
    }
    PyObject *prev = PyDataMem_SetHandler(capsule);
    if (prev == NULL) {
        Py_DECREF(capsule);
        return NULL;
    }
    Py_DECREF(capsule);
    return prev;
}

/* _handler.set_handler(capsule_or_None) -> previous handler capsule */
static PyObject *mod_set_handler(PyObject *self, PyObject *arg) {
    if (arg != Py_None && !PyCapsule_IsValid(arg, CAPSULE_NAME)) {
        PyErr_Format(PyExc_TypeError,
                     "tessera.numpy_allocator.set_handler: expected a NumPy 'mem_handler' capsule or None, "
                     "got %R",
                     (PyObject *)Py_TYPE(arg));
        return NULL;
    }
    return PyDataMem_SetHandler(arg == Py_None ? NULL : arg);
}

static PyObject *mod_current_handler(PyObject *self, PyObject *noargs) {
    return PyDataMem_GetHandler();
}

static PyObject *mod_is_tessera_handler(PyObject *self, PyObject *arg) {
    if (!PyCapsule_IsValid(arg, CAPSULE_NAME)) {
        Py_RETURN_FALSE;
    }
    PyDataMem_Handler *h = (PyDataMem_Handler *)PyCapsule_GetPointer(arg, CAPSULE_NAME);
    return PyBool_FromLong(h != NULL && h->allocator.malloc == tsr_numpy_malloc);
}

static int set_u64(PyObject *d, const char *key, unsigned long long v) {
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    if (o == NULL) {
        return -1;
    }
    int r = PyDict_SetItemString(d, key, o);
    Py_DECREF(o);
    return r;
}

static PyObject *stats_of(const char *func, TsrAllocator *a, HandlerCtx *hc) {
    TsrAllocatorStats s;
    TsrStatus st = tsr_allocator_stats(a, &s);
    if (st != TSR_OK) {
        return raise_tsr(func, st, "tsr_allocator_stats");
    }
    PyObject *d = PyDict_New();
    if (d == NULL) {
        return NULL;
    }
    PyObject *name = PyUnicode_FromString(tsr_allocator_name(a));
    if (name == NULL || PyDict_SetItemString(d, "allocator", name) < 0) {
        Py_XDECREF(name);
        Py_DECREF(d);
        return NULL;
    }
    Py_DECREF(name);
    if (set_u64(d, "allocations", s.num_allocs) < 0 || set_u64(d, "frees", s.num_frees) < 0 ||
        set_u64(d, "live_blocks", s.num_allocs - s.num_frees) < 0 ||
        set_u64(d, "current_bytes", s.allocated_bytes) < 0 ||
        set_u64(d, "peak_bytes", s.peak_bytes) < 0 || set_u64(d, "failed", s.num_failed) < 0 ||
        set_u64(d, "header_bytes", HEADER_BYTES) < 0 ||
        set_u64(d, "bad_frees", hc ? atomic_load(&hc->bad_frees) : 0) < 0 ||
        set_u64(d, "size_mismatches", hc ? atomic_load(&hc->size_mismatches) : 0) < 0) {
        Py_DECREF(d);
        return NULL;
    }
    return d;
}

/* stats(): the allocator of NumPy's current handler when it is one of
 * ours, else the registry's CPU allocator (the one install() uses). */
static PyObject *mod_stats(PyObject *self, PyObject *noargs) {
    PyObject *cur = PyDataMem_GetHandler();
    if (cur == NULL) {
        return NULL;
    }
    PyDataMem_Handler *h = NULL;
    if (PyCapsule_IsValid(cur, CAPSULE_NAME)) {
        h = (PyDataMem_Handler *)PyCapsule_GetPointer(cur, CAPSULE_NAME);
        if (h != NULL && h->allocator.malloc != tsr_numpy_malloc) {
            h = NULL;
        }
    }
    if (h == NULL && default_capsule != NULL) {
        Py_DECREF(cur);
        cur = default_capsule;
        Py_INCREF(cur);
        h = (PyDataMem_Handler *)PyCapsule_GetPointer(cur, CAPSULE_NAME);
    }
    if (h != NULL) {
        HandlerCtx *hc = (HandlerCtx *)h->allocator.ctx;
        PyObject *r = stats_of("tessera.numpy_allocator.stats", hc->allocator, hc);
        Py_DECREF(cur);
        return r;
    }
    Py_DECREF(cur);
    PyErr_Clear();
    TsrAllocator *a = tsr_get_allocator(TSR_CPU);
    if (a == NULL) {
        return raise_tsr("tessera.numpy_allocator.stats", TSR_ERR_INVALID_ARGUMENT,
                         "tsr_get_allocator(TSR_CPU)");
    }
    PyObject *r = stats_of("tessera.numpy_allocator.stats", a, NULL);
    tsr_allocator_decref(a);
    return r;
}

static PyObject *mod_snapshot(PyObject *self, PyObject *args) {
    PyObject *path_obj = NULL;
    int format = -1;
    if (!PyArg_ParseTuple(args, "O&|i:snapshot", PyUnicode_FSConverter, &path_obj, &format)) {
        return NULL;
    }
    const char *path = PyBytes_AsString(path_obj);
    if (format == -1) {
        size_t n = strlen(path);
        format = (n >= 7 && strcmp(path + n - 7, ".pickle") == 0) ? TSR_SNAPSHOT_TORCH
                                                                   : TSR_SNAPSHOT_JSON;
    } else if (format != TSR_SNAPSHOT_JSON && format != TSR_SNAPSHOT_TORCH) {
        PyErr_Format(PyExc_ValueError,
                     "tessera.numpy_allocator.snapshot: format=%d is unknown, expected %d (JSON) or %d "
                     "(memory_viz pickle)",
                     format, TSR_SNAPSHOT_JSON, TSR_SNAPSHOT_TORCH);
        Py_DECREF(path_obj);
        return NULL;
    }
    TsrStatus st;
    Py_BEGIN_ALLOW_THREADS
    st = tsr_memory_snapshot(path, (TsrSnapshotFormat)format);
    Py_END_ALLOW_THREADS
    if (st != TSR_OK) {
        PyErr_Format(st == TSR_ERR_OUT_OF_MEMORY ? PyExc_MemoryError : PyExc_OSError,
                     "tessera.numpy_allocator.snapshot: tsr_memory_snapshot(%R) failed with %s: %s",
                     PyTuple_GetItem(args, 0), tsr_status_name(st), tsr_last_error_message());
        Py_DECREF(path_obj);
        return NULL;
    }
    Py_DECREF(path_obj);
    Py_RETURN_NONE;
}

static PyObject *mod_record_history(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"enabled", "max_entries", "backtraces", NULL};
    int enabled = 1;
    Py_ssize_t max_entries = 100000;
    int backtraces = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "p|np:record_history", kwlist, &enabled,
                                     &max_entries, &backtraces)) {
        return NULL;
    }
    TsrStatus st;
    if (enabled) {
        if (max_entries < 1) {
            PyErr_Format(PyExc_ValueError,
                         "tessera.numpy_allocator.record_history: max_entries=%zd, expected >= 1",
                         max_entries);
            return NULL;
        }
        TsrHistoryOptions o;
        memset(&o, 0, sizeof o);
        o.struct_size = sizeof o;
        o.max_entries = (size_t)max_entries;
        o.backtraces = backtraces != 0;
        st = tsr_memory_record_history(&o);
    } else {
        st = tsr_memory_record_history(NULL);
    }
    if (st != TSR_OK) {
        return raise_tsr("tessera.numpy_allocator.record_history", st, "tsr_memory_record_history");
    }
    Py_RETURN_NONE;
}

static PyObject *mod_release_cache(PyObject *self, PyObject *noargs) {
    return PyLong_FromSize_t(tsr_cpu_allocator_release_cache());
}

/* ---- module ----------------------------------------------------------- */

static PyMethodDef methods[] = {
    {"install", (PyCFunction)(void (*)(void))mod_install, METH_VARARGS | METH_KEYWORDS,
     "install(allocator='registry', limit_bytes=None) -> previous handler capsule"},
    {"set_handler", mod_set_handler, METH_O,
     "set_handler(capsule_or_None) -> previous handler capsule"},
    {"current_handler", mod_current_handler, METH_NOARGS,
     "current_handler() -> NumPy's current handler capsule"},
    {"is_tessera_handler", mod_is_tessera_handler, METH_O,
     "is_tessera_handler(capsule) -> whether it is one of this module's handlers"},
    {"stats", mod_stats, METH_NOARGS, "stats() -> dict of tessera allocator statistics"},
    {"snapshot", mod_snapshot, METH_VARARGS, "snapshot(path, format=-1)"},
    {"record_history", (PyCFunction)(void (*)(void))mod_record_history,
     METH_VARARGS | METH_KEYWORDS, "record_history(enabled, max_entries=100000, backtraces=True)"},
    {"release_cache", mod_release_cache, METH_NOARGS,
     "release_cache() -> bytes freed from this thread's tessera CPU cache"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moduledef = {
    PyModuleDef_HEAD_INIT, "tessera.numpy_allocator._handler", NULL, -1, methods,
};

PyMODINIT_FUNC PyInit__handler(void) {
    import_array();
    long ps = sysconf(_SC_PAGESIZE);
    if (ps > 0 && (ps & (ps - 1)) == 0) {
        page_size = ps;
    }
    PyObject *m = PyModule_Create(&moduledef);
    if (m == NULL) {
        return NULL;
    }
    /* CPython runs Python frames in _PyEval_EvalFrameDefault: a snapshot
     * puts them before the innermost native frame of that name. */
    TsrStatus st = tsr_memory_set_host_frames("python", "_PyEval_EvalFrameDefault",
                                              tsr_numpy_python_frames, NULL);
    if (st != TSR_OK) {
        Py_DECREF(m);
        return raise_tsr("tessera.numpy_allocator", st, "tsr_memory_set_host_frames");
    }
    if (PyModule_AddIntConstant(m, "HEADER_BYTES", HEADER_BYTES) < 0 ||
        PyModule_AddIntConstant(m, "MAX_PYTHON_FRAMES", TSR_MAX_HOST_FRAMES) < 0 ||
        PyModule_AddIntConstant(m, "SNAPSHOT_JSON", TSR_SNAPSHOT_JSON) < 0 ||
        PyModule_AddIntConstant(m, "SNAPSHOT_TORCH", TSR_SNAPSHOT_TORCH) < 0 ||
        PyModule_AddStringConstant(m, "TESSERA_VERSION", tsr_version()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
