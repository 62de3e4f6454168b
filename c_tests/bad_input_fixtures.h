/*
 * bad_input_fixtures.h: the objects, scratch outputs and checks behind
 * test_bad_input.c (which scripts/bad_input.py generates from
 * c_tests/bad_input_table.txt).
 *
 * Every case runs between fx_setup() and fx_teardown():
 * - fx_setup() makes fresh fixtures F (a float [2,3] tensor on a storage,
 *   allocators, weak handles, a config, an iterator, a data pointer, dead
 *   handles whose strong count is 0, ...) and fills the scratch outputs S
 *   with 0xa5 bytes (a copy is kept to see that a failing call leaves its
 *   out-pointers untouched).
 * - fx_teardown() checks that the call left every fixture's strong and
 *   weak counts where they were (no reference leaked or dropped by an
 *   error path), that every data pointer and DLPack producer handed to
 *   tessera was freed exactly once, and that the test plugin has no live
 *   allocation; then it frees everything.
 */
#ifndef BAD_INPUT_FIXTURES_H
#define BAD_INPUT_FIXTURES_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* pipe, close: shared-memory cases */
#endif
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

#include "tsr_test.h"

/* ---- the test plugin: malloc with counts --------------------------------- */

static long fx_plugin_live = 0;
static long fx_plugin_released = 0;

static void fx_plugin_free(void *ctx) {
    fx_plugin_live--;
    free(ctx);
}

static TsrStatus fx_plugin_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    (void)self;
    /* A careful plugin refuses what malloc cannot represent. */
    if (nbytes > PTRDIFF_MAX) return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "fx plugin: too large");
    void *p = malloc(nbytes ? nbytes : 1);
    if (p == NULL) return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "fx plugin: malloc failed");
    fx_plugin_live++;
    out->data = p;
    out->ctx = p;
    out->deleter = fx_plugin_free;
    out->device = device;
    return TSR_OK;
}

static void fx_plugin_release(void *self) {
    (void)self;
    fx_plugin_released++;
}

static const TsrAllocatorVTable FX_VTABLE = {
    sizeof(TsrAllocatorVTable), "fx", fx_plugin_allocate, fx_plugin_free, NULL, fx_plugin_release,
};

/* Tables a plugin compiled wrongly might pass. */
static const TsrAllocatorVTable FX_VTABLE_TINY = {4, "tiny", NULL, NULL, NULL, NULL};
static const TsrAllocatorVTable FX_VTABLE_NO_ALLOC = {
    sizeof(TsrAllocatorVTable), "no allocate", NULL, NULL, NULL, NULL,
};

static const TsrObjectVTable FX_OBJECT_VTABLE = {sizeof(TsrObjectVTable), NULL, NULL};
static const TsrObjectVTable FX_OBJECT_VTABLE_TINY = {2, NULL, NULL};

/* A scalar tagged with any dtype number. */
static TsrScalar fx_scalar(TsrDType dtype) {
    TsrScalar s = tsr_scalar_int(1);
    s.dtype = dtype;
    return s;
}

/* ---- callbacks ------------------------------------------------------------ */

static long fx_deleted = 0;
static void fx_deleter(void *ctx) {
    fx_deleted++;
    free(ctx);
}

static void fx_loop(void *user, char **data, const int64_t *strides, int64_t n0, int64_t n1) {
    (void)user, (void)data, (void)strides, (void)n0, (void)n1;
}

static void fx_loop_n(void *user, int64_t ntensors, char **data, const int64_t *strides,
                      int64_t n0, int64_t n1) {
    (void)user, (void)ntensors, (void)data, (void)strides, (void)n0, (void)n1;
}

static size_t fx_host_frames(void *user, TsrHostFrame *frames, size_t capacity) {
    (void)user, (void)frames, (void)capacity;
    return 0;
}

static void fx_reduce_loop(void *user, void *acc, char **data, const int64_t *strides, int64_t n0,
                           int64_t n1) {
    (void)user, (void)acc, (void)data, (void)strides, (void)n0, (void)n1;
}

static void fx_combine(void *user, void *acc, const void *other) {
    (void)user, (void)acc, (void)other;
}

static void fx_sub(void *user, TsrIter *sub) {
    (void)user, (void)sub;
}

static void fx_reporter(void *user, const void *ptr, int64_t delta, uint64_t total, TsrDevice d) {
    (void)user, (void)ptr, (void)delta, (void)total, (void)d;
}

/* memory history (tsr_memory_record_history, tsr_add_oom_observer) */
static const TsrHistoryOptions FX_HISTORY = {sizeof(TsrHistoryOptions), 16, false};
static const TsrHistoryOptions FX_HISTORY_TINY = {4, 16, false};
static const TsrHistoryOptions FX_HISTORY_EMPTY = {sizeof(TsrHistoryOptions), 0, false};
static void fx_oom_observer(void *user, const char *allocator, TsrDevice d, size_t requested,
                            uint64_t allocated) {
    (void)user, (void)allocator, (void)d, (void)requested, (void)allocated;
}

