/* The built-in kernels through the C API: results, dtypes, out= and
 * result conventions, in-place use, error statuses and messages. */
#include <math.h>

#include "tsr_test.h"

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

static TsrTensor *floats(int64_t ndim, const int64_t *sizes, const float *values) {
    TsrTensor *t = NULL;
    int64_t i;
    float *p;
    CHECK_OK(tsr_tensor_empty(ndim, sizes, TSR_FLOAT, cpu(), &t));
    p = (float *)tsr_tensor_data(t);
    for (i = 0; i < tsr_tensor_numel(t); i++) p[i] = values[i];
    return t;
}

static TsrTensor *longs(int64_t n, const int64_t *values) {
    TsrTensor *t = NULL;
    int64_t i;
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_LONG, cpu(), &t));
    for (i = 0; i < n; i++) ((int64_t *)tsr_tensor_data(t))[i] = values[i];
    return t;
}

static float at(const TsrTensor *t, int64_t i) { return ((const float *)tsr_tensor_data(t))[i]; }

static void test_add_broadcast_and_alpha(void) {
    int64_t ms[] = {2, 3}, rs[] = {3};
    float mv[] = {1, 2, 3, 4, 5, 6}, rv[] = {10, 20, 30};
    TsrTensor *a = floats(2, ms, mv), *b = floats(1, rs, rv), *c = NULL, *d = NULL;
    CHECK_OK(tsr_add(NULL, a, b, tsr_scalar_int(1), &c));
    CHECK_EQ(tsr_tensor_ndim(c), 2);
    CHECK_EQ(tsr_tensor_dtype(c), TSR_FLOAT);
    CHECK(at(c, 0) == 11 && at(c, 5) == 36);
    CHECK_OK(tsr_sub(NULL, a, b, tsr_scalar_float(0.5), &d));
    CHECK(at(d, 0) == -4 && at(d, 4) == -5);
    CHECK_OK(tsr_tensor_decref(d));
    /* in place into a, result NULL */
    CHECK_OK(tsr_mul(a, a, b, NULL));
    CHECK(at(a, 0) == 10 && at(a, 5) == 180);
    /* result receives a new reference to out itself */
    CHECK_OK(tsr_add(a, a, b, tsr_scalar_int(2), &d));
    CHECK(d == a);
    CHECK_EQ(tsr_tensor_use_count(a), 2);
    CHECK(at(a, 0) == 30);
    CHECK_OK(tsr_tensor_decref(d));
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_tensor_decref(c));
}

static void test_promotion_and_wrapped_numbers(void) {
    int64_t n = 3;
    int64_t iv[] = {1, 2, 3};
    TsrTensor *ints = NULL, *half = NULL, *r = NULL;
    int32_t *p;
    int64_t i;
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_INT, cpu(), &ints));
    p = (int32_t *)tsr_tensor_data(ints);
    for (i = 0; i < n; i++) p[i] = (int32_t)iv[i];
    CHECK_OK(tsr_scalar_tensor(tsr_scalar_float(2.5), &half));
    CHECK_EQ(tsr_tensor_ndim(half), 0);
    CHECK_EQ(tsr_tensor_dtype(half), TSR_DOUBLE);
    CHECK_OK(tsr_add(NULL, ints, half, tsr_scalar_int(1), &r));
    CHECK_EQ(tsr_tensor_dtype(r), TSR_FLOAT); /* not Double: a wrapped number */
    CHECK(at(r, 2) == 5.5f);
    CHECK_OK(tsr_tensor_decref(r));
    /* true division of integers computes in Float; 1/0 is inf */
    CHECK_OK(tsr_div(NULL, ints, ints, &r));
    CHECK_EQ(tsr_tensor_dtype(r), TSR_FLOAT);
    CHECK(at(r, 1) == 1.0f);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_tensor_decref(half));
    CHECK_OK(tsr_tensor_decref(ints));
}

