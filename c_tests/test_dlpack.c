/* DLPack exchange through the C API: export fields, round trips, deleters
 * run exactly once, NULL strides, byte_offset, and refusals that consume
 * the tensor. dlpack.h (a stand-in with the same guard) is included BEFORE
 * tessera.h here; test_dlpack_header_order.c checks the other order. */
#include "dlpack_fixture/dlpack/dlpack.h"

#include "tsr_test.h"

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

/* A float tensor of `sizes` holding 0, 1, 2, ... */
static TsrTensor *arange(int64_t ndim, const int64_t *sizes) {
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_empty(ndim, sizes, TSR_FLOAT, cpu(), &t));
    float *p = (float *)tsr_tensor_data(t);
    for (int64_t i = 0; i < tsr_tensor_numel(t); i++) p[i] = (float)i;
    return t;
}

/* ---- a producer: a managed tensor over its own buffer, counting deletes ---- */

typedef struct {
    DLManagedTensorVersioned managed; /* first: the deleter casts back */
    int64_t shape[4];
    int64_t strides[4];
    double buffer[32];                /* 64 floats, 8-byte aligned */
    int *deletes;
} Producer;

typedef struct {
    DLManagedTensor managed;
    int64_t shape[4];
    double buffer[32];
    int *deletes;
} LegacyProducer;

static void producer_deleter(DLManagedTensorVersioned *self) {
    Producer *p = (Producer *)self;
    (*p->deletes)++;
    free(p);
}

static void legacy_deleter(DLManagedTensor *self) {
    LegacyProducer *p = (LegacyProducer *)self;
    (*p->deletes)++;
    free(p);
}

static void fill_floats(double *buffer) {
    float *f = (float *)buffer;
    for (int i = 0; i < 64; i++) f[i] = (float)i;
}

/* A 1.1 float tensor of `ndim` sizes, compact strides unless `strides`. */
static Producer *producer(int32_t ndim, const int64_t *shape, const int64_t *strides, int *deletes) {
    Producer *p = (Producer *)calloc(1, sizeof(Producer));
    CHECK(p != NULL);
    fill_floats(p->buffer);
    p->deletes = deletes;
    for (int32_t i = 0; i < ndim; i++) {
        p->shape[i] = shape[i];
        if (strides != NULL) p->strides[i] = strides[i];
    }
    p->managed.version.major = DLPACK_MAJOR_VERSION;
    p->managed.version.minor = DLPACK_MINOR_VERSION;
    p->managed.deleter = producer_deleter;
    p->managed.dl_tensor.data = p->buffer;
    p->managed.dl_tensor.device.device_type = kDLCPU;
    p->managed.dl_tensor.ndim = ndim;
    p->managed.dl_tensor.dtype.code = kDLFloat;
    p->managed.dl_tensor.dtype.bits = 32;
    p->managed.dl_tensor.dtype.lanes = 1;
    p->managed.dl_tensor.shape = p->shape;
    p->managed.dl_tensor.strides = strides != NULL ? p->strides : NULL;
    return p;
}

static void test_dlpack_h_first(void) {
    /* dlpack.h's declarations are in effect, tessera's block was skipped */
    CHECK(TSR_TEST_DLPACK_FIXTURE == 1);
    DLPackExchangeAPIHeader only_in_dlpack_h = {{1, 1}, NULL};
    CHECK_EQ(only_in_dlpack_h.version.major, 1);
    CHECK_EQ(DLPACK_MAJOR_VERSION, 1);
}

static void test_export_fields(void) {
    int64_t sizes[] = {2, 3};
    TsrTensor *base = arange(2, sizes);
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_transpose(base, 0, 1, &t));
    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tsr_tensor_to_dlpack(t, &m));
    CHECK(m != NULL);
    CHECK_EQ(m->version.major, 1);
    CHECK_EQ(m->version.minor, 1);
    CHECK_EQ(m->flags & DLPACK_FLAG_BITMASK_READ_ONLY, 0);
    CHECK_EQ(m->flags & DLPACK_FLAG_BITMASK_IS_COPIED, 0);
    CHECK(m->deleter != NULL);
    const DLTensor *d = &m->dl_tensor;
    CHECK(d->data == tsr_tensor_data(t));
    CHECK_EQ(d->byte_offset, 0);
    CHECK_EQ(d->device.device_type, kDLCPU);
    CHECK_EQ(d->device.device_id, 0);
    CHECK_EQ(d->dtype.code, kDLFloat);
    CHECK_EQ(d->dtype.bits, 32);
    CHECK_EQ(d->dtype.lanes, 1);
    CHECK_EQ(d->ndim, 2);
    CHECK_EQ(d->shape[0], 3);
    CHECK_EQ(d->shape[1], 2);
    CHECK(d->strides != NULL);
    CHECK_EQ(d->strides[0], 1);
    CHECK_EQ(d->strides[1], 3);

    /* manager_ctx is the storage, referenced by the export: the memory
     * outlives the tensors */
    TsrStorage *s = tsr_tensor_storage(t);
    CHECK(m->manager_ctx == (void *)s);
    TsrWeakStorage *w = NULL;
    CHECK_OK(tsr_storage_downgrade(s, &w));
    CHECK_OK(tsr_storage_decref(s));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_OK(tsr_tensor_decref(base));
    CHECK(!tsr_weak_storage_expired(w));
    CHECK(((const float *)d->data)[1 * d->strides[0] + 1 * d->strides[1]] == 4.0f);
    m->deleter(m);
    CHECK(tsr_weak_storage_expired(w));
    CHECK_OK(tsr_weak_storage_decref(w));
}

