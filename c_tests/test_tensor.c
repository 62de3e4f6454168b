/* Tensors through the C API: creation, getters, views, set, resize, fill,
 * copy and bad input. */
#include "tsr_test.h"

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

static TsrTensor *arange(int64_t n) {
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_FLOAT, cpu(), &t));
    float *p = (float *)tsr_tensor_data(t);
    for (int64_t i = 0; i < n; i++) p[i] = (float)i;
    return t;
}

static void check_shape(const TsrTensor *t, int64_t ndim, const int64_t *sizes, const int64_t *strides,
                        int64_t offset) {
    CHECK_EQ(tsr_tensor_ndim(t), ndim);
    for (int64_t i = 0; i < ndim; i++) {
        CHECK_EQ(tsr_tensor_sizes(t)[i], sizes[i]);
        CHECK_EQ(tsr_tensor_strides(t)[i], strides[i]);
    }
    CHECK_EQ(tsr_tensor_storage_offset(t), offset);
}

static void test_empty_and_getters(void) {
    int64_t sizes[] = {2, 3, 4};
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_empty(3, sizes, TSR_DOUBLE, cpu(), &t));
    int64_t strides[] = {12, 4, 1};
    check_shape(t, 3, sizes, strides, 0);
    CHECK_EQ(tsr_tensor_numel(t), 24);
    CHECK_EQ(tsr_tensor_dtype(t), TSR_DOUBLE);
    CHECK_EQ(tsr_tensor_itemsize(t), 8);
    CHECK(tsr_tensor_is_contiguous(t, TSR_CONTIGUOUS));
    CHECK_EQ(tsr_tensor_size(t, -1), 4);
    CHECK_EQ(tsr_tensor_stride(t, 0), 12);
    CHECK_EQ(tsr_tensor_size(t, 3), -1);
    CHECK_MSG_CONTAINS("[-3, 2]");
    TsrStorage *s = tsr_tensor_storage(t);
    CHECK_EQ(tsr_storage_nbytes(s), 24 * 8);
    CHECK(tsr_storage_data(s) == tsr_tensor_data(t));
    CHECK_EQ(tsr_storage_use_count(s), 2);
    CHECK_OK(tsr_storage_decref(s));
    CHECK_OK(tsr_tensor_decref(t));

    TsrTensor *z = NULL;
    CHECK_OK(tsr_tensor_empty(0, NULL, TSR_FLOAT, cpu(), &z));
    CHECK_EQ(tsr_tensor_ndim(z), 0);
    CHECK_EQ(tsr_tensor_numel(z), 1);
    CHECK_OK(tsr_tensor_decref(z));

    int64_t cl[] = {2, 3, 4, 5};
    CHECK_OK(tsr_tensor_empty_format(4, cl, TSR_FLOAT, cpu(), TSR_CHANNELS_LAST, &t));
    int64_t cl_strides[] = {60, 1, 15, 3};
    check_shape(t, 4, cl, cl_strides, 0);
    CHECK(tsr_tensor_is_contiguous(t, TSR_CHANNELS_LAST));
    CHECK(!tsr_tensor_is_contiguous(t, TSR_CONTIGUOUS));
    CHECK_OK(tsr_tensor_decref(t));
}

