/* Read-only storages and tensors: every exported function that writes
 * through tessera refuses them with TSR_ERR_READ_ONLY naming itself, and
 * the bytes stay as they were. The table has one row per writing
 * function, and per function that would hand out a writable alias of the
 * memory (tsr_storage_share_fd / share_name); it runs on four read-only
 * fixtures: a TSR_FILE_READ_ONLY file mapping, a heap storage made
 * read-only, a storage moved into shared memory and then made read-only,
 * and a DLPack import of a tensor flagged DLPACK_FLAG_BITMASK_READ_ONLY. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "dlpack_fixture/dlpack/dlpack.h"
#include "tsr_test.h"

#define N 6
static const int64_t SHAPE[2] = {2, 3};

/* The read-only tensor under test, a writable one of the same shape, and
 * a writable storage of the same size. */
static TsrTensor *ro, *w;
static TsrStorage *ro_s, *w_s;

static int ext_frees = 0;
static void ext_free(void *ctx) {
    ext_frees++;
    free(ctx);
}

static TsrDataPtr ext_ptr(size_t n) {
    TsrDataPtr dp;
    TsrDevice cpu = {TSR_CPU, -1};
    dp.data = malloc(n);
    dp.ctx = dp.data;
    dp.deleter = ext_free;
    dp.device = cpu;
    return dp;
}

static TsrStatus row_tensor_fill(void) { return tsr_tensor_fill(ro, tsr_scalar_float(9)); }
static TsrStatus row_tensor_copy(void) { return tsr_tensor_copy(ro, w); }
static TsrStatus row_add(void) {
    TsrTensor *r = NULL;
    return tsr_add(ro, w, w, tsr_scalar_int(1), &r);
}
static TsrStatus row_sub(void) {
    TsrTensor *r = NULL;
    return tsr_sub(ro, w, w, tsr_scalar_int(1), &r);
}
static TsrStatus row_mul(void) {
    TsrTensor *r = NULL;
    return tsr_mul(ro, w, w, &r);
}
static TsrStatus row_div(void) {
    TsrTensor *r = NULL;
    return tsr_div(ro, w, w, &r);
}
static TsrStatus row_div_rounding(void) {
    TsrTensor *r = NULL;
    return tsr_div_rounding(ro, w, w, TSR_ROUNDING_FLOOR, &r);
}
static TsrStatus row_neg(void) {
    TsrTensor *r = NULL;
    return tsr_neg(ro, w, &r);
}
static TsrStatus row_iter_build(void) {
    TsrIterConfig *c = NULL;
    TsrIter *it = NULL;
    TsrStatus s;
    CHECK_OK(tsr_iter_config_new(&c));
    CHECK_OK(tsr_iter_config_add_output(c, ro));
    CHECK_OK(tsr_iter_config_add_input(c, w));
    s = tsr_iter_build(c, &it);
    tsr_iter_config_free(c);
    CHECK(it == NULL);
    return s;
}
static TsrStatus row_iter_binary_op(void) {
    TsrIter *it = NULL;
    return tsr_iter_binary_op(ro, w, w, &it);
}
static TsrStatus row_iter_binary_float_op(void) {
    TsrIter *it = NULL;
    return tsr_iter_binary_float_op(ro, w, w, &it);
}
static TsrStatus row_iter_comparison_op(void) {
    TsrIter *it = NULL;
    return tsr_iter_comparison_op(ro, w, w, &it);
}
static TsrStatus row_iter_unary_op(void) {
    TsrIter *it = NULL;
    return tsr_iter_unary_op(ro, w, &it);
}
static TsrStatus row_iter_unary_float_op(void) {
    TsrIter *it = NULL;
    return tsr_iter_unary_float_op(ro, w, &it);
}
static TsrStatus row_iter_nullary_op(void) {
    TsrIter *it = NULL;
    return tsr_iter_nullary_op(ro, &it);
}
static TsrStatus row_iter_reduce_op(void) {
    TsrIter *it = NULL;
    return tsr_iter_reduce_op(ro, w, &it);
}
static TsrStatus row_storage_fill(void) { return tsr_storage_fill(ro_s, 0); }
static TsrStatus row_storage_copy(void) { return tsr_storage_copy(ro_s, w_s); }
static TsrStatus row_storage_resize(void) { return tsr_storage_resize(ro_s, 4 * N * 2); }
static TsrStatus row_storage_share_external(void) {
    TsrDataPtr dp = ext_ptr(4 * N);
    TsrStatus s = tsr_storage_share_external(ro_s, &dp, 4 * N);
    CHECK(dp.ctx != NULL); /* untouched on error: still ours */
    tsr_data_ptr_free(&dp);
    return s;
}
static TsrStatus row_storage_set_data_ptr(void) {
    TsrDataPtr dp = ext_ptr(4 * N), old = {0};
    TsrStatus s = tsr_storage_set_data_ptr(ro_s, &dp, 4 * N, &old);
    CHECK(dp.ctx != NULL && old.ctx == NULL);
    tsr_data_ptr_free(&dp);
    return s;
}
static TsrStatus row_storage_share_fd(void) {
    int fd = -1;
    TsrStatus s = tsr_storage_share_fd(ro_s, &fd);
    CHECK_EQ(fd, -1);
    return s;
}
static TsrStatus row_storage_share_name(void) {
    char name[64] = "";
    TsrStatus s = tsr_storage_share_name(ro_s, name, sizeof name);
    CHECK(name[0] == '\0');
    return s;
}
static TsrStatus row_tensor_to_dlpack_legacy(void) {
    DLManagedTensor *m = NULL;
    TsrStatus s = tsr_tensor_to_dlpack_legacy(ro, &m);
    CHECK(m == NULL);
    return s;
}