static void test_round_trip(void) {
    int64_t sizes[] = {2, 3, 4};
    TsrTensor *base = arange(3, sizes);
    int64_t perm[] = {1, 2, 0};
    TsrTensor *v = NULL;
    CHECK_OK(tsr_tensor_permute(base, 3, perm, &v));
    TsrTensor *n = NULL;
    CHECK_OK(tsr_tensor_narrow(v, 1, 1, 2, &n));

    DLManagedTensorVersioned *m = NULL;
    CHECK_OK(tsr_tensor_to_dlpack(n, &m));
    TsrTensor *back = NULL;
    CHECK_OK(tsr_tensor_from_dlpack(m, &back));
    CHECK(tsr_tensor_data(back) == tsr_tensor_data(n));
    CHECK_EQ(tsr_tensor_ndim(back), 3);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(tsr_tensor_sizes(back)[i], tsr_tensor_sizes(n)[i]);
        CHECK_EQ(tsr_tensor_strides(back)[i], tsr_tensor_strides(n)[i]);
    }
    CHECK_EQ(tsr_tensor_dtype(back), TSR_FLOAT);

    DLManagedTensor *lm = NULL;
    CHECK_OK(tsr_tensor_to_dlpack_legacy(n, &lm));
    TsrTensor *back2 = NULL;
    CHECK_OK(tsr_tensor_from_dlpack_legacy(lm, &back2));
    CHECK(tsr_tensor_data(back2) == tsr_tensor_data(n));
    CHECK_EQ(tsr_tensor_strides(back2)[2], tsr_tensor_strides(n)[2]);

    CHECK_OK(tsr_tensor_decref(n));
    CHECK_OK(tsr_tensor_decref(v));
    CHECK_OK(tsr_tensor_decref(base));
    CHECK_OK(tsr_tensor_decref(back));
    CHECK_OK(tsr_tensor_decref(back2));
}

static void test_import_deleter_runs_once(void) {
    int deletes = 0;
    int64_t shape[] = {4, 5};
    Producer *p = producer(2, shape, NULL, &deletes);
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_from_dlpack(&p->managed, &t));
    CHECK(tsr_tensor_data(t) == (void *)p->buffer);
    TsrTensor *row = NULL;
    CHECK_OK(tsr_tensor_select(t, 0, 3, &row));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_EQ(deletes, 0);
    CHECK(((const float *)tsr_tensor_data(row))[4] == 19.0f);
    CHECK_OK(tsr_tensor_decref(row));
    CHECK_EQ(deletes, 1);
}

static void test_null_strides_and_byte_offset(void) {
    int deletes = 0;
    int64_t shape[] = {2, 3};
    Producer *p = producer(2, shape, NULL, &deletes);
    p->managed.dl_tensor.byte_offset = 4 * sizeof(float);
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_from_dlpack(&p->managed, &t));
    CHECK_EQ(tsr_tensor_strides(t)[0], 3);
    CHECK_EQ(tsr_tensor_strides(t)[1], 1);
    CHECK(tsr_tensor_is_contiguous(t, TSR_CONTIGUOUS));
    CHECK(tsr_tensor_data(t) == (void *)((char *)p->buffer + 16));
    CHECK(((const float *)tsr_tensor_data(t))[0] == 4.0f);
    TsrStorage *s = tsr_tensor_storage(t);
    CHECK_EQ(tsr_storage_nbytes(s), 6 * sizeof(float));
    CHECK_OK(tsr_storage_decref(s));
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_EQ(deletes, 1);

    /* legacy, explicit strides */
    LegacyProducer *lp = (LegacyProducer *)calloc(1, sizeof(LegacyProducer));
    CHECK(lp != NULL);
    fill_floats(lp->buffer);
    lp->deletes = &deletes;
    lp->shape[0] = 5;
    lp->managed.deleter = legacy_deleter;
    lp->managed.dl_tensor.data = lp->buffer;
    lp->managed.dl_tensor.device.device_type = kDLCPU;
    lp->managed.dl_tensor.ndim = 1;
    lp->managed.dl_tensor.dtype.code = kDLFloat;
    lp->managed.dl_tensor.dtype.bits = 32;
    lp->managed.dl_tensor.dtype.lanes = 1;
    lp->managed.dl_tensor.shape = lp->shape;
    CHECK_OK(tsr_tensor_from_dlpack_legacy(&lp->managed, &t));
    CHECK_EQ(tsr_tensor_strides(t)[0], 1);
    CHECK(((const float *)tsr_tensor_data(t))[4] == 4.0f);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_EQ(deletes, 2);
}