static void fx_oom_info_observer(void *user, const TsrOomInfo *info) {
    (void)user, (void)info;
}

/* ---- DLPack producers ----------------------------------------------------- */

static long fx_dl_made = 0, fx_dl_deleted = 0;
static float fx_dl_data[6];

typedef struct {
    DLManagedTensorVersioned m; /* first: the deleter casts back */
    int64_t shape[2];
} FxDl;

typedef struct {
    DLManagedTensor m;
    int64_t shape[2];
} FxDlLegacy;

static void fx_dl_delete(DLManagedTensorVersioned *self) {
    fx_dl_deleted++;
    free(self);
}

static void fx_dl_legacy_delete(DLManagedTensor *self) {
    fx_dl_deleted++;
    free(self);
}

static DLTensor fx_dl_tensor(int64_t *shape) {
    DLTensor t;
    memset(&t, 0, sizeof t);
    t.data = fx_dl_data;
    t.device.device_type = kDLCPU;
    t.ndim = 2;
    t.dtype.code = kDLFloat;
    t.dtype.bits = 32;
    t.dtype.lanes = 1;
    shape[0] = 2;
    shape[1] = 3;
    t.shape = shape;
    return t;
}

/* A fresh, valid float [2,3] DLPack 1.1 tensor whose deleter is counted. */
static DLManagedTensorVersioned *fx_dl(void) {
    FxDl *p = (FxDl *)calloc(1, sizeof(FxDl));
    CHECK(p != NULL);
    fx_dl_made++;
    p->m.version.major = 1;
    p->m.version.minor = 1;
    p->m.deleter = fx_dl_delete;
    p->m.dl_tensor = fx_dl_tensor(p->shape);
    return &p->m;
}

/* As fx_dl, with one field changed by the caller. */
static DLManagedTensorVersioned *fx_dl_with(uint32_t major, uint64_t flags, int32_t ndim,
                                            uint8_t code, uint16_t lanes) {
    DLManagedTensorVersioned *m = fx_dl();
    m->version.major = major;
    m->flags = flags;
    m->dl_tensor.ndim = ndim;
    m->dl_tensor.dtype.code = code;
    m->dl_tensor.dtype.lanes = lanes;
    return m;
}

/* As fx_dl with a NULL shape. */
static DLManagedTensorVersioned *fx_dl_no_shape(void) {
    DLManagedTensorVersioned *m = fx_dl();
    m->dl_tensor.shape = NULL;
    return m;
}

static DLManagedTensor *fx_dl_legacy(void) {
    FxDlLegacy *p = (FxDlLegacy *)calloc(1, sizeof(FxDlLegacy));
    CHECK(p != NULL);
    fx_dl_made++;
    p->m.deleter = fx_dl_legacy_delete;
    p->m.dl_tensor = fx_dl_tensor(p->shape);
    return &p->m;
}

/* ---- fixtures and scratch outputs ----------------------------------------- */

typedef struct {
    TsrStorage *s;      /* 24 bytes, resizable, viewed by t */
    TsrStorage *su;     /* 16 bytes, resizable, uniquely owned */
    TsrStorage *fixed;  /* 16 bytes of external memory: not resizable */
    TsrTensor *t;       /* float [2,3] on s */
    TsrTensor *t1;      /* float [3] (broadcasts with t) */
    TsrTensor *t4;      /* float [4] (does not broadcast with t) */
    TsrAllocator *a;    /* the built-in CPU allocator */
    TsrAllocator *ca;   /* a caching allocator over a */
    TsrAllocator *pa;   /* an allocator of the fx plugin, self = &fx_plugin_live */
    TsrObject *o;
    TsrWeakTensor *wt;
    TsrWeakStorage *ws;
    TsrWeakAllocator *wa;
    TsrWeakObject *wo;
    TsrIterConfig *cfg; /* one input (t), one output to allocate */
    TsrIterConfig *cfg_empty; /* no operand */
    TsrIterConfig *cfg_bad;   /* promote_integer_inputs_to_float alone */
    TsrIter *it;        /* tsr_iter_unary_op(NULL, t) */
    TsrDataPtr dp;      /* 64 bytes of malloc with fx_deleter */
    TsrCachingOptions copts;
    TsrCachingStats cstats_zero; /* struct_size 0 */
    TsrCachingMemoryStats mstats_zero; /* struct_size 0 */
    int32_t threads;             /* tsr_get_num_threads() at setup */
    size_t cache_limit;          /* tsr_cpu_allocator_cache_limit() at setup */
    /* Handles whose strong count is 0, kept allocated by a weak reference. */
    TsrTensor *dead_t;
    TsrStorage *dead_s;
    TsrAllocator *dead_a;
    TsrObject *dead_o;
    TsrWeakTensor *dead_wt;
    TsrWeakStorage *dead_ws;
    TsrWeakAllocator *dead_wa;
    TsrWeakObject *dead_wo;
    double acc;
    char buf[64], buf2[64], fixed_bytes[16];
    TsrTensorDict *dict; /* {"w": a float [3] tensor of its own}, metadata k=v */
    TsrStorage *saved;   /* F.dict's bytes in the torch format */
    TsrStorage *hostile; /* fx_hostile's file, if a row asked for one */
    TsrCheckpoint *ckpt; /* fx_path()'s torch file, opened */
} Fixtures;

