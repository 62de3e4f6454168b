/* Float8 conversions through the C API: copy from and to float, fill,
 * and Float4_e2m1fn_x2's refusals (c10 2.15's rules; the exhaustive
 * checks are tests/float8_formats.rs and tests/float8_copy.rs). */
#include <math.h>
#include <string.h>

#include "tsr_test.h"

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

static TsrTensor *empty1(int64_t n, TsrDType dtype) {
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_empty(1, &n, dtype, cpu(), &t));
    return t;
}

static void test_copy_float_to_float8_and_back(void) {
    /* 1, a tie (1.0625: to 1.0 in e4m3fn), 500 (e4m3fn saturates at 448,
     * e5m2 rounds to 512), -inf, NaN. */
    const float in[5] = {1.0f, 1.0625f, 500.0f, -INFINITY, NAN};
    const unsigned char e4m3fn[5] = {0x38, 0x38, 0x7E, 0xFE, 0x7F};
    const unsigned char e5m2[5] = {0x3C, 0x3C, 0x60, 0xFC, 0x7F};
    TsrTensor *f = empty1(5, TSR_FLOAT), *a = empty1(5, TSR_FLOAT8_E4M3FN),
              *b = empty1(5, TSR_FLOAT8_E5M2), *back = empty1(5, TSR_FLOAT);
    memcpy(tsr_tensor_data(f), in, sizeof in);
    CHECK_OK(tsr_tensor_copy(a, f));
    CHECK_OK(tsr_tensor_copy(b, f));
    CHECK(memcmp(tsr_tensor_data(a), e4m3fn, 5) == 0);
    CHECK(memcmp(tsr_tensor_data(b), e5m2, 5) == 0);
    CHECK_OK(tsr_tensor_copy(back, a));
    CHECK(((float *)tsr_tensor_data(back))[2] == 448.0f);
    CHECK(((float *)tsr_tensor_data(back))[3] == -448.0f);
    CHECK_OK(tsr_tensor_decref(f));
    CHECK_OK(tsr_tensor_decref(a));
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_tensor_decref(back));
}

static void test_fill(void) {
    TsrTensor *t = empty1(3, TSR_FLOAT8_E4M3FNUZ), *s = empty1(3, TSR_FLOAT8_E8M0FNU);
    const unsigned char *p = (const unsigned char *)tsr_tensor_data(t);
    CHECK_OK(tsr_tensor_fill(t, tsr_scalar_float(-0.0)));
    CHECK_EQ(p[1], 0x00); /* no negative zero */
    CHECK_OK(tsr_tensor_fill(t, tsr_scalar_int(300)));
    CHECK_EQ(p[2], 0x80); /* past 240: the one NaN */
    CHECK_OK(tsr_tensor_fill(s, tsr_scalar_float(-3.0)));
    /* 2^2: the sign dropped, 3 = 1.5 x 2^1 rounds up */
    CHECK_EQ(((const unsigned char *)tsr_tensor_data(s))[0], 129);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_tensor_decref(s));
}

static void test_float4_x2_is_storage_only(void) {
    TsrTensor *p = empty1(4, TSR_FLOAT4_E2M1FN_X2), *q = empty1(4, TSR_FLOAT4_E2M1FN_X2),
              *f = empty1(4, TSR_FLOAT);
    memset(tsr_tensor_data(p), 0x2F, 4);
    CHECK_OK(tsr_tensor_copy(q, p));
    CHECK(memcmp(tsr_tensor_data(q), tsr_tensor_data(p), 4) == 0);
    CHECK_STATUS(tsr_tensor_copy(f, p), TSR_ERR_UNSUPPORTED);
    CHECK_MSG_CONTAINS("Float4_e2m1fn_x2");
    CHECK_STATUS(tsr_tensor_fill(p, tsr_scalar_float(1.0)), TSR_ERR_UNSUPPORTED);
    CHECK_MSG_CONTAINS("Float4_e2m1fn_x2");
    CHECK_OK(tsr_tensor_decref(p));
    CHECK_OK(tsr_tensor_decref(q));
    CHECK_OK(tsr_tensor_decref(f));
}

int main(void) {
    RUN(test_copy_float_to_float8_and_back);
    RUN(test_fill);
    RUN(test_float4_x2_is_storage_only);
    printf("all %d checks passed\n", tsr_test_checks);
    return 0;
}
