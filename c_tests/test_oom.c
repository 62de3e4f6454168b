/*
 * test_oom.c: every function that allocates storage data, driven through
 * each of its allocation failures.
 *
 * An allocator plugin that refuses its allocation number N + 1 is
 * registered for TSR_CPU at priority 255, so every storage tessera makes
 * (storages, tensors, iterator outputs and cast temporaries, copies, wrapped
 * scalars) asks it; functions given an allocator use it directly. For each
 * function, N = 0, 1, 2, ... until the call succeeds: every failure must be
 * a clean TSR_ERR_OUT_OF_MEMORY whose message names the function and
 * carries the plugin's message, the out-pointer untouched, no allocation
 * left behind (the plugin's live count back where it was), and the objects
 * the call touched intact and usable. At the end the plugin's every
 * allocation is freed and, once unregistered, its release runs.
 *
 * What the plugin does not see: tessera's own metadata (the refcounted
 * blocks of storages, tensors, allocators and objects, iterator and config
 * state, DLPack export structs, error messages) comes from the global
 * allocator (malloc), and tsr_object_new's block from calloc. Failures
 * there abort like any Rust allocation failure; they are not reachable
 * through an allocator plugin.
 */
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#include <stdint.h>

#include "portable.h"
#include "tsr_test.h"

/* ---- the failing plugin --------------------------------------------------- */

static long budget = -1; /* allocations left before the next one fails; -1: no limit */
static long refuse_next = 0; /* refuse this many of the next requests, then go on */
static long live = 0, made = 0, refused = 0, released = 0;

static void oom_free(void *ctx) {
    live--;
    aligned_block_free(ctx);
}

static TsrStatus oom_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    (void)self;
    if (budget == 0 || refuse_next > 0) {
        if (refuse_next > 0) refuse_next--;
        refused++;
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "oom plugin: refused on purpose");
    }
    if (nbytes > PTRDIFF_MAX) return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "oom plugin: too large");
    void *p = aligned_block(64, nbytes ? nbytes : 1);
    if (p == NULL) {
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "oom plugin: no aligned block");
    }
    if (budget > 0) budget--;
    live++;
    made++;
    out->data = p;
    out->ctx = p;
    out->deleter = oom_free;
    out->device = device;
    return TSR_OK;
}

static void oom_release(void *self) {
    (void)self;
    released++;
}

static const TsrAllocatorVTable OOM_VTABLE = {
    sizeof(TsrAllocatorVTable), "oom", oom_allocate, oom_free, NULL, oom_release,
};

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

/* ---- fixtures the operations work on (made with no budget) -------------- */

static TsrStorage *s64;       /* 64 bytes holding 0, 1, 2, ..., resizable */
static TsrTensor *mat;        /* float [4, 6] holding 0..23 */
static TsrTensor *mat_t;      /* its transpose [6, 4]: not contiguous */
static TsrTensor *vec_d;      /* double [6] */
static TsrTensor *out_i;      /* int32 [4, 6]: an output of another dtype */
static TsrAllocator *plugin;  /* the registered plugin (tsr_get_allocator) */
static TsrAllocator *caching; /* a caching allocator over the plugin */

static void check_fixtures_intact(void) {
    const unsigned char *b = tsr_storage_data(s64);
    CHECK_EQ(tsr_storage_nbytes(s64), 64);
    for (int i = 0; i < 64; i++) CHECK_EQ(b[i], i);
    CHECK_EQ(tsr_tensor_ndim(mat), 2);
    CHECK_EQ(tsr_tensor_size(mat, 0), 4);
    const float *f = tsr_tensor_data(mat);
    for (int i = 0; i < 24; i++) CHECK(f[i] == (float)i);
    CHECK(!tsr_tensor_is_contiguous(mat_t, TSR_CONTIGUOUS));
    CHECK_EQ(tsr_tensor_use_count(mat), 1);
    CHECK_EQ(tsr_tensor_use_count(mat_t), 1);
    CHECK_EQ(tsr_tensor_use_count(vec_d), 1);
    CHECK_EQ(tsr_tensor_use_count(out_i), 1);
    CHECK_EQ(tsr_tensor_size(out_i, 1), 6);
}

