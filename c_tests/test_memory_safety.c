/* A storage resized under the things that point into it (issue 36,
 * findings 1-3): a live DLPack export refuses the resize; a tensor left
 * larger than its shrunk storage is refused by every call that reads or
 * writes through it; an iterator built before a resize refuses to run.
 * Run under ASan + UBSan and valgrind by CI: before the fixes each case
 * read or wrote freed or out-of-bounds memory. */
#include "dlpack_fixture/dlpack/dlpack.h"
#include "tsr_test.h"

static const TsrDevice CPU = {TSR_CPU, -1};

/* A [1024] float tensor on a resizable 4096-byte storage. */
static void make_1024(TsrStorage **s, TsrTensor **t) {
    int64_t n = 1024;
    CHECK_OK(tsr_storage_new(4096, CPU, true, s));
    CHECK_OK(tsr_tensor_from_storage(*s, 0, 1, &n, NULL, TSR_FLOAT, t));
    CHECK_OK(tsr_tensor_fill(*t, tsr_scalar_float(1)));
}

static void test_resize_refused_while_dlpack_export_lives(void) {
    TsrStorage *s;
    TsrTensor *t;
    make_1024(&s, &t);
    DLManagedTensorVersioned *dl = NULL;
    CHECK_OK(tsr_tensor_to_dlpack(t, &dl));
    void *data = tsr_storage_data(s);
    CHECK_STATUS(tsr_storage_resize(s, 16), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_storage_resize");
    CHECK_MSG_CONTAINS("1 live DLPack export");
    CHECK_EQ(tsr_storage_nbytes(s), 4096);
    CHECK(tsr_storage_data(s) == data);
    /* The consumer's view still reads the original memory. */
    CHECK(((float *)dl->dl_tensor.data)[1023] == 1.0f);
    dl->deleter(dl);
    /* Once the export is gone the resize goes through. */
    CHECK_OK(tsr_storage_resize(s, 8192));
    CHECK_EQ(tsr_storage_nbytes(s), 8192);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_storage_decref(s));
}

static void test_shrunk_storage_refused_by_every_op(void) {
    TsrStorage *s;
    TsrTensor *t, *other, *r = NULL;
    int64_t n = 1024;
    make_1024(&s, &t);
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_FLOAT, CPU, &other));
    CHECK_OK(tsr_tensor_fill(other, tsr_scalar_float(2)));
    TsrTensor *v = NULL;
    int64_t half = 512, two = 2;
    CHECK_OK(tsr_tensor_as_strided(t, 1, &half, &two, 0, &v));
    CHECK_OK(tsr_storage_resize(s, 16));

    CHECK_STATUS(tsr_tensor_fill(t, tsr_scalar_float(3)), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("tsr_tensor_fill");
    CHECK_MSG_CONTAINS("spans 4096 bytes");
    CHECK_MSG_CONTAINS("now holds 16 bytes");
    CHECK_STATUS(tsr_tensor_copy(t, other), TSR_ERR_SHAPE);
    CHECK_MSG_CONTAINS("tsr_tensor_copy");
    CHECK_STATUS(tsr_tensor_copy(other, t), TSR_ERR_SHAPE);
    CHECK_STATUS(tsr_add(NULL, t, other, tsr_scalar_float(1), &r), TSR_ERR_SHAPE);
    CHECK(r == NULL);
    CHECK_STATUS(tsr_add(other, other, t, tsr_scalar_float(1), &r), TSR_ERR_SHAPE);
    CHECK_STATUS(tsr_sum(t, 0, NULL, false, &r), TSR_ERR_SHAPE);
    CHECK_STATUS(tsr_tensor_clone(t, &r), TSR_ERR_SHAPE);
    CHECK(r == NULL);
    DLManagedTensorVersioned *dl = NULL;
    CHECK_STATUS(tsr_tensor_to_dlpack(t, &dl), TSR_ERR_SHAPE);
    CHECK(dl == NULL);
    /* Strided (non-dense) paths: a view every other element, made
     * before the shrink. */
    CHECK_STATUS(tsr_tensor_fill(v, tsr_scalar_float(3)), TSR_ERR_SHAPE);
    CHECK_OK(tsr_tensor_decref(v));
    /* The other operand kept its values. */
    CHECK(((float *)tsr_tensor_data(other))[1023] == 2.0f);

    /* Growing the storage back makes the tensor usable again. */
    CHECK_OK(tsr_storage_resize(s, 4096));
    CHECK_OK(tsr_tensor_fill(t, tsr_scalar_float(3)));
    CHECK(((float *)tsr_tensor_data(t))[1023] == 3.0f);
    CHECK_OK(tsr_tensor_decref(other));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_storage_decref(s));
}

static void sum_loop(void *user, char **data, const int64_t *strides, int64_t n0, int64_t n1) {
    double *acc = user;
    for (int64_t j = 0; j < n1; j++)
        for (int64_t i = 0; i < n0; i++)
            *acc += *(float *)(data[1] + i * strides[1] + j * strides[3]);
}

static void test_iterator_refuses_to_run_after_resize(void) {
    TsrStorage *s;
    TsrTensor *t, *out;
    int64_t n = 1024;
    make_1024(&s, &t);
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_FLOAT, CPU, &out));
    TsrIter *it = NULL;
    CHECK_OK(tsr_iter_unary_op(out, t, &it));
    double acc = 0;
    CHECK_OK(tsr_iter_for_each(it, sum_loop, &acc, 0));
    CHECK(acc == 1024.0);

    /* Grown: the memory moved, the iterator's pointers are stale. */
    CHECK_OK(tsr_storage_resize(s, 8192));
    acc = 0;
    CHECK_STATUS(tsr_iter_for_each(it, sum_loop, &acc, 0), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_iter_for_each");
    CHECK_MSG_CONTAINS("operand 1");
    CHECK_MSG_CONTAINS("build it again");
    CHECK(acc == 0);
    CHECK_STATUS(tsr_iter_serial_for_each(it, sum_loop, &acc, 0, 1024), TSR_ERR_INVALID_ARGUMENT);
    CHECK(acc == 0);
    tsr_iter_free(it);

    /* Shrunk below the tensor: refused too. */
    CHECK_OK(tsr_iter_unary_op(out, t, &it));
    CHECK_OK(tsr_storage_resize(s, 16));
    CHECK_STATUS(tsr_iter_for_each(it, sum_loop, &acc, 0), TSR_ERR_SHAPE);
    CHECK(acc == 0);
    tsr_iter_free(it);

    CHECK_OK(tsr_tensor_decref(out));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_storage_decref(s));
}

int main(void) {
    RUN(test_resize_refused_while_dlpack_export_lives);
    RUN(test_shrunk_storage_refused_by_every_op);
    RUN(test_iterator_refuses_to_run_after_resize);
    printf("all memory-safety tests passed\n");
    return 0;
}