typedef struct {
    const char *function;
    TsrStatus (*call)(void);
} Row;

/* One row per exported function that writes into a tensor or storage. */
static const Row ROWS[] = {
    {"tsr_tensor_fill", row_tensor_fill},
    {"tsr_tensor_copy", row_tensor_copy},
    {"tsr_add", row_add},
    {"tsr_sub", row_sub},
    {"tsr_mul", row_mul},
    {"tsr_div", row_div},
    {"tsr_div_rounding", row_div_rounding},
    {"tsr_neg", row_neg},
    {"tsr_iter_build", row_iter_build},
    {"tsr_iter_binary_op", row_iter_binary_op},
    {"tsr_iter_binary_float_op", row_iter_binary_float_op},
    {"tsr_iter_comparison_op", row_iter_comparison_op},
    {"tsr_iter_unary_op", row_iter_unary_op},
    {"tsr_iter_unary_float_op", row_iter_unary_float_op},
    {"tsr_iter_nullary_op", row_iter_nullary_op},
    {"tsr_iter_reduce_op", row_iter_reduce_op},
    {"tsr_storage_fill", row_storage_fill},
    {"tsr_storage_copy", row_storage_copy},
    {"tsr_storage_resize", row_storage_resize},
    {"tsr_storage_share_external", row_storage_share_external},
    {"tsr_storage_set_data_ptr", row_storage_set_data_ptr},
    {"tsr_storage_share_fd", row_storage_share_fd},
    {"tsr_storage_share_name", row_storage_share_name},
    {"tsr_tensor_to_dlpack_legacy", row_tensor_to_dlpack_legacy},
};

/* Runs every row against `ro` (read-only, holding 1..6) and checks each
 * refusal and that nothing changed. */
static void run_table(const char *fixture) {
    size_t i;
    const float *data;
    ro_s = tsr_tensor_storage(ro);
    CHECK(ro_s != NULL);
    CHECK(tsr_tensor_is_read_only(ro));
    CHECK(tsr_storage_is_read_only(ro_s));
    CHECK(!tsr_tensor_is_read_only(w));
    CHECK_OK(tsr_tensor_fill(w, tsr_scalar_float(2)));
    for (i = 0; i < sizeof ROWS / sizeof ROWS[0]; i++) {
        TsrStatus s = ROWS[i].call();
        const char *msg = tsr_last_error_message();
        int j;
        if (s != TSR_ERR_READ_ONLY || strstr(msg, ROWS[i].function) != msg ||
            strstr(msg, "read-only") == NULL) {
            fprintf(stderr, "%s: %s returned %s: %s\n", fixture, ROWS[i].function,
                    tsr_status_name(s), msg);
            CHECK(!"refused with TSR_ERR_READ_ONLY naming the function");
        }
        data = (const float *)tsr_tensor_data(ro);
        for (j = 0; j < N; j++) CHECK(data[j] == (float)(j + 1));
        CHECK_EQ(tsr_storage_nbytes(ro_s), 4 * N);
    }
    /* Reading works: a copy out, a kernel with a writable output. */
    CHECK_OK(tsr_tensor_copy(w, ro));
    CHECK(((const float *)tsr_tensor_data(w))[5] == 6.0f);
    {
        TsrTensor *r = NULL;
        CHECK_OK(tsr_add(NULL, ro, ro, tsr_scalar_int(1), &r));
        CHECK(!tsr_tensor_is_read_only(r));
        CHECK(((const float *)tsr_tensor_data(r))[2] == 6.0f);
        CHECK_OK(tsr_tensor_decref(r));
    }
    printf("  %s: %d rows refused\n", fixture, (int)(sizeof ROWS / sizeof ROWS[0]));
    CHECK_OK(tsr_storage_decref(ro_s));
}

