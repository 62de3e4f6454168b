/*
 * dtypes: c10's numbers, item sizes and names of all 47 ScalarTypes of
 * PyTorch 2.15 (tests/data/torch_dtypes.jsonl);
 * promotion and can_cast for all 144 pairs of the 12 common dtypes (a table
 * written down from PyTorch's results); the promotion errors for
 * quantized, float8 and UInt16/32/64 types (every pair of the 47:
 * tests/dtype_pairs.rs).
 */
#include "tsr_test.h"

static void test_itemsize_and_names(void) {
    static const struct {
        TsrDType dtype;
        int number;
        size_t itemsize;
        const char *name;
        bool floating, complex;
    } dtypes[] = {
        {TSR_BYTE, 0, 1, "Byte", false, false},
        {TSR_CHAR, 1, 1, "Char", false, false},
        {TSR_SHORT, 2, 2, "Short", false, false},
        {TSR_INT, 3, 4, "Int", false, false},
        {TSR_LONG, 4, 8, "Long", false, false},
        {TSR_HALF, 5, 2, "Half", true, false},
        {TSR_FLOAT, 6, 4, "Float", true, false},
        {TSR_DOUBLE, 7, 8, "Double", true, false},
        {TSR_COMPLEX_HALF, 8, 4, "ComplexHalf", false, true},
        {TSR_COMPLEX_FLOAT, 9, 8, "ComplexFloat", false, true},
        {TSR_COMPLEX_DOUBLE, 10, 16, "ComplexDouble", false, true},
        {TSR_BOOL, 11, 1, "Bool", false, false},
        {TSR_QINT8, 12, 1, "QInt8", false, false},
        {TSR_QUINT8, 13, 1, "QUInt8", false, false},
        {TSR_QINT32, 14, 4, "QInt32", false, false},
        {TSR_BFLOAT16, 15, 2, "BFloat16", true, false},
        {TSR_QUINT4X2, 16, 1, "QUInt4x2", false, false},
        {TSR_QUINT2X4, 17, 1, "QUInt2x4", false, false},
        {TSR_BITS1X8, 18, 1, "Bits1x8", false, false},
        {TSR_BITS2X4, 19, 1, "Bits2x4", false, false},
        {TSR_BITS4X2, 20, 1, "Bits4x2", false, false},
        {TSR_BITS8, 21, 1, "Bits8", false, false},
        {TSR_BITS16, 22, 2, "Bits16", false, false},
        {TSR_FLOAT8_E5M2, 23, 1, "Float8_e5m2", true, false},
        {TSR_FLOAT8_E4M3FN, 24, 1, "Float8_e4m3fn", true, false},
        {TSR_FLOAT8_E5M2FNUZ, 25, 1, "Float8_e5m2fnuz", true, false},
        {TSR_FLOAT8_E4M3FNUZ, 26, 1, "Float8_e4m3fnuz", true, false},
        {TSR_UINT16, 27, 2, "UInt16", false, false},
        {TSR_UINT32, 28, 4, "UInt32", false, false},
        {TSR_UINT64, 29, 8, "UInt64", false, false},
        {TSR_UINT1, 30, 1, "UInt1", false, false},
        {TSR_UINT2, 31, 1, "UInt2", false, false},
        {TSR_UINT3, 32, 1, "UInt3", false, false},
        {TSR_UINT4, 33, 1, "UInt4", false, false},
        {TSR_UINT5, 34, 1, "UInt5", false, false},
        {TSR_UINT6, 35, 1, "UInt6", false, false},
        {TSR_UINT7, 36, 1, "UInt7", false, false},
        {TSR_INT1, 37, 1, "Int1", false, false},
        {TSR_INT2, 38, 1, "Int2", false, false},
        {TSR_INT3, 39, 1, "Int3", false, false},
        {TSR_INT4, 40, 1, "Int4", false, false},
        {TSR_INT5, 41, 1, "Int5", false, false},
        {TSR_INT6, 42, 1, "Int6", false, false},
        {TSR_INT7, 43, 1, "Int7", false, false},
        {TSR_FLOAT8_E8M0FNU, 44, 1, "Float8_e8m0fnu", true, false},
        {TSR_FLOAT4_E2M1FN_X2, 45, 1, "Float4_e2m1fn_x2", true, false},
        {TSR_BCOMPLEX32, 46, 4, "BComplex32", false, true},
    };
    size_t i;
    int valid = 0, n;
    for (i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        TsrDType d = dtypes[i].dtype;
        CHECK_EQ(d, dtypes[i].number);
        CHECK(tsr_dtype_is_valid(d));
        CHECK_EQ(tsr_dtype_itemsize(d), dtypes[i].itemsize);
        if (strcmp(tsr_dtype_name(d), dtypes[i].name) != 0) {
            fprintf(stderr, "tsr_dtype_name(%d) = %s, expected %s\n", (int)d,
                    tsr_dtype_name(d), dtypes[i].name);
        }
        CHECK(strcmp(tsr_dtype_name(d), dtypes[i].name) == 0);
        CHECK_EQ(tsr_dtype_is_floating(d), dtypes[i].floating);
        CHECK_EQ(tsr_dtype_is_complex(d), dtypes[i].complex);
    }
    /* exactly these numbers are valid */
    for (n = -128; n < 128; n++) valid += tsr_dtype_is_valid((TsrDType)n);
    CHECK_EQ(valid, (int)(sizeof dtypes / sizeof dtypes[0]));

    /* the aliases */
    CHECK_EQ(TSR_UINT8, TSR_BYTE);
    CHECK_EQ(TSR_INT8, TSR_CHAR);
    CHECK_EQ(TSR_INT16, TSR_SHORT);
    CHECK_EQ(TSR_INT32, TSR_INT);
    CHECK_EQ(TSR_INT64, TSR_LONG);
    CHECK_EQ(TSR_FLOAT16, TSR_HALF);
    CHECK_EQ(TSR_FLOAT32, TSR_FLOAT);
    CHECK_EQ(TSR_FLOAT64, TSR_DOUBLE);
    CHECK_EQ(sizeof(TsrDType), 1);
}