/* Runs statements with no budget, without counting their allocations (a
   check that the object a failed call touched still works). */
#define UNCOUNTED(stmts)                       \
    do {                                       \
        long saved_budget_ = budget;           \
        long saved_made_ = made;               \
        budget = -1;                           \
        stmts;                                 \
        budget = saved_budget_;                \
        made = saved_made_;                    \
    } while (0)

/* ---- the driver ----------------------------------------------------------- */

typedef TsrStatus (*Op)(void);

static const char *current = "";
static int total_failures = 0;

/* Runs `op` with a budget of 0, 1, 2, ... allocations until it succeeds.
   `fname` is the C function under test (its name leads the message);
   each failure makes `refusals` requests the plugin refuses (2 for the
   caching allocator, which retries once). Returns the number of
   allocations the successful call made: exactly the budget it needed. */
static long drive(const char *fname, const char *what, Op op, long min_allocs, long refusals) {
    current = fname;
    for (long n = 0; n < 64; n++) {
        long live_before = live, refused_before = refused, made_before = made;
        TsrAllocatorStats before, after;
        CHECK_OK(tsr_allocator_stats(plugin, &before));
        budget = n;
        tsr_clear_last_error();
        TsrStatus s = op();
        budget = -1;
        CHECK_OK(tsr_allocator_stats(plugin, &after));
        if (s == TSR_OK) {
            CHECK_EQ(refused, refused_before); /* it never hit the limit */
            CHECK_EQ(made - made_before, n);   /* every allocation had its failure run */
            CHECK_EQ(live, live_before);       /* op released what it made */
            check_fixtures_intact();
            long allocs = made - made_before;
            if (allocs < min_allocs) {
                fprintf(stderr, "%s: made %ld allocations through the plugin, expected >= %ld\n",
                        fname, allocs, min_allocs);
                CHECK(allocs >= min_allocs);
            }
            printf("  %-32s %-34s %ld allocation(s), %ld failure(s) clean\n", fname, what, allocs, n);
            return allocs;
        }
        total_failures++;
        if (s != TSR_ERR_OUT_OF_MEMORY) {
            fprintf(stderr, "%s with a budget of %ld: %s\n", fname, n, tsr_status_name(s));
            CHECK_EQ(s, TSR_ERR_OUT_OF_MEMORY);
        }
        const char *m = tsr_last_error_message();
        if (strncmp(m, fname, strlen(fname)) != 0 || strstr(m, "oom plugin") == NULL) {
            fprintf(stderr, "%s: the message does not name the function and the plugin's reason: %s\n",
                    fname, m);
            CHECK(0);
        }
        CHECK_EQ(refused, refused_before + refusals);
        CHECK_EQ(made - made_before, n); /* it stopped at the refused one */
        CHECK_EQ(live, live_before);     /* and freed what it had */
        CHECK_EQ(after.num_failed, before.num_failed + (uint64_t)refusals);
        CHECK_EQ(after.allocated_bytes, before.allocated_bytes);
        check_fixtures_intact();
    }
    fprintf(stderr, "%s still fails after 64 allocations\n", fname);
    CHECK(0);
    return -1;
}

/* ---- the operations ------------------------------------------------------- */
/* Each makes its objects, checks them, releases them, and returns the first
   failing status (its out-pointers are checked to be untouched then). */

#define SENTINEL ((void *)0x5a5a5a5a)

static TsrStatus op_allocate(void) {
    TsrDataPtr p;
    memset(&p, 0x5a, sizeof p);
    TsrDataPtr copy = p;
    TsrStatus s = tsr_allocator_allocate(plugin, 100, &p);
    if (s != TSR_OK) {
        CHECK(memcmp(&p, &copy, sizeof p) == 0);
        return s;
    }
    tsr_data_ptr_free(&p);
    return s;
}

