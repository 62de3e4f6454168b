/* tessera's instruction-count cases (.ci/icount.sh, docs/PERFORMANCE.md,
 * "Instruction counts"): the hot paths through libtessera.so's C API,
 * counted by valgrind's callgrind, which counts instructions
 * deterministically where a clock on a shared machine cannot resolve a
 * few percent.
 *
 * Every case runs its operation WARMUP times uncounted (first touch, lazy
 * initialisation, the thread caches filling, the history ring filling),
 * then N times with callgrind collecting, and dumps its counts under its
 * name (callgrind client requests; without valgrind they do nothing and
 * the program is a quick smoke run of the cases). The first case,
 * "loop", is the empty operation: the driver's own cost per iteration,
 * which .ci/icount.sh subtracts from every other case.
 *
 * Before the cases it prints the CPU the program sees (valgrind
 * virtualises CPUID: on a host with AVX2 it shows one fixed CPU, so the
 * kernels' and glibc's run-time dispatch choose the same code on every
 * such host) and the kernel's clock source (memory history's time
 * stamps); .ci/icount.sh records and checks both.
 *
 *   cc -O2 -Iinclude benches/icount.c -Ltarget/dist -ltessera -o icount
 *   valgrind --tool=callgrind --collect-atstart=no ./icount
 */
#include <cpuid.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <valgrind/callgrind.h>

#include "tessera.h"

enum { WARMUP = 1000, N = 1000 };

typedef TsrStatus (*Op)(void *ctx);

static void fail(TsrStatus st, const char *what) {
    fprintf(stderr, "icount: %s failed: %s\n", what, tsr_last_error_message());
    (void)st;
    exit(1);
}