static void test_division_by_zero(void) {
    int64_t av[] = {7, -7, 5}, bv[] = {2, 2, 0};
    float fv[] = {1, -1, 0}, zv[] = {0};
    int64_t three = 3, one = 1;
    TsrTensor *a = longs(3, av), *b = longs(3, bv), *r = NULL;
    TsrTensor *f = floats(1, &three, fv), *z = floats(1, &one, zv);
    CHECK_STATUS(tsr_div_rounding(NULL, a, b, TSR_ROUNDING_FLOOR, &r), TSR_ERR_ZERO_DIVISION);
    CHECK_MSG_CONTAINS("tsr_div_rounding: integer division by zero");
    CHECK(r == NULL); /* untouched on failure */
    CHECK_STATUS(tsr_div_rounding(NULL, a, b, TSR_ROUNDING_TRUNC, &r), TSR_ERR_ZERO_DIVISION);
    CHECK_STATUS(tsr_div_rounding(NULL, a, b, 7, &r), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("unknown rounding mode 7");
    ((int64_t *)tsr_tensor_data(b))[2] = 3;
    CHECK_OK(tsr_div_rounding(NULL, a, b, TSR_ROUNDING_FLOOR, &r));
    CHECK_EQ(tsr_tensor_dtype(r), TSR_LONG);
    CHECK_EQ(((int64_t *)tsr_tensor_data(r))[1], -4);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_div(NULL, f, z, &r));
    CHECK(isinf(at(r, 0)) && at(r, 0) > 0);
    CHECK(isinf(at(r, 1)) && at(r, 1) < 0);
    CHECK(isnan(at(r, 2)));
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_tensor_decref(f));
    CHECK_OK(tsr_tensor_decref(z));
}

static void test_neg_and_bool_rules(void) {
    int64_t n = 2;
    TsrTensor *b = NULL, *r = NULL;
    float v[] = {1.5f, -2};
    TsrTensor *f = floats(1, &n, v);
    CHECK_OK(tsr_neg(NULL, f, &r));
    CHECK(at(r, 0) == -1.5f && at(r, 1) == 2);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_neg(f, f, NULL));
    CHECK(at(f, 0) == -1.5f);
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_BOOL, cpu(), &b));
    CHECK_OK(tsr_tensor_fill(b, tsr_scalar_bool(true)));
    CHECK_STATUS(tsr_neg(NULL, b, &r), TSR_ERR_DTYPE);
    CHECK_MSG_CONTAINS("tsr_neg: negation of a Bool tensor");
    CHECK_STATUS(tsr_sub(NULL, b, b, tsr_scalar_int(1), &r), TSR_ERR_DTYPE);
    CHECK_OK(tsr_add(NULL, b, b, tsr_scalar_bool(true), &r));
    CHECK_EQ(tsr_tensor_dtype(r), TSR_BOOL);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_STATUS(tsr_add(NULL, f, f, tsr_scalar_bool(true), &r), TSR_ERR_DTYPE);
    CHECK_MSG_CONTAINS("bool alpha");
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_tensor_decref(f));
}