static void test_views(void) {
    TsrTensor *t = arange(24), *v = NULL, *p = NULL, *r = NULL, *n = NULL, *e = NULL;
    int64_t shape[] = {2, -1, 4};
    CHECK_OK(tsr_tensor_view(t, 3, shape, &v));
    int64_t vs[] = {2, 3, 4}, vst[] = {12, 4, 1};
    check_shape(v, 3, vs, vst, 0);
    int64_t perm[] = {2, 0, 1};
    CHECK_OK(tsr_tensor_permute(v, 3, perm, &p));
    int64_t ps[] = {4, 2, 3}, pst[] = {1, 12, 4};
    check_shape(p, 3, ps, pst, 0);
    int64_t flat[] = {24};
    CHECK_STATUS(tsr_tensor_view(p, 1, flat, &r), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("tsr_tensor_view");
    CHECK_OK(tsr_tensor_reshape(p, 1, flat, &r));
    CHECK(tsr_tensor_data(r) != tsr_tensor_data(t));
    CHECK(((float *)tsr_tensor_data(r))[1] == 4.0f); /* p[0][0][1] = v[0][1][0] */
    CHECK(((float *)tsr_tensor_data(r))[6] == 1.0f);  /* p[1][0][0] = v[0][0][1] */
    CHECK_OK(tsr_tensor_narrow(v, 1, 1, 2, &n));
    int64_t ns[] = {2, 2, 4};
    check_shape(n, 3, ns, vst, 4);
    TsrTensor *s = NULL, *u = NULL;
    CHECK_OK(tsr_tensor_select(n, 0, 1, &s));
    CHECK_EQ(tsr_tensor_storage_offset(s), 16);
    CHECK_OK(tsr_tensor_unsqueeze(s, 0, &u));
    int64_t ex[] = {3, 2, 4};
    CHECK_OK(tsr_tensor_expand(u, 3, ex, &e));
    CHECK_EQ(tsr_tensor_strides(e)[0], 0);
    int64_t bad_ex[] = {3, 3, 4};
    TsrTensor *bad = NULL;
    CHECK_STATUS(tsr_tensor_expand(u, 3, bad_ex, &bad), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("non-singleton dimension 1");
    CHECK_STATUS(tsr_tensor_transpose(v, 0, 3, &bad), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("dim 3 is out of range");
    /* views share the version counter */
    CHECK_EQ(tsr_tensor_version(t), 0);
    CHECK_OK(tsr_tensor_fill(e, tsr_scalar_float(7.0)));
    CHECK_EQ(tsr_tensor_version(t), 1);
    CHECK(((float *)tsr_tensor_data(t))[16] == 7.0f);
    CHECK(((float *)tsr_tensor_data(t))[15] == 15.0f);
    TsrTensor *handles[] = {t, v, p, r, n, s, u, e};
    for (size_t i = 0; i < sizeof handles / sizeof handles[0]; i++) CHECK_OK(tsr_tensor_decref(handles[i]));
}

static void test_set_and_copy(void) {
    TsrTensor *t = arange(4);
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(8 * sizeof(float), cpu(), false, &s));
    CHECK_OK(tsr_storage_fill(s, 0));
    int64_t sizes[] = {2, 4};
    CHECK_OK(tsr_tensor_set(t, s, 0, 2, sizes, NULL));
    CHECK_EQ(tsr_tensor_numel(t), 8);
    CHECK(tsr_tensor_data(t) == tsr_storage_data(s));
    CHECK_STATUS(tsr_tensor_set(t, s, 1, 2, sizes, NULL), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("out of bounds for storage of size 32");
    CHECK_EQ(tsr_tensor_numel(t), 8);
    TsrTensor *src = arange(4);
    CHECK_OK(tsr_tensor_copy(t, src));
    CHECK(((float *)tsr_tensor_data(t))[7] == 3.0f);
    CHECK_OK(tsr_tensor_decref(src));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_storage_decref(s));
}

/* set onto a resizable storage grows it (c10's set_); resize keeps the
   offset, grows a resizable storage to (offset + numel) * itemsize bytes
   keeping its first bytes, never shrinks it, and bumps the version. */
static void test_set_and_resize_grow(void) {
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(2 * sizeof(float), cpu(), true, &s));
    ((float *)tsr_storage_data(s))[0] = 5.0f;
    TsrTensor *t = arange(1);
    int64_t sizes[] = {2, 4};
    CHECK_OK(tsr_tensor_set(t, s, 1, 2, sizes, NULL));
    CHECK_EQ(tsr_storage_nbytes(s), 9 * sizeof(float));
    CHECK(((float *)tsr_storage_data(s))[0] == 5.0f);
    CHECK_EQ(tsr_tensor_version(t), 1);

    int64_t nchw[] = {2, 3, 2, 2}, cl[] = {12, 1, 6, 3};
    CHECK_OK(tsr_tensor_resize(t, 4, nchw, TSR_CHANNELS_LAST));
    check_shape(t, 4, nchw, cl, 1);
    CHECK(tsr_tensor_is_contiguous(t, TSR_CHANNELS_LAST));
    CHECK_EQ(tsr_storage_nbytes(s), 25 * sizeof(float));
    CHECK(((float *)tsr_storage_data(s))[0] == 5.0f);
    CHECK_EQ(tsr_tensor_version(t), 2);
    int64_t three = 3, one = 1;
    CHECK_OK(tsr_tensor_resize(t, 1, &three, TSR_CONTIGUOUS));
    check_shape(t, 1, &three, &one, 1);
    CHECK_EQ(tsr_storage_nbytes(s), 25 * sizeof(float)); /* never shrunk */

    /* a fixed storage too small: refused, nothing changed */
    TsrStorage *fixed = NULL;
    CHECK_OK(tsr_storage_new(4 * sizeof(float), cpu(), false, &fixed));
    CHECK_STATUS(tsr_tensor_set(t, fixed, 0, 2, sizes, NULL), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("not resizable");
    TsrTensor *u = NULL;
    int64_t four = 4;
    CHECK_OK(tsr_tensor_from_storage(fixed, 0, 1, &four, NULL, TSR_FLOAT, &u));
    CHECK_STATUS(tsr_tensor_resize(u, 2, sizes, TSR_CONTIGUOUS), TSR_ERR_NOT_RESIZABLE);
    CHECK_MSG_CONTAINS("need 32 bytes, the storage holds 16");
    CHECK_EQ(tsr_tensor_numel(u), 4);
    CHECK_EQ(tsr_tensor_version(u), 0);
    CHECK_STATUS(tsr_tensor_resize(u, 2, sizes, TSR_CHANNELS_LAST), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("requires 4 dims");
    CHECK_OK(tsr_tensor_decref(u));
    CHECK_OK(tsr_storage_decref(fixed));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_storage_decref(s));
}

static void test_bad_input(void) {
    TsrTensor *t = NULL;
    int64_t neg[] = {2, -3};
    CHECK_STATUS(tsr_tensor_empty(2, neg, TSR_FLOAT, cpu(), &t), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("-3");
    int64_t huge[] = {INT64_MAX / 2, 4};
    CHECK_STATUS(tsr_tensor_empty(2, huge, TSR_FLOAT, cpu(), &t), TSR_ERR_OUT_OF_MEMORY);
    int64_t ok[] = {2};
    CHECK_STATUS(tsr_tensor_empty(1, ok, 99, cpu(), &t), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("unknown dtype 99");
    CHECK_STATUS(tsr_tensor_empty(1, NULL, TSR_FLOAT, cpu(), &t), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_tensor_empty(65, ok, TSR_FLOAT, cpu(), &t), TSR_ERR_SHAPE);
    CHECK(t == NULL);
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(16, cpu(), false, &s));
    int64_t sz[] = {4}, st[] = {2};
    CHECK_STATUS(tsr_tensor_from_storage(s, 0, 1, sz, st, TSR_FLOAT, &t), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("requiring a storage size of 28");
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(tsr_tensor_ndim(NULL), -1);
    CHECK(tsr_tensor_sizes(NULL) == NULL);
    CHECK_STATUS(tsr_tensor_view(NULL, 1, sz, &t), TSR_ERR_NULL_POINTER);
}

/* tsr_tensor_from_storage_desc: every argument by name; the same tensor
 * as the positional call. */
/* tsr_tensor_from_data: a copy of a C array, contiguous, from the CPU
 * allocator; the caller's array is not kept; a wrong dtype for the bytes
 * is the caller's to avoid (the size read is numel * itemsize). */
static void test_from_data(void) {
    double values[2][3] = {{1.5, -2.0, 3.25}, {0.0, 1e300, -7.0}};
    int64_t sizes[] = {2, 3};
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_from_data(values, 2, sizes, TSR_DOUBLE, cpu(), &t));
    int64_t strides[] = {3, 1};
    check_shape(t, 2, sizes, strides, 0);
    CHECK_EQ(tsr_tensor_dtype(t), TSR_DOUBLE);
    CHECK(tsr_tensor_is_contiguous(t, TSR_CONTIGUOUS));
    double *p = (double *)tsr_tensor_data(t);
    CHECK(p != &values[0][0]);
    values[0][0] = 99.0; /* a copy: the tensor keeps 1.5 */
    CHECK(p[0] == 1.5 && p[4] == 1e300 && p[5] == -7.0);
    CHECK_OK(tsr_tensor_decref(t));
    /* A 0-d tensor: one element, no sizes. */
    int32_t one = 42;
    CHECK_OK(tsr_tensor_from_data(&one, 0, NULL, TSR_INT, cpu(), &t));
    CHECK_EQ(tsr_tensor_ndim(t), 0);
    CHECK_EQ(*(int32_t *)tsr_tensor_data(t), 42);
    CHECK_OK(tsr_tensor_decref(t));
    /* An empty one still needs data (any address: nothing is read). */
    int64_t none[] = {0, 4};
    CHECK_OK(tsr_tensor_from_data(&one, 2, none, TSR_FLOAT, cpu(), &t));
    CHECK_EQ(tsr_tensor_numel(t), 0);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_STATUS(tsr_tensor_from_data(NULL, 2, sizes, TSR_DOUBLE, cpu(), &t), TSR_ERR_NULL_POINTER);
}

static void test_from_storage_desc(void) {
    TsrDevice cpu = {TSR_CPU, -1};
    TsrStorage *s = NULL;
    TsrTensor *a = NULL, *b = NULL;
    int64_t sizes[2] = {2, 3};
    CHECK_OK(tsr_storage_new(64, cpu, true, &s));
    TsrTensorDesc d = {.struct_size = sizeof d, .dtype = TSR_FLOAT, .ndim = 2, .sizes = sizes,
                       .storage_offset = 4};
    CHECK_OK(tsr_tensor_from_storage_desc(s, &d, &a));
    CHECK_OK(tsr_tensor_from_storage(s, 4, 2, sizes, NULL, TSR_FLOAT, &b));
    CHECK_EQ(tsr_tensor_storage_offset(a), 4);
    CHECK_EQ(tsr_tensor_dtype(a), TSR_FLOAT);
    CHECK(tsr_tensor_data(a) == tsr_tensor_data(b));
    CHECK(tsr_tensor_data(a) == (char *)tsr_storage_data(s) + 16);
    CHECK_EQ(tsr_tensor_stride(a, 0), 3);
    /* An older, shorter struct (no storage_offset) is refused by name. */
    d.struct_size = 8;
    CHECK_STATUS(tsr_tensor_from_storage_desc(s, &d, &b), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("TsrTensorDesc.struct_size is 8");
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_storage_decref(s));
}

int main(void) {
    RUN(test_from_data);
    RUN(test_from_storage_desc);
    RUN(test_empty_and_getters);
    RUN(test_views);
    RUN(test_set_and_copy);
    RUN(test_set_and_resize_grow);
    RUN(test_bad_input);
    return 0;
}