/* Imports a producer that must be refused with `status`: out untouched and
 * the producer's deleter called once. */
static void check_refused(Producer *p, int *deletes, TsrStatus status, const char *needle) {
    TsrTensor *sentinel = (TsrTensor *)&sentinel;
    TsrTensor *out = sentinel;
    *deletes = 0;
    CHECK_STATUS(tsr_tensor_from_dlpack(&p->managed, &out), status);
    if (strstr(tsr_last_error_message(), needle) == NULL) {
        fprintf(stderr, "message lacks \"%s\"\n", needle);
        CHECK(0);
    }
    CHECK(out == sentinel);
    CHECK_EQ(*deletes, 1);
}

static void test_refusals(void) {
    int deletes = 0;
    int64_t shape[] = {2, 3};
    Producer *p = producer(2, shape, NULL, &deletes);
    p->managed.dl_tensor.dtype.lanes = 4;
    check_refused(p, &deletes, TSR_ERR_DTYPE, "4 lanes");

    p = producer(2, shape, NULL, &deletes);
    p->managed.dl_tensor.dtype.code = 99;
    check_refused(p, &deletes, TSR_ERR_DTYPE, "unknown DLPack type code 99");

    p = producer(2, shape, NULL, &deletes);
    p->managed.version.major = 2;
    p->managed.version.minor = 0;
    check_refused(p, &deletes, TSR_ERR_UNSUPPORTED, "DLPack version 2.0 is not supported");
    CHECK_MSG_CONTAINS("major version 1");

    int64_t negative[] = {2, -3};
    p = producer(2, negative, NULL, &deletes);
    check_refused(p, &deletes, TSR_ERR_SHAPE, "-3");

    int64_t strides[] = {-3, 1};
    p = producer(2, shape, strides, &deletes);
    p->managed.dl_tensor.byte_offset = 3 * sizeof(float);
    check_refused(p, &deletes, TSR_ERR_UNSUPPORTED, "negative stride");

    p = producer(2, shape, NULL, &deletes);
    p->managed.dl_tensor.device.device_type = kDLMetal;
    check_refused(p, &deletes, TSR_ERR_UNSUPPORTED, "kDLMetal");

    p = producer(2, shape, NULL, &deletes);
    p->managed.dl_tensor.ndim = 65;
    check_refused(p, &deletes, TSR_ERR_SHAPE, "ndim 65");

    /* NULL out: still consumed */
    p = producer(2, shape, NULL, &deletes);
    deletes = 0;
    CHECK_STATUS(tsr_tensor_from_dlpack(&p->managed, NULL), TSR_ERR_NULL_POINTER);
    CHECK_EQ(deletes, 1);
    TsrTensor *out = NULL;
    CHECK_STATUS(tsr_tensor_from_dlpack(NULL, &out), TSR_ERR_NULL_POINTER);
    CHECK(out == NULL);
}

static void test_export_refusals(void) {
    int64_t n = 4;
    TsrTensor *q = NULL;
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_QUINT8, cpu(), &q));
    DLManagedTensorVersioned *m = NULL;
    CHECK_STATUS(tsr_tensor_to_dlpack(q, &m), TSR_ERR_DTYPE);
    CHECK_MSG_CONTAINS("QUInt8");
    CHECK(m == NULL);
    CHECK_OK(tsr_tensor_decref(q));
    TsrDevice meta = {TSR_META, -1};
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_FLOAT, meta, &t));
    CHECK_STATUS(tsr_tensor_to_dlpack(t, &m), TSR_ERR_UNSUPPORTED);
    CHECK_MSG_CONTAINS("meta");
    CHECK(m == NULL);
    CHECK_OK(tsr_tensor_decref(t));
}

int main(void) {
    RUN(test_dlpack_h_first);
    RUN(test_export_fields);
    RUN(test_round_trip);
    RUN(test_import_deleter_runs_once);
    RUN(test_null_strides_and_byte_offset);
    RUN(test_refusals);
    RUN(test_export_refusals);
    return 0;
}