static void test_sum_and_amax(void) {
    int64_t ms[] = {2, 3}, dims[] = {-1}, both[] = {0, 1}, bad[] = {0, 0}, empty[] = {2, 0};
    float mv[] = {1, 7, 3, 4, 5, 6};
    TsrTensor *a = floats(2, ms, mv), *r = NULL, *e = NULL, *l = NULL;
    int64_t lv[] = {5, -2, 9};
    CHECK_OK(tsr_sum(a, 0, NULL, false, &r));
    CHECK_EQ(tsr_tensor_ndim(r), 0);
    CHECK(at(r, 0) == 26);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_sum(a, 1, dims, true, &r));
    CHECK_EQ(tsr_tensor_ndim(r), 2);
    CHECK_EQ(tsr_tensor_sizes(r)[1], 1);
    CHECK(at(r, 0) == 11 && at(r, 1) == 15);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_amax(a, 2, both, false, &r));
    CHECK(at(r, 0) == 7);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_amin(a, 1, dims, false, &r));
    CHECK(at(r, 0) == 1 && at(r, 1) == 4);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_prod(a, 1, dims, false, &r));
    CHECK(at(r, 0) == 21 && at(r, 1) == 120);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_mean(a, 0, NULL, false, &r));
    CHECK(at(r, 0) == 26.0f / 6.0f);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_vector_norm(a, 1.0, 1, dims, false, &r));
    CHECK(at(r, 0) == 11 && at(r, 1) == 15);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_vector_norm(a, -INFINITY, 0, NULL, false, &r));
    CHECK(at(r, 0) == 1);
    CHECK_OK(tsr_tensor_decref(r));
    {
        TsrTensor *v = NULL, *i = NULL;
        CHECK_OK(tsr_max_dim(a, 1, false, &v, &i));
        CHECK(at(v, 0) == 7 && at(v, 1) == 6);
        CHECK_EQ(tsr_tensor_dtype(i), TSR_LONG);
        CHECK_EQ(((int64_t *)tsr_tensor_data(i))[0], 1);
        CHECK_EQ(((int64_t *)tsr_tensor_data(i))[1], 2);
        CHECK_OK(tsr_tensor_decref(v));
        CHECK_OK(tsr_tensor_decref(i));
        CHECK_OK(tsr_min_dim(a, -2, true, &v, &i));
        CHECK_EQ(tsr_tensor_ndim(v), 2);
        CHECK(at(v, 0) == 1 && at(v, 1) == 5 && at(v, 2) == 3);
        CHECK_EQ(((int64_t *)tsr_tensor_data(i))[1], 1);
        CHECK_OK(tsr_tensor_decref(v));
        CHECK_OK(tsr_tensor_decref(i));
        CHECK_STATUS(tsr_max_dim(a, 2, false, &v, &i), TSR_ERR_SHAPE);
        CHECK_MSG_CONTAINS("tsr_max_dim: dim 2 is out of range");
    }
    CHECK_STATUS(tsr_sum(a, 2, bad, false, &r), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("appears multiple times");
    CHECK_STATUS(tsr_sum(a, 1, NULL, false, &r), TSR_ERR_NULL_POINTER);
    /* integers sum to Long */
    l = longs(3, lv);
    CHECK_OK(tsr_sum(l, 0, NULL, false, &r));
    CHECK_EQ(tsr_tensor_dtype(r), TSR_LONG);
    CHECK_EQ(((int64_t *)tsr_tensor_data(r))[0], 12);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_prod(l, 0, NULL, false, &r));
    CHECK_EQ(((int64_t *)tsr_tensor_data(r))[0], -90);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_STATUS(tsr_vector_norm(l, 2.0, 0, NULL, false, &r), TSR_ERR_DTYPE);
    CHECK_MSG_CONTAINS("tsr_vector_norm: vector_norm of a Long tensor");
    CHECK_STATUS(tsr_mean(l, 0, NULL, false, &r), TSR_ERR_DTYPE);
    CHECK_MSG_CONTAINS("tsr_mean: mean of a Long tensor");
    /* empty dims: the sum is 0, the maximum an error naming the dim */
    CHECK_OK(tsr_tensor_empty(2, empty, TSR_FLOAT, cpu(), &e));
    CHECK_OK(tsr_sum(e, 1, dims, false, &r));
    CHECK_EQ(tsr_tensor_numel(r), 2);
    CHECK(at(r, 0) == 0 && at(r, 1) == 0);
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_STATUS(tsr_amax(e, 1, dims, false, &r), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("tsr_amax: reduction dim 1 has size 0");
    CHECK_STATUS(tsr_amin(e, 1, dims, false, &r), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("tsr_amin: reduction dim 1 has size 0: the minimum");
    CHECK_OK(tsr_tensor_decref(e));
    CHECK_OK(tsr_tensor_decref(l));
    CHECK_OK(tsr_tensor_decref(a));
}

static void test_copy_fill_and_null_arguments(void) {
    int64_t ms[] = {2, 3}, ts[] = {3, 2}, perm[] = {1, 0};
    float mv[] = {1, 2, 3, 4, 5, 6};
    TsrTensor *a = floats(2, ms, mv), *t = NULL, *h = NULL, *r = NULL;
    uint16_t *bits;
    CHECK_OK(tsr_tensor_permute(a, 2, perm, &t));
    CHECK_OK(tsr_tensor_empty(2, ts, TSR_HALF, cpu(), &h));
    CHECK_OK(tsr_tensor_copy(h, t)); /* transpose and cast to half */
    bits = (uint16_t *)tsr_tensor_data(h);
    CHECK_EQ(bits[1], 0x4400); /* 4.0 in binary16, element [0][1] = a[1][0] */
    CHECK_OK(tsr_tensor_fill(h, tsr_scalar_float(0.5)));
    CHECK_EQ(bits[5], 0x3800);
    CHECK_STATUS(tsr_add(NULL, a, a, tsr_scalar_int(1), NULL), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_add: argument 'result' is NULL");
    CHECK_STATUS(tsr_add(NULL, NULL, a, tsr_scalar_int(1), &r), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_mul(NULL, a, NULL, &r), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_neg(NULL, NULL, &r), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_sum(NULL, 0, NULL, false, &r), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_amax(a, 0, NULL, false, NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_scalar_tensor(tsr_scalar_int(1), NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_add(NULL, a, h, tsr_scalar_int(1), &r), TSR_ERR_SHAPE);
    CHECK(r == NULL);
    CHECK_OK(tsr_tensor_decref(h));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_tensor_decref(a));
}

int main(void) {
    RUN(test_add_broadcast_and_alpha);
    RUN(test_promotion_and_wrapped_numbers);
    RUN(test_division_by_zero);
    RUN(test_neg_and_bool_rules);
    RUN(test_sum_and_amax);
    RUN(test_copy_fill_and_null_arguments);
    printf("all %d checks passed\n", tsr_test_checks);
    return 0;
}