static TsrStatus op_raw_allocate(void) {
    void *p = SENTINEL;
    TsrStatus s = tsr_allocator_raw_allocate(plugin, 100, &p);
    if (s != TSR_OK) {
        CHECK(p == SENTINEL);
        return s;
    }
    CHECK_OK(tsr_allocator_raw_deallocate(plugin, p));
    return s;
}

static TsrStatus op_storage_new(void) {
    TsrStorage *s2 = SENTINEL;
    TsrStatus s = tsr_storage_new(100, cpu(), true, &s2);
    if (s != TSR_OK) {
        CHECK(s2 == SENTINEL);
        return s;
    }
    TsrAllocator *a = tsr_storage_allocator(s2);
    CHECK(a == plugin); /* the registry gave it the plugin */
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_OK(tsr_storage_decref(s2));
    return s;
}

static TsrStatus op_storage_new_with_allocator(void) {
    TsrStorage *s2 = SENTINEL;
    TsrStatus s = tsr_storage_new_with_allocator(100, plugin, false, &s2);
    if (s != TSR_OK) {
        CHECK(s2 == SENTINEL);
        return s;
    }
    CHECK_OK(tsr_storage_decref(s2));
    return s;
}

static TsrStatus op_storage_resize(void) {
    TsrStatus s = tsr_storage_resize(s64, 200);
    if (s != TSR_OK) {
        /* the storage keeps its size and bytes (check_fixtures_intact) and
           still works */
        CHECK_OK(tsr_storage_fill(s64, 0));
        unsigned char *b = tsr_storage_data(s64);
        for (int i = 0; i < 64; i++) b[i] = (unsigned char)i;
        return s;
    }
    const unsigned char *b = tsr_storage_data(s64);
    for (int i = 0; i < 64; i++) CHECK_EQ(b[i], i); /* the first 64 bytes kept */
    UNCOUNTED(CHECK_OK(tsr_storage_resize(s64, 64)));
    return s;
}

static TsrStatus op_storage_clone(void) {
    TsrStorage *c = SENTINEL;
    TsrStatus s = tsr_storage_clone(s64, &c);
    if (s != TSR_OK) {
        CHECK(c == SENTINEL);
        return s;
    }
    CHECK(memcmp(tsr_storage_data(c), tsr_storage_data(s64), 64) == 0);
    CHECK_OK(tsr_storage_decref(c));
    return s;
}

/* A tensor-returning call: out untouched on failure, released on success. */
static TsrStatus tensor_result(TsrStatus s, TsrTensor *t) {
    if (s != TSR_OK) {
        CHECK(t == SENTINEL);
        return s;
    }
    CHECK(t != NULL && t != SENTINEL);
    CHECK_OK(tsr_tensor_decref(t));
    return s;
}

static const int64_t SIZES[4] = {2, 3, 4, 5};

static TsrStatus op_tensor_empty(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_tensor_empty(2, SIZES, TSR_FLOAT, cpu(), &t);
    return tensor_result(s, t);
}

static TsrStatus op_tensor_empty_format(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_tensor_empty_format(4, SIZES, TSR_FLOAT, cpu(), TSR_CHANNELS_LAST, &t);
    return tensor_result(s, t);
}

static TsrStatus op_tensor_empty_strided(void) {
    static const int64_t strides[2] = {1, 2};
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_tensor_empty_strided(2, SIZES, strides, TSR_DOUBLE, cpu(), &t);
    return tensor_result(s, t);
}

static TsrStatus op_tensor_empty_like(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_tensor_empty_like(mat_t, TSR_PRESERVE, &t);
    return tensor_result(s, t);
}

/* A copy of mat_t: its elements must be mat's transposed. */
static TsrStatus copied(TsrStatus s, TsrTensor *t) {
    if (s == TSR_OK) {
        const float *f = tsr_tensor_data(t);
        CHECK(tsr_tensor_is_contiguous(t, TSR_CONTIGUOUS));
        CHECK(f[1] == 6.0f); /* element [0, 1] of the transpose = mat[1, 0] */
    }
    return tensor_result(s, t);
}

