/* The iterator through the C API: config, build, queries, loops (also
 * the loop that is given the operand count), reductions, 32-bit pieces,
 * bad input, an output allocator, squashed static shapes and borrowed
 * operands. */
#include "tsr_test.h"

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

static TsrTensor *arange_f(int64_t ndim, const int64_t *sizes) {
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_empty(ndim, sizes, TSR_FLOAT, cpu(), &t));
    float *p = (float *)tsr_tensor_data(t);
    for (int64_t i = 0; i < tsr_tensor_numel(t); i++) p[i] = (float)i;
    return t;
}

/* out = a * b + c, float */
static void fma_loop(void *user, char **data, const int64_t *strides, int64_t n0, int64_t n1) {
    (void)user;
    for (int64_t j = 0; j < n1; j++) {
        for (int64_t i = 0; i < n0; i++) {
            float *o = (float *)(data[0] + i * strides[0] + j * strides[4]);
            const float *a = (const float *)(data[1] + i * strides[1] + j * strides[5]);
            const float *b = (const float *)(data[2] + i * strides[2] + j * strides[6]);
            const float *c = (const float *)(data[3] + i * strides[3] + j * strides[7]);
            *o = *a * *b + *c;
        }
    }
}

static void test_build_queries_and_loop(void) {
    int64_t sa[] = {3, 1}, sb[] = {4}, sc[] = {3, 4};
    TsrTensor *a = arange_f(2, sa), *b = arange_f(1, sb), *c = arange_f(2, sc);
    TsrIterConfig *cfg = NULL;
    CHECK_OK(tsr_iter_config_new(&cfg));
    CHECK_OK(tsr_iter_config_add_output(cfg, NULL));
    CHECK_OK(tsr_iter_config_add_input(cfg, a));
    CHECK_OK(tsr_iter_config_add_input(cfg, b));
    CHECK_OK(tsr_iter_config_add_input(cfg, c));
    TsrIter *it = NULL;
    CHECK_OK(tsr_iter_build(cfg, &it));
    tsr_iter_config_free(cfg);
    CHECK_EQ(tsr_iter_ntensors(it), 4);
    CHECK_EQ(tsr_iter_noutputs(it), 1);
    CHECK_EQ(tsr_iter_ninputs(it), 3);
    CHECK_EQ(tsr_iter_numel(it), 12);
    CHECK_EQ(tsr_iter_dtype(it, 0), TSR_FLOAT);
    CHECK_EQ(tsr_iter_common_dtype(it), TSR_FLOAT);
    CHECK(tsr_iter_strides(it, 9) == NULL);
    CHECK_MSG_CONTAINS("operand 9 is out of range");
    CHECK_OK(tsr_iter_for_each(it, fma_loop, NULL, 0));
    TsrTensor *out = tsr_iter_output(it, 0);
    CHECK_EQ(tsr_tensor_ndim(out), 2);
    const float *o = (const float *)tsr_tensor_data(out);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) CHECK(o[i * 4 + j] == (float)(i * j + i * 4 + j));
    CHECK_OK(tsr_tensor_decref(out));
    tsr_iter_free(it);
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_tensor_decref(c));
}

/* out = the sum of every input (float), for any operand count: the
 * TsrLoop2dN body is given it. */
static void sum_inputs_loop(void *user, int64_t ntensors, char **data, const int64_t *strides,
                            int64_t n0, int64_t n1) {
    int64_t *seen = (int64_t *)user;
    *seen = ntensors; /* every call sees the same count: no race on its value */
    for (int64_t j = 0; j < n1; j++) {
        for (int64_t i = 0; i < n0; i++) {
            float acc = 0.0f;
            for (int64_t arg = 1; arg < ntensors; arg++) {
                acc += *(const float *)(data[arg] + i * strides[arg] + j * strides[ntensors + arg]);
            }
            *(float *)(data[0] + i * strides[0] + j * strides[ntensors]) = acc;
        }
    }
}

/* tsr_iter_for_each_n / tsr_iter_serial_for_each_n: one body over
 * iterators of 3 and 5 operands, with a broadcast and a transposed input. */