/* The 12 common dtypes, in the order of the tables below. */
#define B1 TSR_BOOL
#define U1 TSR_BYTE
#define I1 TSR_CHAR
#define I2 TSR_SHORT
#define I4 TSR_INT
#define I8 TSR_LONG
#define F2 TSR_HALF
#define BF TSR_BFLOAT16
#define F4 TSR_FLOAT
#define F8 TSR_DOUBLE
#define C4 TSR_COMPLEX_FLOAT
#define C8 TSR_COMPLEX_DOUBLE

static const TsrDType common[12] = {B1, U1, I1, I2, I4, I8, F2, BF, F4, F8, C4, C8};

/* promote_types(row, column), as PyTorch computes it. */
static const TsrDType promoted[12][12] = {
    /*        B1  U1  I1  I2  I4  I8  F2  BF  F4  F8  C4  C8 */
    /* B1 */ {B1, U1, I1, I2, I4, I8, F2, BF, F4, F8, C4, C8},
    /* U1 */ {U1, U1, I2, I2, I4, I8, F2, BF, F4, F8, C4, C8},
    /* I1 */ {I1, I2, I1, I2, I4, I8, F2, BF, F4, F8, C4, C8},
    /* I2 */ {I2, I2, I2, I2, I4, I8, F2, BF, F4, F8, C4, C8},
    /* I4 */ {I4, I4, I4, I4, I4, I8, F2, BF, F4, F8, C4, C8},
    /* I8 */ {I8, I8, I8, I8, I8, I8, F2, BF, F4, F8, C4, C8},
    /* F2 */ {F2, F2, F2, F2, F2, F2, F2, F4, F4, F8, C4, C8},
    /* BF */ {BF, BF, BF, BF, BF, BF, F4, BF, F4, F8, C4, C8},
    /* F4 */ {F4, F4, F4, F4, F4, F4, F4, F4, F4, F8, C4, C8},
    /* F8 */ {F8, F8, F8, F8, F8, F8, F8, F8, F8, F8, C8, C8},
    /* C4 */ {C4, C4, C4, C4, C4, C4, C4, C4, C4, C8, C4, C8},
    /* C8 */ {C8, C8, C8, C8, C8, C8, C8, C8, C8, C8, C8, C8},
};