static TsrStatus op_tensor_reshape(void) {
    static const int64_t flat[1] = {24};
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_tensor_reshape(mat_t, 1, flat, &t);
    return copied(s, t);
}

static TsrStatus op_tensor_flatten(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_tensor_flatten(mat_t, 0, -1, &t);
    return copied(s, t);
}

static TsrStatus op_tensor_contiguous(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_tensor_contiguous(mat_t, TSR_CONTIGUOUS, &t);
    return copied(s, t);
}

static TsrStatus op_tensor_clone(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_tensor_clone(mat, &t);
    return tensor_result(s, t);
}

static TsrStatus op_tensor_copy_cast(void) {
    /* float [4, 6] into int32 [4, 6] (and back through a broadcast) */
    TsrStatus s = tsr_tensor_copy(out_i, mat);
    if (s == TSR_OK) {
        const int32_t *v = tsr_tensor_data(out_i);
        CHECK_EQ(v[23], 23);
    }
    return s;
}

/* An iterator result: out untouched on failure; on success the loop runs
   (writing cast temporaries back) and the iterator is freed. */
static TsrStatus iter_result(TsrStatus s, TsrIter *it) {
    if (s != TSR_OK) {
        CHECK(it == SENTINEL);
        return s;
    }
    CHECK_EQ(tsr_iter_numel(it), 24);
    tsr_iter_free(it);
    return s;
}

static TsrStatus op_iter_build(void) {
    /* An allocated output, a float and a double input promoted to double,
       and an int32 output written through a cast temporary. */
    TsrIterConfig *c = NULL;
    CHECK_OK(tsr_iter_config_new(&c)); /* config state is not plugin memory */
    CHECK_OK(tsr_iter_config_add_output(c, NULL));
    CHECK_OK(tsr_iter_config_add_input(c, mat));
    CHECK_OK(tsr_iter_config_add_input(c, vec_d));
    CHECK_OK(tsr_iter_config_promote_inputs_to_common_dtype(c, true));
    TsrIter *it = SENTINEL;
    TsrStatus s = tsr_iter_build(c, &it);
    s = iter_result(s, it); /* (it read after the call) */
    if (s != TSR_OK) {
        /* the config survives its failed build: it builds again now */
        TsrIter *again = NULL;
        UNCOUNTED(CHECK_OK(tsr_iter_build(c, &again)); tsr_iter_free(again));
    }
    tsr_iter_config_free(c);
    return s;
}

static TsrStatus op_iter_cast_output(void) {
    TsrIterConfig *c = NULL;
    CHECK_OK(tsr_iter_config_new(&c));
    CHECK_OK(tsr_iter_config_add_output(c, out_i));
    CHECK_OK(tsr_iter_config_add_input(c, mat));
    CHECK_OK(tsr_iter_config_add_input(c, vec_d));
    CHECK_OK(tsr_iter_config_promote_inputs_to_common_dtype(c, true));
    CHECK_OK(tsr_iter_config_cast_common_dtype_to_outputs(c, true));
    TsrIter *it = SENTINEL;
    TsrStatus s = tsr_iter_build(c, &it);
    s = iter_result(s, it);
    tsr_iter_config_free(c);
    return s;
}

static TsrStatus op_iter_add_input_scalar(void) {
    TsrIterConfig *c = NULL;
    CHECK_OK(tsr_iter_config_new(&c));
    TsrStatus s = tsr_iter_config_add_input_scalar(c, tsr_scalar_float(2.5));
    if (s != TSR_OK) {
        /* the config is unchanged: it takes the input and builds later */
        TsrIter *it = NULL;
        UNCOUNTED(CHECK_OK(tsr_iter_config_add_input_scalar(c, tsr_scalar_float(2.5)));
                  CHECK_OK(tsr_iter_build(c, &it)); CHECK_EQ(tsr_iter_ninputs(it), 1);
                  tsr_iter_free(it));
    }
    tsr_iter_config_free(c);
    return s;
}