#define TRY(call)                               \
    do {                                        \
        TsrStatus st_ = (call);                 \
        if (st_ != TSR_OK) fail(st_, #call);    \
    } while (0)

/* The driver: the same loop for every case, the operation called through
 * a volatile pointer so that the compiler cannot specialise the loop for
 * one case (the "loop" case must cost what the others' loops cost). */
static void measure(const char *name, Op op, void *ctx) {
    Op volatile call = op;
    for (int i = 0; i < WARMUP; i++)
        if (call(ctx) != TSR_OK) fail(TSR_OK, name);
    CALLGRIND_ZERO_STATS;
    CALLGRIND_TOGGLE_COLLECT;
    int bad = 0;
    for (int i = 0; i < N; i++) bad |= call(ctx) != TSR_OK;
    CALLGRIND_TOGGLE_COLLECT;
    CALLGRIND_DUMP_STATS_AT(name);
    if (bad) fail(TSR_OK, name);
}

static const TsrDevice kCpu = {TSR_CPU, -1};

static TsrTensor *tensor(int ndim, const int64_t *sizes, const int64_t *strides, TsrDType dt) {
    TsrTensor *t = NULL;
    if (strides)
        TRY(tsr_tensor_empty_strided(ndim, sizes, strides, dt, kCpu, &t));
    else
        TRY(tsr_tensor_empty(ndim, sizes, dt, kCpu, &t));
    return t;
}

/* ------------------------------------------------------------ the cases */

static TsrStatus op_nothing(void *ctx) {
    (void)ctx;
    return TSR_OK;
}

struct alloc_ctx {
    TsrAllocator *allocator;
    size_t size;
};

static TsrStatus op_alloc_free(void *ctx) {
    struct alloc_ctx *x = ctx;
    TsrDataPtr p;
    TsrStatus st = tsr_allocator_allocate(x->allocator, x->size, &p);
    if (st == TSR_OK) tsr_data_ptr_free(&p);
    return st;
}

static TsrStatus op_incref_decref(void *ctx) {
    TsrStorage *s = ctx;
    TsrStatus st = tsr_storage_incref(s);
    if (st == TSR_OK) st = tsr_storage_decref(s);
    return st;
}

static TsrStatus op_weak_lock(void *ctx) {
    TsrStorage *locked = NULL;
    TsrStatus st = tsr_weak_storage_lock(ctx, &locked);
    if (st == TSR_OK) st = locked ? tsr_storage_decref(locked) : TSR_ERR_INVALID_ARGUMENT;
    return st;
}

static TsrStatus op_empty(void *ctx) {
    (void)ctx;
    int64_t size = 1000;
    TsrTensor *t = NULL;
    TsrStatus st = tsr_tensor_empty(1, &size, TSR_FLOAT, kCpu, &t);
    if (st == TSR_OK) st = tsr_tensor_decref(t);
    return st;
}

struct add_ctx {
    TsrTensor *a, *b, *out; /* out NULL: allocated */
};

static TsrStatus op_add(void *ctx) {
    struct add_ctx *x = ctx;
    TsrTensor *r = NULL;
    TsrStatus st = tsr_add(x->out, x->a, x->b, tsr_scalar_int(1), x->out ? NULL : &r);
    if (st == TSR_OK && r) st = tsr_tensor_decref(r);
    return st;
}

/* A sum over `ndims` dims of `a` into a new tensor (issue 56's kernels:
 * the AVX2 runs, four rows a pass over dim 1, four or eight rows added
 * into a row of accumulators over dim 0). */
struct sum_ctx {
    TsrTensor *a;
    int64_t ndims, dims[2];
};

static TsrStatus op_sum(void *ctx) {
    struct sum_ctx *x = ctx;
    TsrTensor *r = NULL;
    TsrStatus st = tsr_sum(x->a, x->ndims, x->dims, false, &r);
    if (st == TSR_OK) st = tsr_tensor_decref(r);
    return st;
}

/* Sums of a [64, 256] matrix (16 KiB of float: cached, so the count is
 * the kernels' and the reduction's set-up, not the memory's) over dim 1,
 * dim 0 and all dims in float, and over dims 1 and 0 in bfloat16 (the
 * widened kernels; half's differ from it in the widening instruction). */
static void sums(void) {
    static const struct {
        const char *name;
        TsrDType dt;
        int64_t ndims, dims[2];
    } cases[] = {
        {"sum_64x256f_dim1", TSR_FLOAT, 1, {1}},
        {"sum_64x256f_dim0", TSR_FLOAT, 1, {0}},
        {"sum_64x256f_all", TSR_FLOAT, 0, {0}},
        {"sum_64x256bf16_dim1", TSR_BFLOAT16, 1, {1}},
        {"sum_64x256bf16_dim0", TSR_BFLOAT16, 1, {0}},
    };
    int64_t sizes[] = {64, 256};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct sum_ctx x = {tensor(2, sizes, NULL, cases[i].dt), cases[i].ndims,
                            {cases[i].dims[0], cases[i].dims[1]}};
        TRY(tsr_tensor_fill(x.a, tsr_scalar_float(0.25)));
        measure(cases[i].name, op_sum, &x);
        TRY(tsr_tensor_decref(x.a));
    }
}

static void nop_loop(void *user, char **data, const int64_t *strides, int64_t n0, int64_t n1) {
    (void)user, (void)data, (void)strides, (void)n0, (void)n1;
}

static TsrStatus op_for_each(void *ctx) {
    return tsr_iter_for_each(ctx, nop_loop, NULL, 0);
}

/* ------------------------------------------------------ iterator builds */

/* The five cases of benches/bench.cpp's bench_iter_build, each built with
 * the preset (tsr_iter_binary_op) and with the generic builder once per
 * row of `builders`. */
struct iter_case {
    const char *name;
    int a_ndim;
    int64_t a_sizes[4], a_strides[4]; /* strides all 0: contiguous */
    int b_ndim;
    int64_t b_sizes[4];
    TsrDType a_dtype, b_dtype;
    bool given_out;
};