/* can_cast(row -> column), as PyTorch computes it. */
static const bool castable[12][12] = {
    /*       B1 U1 I1 I2 I4 I8 F2 BF F4 F8 C4 C8 */
    /* B1 */ {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* U1 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* I1 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* I2 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* I4 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* I8 */ {0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    /* F2 */ {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1},
    /* BF */ {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1},
    /* F4 */ {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1},
    /* F8 */ {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1},
    /* C4 */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
    /* C8 */ {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1},
};

static void test_promotion_of_all_pairs(void) {
    int i, j, pairs = 0, wrong = 0;
    for (i = 0; i < 12; i++) {
        for (j = 0; j < 12; j++) {
            TsrDType out = (TsrDType)-1;
            TsrStatus s = tsr_promote_types(common[i], common[j], &out);
            pairs++;
            if (s != TSR_OK || out != promoted[i][j]) {
                fprintf(stderr, "promote_types(%s, %s) = %s (%s), expected %s\n",
                        tsr_dtype_name(common[i]), tsr_dtype_name(common[j]),
                        tsr_dtype_name(out), tsr_status_name(s), tsr_dtype_name(promoted[i][j]));
                wrong++;
            }
        }
    }
    CHECK_EQ(pairs, 144);
    CHECK_EQ(wrong, 0);
}

static void test_can_cast_of_all_pairs(void) {
    int i, j, pairs = 0, wrong = 0;
    for (i = 0; i < 12; i++) {
        for (j = 0; j < 12; j++) {
            bool got = tsr_can_cast(common[i], common[j]);
            pairs++;
            if (got != castable[i][j]) {
                fprintf(stderr, "can_cast(%s -> %s) = %d, expected %d\n",
                        tsr_dtype_name(common[i]), tsr_dtype_name(common[j]), (int)got,
                        (int)castable[i][j]);
                wrong++;
            }
        }
    }
    CHECK_EQ(pairs, 144);
    CHECK_EQ(wrong, 0);
}

/* Pairs outside the 12: complex half and the wide unsigned types with
 * floating types. */
static void test_promotion_beyond_the_table(void) {
    static const TsrDType cases[][3] = {
        {TSR_COMPLEX_HALF, TSR_HALF, TSR_COMPLEX_HALF},
        {TSR_COMPLEX_HALF, TSR_FLOAT, TSR_COMPLEX_FLOAT},
        {TSR_COMPLEX_HALF, TSR_DOUBLE, TSR_COMPLEX_DOUBLE},
        {TSR_COMPLEX_HALF, TSR_LONG, TSR_COMPLEX_HALF},
        {TSR_UINT16, TSR_FLOAT, TSR_FLOAT},
        {TSR_DOUBLE, TSR_UINT32, TSR_DOUBLE},
        {TSR_UINT64, TSR_HALF, TSR_HALF},
        {TSR_UINT16, TSR_UINT16, TSR_UINT16},
        {TSR_QINT8, TSR_QINT8, TSR_QINT8},
        {TSR_FLOAT8_E5M2, TSR_FLOAT8_E5M2, TSR_FLOAT8_E5M2},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TsrDType out = (TsrDType)-1;
        CHECK_OK(tsr_promote_types(cases[i][0], cases[i][1], &out));
        if (out != cases[i][2]) {
            fprintf(stderr, "promote_types(%s, %s) = %s, expected %s\n",
                    tsr_dtype_name(cases[i][0]), tsr_dtype_name(cases[i][1]),
                    tsr_dtype_name(out), tsr_dtype_name(cases[i][2]));
        }
        CHECK_EQ(out, cases[i][2]);
    }
}

static void test_promotion_errors(void) {
    static const TsrDType refused[][2] = {
        {TSR_QINT8, TSR_FLOAT},         {TSR_INT, TSR_QUINT8},
        {TSR_QINT32, TSR_QINT8},        {TSR_QUINT8, TSR_BYTE},
        {TSR_FLOAT8_E5M2, TSR_FLOAT},   {TSR_HALF, TSR_FLOAT8_E4M3FN},
        {TSR_FLOAT8_E4M3FN, TSR_FLOAT8_E5M2},
        {TSR_UINT16, TSR_INT},          {TSR_LONG, TSR_UINT64},
        {TSR_UINT32, TSR_BOOL},         {TSR_UINT16, TSR_UINT32},
        {TSR_UINT64, TSR_COMPLEX_FLOAT},
    };
    size_t i;
    for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        TsrDType out = TSR_BOOL;
        TsrStatus s = tsr_promote_types(refused[i][0], refused[i][1], &out);
        if (s != TSR_ERR_DTYPE) {
            fprintf(stderr, "promote_types(%s, %s) returned %s\n", tsr_dtype_name(refused[i][0]),
                    tsr_dtype_name(refused[i][1]), tsr_status_name(s));
        }
        CHECK_EQ(s, TSR_ERR_DTYPE);
        CHECK_EQ(out, TSR_BOOL);
        CHECK(strstr(tsr_last_error_message(), "tsr_promote_types") != NULL);
        /* the message names both dtypes */
        CHECK(strstr(tsr_last_error_message(), tsr_dtype_name(refused[i][0])) != NULL);
        CHECK(strstr(tsr_last_error_message(), tsr_dtype_name(refused[i][1])) != NULL);
    }
}

/* bfloat16 bits of small exact values */
static uint16_t bf16_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)(u >> 16);
}

/* BComplex32 computes through the C API; a storage-only dtype refuses
 * arithmetic naming the dtype; the new types promote as c10. */