static TsrStatus op_iter_overlap_copy(void) {
    /* out = mat[:, 1:] and in = mat[:, :5] overlap partially: the input is
       copied to a temporary first. */
    TsrTensor *a = NULL, *b = NULL;
    CHECK_OK(tsr_tensor_narrow(mat, 1, 1, 5, &a));
    CHECK_OK(tsr_tensor_narrow(mat, 1, 0, 5, &b));
    TsrIterConfig *c = NULL;
    CHECK_OK(tsr_iter_config_new(&c));
    CHECK_OK(tsr_iter_config_add_output(c, a));
    CHECK_OK(tsr_iter_config_add_input(c, b));
    CHECK_OK(tsr_iter_config_resolve_overlap_by_copy(c, true));
    TsrIter *it = SENTINEL;
    TsrStatus s = tsr_iter_build(c, &it);
    if (s == TSR_OK) {
        CHECK_EQ(tsr_iter_numel(it), 20);
        tsr_iter_free(it);
    } else {
        CHECK(it == SENTINEL);
    }
    tsr_iter_config_free(c);
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(b));
    return s;
}

static TsrStatus op_iter_binary_op(void) {
    TsrIter *it = SENTINEL;
    TsrStatus s = tsr_iter_binary_op(NULL, mat, vec_d, &it);
    return iter_result(s, it);
}

static TsrStatus op_iter_unary_float_op(void) {
    TsrIter *it = SENTINEL;
    TsrStatus s = tsr_iter_unary_float_op(NULL, out_i, &it); /* int32 in: float compute */
    if (s != TSR_OK) {
        CHECK(it == SENTINEL);
        return s;
    }
    tsr_iter_free(it);
    return s;
}

static TsrStatus op_caching_allocate(void) {
    /* A new segment from the plugin; the caching layer frees its unused
       cached segments and retries once before giving up. */
    TsrDataPtr p;
    memset(&p, 0x5a, sizeof p);
    TsrStatus s = tsr_allocator_allocate(caching, 3 << 20, &p);
    if (s != TSR_OK) return s;
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_caching_allocator_empty_cache(caching));
    return s;
}

static TsrStatus op_caching_new_storage(void) {
    TsrStorage *s2 = SENTINEL;
    TsrStatus s = tsr_storage_new_with_allocator(4096, caching, true, &s2);
    if (s != TSR_OK) {
        CHECK(s2 == SENTINEL);
        return s;
    }
    CHECK_OK(tsr_storage_decref(s2));
    CHECK_OK(tsr_caching_allocator_empty_cache(caching));
    return s;
}

#if defined(TSR_ROUNDING_TRUNC) /* the built-in kernels are declared */

static TsrStatus kernel_result(TsrStatus s, TsrTensor *t) {
    return tensor_result(s, t);
}

static TsrStatus op_add(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_add(NULL, mat, vec_d, tsr_scalar_int(2), &t); /* float + double */
    return kernel_result(s, t);
}

static TsrStatus op_div(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_div(NULL, out_i, out_i, &t); /* int32 / int32: computed in Float */
    return kernel_result(s, t);
}

static TsrStatus op_neg(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_neg(NULL, mat_t, &t);
    return kernel_result(s, t);
}

static TsrStatus op_sum(void) {
    static const int64_t dims[1] = {1};
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_sum(mat, 1, dims, false, &t);
    if (s == TSR_OK) CHECK(((const float *)tsr_tensor_data(t))[0] == 15.0f); /* 0+1+...+5 */
    return kernel_result(s, t);
}

static TsrStatus op_amax(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_amax(mat_t, 0, NULL, true, &t);
    if (s == TSR_OK) CHECK(((const float *)tsr_tensor_data(t))[0] == 23.0f);
    return kernel_result(s, t);
}

static TsrStatus op_scalar_tensor(void) {
    TsrTensor *t = SENTINEL;
    TsrStatus s = tsr_scalar_tensor(tsr_scalar_float(2.5), &t);
    return kernel_result(s, t);
}

#endif

/* ---- tests ----------------------------------------------------------------- */