static const struct iter_case iter_cases[] = {
    {"given_1000f", 1, {1000}, {0}, 1, {1000}, TSR_FLOAT, TSR_FLOAT, true},
    {"alloc_1000f", 1, {1000}, {0}, 1, {1000}, TSR_FLOAT, TSR_FLOAT, false},
    {"broadcast", 3, {64, 1, 128}, {0}, 2, {32, 128}, TSR_FLOAT, TSR_FLOAT, false},
    /* channels-last strides of [8, 32, 32, 64] (N, C, H, W) */
    {"channels_last", 4, {8, 32, 32, 64}, {65536, 1, 2048, 32}, 1, {64}, TSR_FLOAT, TSR_FLOAT,
     false},
    {"promote_half_double", 1, {1000}, {0}, 1, {1000}, TSR_HALF, TSR_DOUBLE, false},
};

/* How the generic builder adds the operands: one row per flavour; each
 * row gives every case above one more count, iter_<case>_<flavour>. */
struct builder {
    const char *flavour;
    TsrStatus (*add_output)(TsrIterConfig *, TsrTensor *);
    TsrStatus (*add_input)(TsrIterConfig *, const TsrTensor *);
};

static const struct builder builders[] = {
    /* The config holds a reference per operand (tessera's contract). */
    {"owned", tsr_iter_config_add_output, tsr_iter_config_add_input},
    /* The config borrows (c10's add_borrowed_*): no count taken or dropped. */
    {"borrowed", tsr_iter_config_add_borrowed_output, tsr_iter_config_add_borrowed_const_input},
};

struct iter_ctx {
    const struct iter_case *c;
    const struct builder *b; /* NULL: the preset */
    TsrTensor *a, *bt, *out;
};

static TsrStatus op_iter_preset(void *ctx) {
    struct iter_ctx *x = ctx;
    TsrIter *it = NULL;
    TsrStatus st = tsr_iter_binary_op(x->out, x->a, x->bt, &it);
    tsr_iter_free(it);
    return st;
}

static TsrStatus op_iter_config(void *ctx) {
    struct iter_ctx *x = ctx;
    TsrIterConfig *cfg = NULL;
    TsrIter *it = NULL;
    TsrStatus st = tsr_iter_config_new(&cfg);
    if (st == TSR_OK) st = x->b->add_output(cfg, x->out);
    if (st == TSR_OK) st = x->b->add_input(cfg, x->a);
    if (st == TSR_OK) st = x->b->add_input(cfg, x->bt);
    if (st == TSR_OK && x->c->a_dtype != x->c->b_dtype)
        st = tsr_iter_config_promote_inputs_to_common_dtype(cfg, true);
    if (st == TSR_OK) st = tsr_iter_build(cfg, &it);
    tsr_iter_config_free(cfg);
    tsr_iter_free(it);
    return st;
}

static void iter_builds(void) {
    for (size_t i = 0; i < sizeof iter_cases / sizeof iter_cases[0]; i++) {
        const struct iter_case *c = &iter_cases[i];
        struct iter_ctx x = {c, NULL, NULL, NULL, NULL};
        x.a = tensor(c->a_ndim, c->a_sizes, c->a_strides[0] ? c->a_strides : NULL, c->a_dtype);
        x.bt = tensor(c->b_ndim, c->b_sizes, NULL, c->b_dtype);
        TRY(tsr_tensor_fill(x.a, tsr_scalar_float(1.0)));
        TRY(tsr_tensor_fill(x.bt, tsr_scalar_float(2.0)));
        if (c->given_out) x.out = tensor(c->a_ndim, c->a_sizes, NULL, c->a_dtype);
        char name[96];
        snprintf(name, sizeof name, "iter_%s_preset", c->name);
        measure(name, op_iter_preset, &x);
        for (size_t k = 0; k < sizeof builders / sizeof builders[0]; k++) {
            x.b = &builders[k];
            snprintf(name, sizeof name, "iter_%s_%s", c->name, x.b->flavour);
            measure(name, op_iter_config, &x);
        }
        if (x.out) TRY(tsr_tensor_decref(x.out));
        TRY(tsr_tensor_decref(x.a));
        TRY(tsr_tensor_decref(x.bt));
    }
}

/* ---------------------------------------------------------------- main */