typedef struct {
    TsrTensor *tensor;
    TsrStorage *storage;
    TsrAllocator *allocator;
    TsrIterConfig *config;
    TsrIter *iter;
    TsrObject *object;
    TsrWeakTensor *weak_tensor;
    TsrWeakStorage *weak_storage;
    TsrWeakAllocator *weak_allocator;
    TsrWeakObject *weak_object;
    TsrDataPtr data_ptr;
    TsrAllocatorStats astats;
    TsrCachingStats cstats;
    TsrScalar scalar; /* tsr_tensor_item */
    TsrCachingMemoryStats mstats;
    DLManagedTensorVersioned *dl;
    DLManagedTensor *dl_legacy;
    void *ptr;
    TsrDType dtype;
    bool flag;
    TsrTensorDict *dict;
    int fd; /* tsr_storage_share_fd */
    TsrCheckpoint *ckpt;
    size_t index; /* tsr_checkpoint_find */
} Scratch;

static Fixtures F;
static Scratch S, S0;
static const int64_t FX_SIZES[2] = {2, 3}, FX_STRIDES[2] = {3, 1}, FX_DIMS[2] = {1, 0};
static const int64_t FX_SIZES_64[65] = {0};
static const int64_t FX_SIZES_3_3[2] = {3, 3}, FX_NEG_SIZES[2] = {-1, 3}, FX_NEG2_SIZES[2] = {-2, 3};
static const int64_t FX_HUGE_SIZES[2] = {INT64_MAX, 2}, FX_TWO_INFERRED[2] = {-1, -1};
static const int64_t FX_DIMS_REPEATED[2] = {0, 0}, FX_DIMS_OUT[2] = {0, 2};
static const TsrDevice FX_CPU = {TSR_CPU, -1};
/* tsr_tensor_from_storage_desc: float [2, 3] at offset 0 of F.s, and
   one bad field each. */
static const TsrTensorDesc FX_DESC = {sizeof(TsrTensorDesc), TSR_FLOAT, 2, FX_SIZES, NULL, 0};
static const TsrTensorDesc FX_DESC_TINY = {8, TSR_FLOAT, 2, FX_SIZES, NULL, 0};
static const TsrTensorDesc FX_DESC_DTYPE = {sizeof(TsrTensorDesc), 99, 2, FX_SIZES, NULL, 0};
static const TsrTensorDesc FX_DESC_NULL_SIZES = {sizeof(TsrTensorDesc), TSR_FLOAT, 2, NULL, NULL, 0};
static const TsrTensorDesc FX_DESC_OFFSET = {sizeof(TsrTensorDesc), TSR_FLOAT, 2, FX_SIZES, NULL, -1};
static const TsrTensorDesc FX_DESC_OOB = {sizeof(TsrTensorDesc), TSR_FLOAT, 2, FX_SIZES, NULL, 1};
/* tsr_checkpoint_load_many: names of F.ckpt's tensor, absent, twice,
   NULL; options with a bad struct_size, and with a callback that cancels. */
static const char *const FX_NAMES[1] = {"w"};
static const char *const FX_NAMES_ABSENT[1] = {"absent"};
static const char *const FX_NAMES_TWICE[2] = {"w", "w"};
static const char *const FX_NAMES_NULL[1] = {NULL};
static int fx_cancel(void *user, uint64_t done, uint64_t total, const char *finished) {
    (void)user, (void)done, (void)total, (void)finished;
    return 1;
}
static const TsrLoadOptions FX_LOAD_OPTS = {sizeof(TsrLoadOptions), 2, 4096, NULL, NULL};
static const TsrLoadOptions FX_LOAD_OPTS_TINY = {2, 0, 0, NULL, NULL};
static const TsrLoadOptions FX_LOAD_OPTS_CANCEL = {sizeof(TsrLoadOptions), 0, 0, fx_cancel, NULL};
/* Settings for tsr_checkpoint_open_with: two valid ones (a local path
   ignores them), a name tessera does not take, a NULL name, a value out
   of range (checked at a URL's open, before any request). */
static const TsrSetting FX_SETTINGS[] = {{"TSR_REMOTE_RETRIES", "1"}, {"AWS_REGION", "us-east-1"}};
static const TsrSetting FX_SETTINGS_UNKNOWN[] = {{"TSR_REMOTE_THREADS", "4"}};
static const TsrSetting FX_SETTINGS_NULL_NAME[] = {{NULL, "1"}};
static const TsrSetting FX_SETTINGS_BAD_VALUE[] = {{"TSR_REMOTE_RETRIES", "many"}};
static long fx_deleted_at_setup, fx_dl_made_at_setup, fx_dl_deleted_at_setup;

static TsrDevice fx_device(int8_t type, int8_t index) {
    TsrDevice d;
    d.type = type;
    d.index = index;
    return d;
}