static void setup(void) {
    CHECK_OK(tsr_register_allocator(TSR_CPU, &OOM_VTABLE, NULL, 255));
    plugin = tsr_get_allocator(TSR_CPU);
    CHECK(plugin != NULL);
    CHECK(strcmp(tsr_allocator_name(plugin), "oom") == 0);
    CHECK_OK(tsr_caching_allocator_new(plugin, NULL, &caching));
    CHECK_OK(tsr_storage_new(64, cpu(), true, &s64));
    unsigned char *b = tsr_storage_data(s64);
    for (int i = 0; i < 64; i++) b[i] = (unsigned char)i;
    static const int64_t m[2] = {4, 6};
    CHECK_OK(tsr_tensor_empty(2, m, TSR_FLOAT, cpu(), &mat));
    float *f = tsr_tensor_data(mat);
    for (int i = 0; i < 24; i++) f[i] = (float)i;
    CHECK_OK(tsr_tensor_transpose(mat, 0, 1, &mat_t));
    static const int64_t v[1] = {6};
    CHECK_OK(tsr_tensor_empty(1, v, TSR_DOUBLE, cpu(), &vec_d));
    CHECK_OK(tsr_tensor_fill(vec_d, tsr_scalar_float(0.5)));
    CHECK_OK(tsr_tensor_empty(2, m, TSR_INT, cpu(), &out_i));
    check_fixtures_intact();
}

static void test_every_allocation_failure(void) {
    setup();
    long allocs = 0;
    allocs += drive("tsr_allocator_allocate", "a plugin", op_allocate, 1, 1);
    allocs += drive("tsr_allocator_raw_allocate", "a plugin", op_raw_allocate, 1, 1);
    allocs += drive("tsr_storage_new", "through the registry", op_storage_new, 1, 1);
    allocs += drive("tsr_storage_new_with_allocator", "a plugin", op_storage_new_with_allocator, 1, 1);
    allocs += drive("tsr_storage_resize", "64 -> 200 bytes", op_storage_resize, 1, 1);
    allocs += drive("tsr_storage_clone", "64 bytes", op_storage_clone, 1, 1);
    allocs += drive("tsr_tensor_empty", "float [2, 3]", op_tensor_empty, 1, 1);
    allocs += drive("tsr_tensor_empty_format", "channels-last [2, 3, 4, 5]", op_tensor_empty_format, 1, 1);
    allocs += drive("tsr_tensor_empty_strided", "double, strides {1, 2}", op_tensor_empty_strided, 1, 1);
    allocs += drive("tsr_tensor_empty_like", "of a transposed tensor", op_tensor_empty_like, 1, 1);
    allocs += drive("tsr_tensor_reshape", "a copy (transposed input)", op_tensor_reshape, 1, 1);
    allocs += drive("tsr_tensor_flatten", "a copy (transposed input)", op_tensor_flatten, 1, 1);
    allocs += drive("tsr_tensor_contiguous", "a copy (transposed input)", op_tensor_contiguous, 1, 1);
    allocs += drive("tsr_tensor_clone", "float [4, 6]", op_tensor_clone, 1, 1);
    allocs += drive("tsr_tensor_copy", "float into int32", op_tensor_copy_cast, 0, 1);
    allocs += drive("tsr_iter_build", "allocated output, promoted input", op_iter_build, 2, 1);
    allocs += drive("tsr_iter_build", "int32 output, cast temporaries", op_iter_cast_output, 2, 1);
    allocs += drive("tsr_iter_config_add_input_scalar", "a wrapped number", op_iter_add_input_scalar, 1, 1);
    allocs += drive("tsr_iter_build", "resolve_overlap_by_copy", op_iter_overlap_copy, 1, 1);
    allocs += drive("tsr_iter_binary_op", "float + double", op_iter_binary_op, 2, 1);
    allocs += drive("tsr_iter_unary_float_op", "int32 input", op_iter_unary_float_op, 2, 1);
    allocs += drive("tsr_allocator_allocate", "caching: 3 MiB, retried", op_caching_allocate, 1, 2);
    allocs += drive("tsr_storage_new_with_allocator", "caching: a storage, retried", op_caching_new_storage, 1, 2);
#if defined(TSR_ROUNDING_TRUNC)
    allocs += drive("tsr_add", "float + double, allocated out", op_add, 1, 1);
    allocs += drive("tsr_div", "int32 / int32, in Float", op_div, 1, 1);
    allocs += drive("tsr_neg", "a transposed input", op_neg, 1, 1);
    allocs += drive("tsr_sum", "over dim 1", op_sum, 1, 1);
    allocs += drive("tsr_amax", "every dim, keepdim", op_amax, 1, 1);
    allocs += drive("tsr_scalar_tensor", "a wrapped number", op_scalar_tensor, 1, 1);
#endif
    printf("  %d failure paths, %ld allocations on the success paths\n", total_failures, allocs);

    /* The caching layer counted the failures it could not retry away. */
    TsrCachingStats cs;
    memset(&cs, 0, sizeof cs);
    cs.struct_size = sizeof cs;
    CHECK_OK(tsr_caching_allocator_stats(caching, &cs));
    CHECK_EQ(cs.all.ooms, 2);
    CHECK_EQ(cs.all.segments.current, 0);
    CHECK_EQ(cs.all.active_blocks.current, 0);
}

