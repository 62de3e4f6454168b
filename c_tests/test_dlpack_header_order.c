/* tessera.h included BEFORE dlpack.h: tessera's DLPack block defines
 * dlpack.h's guard, so the later include is skipped and tessera's
 * declarations (same names, values and layout) serve the whole program.
 * test_dlpack.c checks the other order. */
#include "tsr_test.h"

#include "dlpack_fixture/dlpack/dlpack.h"

#include <stddef.h>

#ifdef TSR_TEST_DLPACK_FIXTURE
#error "dlpack.h was not skipped after tessera.h"
#endif

static void test_tessera_h_first(void) {
    CHECK_EQ(DLPACK_MAJOR_VERSION, 1);
    CHECK_EQ(DLPACK_MINOR_VERSION, 1);
    CHECK_EQ(DLPACK_FLAG_BITMASK_READ_ONLY, 1);
    CHECK_EQ(DLPACK_FLAG_BITMASK_IS_COPIED, 2);
    CHECK_EQ(DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED, 4);
}

static void test_enum_values(void) {
    CHECK_EQ(kDLCPU, 1);
    CHECK_EQ(kDLCUDA, 2);
    CHECK_EQ(kDLCUDAHost, 3);
    CHECK_EQ(kDLOpenCL, 4);
    CHECK_EQ(kDLVulkan, 7);
    CHECK_EQ(kDLMetal, 8);
    CHECK_EQ(kDLVPI, 9);
    CHECK_EQ(kDLROCM, 10);
    CHECK_EQ(kDLROCMHost, 11);
    CHECK_EQ(kDLExtDev, 12);
    CHECK_EQ(kDLCUDAManaged, 13);
    CHECK_EQ(kDLOneAPI, 14);
    CHECK_EQ(kDLWebGPU, 15);
    CHECK_EQ(kDLHexagon, 16);
    CHECK_EQ(kDLMAIA, 17);
    CHECK_EQ(kDLInt, 0);
    CHECK_EQ(kDLUInt, 1);
    CHECK_EQ(kDLFloat, 2);
    CHECK_EQ(kDLOpaqueHandle, 3);
    CHECK_EQ(kDLBfloat, 4);
    CHECK_EQ(kDLComplex, 5);
    CHECK_EQ(kDLBool, 6);
    CHECK_EQ(kDLFloat8_e4m3fn, 10);
    CHECK_EQ(kDLFloat8_e5m2, 12);
}

static void test_layout(void) {
    CHECK_EQ(sizeof(DLDevice), 8);
    CHECK_EQ(sizeof(DLDataType), 4);
    CHECK_EQ(sizeof(DLPackVersion), 8);
    CHECK_EQ(offsetof(DLTensor, device), sizeof(void *));
    CHECK_EQ(offsetof(DLTensor, ndim), sizeof(void *) + 8);
    CHECK_EQ(offsetof(DLTensor, dtype), sizeof(void *) + 12);
    CHECK_EQ(offsetof(DLManagedTensor, dl_tensor), 0);
    CHECK_EQ(offsetof(DLManagedTensorVersioned, version), 0);
    CHECK_EQ(offsetof(DLManagedTensorVersioned, manager_ctx), 8);
#if UINTPTR_MAX == UINT64_MAX
    CHECK_EQ(sizeof(DLTensor), 48);
    CHECK_EQ(offsetof(DLTensor, shape), 24);
    CHECK_EQ(offsetof(DLTensor, strides), 32);
    CHECK_EQ(offsetof(DLTensor, byte_offset), 40);
    CHECK_EQ(sizeof(DLManagedTensor), 64);
    CHECK_EQ(offsetof(DLManagedTensor, deleter), 56);
    CHECK_EQ(sizeof(DLManagedTensorVersioned), 80);
    CHECK_EQ(offsetof(DLManagedTensorVersioned, deleter), 16);
    CHECK_EQ(offsetof(DLManagedTensorVersioned, flags), 24);
    CHECK_EQ(offsetof(DLManagedTensorVersioned, dl_tensor), 32);
#endif
}

static int deletes = 0;

static void count_delete(DLManagedTensorVersioned *self) {
    (void)self;
    deletes++;
}

static void test_round_trip_with_tessera_types(void) {
    float data[6] = {0, 1, 2, 3, 4, 5};
    int64_t shape[] = {3, 2};
    DLManagedTensorVersioned m;
    memset(&m, 0, sizeof m);
    m.version.major = DLPACK_MAJOR_VERSION;
    m.version.minor = DLPACK_MINOR_VERSION;
    m.deleter = count_delete;
    m.dl_tensor.data = data;
    m.dl_tensor.device.device_type = kDLCPU;
    m.dl_tensor.ndim = 2;
    m.dl_tensor.dtype.code = kDLFloat;
    m.dl_tensor.dtype.bits = 32;
    m.dl_tensor.dtype.lanes = 1;
    m.dl_tensor.shape = shape;
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_from_dlpack(&m, &t));
    CHECK(tsr_tensor_data(t) == (void *)data);
    CHECK_EQ(tsr_tensor_strides(t)[0], 2);
    DLManagedTensorVersioned *out = NULL;
    CHECK_OK(tsr_tensor_to_dlpack(t, &out));
    CHECK(out->dl_tensor.data == (void *)data);
    CHECK_OK(tsr_tensor_decref(t));
    CHECK_EQ(deletes, 0); /* the export still holds the storage */
    out->deleter(out);
    CHECK_EQ(deletes, 1);
}

int main(void) {
    RUN(test_tessera_h_first);
    RUN(test_enum_values);
    RUN(test_layout);
    RUN(test_round_trip_with_tessera_types);
    return 0;
}