/* A torch file of F.dict's contents, written once per process (removed
 * at exit). */
static char fx_path_buf[64];
static void fx_path_unlink(void) { remove(fx_path_buf); }
static const char *fx_path(void) {
    if (!fx_path_buf[0]) {
        snprintf(fx_path_buf, sizeof fx_path_buf, "/tmp/tsr-bad-input-%ld.pt", (long)getpid());
        TsrTensorDict *d = NULL;
        TsrTensor *w = NULL;
        int64_t three = 3;
        CHECK_OK(tsr_dict_new(&d));
        CHECK_OK(tsr_tensor_empty(1, &three, TSR_FLOAT, FX_CPU, &w));
        CHECK_OK(tsr_tensor_fill(w, tsr_scalar_float(3.0))); /* saved bytes are defined */
        CHECK_OK(tsr_dict_set(d, "w", w));
        CHECK_OK(tsr_save(d, fx_path_buf, TSR_FORMAT_TORCH));
        CHECK_OK(tsr_tensor_decref(w));
        tsr_dict_free(d);
        atexit(fx_path_unlink);
    }
    return fx_path_buf;
}

/* tests/data/shards/hostile/NAME (checkpoints with one thing wrong each,
 * made by scripts/make_shard_fixtures.py), found from this header's path. */
static const char *fx_hostile_path(const char *name) {
    static char buf[4][4096];
    static int next;
    char *out = buf[next++ % 4];
    const char *file = __FILE__;
    const char *slash = strrchr(file, '/');
    if (slash == NULL) {
        snprintf(out, sizeof buf[0], "../tests/data/shards/hostile/%s", name);
    } else {
        snprintf(out, sizeof buf[0], "%.*s/../tests/data/shards/hostile/%s", (int)(slash - file),
                 file, name);
    }
    return out;
}

/* A scratch directory for tsr_save_sharded, removed with what it holds
 * (the names a sharded save of F.dict writes) at exit. */
static char fx_shard_dir_buf[64];
static void fx_shard_dir_remove(void) {
    static const char *names[] = {"model.safetensors", "model.safetensors.index.json",
                                  "pytorch_model.bin", "pytorch_model.bin.index.json",
                                  "model-00001-of-00002.safetensors",
                                  "model-00002-of-00002.safetensors",
                                  "pytorch_model-00001-of-00002.bin",
                                  "pytorch_model-00002-of-00002.bin"};
    char path[128];
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", fx_shard_dir_buf, names[i]);
        remove(path);
    }
    remove(fx_shard_dir_buf);
}
static const char *fx_shard_dir(void) {
    if (!fx_shard_dir_buf[0]) {
        snprintf(fx_shard_dir_buf, sizeof fx_shard_dir_buf, "/tmp/tsr-bad-input-shards-%ld",
                 (long)getpid());
        atexit(fx_shard_dir_remove);
    }
    return fx_shard_dir_buf;
}

/* A scratch path for tsr_memory_snapshot, removed at exit. */
static char fx_snapshot_buf[64];
static void fx_snapshot_unlink(void) { remove(fx_snapshot_buf); }
static const char *fx_snapshot_path(void) {
    if (!fx_snapshot_buf[0]) {
        snprintf(fx_snapshot_buf, sizeof fx_snapshot_buf, "/tmp/tsr-bad-input-snap-%ld.json",
                 (long)getpid());
        atexit(fx_snapshot_unlink);
    }
    return fx_snapshot_buf;
}

/* Shared-memory storages: the read end of a pipe (closed at teardown)
   and a name longer than NAME_MAX. */
static int fx_pipe[2] = {-1, -1};
static int fx_pipe_fd(void) {
    CHECK(pipe(fx_pipe) == 0);
    return fx_pipe[0];
}
static TsrStorage *fx_shared_su(void) {
    CHECK_OK(tsr_storage_share_memory(F.su));
    return F.su;
}
/* F.su in an anonymous / a named segment, then made read-only: it hands
 * out no writable alias (issue 36). */
static TsrStorage *fx_shared_ro_su(void) {
    CHECK_OK(tsr_storage_share_memory(F.su));
    CHECK_OK(tsr_storage_make_read_only(F.su));
    return F.su;
}
static TsrStorage *fx_named_ro_su(void) {
    char name[64];
    CHECK_OK(tsr_storage_share_name(F.su, name, sizeof name));
    CHECK_OK(tsr_storage_make_read_only(F.su));
    return F.su;
}
static const char *fx_long_name(void) {
    static char name[301];
    memset(name, 'x', 300);
    name[0] = '/';
    return name;
}

/* ---- hostile files for the loaders (issue 52), built byte by byte ---- */

/* Which hostile file fx_hostile makes. */
enum {
    FX_NPZ_DUP,       /* two records named a.npy, over two entries */
    FX_NPZ_OVERLAP,   /* records a.npy and b.npy over one entry */
    FX_NPZ_RENAMED,   /* record a.npy over a local header naming b.npy */
    FX_TORCH_DUP,     /* two records named archive/data/0 */
    FX_TORCH_OVERLAP, /* records archive/data/0 and archive/data/1 over one entry */
    FX_GGUF_OVERLAP   /* tensor b's data (bytes 32..48) inside a's (0..64) */
};