static void test_new_dtypes_through_c(void) {
    TsrDevice cpu = {TSR_CPU, -1};
    int64_t n = 3;
    TsrTensor *a = NULL, *b = NULL, *r = NULL, *s = NULL, *bits = NULL;
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_BCOMPLEX32, cpu, &a));
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_BCOMPLEX32, cpu, &b));
    CHECK_OK(tsr_tensor_fill(a, tsr_scalar_complex(1.5, -2.0)));
    CHECK_OK(tsr_tensor_fill(b, tsr_scalar_complex(0.5, 4.0)));
    CHECK_OK(tsr_add(NULL, a, b, tsr_scalar_int(2), &r));
    CHECK_EQ(tsr_tensor_dtype(r), TSR_BCOMPLEX32);
    const uint16_t *p = (const uint16_t *)tsr_tensor_data(r);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(p[2 * i], bf16_bits(2.5f));   /* 1.5 + 2 * 0.5 */
        CHECK_EQ(p[2 * i + 1], bf16_bits(6.0f)); /* -2 + 2 * 4 */
    }
    CHECK_OK(tsr_sum(r, 0, NULL, false, &s));
    CHECK_EQ(tsr_tensor_dtype(s), TSR_BCOMPLEX32);
    p = (const uint16_t *)tsr_tensor_data(s);
    CHECK_EQ(p[0], bf16_bits(7.5f));
    CHECK_EQ(p[1], bf16_bits(18.0f));

    CHECK_OK(tsr_tensor_empty(1, &n, TSR_BITS8, cpu, &bits));
    TsrTensor *none = NULL;
    CHECK_STATUS(tsr_add(NULL, bits, bits, tsr_scalar_int(1), &none), TSR_ERR_UNSUPPORTED);
    CHECK_MSG_CONTAINS("Bits8");
    CHECK(none == NULL);

    static const TsrDType promoted[][3] = {
        {TSR_BCOMPLEX32, TSR_INT, TSR_BCOMPLEX32},
        {TSR_BCOMPLEX32, TSR_HALF, TSR_COMPLEX_FLOAT},
        {TSR_BFLOAT16, TSR_BCOMPLEX32, TSR_BCOMPLEX32},
        {TSR_UINT4, TSR_DOUBLE, TSR_DOUBLE},
        {TSR_FLOAT4_E2M1FN_X2, TSR_UINT16, TSR_FLOAT4_E2M1FN_X2},
        {TSR_INT3, TSR_INT3, TSR_INT3},
    };
    static const TsrDType refused[][2] = {
        {TSR_BITS8, TSR_FLOAT},       {TSR_QUINT4X2, TSR_BYTE}, {TSR_FLOAT8_E8M0FNU, TSR_FLOAT},
        {TSR_INT4, TSR_FLOAT},        {TSR_UINT2, TSR_INT},     {TSR_FLOAT4_E2M1FN_X2, TSR_HALF},
    };
    size_t i;
    for (i = 0; i < sizeof promoted / sizeof promoted[0]; i++) {
        TsrDType out = (TsrDType)-1;
        CHECK_OK(tsr_promote_types(promoted[i][0], promoted[i][1], &out));
        CHECK_EQ(out, promoted[i][2]);
    }
    for (i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        TsrDType out = TSR_BOOL;
        CHECK_STATUS(tsr_promote_types(refused[i][0], refused[i][1], &out), TSR_ERR_DTYPE);
        CHECK(strstr(tsr_last_error_message(), tsr_dtype_name(refused[i][0])) != NULL);
        CHECK(strstr(tsr_last_error_message(), tsr_dtype_name(refused[i][1])) != NULL);
        CHECK_EQ(out, TSR_BOOL);
    }
    CHECK(!tsr_can_cast(TSR_BCOMPLEX32, TSR_BFLOAT16));
    CHECK(tsr_can_cast(TSR_FLOAT, TSR_INT4)); /* Int4 is not integral in c10 */
    CHECK(!tsr_can_cast(TSR_FLOAT4_E2M1FN_X2, TSR_LONG));

    CHECK_OK(tsr_tensor_decref(bits));
    CHECK_OK(tsr_tensor_decref(s));
    CHECK_OK(tsr_tensor_decref(r));
    CHECK_OK(tsr_tensor_decref(b));
    CHECK_OK(tsr_tensor_decref(a));
}

int main(void) {
    RUN(test_itemsize_and_names);
    RUN(test_promotion_of_all_pairs);
    RUN(test_can_cast_of_all_pairs);
    RUN(test_promotion_beyond_the_table);
    RUN(test_promotion_errors);
    RUN(test_new_dtypes_through_c);
    return 0;
}