static void make_writable(void) {
    TsrDevice cpu = {TSR_CPU, -1};
    CHECK_OK(tsr_tensor_empty(2, SHAPE, TSR_FLOAT, cpu, &w));
    w_s = tsr_tensor_storage(w);
}

static void release(void) {
    CHECK_OK(tsr_tensor_decref(ro));
    CHECK_OK(tsr_tensor_decref(w));
    CHECK_OK(tsr_storage_decref(w_s));
}

static void test_file_read_only_table(void) {
    char path[64];
    float vals[N] = {1, 2, 3, 4, 5, 6};
    int fd;
    TsrStorage *s = NULL;
    snprintf(path, sizeof path, "/tmp/tessera-ro-%ld.bin", (long)getpid());
    fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, vals, sizeof vals) == (ssize_t)sizeof vals);
    close(fd);
    CHECK_OK(tsr_storage_from_file(path, TSR_FILE_READ_ONLY, 0, &s));
    CHECK_OK(tsr_tensor_from_storage(s, 0, 2, SHAPE, NULL, TSR_FLOAT, &ro));
    CHECK_OK(tsr_storage_decref(s));
    make_writable();
    run_table("TSR_FILE_READ_ONLY file");
    release();
    CHECK(unlink(path) == 0);
}

static void fill_ordinal(TsrTensor *t) {
    float *d = (float *)tsr_tensor_data(t);
    int j;
    for (j = 0; j < N; j++) d[j] = (float)(j + 1);
}

static void test_made_read_only_table(void) {
    TsrDevice cpu = {TSR_CPU, -1};
    TsrStorage *s;
    CHECK_OK(tsr_tensor_empty(2, SHAPE, TSR_FLOAT, cpu, &ro));
    fill_ordinal(ro);
    s = tsr_tensor_storage(ro);
    CHECK(!tsr_storage_is_read_only(s));
    CHECK_OK(tsr_storage_make_read_only(s));
    CHECK_OK(tsr_storage_make_read_only(s)); /* idempotent */
    CHECK_OK(tsr_storage_decref(s));
    make_writable();
    run_table("tsr_storage_make_read_only");
    release();
}

/* Shared first, then made read-only: the descriptor and name rows must
 * refuse too (issue 36), not hand out a writable alias. */
static void test_shared_then_read_only_table(void) {
    TsrDevice cpu = {TSR_CPU, -1};
    TsrStorage *s;
    CHECK_OK(tsr_tensor_empty(2, SHAPE, TSR_FLOAT, cpu, &ro));
    fill_ordinal(ro);
    s = tsr_tensor_storage(ro);
    CHECK_OK(tsr_storage_share_memory(s));
    CHECK_OK(tsr_storage_make_read_only(s));
    CHECK_OK(tsr_storage_decref(s));
    make_writable();
    run_table("tsr_storage_share_memory, then tsr_storage_make_read_only");
    release();
}

static void test_dlpack_read_only_round_trip(void) {
    TsrDevice cpu = {TSR_CPU, -1};
    TsrTensor *src = NULL;
    TsrStorage *s;
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tsr_tensor_empty(2, SHAPE, TSR_FLOAT, cpu, &src));
    fill_ordinal(src);
    /* a writable tensor exports without the flag */
    CHECK_OK(tsr_tensor_to_dlpack(src, &m));
    CHECK_EQ(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0);
    m->deleter(m);
    s = tsr_tensor_storage(src);
    CHECK_OK(tsr_storage_make_read_only(s));
    CHECK_OK(tsr_storage_decref(s));
    /* a read-only one exports with it, and imports read-only */
    CHECK_OK(tsr_tensor_to_dlpack(src, &m));
    CHECK_EQ(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
    CHECK_OK(tsr_tensor_decref(src));
    CHECK_OK(tsr_tensor_from_dlpack(m, &ro));
    make_writable();
    run_table("DLPack import flagged READ_ONLY");
    release();
}

static void test_null_handles(void) {
    CHECK(!tsr_storage_is_read_only(NULL));
    CHECK_MSG_CONTAINS("tsr_storage_is_read_only");
    CHECK(!tsr_tensor_is_read_only(NULL));
    CHECK_MSG_CONTAINS("tsr_tensor_is_read_only");
    CHECK_STATUS(tsr_storage_make_read_only(NULL), TSR_ERR_NULL_POINTER);
}

int main(void) {
    RUN(test_file_read_only_table);
    RUN(test_made_read_only_table);
    RUN(test_shared_then_read_only_table);
    RUN(test_dlpack_read_only_round_trip);
    RUN(test_null_handles);
    CHECK_EQ(ext_frees, 2 * 4); /* each fixture freed both refused pointers once */
    printf("all read-only tests passed\n");
    return 0;
}