typedef struct {
    unsigned char b[512];
    size_t n;
} FxBytes;

static void fx_put(FxBytes *o, const void *p, size_t n) {
    CHECK(o->n + n <= sizeof o->b);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
/* `v` little-endian in `width` bytes (past the 8th: zeros). */
static void fx_le(FxBytes *o, uint64_t v, int width) {
    for (int i = 0; i < width; i++) {
        unsigned char c = i < 8 ? (unsigned char)(v >> (8 * i)) : 0;
        fx_put(o, &c, 1);
    }
}

/* A zip header's fields from the method on (stored, CRC 0: these archives
   are refused for their structure before any CRC is read), sizes `n`,
   then the name's length. */
static void fx_zip_fields(FxBytes *o, size_t n, const char *name) {
    fx_le(o, 0, 2); /* stored */
    fx_le(o, 0, 4); /* time, date */
    fx_le(o, 0, 4); /* CRC-32 */
    fx_le(o, n, 4);
    fx_le(o, n, 4);
    fx_le(o, strlen(name), 2);
}

/* A stored zip archive: local entry i is named `local[i]` and holds "xy";
   central-directory record j names entry `at[j]` as `cd[j]`. */
static void fx_zip(FxBytes *o, int entries, const char *const *local, int records,
                   const char *const *cd, const int *at) {
    uint32_t offset[8];
    CHECK(entries <= 8);
    for (int i = 0; i < entries; i++) {
        offset[i] = (uint32_t)o->n;
        fx_put(o, "PK\3\4", 4);
        fx_le(o, 20, 2); /* version needed */
        fx_le(o, 0, 2);  /* flags */
        fx_zip_fields(o, 2, local[i]);
        fx_le(o, 0, 2); /* extra */
        fx_put(o, local[i], strlen(local[i]));
        fx_put(o, "xy", 2);
    }
    size_t cd_start = o->n;
    for (int j = 0; j < records; j++) {
        fx_put(o, "PK\1\2", 4);
        fx_le(o, 20, 2); /* made by */
        fx_le(o, 20, 2); /* needed */
        fx_le(o, 0, 2);  /* flags */
        fx_zip_fields(o, 2, cd[j]);
        fx_le(o, 0, 12); /* extra, comment, disk, attributes */
        fx_le(o, offset[at[j]], 4);
        fx_put(o, cd[j], strlen(cd[j]));
    }
    fx_put(o, "PK\5\6", 4);
    fx_le(o, 0, 4); /* disks */
    fx_le(o, (uint64_t)records, 2);
    fx_le(o, (uint64_t)records, 2);
    fx_le(o, o->n - cd_start - 12, 4); /* the directory's size */
    fx_le(o, cd_start, 4);
    fx_le(o, 0, 2); /* comment */
}

/* A GGUF tensor info: a float32 tensor of `n` elements at data `offset`. */
static void fx_gguf_info(FxBytes *o, const char *name, uint64_t n, uint64_t offset) {
    fx_le(o, strlen(name), 8);
    fx_put(o, name, strlen(name));
    fx_le(o, 1, 4); /* dims */
    fx_le(o, n, 8);
    fx_le(o, 0, 4); /* F32 */
    fx_le(o, offset, 8);
}

/* A storage holding hostile file `kind` (F.hostile, released at
   teardown, where a refused load must have left it one reference). */
static TsrStorage *fx_hostile(int kind) {
    static const char *const a2[2] = {"a.npy", "a.npy"}, *ab[2] = {"a.npy", "b.npy"};
    static const char *const b1[1] = {"b.npy"};
    static const char *const torch[3] = {"archive/data.pkl", "archive/data/0",
                                         "archive/data/0"};
    static const char *const torch_cd[3] = {"archive/data.pkl", "archive/data/0",
                                            "archive/data/1"};
    static const int a01[3] = {0, 1, 2}, a00[2] = {0, 0}, a011[3] = {0, 1, 1};
    FxBytes o;
    o.n = 0;
    switch (kind) {
    case FX_NPZ_DUP: fx_zip(&o, 2, a2, 2, a2, a01); break;
    case FX_NPZ_OVERLAP: fx_zip(&o, 1, a2, 2, ab, a00); break;
    case FX_NPZ_RENAMED: fx_zip(&o, 1, b1, 1, a2, a00); break;
    case FX_TORCH_DUP: fx_zip(&o, 3, torch, 3, torch, a01); break;
    case FX_TORCH_OVERLAP: fx_zip(&o, 2, torch, 3, torch_cd, a011); break;
    case FX_GGUF_OVERLAP:
        fx_put(&o, "GGUF", 4);
        fx_le(&o, 3, 4); /* version */
        fx_le(&o, 2, 8); /* tensors */
        fx_le(&o, 0, 8); /* keys */
        fx_gguf_info(&o, "a", 16, 0);
        fx_gguf_info(&o, "b", 4, 32);
        while (o.n % 32 != 0) fx_le(&o, 0, 1); /* to the data (alignment 32) */
        for (int i = 0; i < 8; i++) fx_le(&o, 0, 8); /* a's 64 bytes */
        break;
    default: CHECK(!"a hostile file kind");
    }
    CHECK(F.hostile == NULL);
    CHECK_OK(tsr_storage_new(o.n, FX_CPU, true, &F.hostile));
    memcpy(tsr_storage_data(F.hostile), o.b, o.n);
    return F.hostile;
}

/* F.s shrunk to 4 bytes under F.t (a float [2, 3] spans 24): every call
   that reads or writes through F.t refuses it (TSR_ERR_SHAPE). */
static TsrTensor *fx_shrunk_t(void) {
    CHECK_OK(tsr_storage_resize(F.s, 4));
    return F.t;
}
/* F.s while a DLPack export of F.t is alive (fx_export_end deletes it). */
static DLManagedTensorVersioned *fx_export = NULL;
static TsrStorage *fx_exported_s(void) {
    CHECK_OK(tsr_tensor_to_dlpack(F.t, &fx_export));
    return F.s;
}
static void fx_export_end(void) {
    fx_export->deleter(fx_export);
    fx_export = NULL;
}
/* F.t while a DLPack export of it is alive (fx_export_end deletes it). */
static TsrTensor *fx_exported_t(void) {
    CHECK_OK(tsr_tensor_to_dlpack(F.t, &fx_export));
    return F.t;
}
/* A float [4] tensor on F.fixed (external memory of 16 bytes, not
   resizable); fx_fixed_t_end checks it unchanged and releases it. */
static TsrTensor *fx_fixed_tensor = NULL;
static TsrTensor *fx_fixed_t(void) {
    const int64_t four = 4;
    CHECK_OK(tsr_tensor_from_storage(F.fixed, 0, 1, &four, NULL, TSR_FLOAT, &fx_fixed_tensor));
    return fx_fixed_tensor;
}
static void fx_fixed_t_end(void) {
    CHECK_EQ(tsr_tensor_size(fx_fixed_tensor, 0), 4);
    CHECK_EQ(tsr_storage_nbytes(F.fixed), 16);
    CHECK_OK(tsr_tensor_decref(fx_fixed_tensor));
    fx_fixed_tensor = NULL;
}
/* F.it after its input's storage F.s was grown (its memory moved): the
   iterator's pointers are stale, so every run call refuses it. */
static TsrIter *fx_stale_it(void) {
    CHECK_OK(tsr_storage_resize(F.s, 48));
    return F.it;
}

static void fx_setup(void) {
    int64_t three = 3;
    memset(&F, 0, sizeof F);
    CHECK_OK(tsr_storage_new(24, FX_CPU, true, &F.s));
    CHECK_OK(tsr_storage_new(16, FX_CPU, true, &F.su));
    /* Defined bytes: rows that share it copy them into a segment with
       pwrite, which valgrind checks byte for byte. */
    CHECK_OK(tsr_storage_fill(F.su, 0));
    TsrDataPtr ext = {F.fixed_bytes, NULL, NULL, {TSR_CPU, -1}};
    CHECK_OK(tsr_storage_from_data_ptr(&ext, sizeof F.fixed_bytes, &F.fixed));
    CHECK_OK(tsr_tensor_from_storage(F.s, 0, 2, FX_SIZES, NULL, TSR_FLOAT, &F.t));
    CHECK_OK(tsr_tensor_empty(1, &three, TSR_FLOAT, FX_CPU, &F.t1));
    int64_t four = 4;
    CHECK_OK(tsr_tensor_empty(1, &four, TSR_FLOAT, FX_CPU, &F.t4));
    CHECK_OK(tsr_tensor_fill(F.t, tsr_scalar_float(1.0)));
    CHECK_OK(tsr_tensor_fill(F.t1, tsr_scalar_float(2.0)));
    F.a = tsr_cpu_allocator();
    CHECK(F.a != NULL);
    CHECK_OK(tsr_caching_allocator_new(F.a, NULL, &F.ca));
    CHECK_OK(tsr_allocator_new(&FX_VTABLE, &fx_plugin_live, &F.pa)); /* self: any address */
    CHECK_OK(tsr_object_new(16, NULL, &F.o));
    CHECK_OK(tsr_tensor_downgrade(F.t, &F.wt));
    CHECK_OK(tsr_storage_downgrade(F.s, &F.ws));
    CHECK_OK(tsr_allocator_downgrade(F.pa, &F.wa));
    CHECK_OK(tsr_object_downgrade(F.o, &F.wo));
    CHECK_OK(tsr_iter_config_new(&F.cfg));
    CHECK_OK(tsr_iter_config_add_output(F.cfg, NULL));
    CHECK_OK(tsr_iter_config_add_input(F.cfg, F.t));
    CHECK_OK(tsr_iter_unary_op(NULL, F.t, &F.it));
    CHECK_OK(tsr_iter_config_new(&F.cfg_empty));
    CHECK_OK(tsr_iter_config_new(&F.cfg_bad));
    CHECK_OK(tsr_iter_config_add_input(F.cfg_bad, F.t1));
    CHECK_OK(tsr_iter_config_promote_integer_inputs_to_float(F.cfg_bad, true));
    F.threads = tsr_get_num_threads();
    F.cache_limit = tsr_cpu_allocator_cache_limit();
    F.dp.data = malloc(64);
    CHECK(F.dp.data != NULL);
    F.dp.ctx = F.dp.data;
    F.dp.deleter = fx_deleter;
    F.dp.device = FX_CPU;
    F.copts.struct_size = sizeof F.copts;
    /* dead handles */
    {
        TsrTensor *w = NULL;
        CHECK_OK(tsr_dict_new(&F.dict));
        CHECK_OK(tsr_tensor_empty(1, &three, TSR_FLOAT, FX_CPU, &w));
        CHECK_OK(tsr_tensor_fill(w, tsr_scalar_float(3.0))); /* saved bytes are defined */
        CHECK_OK(tsr_dict_set(F.dict, "w", w));
        CHECK_OK(tsr_dict_set_metadata(F.dict, "k", "v"));
        CHECK_OK(tsr_tensor_decref(w));
        CHECK_OK(tsr_save_to_storage(F.dict, TSR_FORMAT_TORCH, &F.saved));
        CHECK_OK(tsr_dict_set_value_json(F.dict, "step", "5"));
    }
    CHECK_OK(tsr_checkpoint_open(fx_path(), TSR_FORMAT_AUTO, 0, &F.ckpt));
    CHECK_OK(tsr_tensor_empty(1, &three, TSR_FLOAT, FX_CPU, &F.dead_t));
    CHECK_OK(tsr_tensor_downgrade(F.dead_t, &F.dead_wt));
    CHECK_OK(tsr_tensor_decref(F.dead_t));
    CHECK_OK(tsr_storage_new(8, FX_CPU, true, &F.dead_s));
    CHECK_OK(tsr_storage_downgrade(F.dead_s, &F.dead_ws));
    CHECK_OK(tsr_storage_decref(F.dead_s));
    CHECK_OK(tsr_allocator_new(&FX_VTABLE, NULL, &F.dead_a));
    CHECK_OK(tsr_allocator_downgrade(F.dead_a, &F.dead_wa));
    CHECK_OK(tsr_allocator_decref(F.dead_a));
    CHECK_OK(tsr_object_new(8, NULL, &F.dead_o));
    CHECK_OK(tsr_object_downgrade(F.dead_o, &F.dead_wo));
    CHECK_OK(tsr_object_decref(F.dead_o));

    memset(&S, 0xa5, sizeof S);
    S.cstats.struct_size = sizeof S.cstats;
    S.mstats.struct_size = sizeof S.mstats;
    memcpy(&S0, &S, sizeof S);
    fx_deleted_at_setup = fx_deleted;
    fx_dl_made_at_setup = fx_dl_made;
    fx_dl_deleted_at_setup = fx_dl_deleted;
    tsr_clear_last_error();
}

/* ---- what every case checks ----------------------------------------------- */

static const char *fx_fname = "";
static const char *fx_label = "";

/* With TSR_BAD_INPUT_KEEP_GOING set, a failed check is reported and the
   run goes on (to see every mismatch at once after changing the table);
   the program still exits with 1 at the end. */
static int fx_failures = 0;

static void fx_fail(int line, const char *what, const char *detail) {
    fprintf(stderr, "test_bad_input.c:%d: %s [%s]: %s (%s)\n  last error: %s\n", line, fx_fname,
            fx_label, what, detail, tsr_last_error_message());
    fx_failures++;
    if (getenv("TSR_BAD_INPUT_KEEP_GOING") == NULL) exit(1);
}

#define FX_CHECK(cond, detail)                                   \
    do {                                                         \
        tsr_test_checks++;                                       \
        if (!(cond)) fx_fail(__LINE__, #cond, (detail));         \
    } while (0)

/* The message must name the function ("tsr_x: ...") and contain `substr`. */
static void fx_check_named_message(const char *substr) {
    const char *m = tsr_last_error_message();
    size_t n = strlen(fx_fname);
    FX_CHECK(strncmp(m, fx_fname, n) == 0 && m[n] == ':' && m[n + 1] == ' ' && m[n + 2] != '\0',
             "the message must start with the function's name");
    if (substr != NULL) FX_CHECK(strstr(m, substr) != NULL, substr);
}

/* A status expectation: the status, a message naming the function, and
   (for an error) the out-pointers left as they were. */
static void fx_expect_status(TsrStatus got, TsrStatus want, const char *substr) {
    FX_CHECK(got == want, tsr_status_name(got));
    if (want != TSR_OK) {
        fx_check_named_message(substr);
        FX_CHECK(memcmp(&S, &S0, sizeof S) == 0, "a failing call wrote an out-pointer");
    }
}

enum { FX_MSG_NONE, FX_MSG_NAMED, FX_MSG_ANY };

/* After a getter or a void function: `named` a message naming the
   function was recorded, `none` no message, `any` not checked. */
static void fx_expect_message(int mode, const char *substr) {
    if (mode == FX_MSG_NAMED) {
        fx_check_named_message(substr);
    } else if (mode == FX_MSG_NONE) {
        FX_CHECK(tsr_last_error_message()[0] == '\0', "no message expected");
    }
}

static void fx_teardown(void) {
    tsr_dict_free(F.dict);
    tsr_checkpoint_close(F.ckpt);
    CHECK_OK(tsr_storage_decref(F.saved));
    if (F.hostile != NULL) {
        FX_CHECK(tsr_storage_use_count(F.hostile) == 1, "a refused load kept the file's storage");
        CHECK_OK(tsr_storage_decref(F.hostile));
    }
    if (fx_pipe[0] >= 0) {
        close(fx_pipe[0]);
        close(fx_pipe[1]);
        fx_pipe[0] = fx_pipe[1] = -1;
    }
    tsr_iter_free(F.it);
    tsr_iter_config_free(F.cfg);
    tsr_iter_config_free(F.cfg_empty);
    tsr_iter_config_free(F.cfg_bad);
    /* The call under test left every count where it was. */
    FX_CHECK(tsr_tensor_use_count(F.t) == 1 && tsr_tensor_weak_use_count(F.t) == 2,
             "counts of the fixture tensor");
    FX_CHECK(tsr_storage_use_count(F.s) == 2 && tsr_storage_weak_use_count(F.s) == 2,
             "counts of the fixture storage");
    FX_CHECK(tsr_storage_use_count(F.su) == 1 && tsr_storage_weak_use_count(F.su) == 1,
             "counts of the unique storage");
    FX_CHECK(tsr_storage_use_count(F.fixed) == 1, "counts of the external storage");
    FX_CHECK(tsr_tensor_use_count(F.t1) == 1 && tsr_tensor_use_count(F.t4) == 1,
             "counts of the other tensors");
    FX_CHECK(tsr_allocator_use_count(F.ca) == 1 && tsr_allocator_weak_use_count(F.ca) == 1,
             "counts of the caching allocator");
    FX_CHECK(tsr_allocator_use_count(F.pa) == 1 && tsr_allocator_weak_use_count(F.pa) == 2,
             "counts of the plugin allocator");
    FX_CHECK(tsr_object_use_count(F.o) == 1 && tsr_object_weak_use_count(F.o) == 2,
             "counts of the object");
    FX_CHECK(tsr_weak_tensor_use_count(F.dead_wt) == 0 &&
                 tsr_weak_tensor_weak_use_count(F.dead_wt) == 1,
             "counts of the dead tensor");
    FX_CHECK(tsr_weak_storage_weak_use_count(F.dead_ws) == 1, "counts of the dead storage");
    FX_CHECK(tsr_weak_allocator_weak_use_count(F.dead_wa) == 1, "counts of the dead allocator");
    FX_CHECK(tsr_weak_object_weak_use_count(F.dead_wo) == 1, "counts of the dead object");
    tsr_clear_last_error();
    CHECK_OK(tsr_weak_tensor_decref(F.wt));
    CHECK_OK(tsr_weak_storage_decref(F.ws));
    CHECK_OK(tsr_weak_allocator_decref(F.wa));
    CHECK_OK(tsr_weak_object_decref(F.wo));
    CHECK_OK(tsr_weak_tensor_decref(F.dead_wt));
    CHECK_OK(tsr_weak_storage_decref(F.dead_ws));
    CHECK_OK(tsr_weak_allocator_decref(F.dead_wa));
    CHECK_OK(tsr_weak_object_decref(F.dead_wo));
    CHECK_OK(tsr_tensor_decref(F.t));
    CHECK_OK(tsr_tensor_decref(F.t1));
    CHECK_OK(tsr_tensor_decref(F.t4));
    CHECK_OK(tsr_storage_decref(F.s));
    CHECK_OK(tsr_storage_decref(F.su));
    CHECK_OK(tsr_storage_decref(F.fixed));
    CHECK_OK(tsr_allocator_decref(F.ca));
    CHECK_OK(tsr_allocator_decref(F.pa));
    CHECK_OK(tsr_allocator_decref(F.a));
    CHECK_OK(tsr_object_decref(F.o));
    tsr_data_ptr_free(&F.dp); /* a no-op when a call consumed it */
    FX_CHECK(fx_deleted == fx_deleted_at_setup + 1, "the data pointer's deleter ran once");
    FX_CHECK(fx_dl_deleted - fx_dl_deleted_at_setup == fx_dl_made - fx_dl_made_at_setup,
             "every DLPack producer handed over was deleted once");
    FX_CHECK(fx_plugin_live == 0, "the fx plugin has live allocations");
}

#endif /* BAD_INPUT_FIXTURES_H */