static void test_loop_given_the_operand_count(void) {
    int64_t sa[] = {3, 4}, sb[] = {4}, sc[] = {4, 3};
    TsrTensor *a = arange_f(2, sa), *b = arange_f(1, sb), *c = arange_f(2, sc), *ct = NULL;
    CHECK_OK(tsr_tensor_transpose(c, 0, 1, &ct));
    for (int n = 2; n <= 4; n += 2) {
        TsrIterConfig *cfg = NULL;
        CHECK_OK(tsr_iter_config_new(&cfg));
        CHECK_OK(tsr_iter_config_add_output(cfg, NULL));
        CHECK_OK(tsr_iter_config_add_input(cfg, a));
        CHECK_OK(tsr_iter_config_add_input(cfg, b));
        if (n == 4) {
            CHECK_OK(tsr_iter_config_add_input(cfg, ct));
            CHECK_OK(tsr_iter_config_add_input(cfg, a));
        }
        TsrIter *it = NULL;
        CHECK_OK(tsr_iter_build(cfg, &it));
        tsr_iter_config_free(cfg);
        int64_t seen = 0;
        CHECK_OK(tsr_iter_for_each_n(it, sum_inputs_loop, &seen, 0));
        CHECK_EQ(seen, n + 1);
        TsrTensor *out = tsr_iter_output(it, 0);
        const float *o = (const float *)tsr_tensor_data(out);
        for (int i = 0; i < 3; i++) {
            for (int j = 0; j < 4; j++) {
                float want = (float)(i * 4 + j) + (float)j;
                if (n == 4) want += (float)(j * 3 + i) + (float)(i * 4 + j);
                CHECK(o[i * 4 + j] == want);
            }
        }
        /* the serial form, over two ranges, gives the same */
        float *w = (float *)tsr_tensor_data(out);
        for (int k = 0; k < 12; k++) w[k] = -1.0f;
        seen = 0;
        CHECK_OK(tsr_iter_serial_for_each_n(it, sum_inputs_loop, &seen, 0, 5));
        CHECK_OK(tsr_iter_serial_for_each_n(it, sum_inputs_loop, &seen, 5, 12));
        CHECK_EQ(seen, n + 1);
        CHECK(o[11] == (n == 4 ? 11.0f + 3.0f + 11.0f + 11.0f : 11.0f + 3.0f));
        CHECK_STATUS(tsr_iter_for_each_n(it, NULL, NULL, 0), TSR_ERR_NULL_POINTER);
        CHECK_MSG_CONTAINS("tsr_iter_for_each_n");
        CHECK_OK(tsr_tensor_decref(out));
        tsr_iter_free(it);
    }
    CHECK_OK(tsr_tensor_decref(ct));
    CHECK_OK(tsr_tensor_decref(c));
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_tensor_decref(a));
}

static void count_loop(void *user, char **data, const int64_t *strides, int64_t n0, int64_t n1) {
    (void)data;
    (void)strides;
    /* serial ranges only in this test: no data race on the counter */
    *(int64_t *)user += n0 * n1;
}

static void test_serial_ranges_and_presets(void) {
    int64_t s[] = {5, 7};
    TsrTensor *a = arange_f(2, s), *t = NULL;
    CHECK_OK(tsr_tensor_transpose(a, 0, 1, &t));
    TsrIter *it = NULL;
    CHECK_OK(tsr_iter_binary_op(NULL, t, t, &it));
    int64_t visited = 0;
    CHECK_OK(tsr_iter_serial_for_each(it, count_loop, &visited, 0, 10));
    CHECK_OK(tsr_iter_serial_for_each(it, count_loop, &visited, 10, 1000));
    CHECK_EQ(visited, 35);
    TsrTensor *out = tsr_iter_output(it, 0);
    const int64_t *st = tsr_tensor_strides(out);
    CHECK(st[0] == 1 && st[1] == 7); /* follows the transposed input */
    CHECK_OK(tsr_tensor_decref(out));
    tsr_iter_free(it);

    TsrTensor *l = NULL;
    CHECK_OK(tsr_tensor_empty(2, s, TSR_LONG, cpu(), &l));
    CHECK_OK(tsr_iter_binary_float_op(NULL, l, l, &it));
    CHECK_EQ(tsr_iter_dtype(it, 0), TSR_FLOAT);
    tsr_iter_free(it);
    CHECK_OK(tsr_iter_comparison_op(NULL, a, l, &it));
    CHECK_EQ(tsr_iter_dtype(it, 0), TSR_BOOL);
    tsr_iter_free(it);
    CHECK_OK(tsr_tensor_decref(l));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_tensor_decref(a));
}