/* The CPU as this process sees it: under valgrind, valgrind's virtual one. */
static void print_cpu(void) {
    unsigned r[12] = {0}, a, b, c, d;
    char brand[49] = "unknown";
    if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
        for (unsigned leaf = 0; leaf < 3; leaf++)
            __get_cpuid(0x80000002u + leaf, &r[4 * leaf], &r[4 * leaf + 1], &r[4 * leaf + 2],
                        &r[4 * leaf + 3]);
        memcpy(brand, r, 48);
        brand[48] = 0;
    }
    bool avx2 = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 5));
    bool avx512 = avx2 && (b & (1u << 16));
    char *s = brand;
    while (*s == ' ') s++;
    printf("cpu: %s; avx2 %s; avx512f %s\n", s, avx2 ? "yes" : "no", avx512 ? "yes" : "no");
}

/* The kernel's clock source: memory history stamps its events with rdtsc
 * where it is "tsc" and with clock_gettime elsewhere (a call of a few
 * hundred instructions), so the *_history cases depend on it. */
static void print_clock(void) {
    char line[64] = "unknown";
    FILE *f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) strcpy(line, "unknown");
        fclose(f);
    }
    line[strcspn(line, "\n")] = 0;
    printf("clocksource: %s\n", line);
}

int main(void) {
    print_cpu();
    print_clock();
    printf("n: %d\n", N);
    fflush(stdout);
    tsr_set_num_threads(1);

    measure("loop", op_nothing, NULL);

    TsrAllocator *cpu = tsr_get_allocator(TSR_CPU);
    struct alloc_ctx a64 = {cpu, 64}, a4k = {cpu, 4096};
    measure("alloc_free_64B", op_alloc_free, &a64);
    measure("alloc_free_4KiB", op_alloc_free, &a4k);

    TsrAllocator *caching = NULL;
    TRY(tsr_caching_allocator_new(cpu, NULL, &caching));
    struct alloc_ctx cached = {caching, 4096};
    measure("alloc_free_4KiB_cached", op_alloc_free, &cached);
    TRY(tsr_allocator_decref(caching));

    /* The ring (1024 events) fills during the warm-up (2 events per
     * operation), so every counted event also drops the oldest. */
    TsrHistoryOptions h = {sizeof h, 1024, false};
    TRY(tsr_memory_record_history(&h));
    measure("alloc_free_4KiB_history", op_alloc_free, &a4k);
    TRY(tsr_memory_record_history(NULL));

    TsrStorage *storage = NULL;
    TRY(tsr_storage_new(64, kCpu, false, &storage));
    TsrWeakStorage *weak = NULL;
    TRY(tsr_storage_downgrade(storage, &weak));
    measure("incref_decref", op_incref_decref, storage);
    measure("weak_lock", op_weak_lock, weak);
    TRY(tsr_weak_storage_decref(weak));
    TRY(tsr_storage_decref(storage));

    measure("empty_1000f", op_empty, NULL);

    iter_builds();

    int64_t n = 1000;
    struct add_ctx add = {tensor(1, &n, NULL, TSR_FLOAT), tensor(1, &n, NULL, TSR_FLOAT),
                          tensor(1, &n, NULL, TSR_FLOAT)};
    TRY(tsr_tensor_fill(add.a, tsr_scalar_float(1.0)));
    TRY(tsr_tensor_fill(add.b, tsr_scalar_float(2.0)));
    measure("add_out_1000f", op_add, &add);
    TsrTensor *out = add.out;
    add.out = NULL;
    measure("add_alloc_1000f", op_add, &add);

    TsrIter *it = NULL;
    TRY(tsr_iter_binary_op(out, add.a, add.b, &it));
    measure("for_each_nop_1000f", op_for_each, it);
    tsr_iter_free(it);

    sums();

    TRY(tsr_tensor_decref(out));
    TRY(tsr_tensor_decref(add.a));
    TRY(tsr_tensor_decref(add.b));
    TRY(tsr_allocator_decref(cpu));
    return 0;
}