static void test_everything_released(void) {
    CHECK_OK(tsr_tensor_decref(mat_t));
    CHECK_OK(tsr_tensor_decref(mat));
    CHECK_OK(tsr_tensor_decref(vec_d));
    CHECK_OK(tsr_tensor_decref(out_i));
    CHECK_OK(tsr_storage_decref(s64));
    CHECK_OK(tsr_allocator_decref(caching));
    CHECK_EQ(live, 0);
    TsrAllocatorStats st;
    CHECK_OK(tsr_allocator_stats(plugin, &st));
    CHECK_EQ(st.allocated_bytes, 0);
    CHECK_EQ(st.num_allocs, st.num_frees);
    CHECK_EQ(st.num_failed, refused);
    /* Unregister: the CPU allocator back at the same priority (last wins);
       the plugin's release runs when its last reference goes. */
    TsrAllocator *cpu_a = tsr_cpu_allocator();
    CHECK_OK(tsr_set_allocator(TSR_CPU, cpu_a, 255));
    CHECK_OK(tsr_allocator_decref(cpu_a));
    CHECK_EQ(released, 0);
    CHECK_OK(tsr_allocator_decref(plugin));
    CHECK_EQ(released, 1);
}

/* The message of a failed call stays readable through later successful
   calls that go through the plugin (also when the caching layer's retry
   succeeds after the plugin refused): it lives until the next failure. */
static void test_message_outlives_successful_plugin_calls(void) {
    TsrStorage *s = NULL;
    TsrDevice bad = {99, 0};
    CHECK_STATUS(tsr_storage_new(16, bad, false, &s), TSR_ERR_INVALID_ARGUMENT);
    const char *msg = tsr_last_error_message();
    char copy[256];
    snprintf(copy, sizeof copy, "%s", msg);
    CHECK_OK(tsr_storage_new(100, cpu(), false, &s)); /* through the plugin */
    CHECK_OK(tsr_storage_decref(s));
    TsrDataPtr big;
    CHECK_OK(tsr_allocator_allocate(caching, 3 << 20, &big));
    tsr_data_ptr_free(&big); /* one cached, unused segment */
    refuse_next = 1; /* the next segment: refused, retried after freeing */
    TsrDataPtr p;
    long before = refused;
    CHECK_OK(tsr_allocator_allocate(caching, 30 << 20, &p));
    CHECK_EQ(refused, before + 1);
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_caching_allocator_empty_cache(caching));
    CHECK(strcmp(msg, copy) == 0); /* the same pointer, still valid (ASan, valgrind) */
    CHECK(tsr_last_error_message() == msg);
}

int main(void) {
    RUN(test_every_allocation_failure);
    RUN(test_message_outlives_successful_plugin_calls);
    RUN(test_everything_released);
    printf("all oom tests passed (%d checks)\n", tsr_test_checks);
    return 0;
}