static void sum_loop(void *user, void *acc, char **data, const int64_t *strides, int64_t n0, int64_t n1) {
    (void)user;
    double *s = (double *)acc;
    for (int64_t j = 0; j < n1; j++)
        for (int64_t i = 0; i < n0; i++) *s += *(const float *)(data[1] + i * strides[1] + j * strides[3]);
}

static void sum_combine(void *user, void *acc, const void *other) {
    (void)user;
    *(double *)acc += *(const double *)other;
}

static void test_parallel_reduce(void) {
    int64_t n = 100000, one = 1;
    TsrTensor *a = arange_f(1, &n), *out = NULL;
    CHECK_OK(tsr_tensor_empty(1, &one, TSR_FLOAT, cpu(), &out));
    TsrIter *it = NULL;
    CHECK_OK(tsr_iter_reduce_op(out, a, &it));
    CHECK_EQ(tsr_iter_num_output_elements(it), 1);
    CHECK_EQ(tsr_iter_num_reduce_dims(it), 1);
    tsr_set_num_threads(2);
    double total = 0.0;
    CHECK_OK(tsr_iter_parallel_reduce(it, sum_loop, sum_combine, NULL, &total, sizeof total, 1000));
    CHECK(total == (double)n * (double)(n - 1) / 2.0);
    tsr_iter_free(it);
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(out));
}

static void piece_counter(void *user, TsrIter *piece) {
    CHECK(tsr_iter_can_use_32bit_indexing(piece));
    *(int64_t *)user += tsr_iter_numel(piece);
}

static void test_32bit_pieces(void) {
    int64_t sizes[] = {1 << 16, 1 << 15};
    TsrDevice meta = {TSR_META, -1};
    TsrTensor *a = NULL;
    CHECK_OK(tsr_tensor_empty(2, sizes, TSR_FLOAT, meta, &a));
    TsrIter *it = NULL;
    CHECK_OK(tsr_iter_unary_op(NULL, a, &it));
    CHECK(!tsr_iter_can_use_32bit_indexing(it));
    int64_t total = 0;
    CHECK_OK(tsr_iter_for_each_32bit_piece(it, piece_counter, &total));
    CHECK_EQ(total, tsr_iter_numel(it));
    tsr_iter_free(it);
    CHECK_OK(tsr_tensor_decref(a));
}

static void test_bad_input(void) {
    TsrIterConfig *cfg = NULL;
    CHECK_OK(tsr_iter_config_new(&cfg));
    int64_t s[] = {4};
    TsrTensor *a = arange_f(1, s);
    CHECK_STATUS(tsr_iter_config_add_input(cfg, NULL), TSR_ERR_NULL_POINTER);
    CHECK_OK(tsr_iter_config_add_input(cfg, a));
    CHECK_STATUS(tsr_iter_config_add_output(cfg, NULL), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("before the inputs");
    tsr_iter_config_free(cfg);

    /* a non-resizable output of the wrong shape */
    TsrStorage *st = NULL;
    CHECK_OK(tsr_storage_new(8, cpu(), false, &st));
    int64_t two = 2;
    TsrTensor *small = NULL;
    CHECK_OK(tsr_tensor_from_storage(st, 0, 1, &two, NULL, TSR_FLOAT, &small));
    TsrIter *it = NULL;
    CHECK_STATUS(tsr_iter_binary_op(small, a, a, &it), TSR_ERR_NOT_RESIZABLE);
    CHECK(it == NULL);
    /* dtype mismatch names both dtypes */
    TsrTensor *l = NULL;
    CHECK_OK(tsr_tensor_empty(1, s, TSR_LONG, cpu(), &l));
    CHECK_OK(tsr_iter_config_new(&cfg));
    CHECK_OK(tsr_iter_config_add_output(cfg, NULL));
    CHECK_OK(tsr_iter_config_add_input(cfg, a));
    CHECK_OK(tsr_iter_config_add_input(cfg, l));
    CHECK_STATUS(tsr_iter_build(cfg, &it), TSR_ERR_DTYPE);
    CHECK_MSG_CONTAINS("Long");
    CHECK_MSG_CONTAINS("Float");
    /* the config is still usable after a failed build */
    CHECK_OK(tsr_iter_config_promote_inputs_to_common_dtype(cfg, true));
    CHECK_OK(tsr_iter_build(cfg, &it));
    CHECK_STATUS(tsr_iter_for_each(it, NULL, NULL, 0), TSR_ERR_NULL_POINTER);
    tsr_iter_free(it);
    int64_t many[65];
    for (int i = 0; i < 65; i++) many[i] = 1;
    CHECK_STATUS(tsr_iter_config_declare_static_shape(cfg, 65, many), TSR_ERR_SHAPE);
    tsr_iter_config_free(cfg);
    CHECK_STATUS(tsr_iter_build(NULL, &it), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_iter_config_check_mem_overlap(NULL, true), TSR_ERR_NULL_POINTER);
    CHECK_EQ(tsr_iter_ndim(NULL), -1);
    tsr_iter_free(NULL);
    tsr_iter_config_free(NULL);
    CHECK_OK(tsr_tensor_decref(l));
    CHECK_OK(tsr_tensor_decref(small));
    CHECK_OK(tsr_storage_decref(st));
    CHECK_OK(tsr_tensor_decref(a));
}

/* tsr_iter_config_output_allocator: the outputs the build allocates come
 * from the given allocator; the config holds its own reference; NULL
 * goes back to the registry. */
static void test_output_allocator(void) {
    int64_t s[] = {3, 4};
    TsrTensor *a = arange_f(2, s);
    TsrAllocator *ca = NULL;
    CHECK_OK(tsr_caching_allocator_new(tsr_cpu_allocator(), NULL, &ca));
    TsrAllocatorStats before, during, after;
    CHECK_OK(tsr_allocator_stats(ca, &before));
    size_t refs = tsr_allocator_use_count(ca);

    TsrIterConfig *cfg = NULL;
    CHECK_OK(tsr_iter_config_new(&cfg));
    CHECK_OK(tsr_iter_config_add_output(cfg, NULL));
    CHECK_OK(tsr_iter_config_add_input(cfg, a));
    CHECK_OK(tsr_iter_config_add_input(cfg, a));
    CHECK_OK(tsr_iter_config_output_allocator(cfg, ca));
    CHECK_EQ(tsr_allocator_use_count(ca), refs + 1);
    TsrIter *it = NULL;
    CHECK_OK(tsr_iter_build(cfg, &it));
    CHECK_OK(tsr_allocator_stats(ca, &during));
    CHECK(during.allocated_bytes >= before.allocated_bytes + 12 * sizeof(float));
    TsrTensor *out = tsr_iter_output(it, 0);
    tsr_iter_free(it);
    CHECK_OK(tsr_tensor_decref(out));
    CHECK_OK(tsr_allocator_stats(ca, &after));
    CHECK_EQ(after.allocated_bytes, before.allocated_bytes);

    /* NULL: the registry again; this allocator sees nothing */
    CHECK_OK(tsr_iter_config_output_allocator(cfg, NULL));
    CHECK_EQ(tsr_allocator_use_count(ca), refs);
    CHECK_OK(tsr_iter_build(cfg, &it));
    CHECK_OK(tsr_allocator_stats(ca, &during));
    CHECK_EQ(during.allocated_bytes, before.allocated_bytes);
    tsr_iter_free(it);

    /* the config keeps the allocator alive after the caller lets go */
    CHECK_OK(tsr_iter_config_output_allocator(cfg, ca));
    CHECK_OK(tsr_allocator_decref(ca));
    CHECK_OK(tsr_iter_build(cfg, &it));
    out = tsr_iter_output(it, 0);
    CHECK_EQ(tsr_tensor_numel(out), 12);
    tsr_iter_free(it);
    tsr_iter_config_free(cfg);
    CHECK_OK(tsr_tensor_decref(out));
    CHECK_OK(tsr_tensor_decref(a));
}

/* declare_static_shape with squash_dims from C: the squashed dims are 1,
 * so a [2, 1] output fits a [2, 3] shape squashed on its last dim (the
 * loop covers a [2, 1] corner of the [2, 3] input). */
static void test_static_shape_squashed(void) {
    int64_t s23[] = {2, 3}, s21[] = {2, 1}, squash[] = {-1};
    TsrTensor *in = arange_f(2, s23), *out = arange_f(2, s21);
    TsrIterConfig *cfg = NULL;
    TsrIter *it = NULL;
    CHECK_OK(tsr_iter_config_new(&cfg));
    CHECK_OK(tsr_iter_config_resize_outputs(cfg, false));
    CHECK_OK(tsr_iter_config_add_output(cfg, out));
    CHECK_OK(tsr_iter_config_add_input(cfg, in));
    CHECK_OK(tsr_iter_config_declare_static_shape_squashed(cfg, 2, s23, 1, squash));
    CHECK_OK(tsr_iter_build(cfg, &it));
    CHECK_EQ(tsr_iter_numel(it), 2);
    tsr_iter_free(it);

    /* unsquashed, the [2, 1] output is smaller than the shape */
    CHECK_OK(tsr_iter_config_declare_static_shape(cfg, 2, s23));
    CHECK_STATUS(tsr_iter_build(cfg, &it), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("does not fit");
    /* a squash dim outside the shape is refused */
    int64_t bad[] = {2};
    CHECK_STATUS(tsr_iter_config_declare_static_shape_squashed(cfg, 2, s23, 1, bad),
                 TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("tsr_iter_config_declare_static_shape_squashed");
    CHECK_MSG_CONTAINS("dim 2");
    tsr_iter_config_free(cfg);
    CHECK_OK(tsr_tensor_decref(out));
    CHECK_OK(tsr_tensor_decref(in));
}

/* c10's add_borrowed_*: the config takes no count, the iterator its own,
   and freeing the config after the operands are gone touches none of them
   (ASan and valgrind run this test: a touch would be a use after free). */
static void test_borrowed_operands(void) {
    int64_t sa[] = {3, 1}, sb[] = {4}, sc[] = {3, 4};
    TsrTensor *a = arange_f(2, sa), *b = arange_f(1, sb), *c = arange_f(2, sc);
    TsrTensor *out = NULL;
    CHECK_OK(tsr_tensor_empty(2, sc, TSR_FLOAT, cpu(), &out));
    TsrIterConfig *cfg = NULL;
    CHECK_OK(tsr_iter_config_new(&cfg));
    CHECK_OK(tsr_iter_config_add_borrowed_output(cfg, out));
    CHECK_OK(tsr_iter_config_add_borrowed_input(cfg, a));
    CHECK_OK(tsr_iter_config_add_borrowed_const_input(cfg, b));
    CHECK_OK(tsr_iter_config_add_input(cfg, c)); /* owned and borrowed mix */
    CHECK_EQ(tsr_tensor_use_count(out), 1);
    CHECK_EQ(tsr_tensor_use_count(a), 1);
    CHECK_EQ(tsr_tensor_use_count(b), 1);
    CHECK_EQ(tsr_tensor_use_count(c), 2);
    TsrIter *it = NULL;
    CHECK_OK(tsr_iter_build(cfg, &it)); /* broadcast: the general pipeline */
    CHECK_EQ(tsr_tensor_use_count(a), 2); /* the iterator's own reference */
    CHECK_EQ(tsr_iter_ntensors(it), 4);
    /* The caller's references go; the iterator keeps the operands alive. */
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_iter_for_each(it, fma_loop, NULL, 0));
    const float *o = (const float *)tsr_tensor_data(out);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) CHECK(o[i * 4 + j] == (float)(i * j + i * 4 + j));
    tsr_iter_free(it); /* a and b are freed here */
    CHECK_OK(tsr_tensor_decref(out));
    CHECK_OK(tsr_tensor_decref(c)); /* the config still holds c */
    tsr_iter_config_free(cfg);

    /* Same shapes (the shortcut), the output allocated. */
    TsrTensor *x = arange_f(2, sc), *y = arange_f(2, sc);
    CHECK_OK(tsr_iter_config_new(&cfg));
    CHECK_OK(tsr_iter_config_add_borrowed_output(cfg, NULL));
    CHECK_OK(tsr_iter_config_add_borrowed_input(cfg, x));
    CHECK_OK(tsr_iter_config_add_borrowed_input(cfg, y));
    CHECK_OK(tsr_iter_build(cfg, &it));
    CHECK_OK(tsr_tensor_decref(x));
    CHECK_OK(tsr_tensor_decref(y));
    tsr_iter_config_free(cfg);
    CHECK_EQ(tsr_iter_numel(it), 12);
    TsrTensor *o2 = tsr_iter_output(it, 0);
    CHECK(o2 != NULL);
    CHECK_EQ(tsr_tensor_numel(o2), 12);
    CHECK_OK(tsr_tensor_decref(o2));
    tsr_iter_free(it);
}

int main(void) {
    RUN(test_build_queries_and_loop);
    RUN(test_loop_given_the_operand_count);
    RUN(test_serial_ranges_and_presets);
    RUN(test_parallel_reduce);
    RUN(test_32bit_pieces);
    RUN(test_bad_input);
    RUN(test_output_allocator);
    RUN(test_static_shape_squashed);
    RUN(test_borrowed_operands);
    return 0;
}
