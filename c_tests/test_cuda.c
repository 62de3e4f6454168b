/*
 * test_cuda.c: the CUDA functions through the C API. They exist in every
 * build; what they do depends on it, and tsr_cuda_init says which case
 * this is:
 *   TSR_ERR_UNSUPPORTED  built without the cuda feature;
 *   TSR_ERR_DEVICE       built with it, but no usable driver or device;
 *   TSR_OK               a GPU: device memory, copies and caching are run.
 */
#include "tsr_test.h"

static TsrStatus mode;

static void test_init_says_which_case(void) {
    mode = tsr_cuda_init();
    if (mode == TSR_ERR_UNSUPPORTED) {
        CHECK_MSG_CONTAINS("tsr_cuda_init: tessera was built without the cuda feature");
        printf("  (built without the cuda feature)\n");
    } else if (mode == TSR_ERR_DEVICE) {
        CHECK_MSG_CONTAINS("tsr_cuda_init: CUDA driver not available: ");
        printf("  (%s)\n", tsr_last_error_message());
    } else {
        CHECK_EQ(mode, TSR_OK);
        printf("  (%d CUDA device(s))\n", tsr_cuda_device_count());
    }
    /* Idempotent. */
    CHECK_EQ(tsr_cuda_init(), mode);
}

static void test_without_cuda_every_call_says_why(void) {
    if (mode == TSR_OK) return; /* covered by the GPU tests */
    CHECK(!tsr_cuda_is_available());
    CHECK_EQ(tsr_cuda_device_count(), 0);
    const char *why = mode == TSR_ERR_DEVICE ? "CUDA driver not available: "
                                             : "tessera was built without the cuda feature";
    TsrAllocator *a = (TsrAllocator *)0x1; /* must stay untouched */
    CHECK_STATUS(tsr_cuda_allocator(&a), mode);
    CHECK(strstr(tsr_last_error_message(), why) != NULL);
    CHECK(a == (TsrAllocator *)0x1);
    CHECK_STATUS(tsr_cuda_raw_allocator(&a), mode);
    CHECK(strstr(tsr_last_error_message(), why) != NULL);
    CHECK_STATUS(tsr_cuda_pinned_allocator(&a), mode);
    CHECK(strstr(tsr_last_error_message(), why) != NULL);
    CHECK(a == (TsrAllocator *)0x1);
    CHECK_STATUS(tsr_cuda_allocator(NULL), TSR_ERR_NULL_POINTER);

    TsrAllocator *registered = tsr_get_allocator(TSR_CUDA);
    if (mode == TSR_ERR_UNSUPPORTED) {
        CHECK(registered == NULL); /* nothing serves TSR_CUDA */
    } else {
        /* The built-in caching CUDA allocator: present, and its
           allocations say why they cannot succeed. */
        CHECK(registered != NULL);
        CHECK(strcmp(tsr_allocator_name(registered), "cuda") == 0);
        CHECK(tsr_allocator_is_caching(registered));
        TsrDataPtr p;
        CHECK_STATUS(tsr_allocator_allocate(registered, 1024, &p), TSR_ERR_DEVICE);
        CHECK_MSG_CONTAINS("tsr_allocator_allocate: CUDA driver not available: ");
        char x[8] = {0}, y[8] = {1};
        CHECK_STATUS(tsr_allocator_copy_data(registered, x, y, sizeof x), TSR_ERR_DEVICE);
        CHECK_MSG_CONTAINS("CUDA driver not available: ");
        TsrAllocatorStats s;
        CHECK_OK(tsr_allocator_stats(registered, &s));
        CHECK(s.num_failed >= 1);
        CHECK_EQ(s.num_allocs, 0);
        CHECK_OK(tsr_allocator_decref(registered));
    }
}

static void test_gpu_device_memory_and_copies(void) {
    if (mode != TSR_OK) return;
    CHECK(tsr_cuda_is_available());
    CHECK(tsr_cuda_device_count() >= 1);
    TsrAllocator *a = NULL;
    CHECK_OK(tsr_cuda_allocator(&a));
    TsrAllocator *registered = tsr_get_allocator(TSR_CUDA);
    CHECK(registered == a);
    enum { N = 1 << 20 };
    static unsigned char host[N], back[N];
    for (int i = 0; i < N; i++) host[i] = (unsigned char)(i * 13);
    TsrDataPtr d1, d2;
    CHECK_OK(tsr_allocator_allocate(a, N, &d1));
    CHECK_OK(tsr_allocator_allocate(a, N, &d2));
    CHECK_EQ(d1.device.type, TSR_CUDA);
    CHECK(d1.device.index >= 0);
    CHECK_OK(tsr_allocator_copy_data(a, d1.data, host, N));    /* host -> device */
    CHECK_OK(tsr_allocator_copy_data(a, d2.data, d1.data, N)); /* device -> device */
    CHECK_OK(tsr_allocator_copy_data(a, back, d2.data, N));    /* device -> host */
    CHECK(memcmp(host, back, N) == 0);
    /* The caching path: a freed block is reused. */
    void *addr = d2.data;
    tsr_data_ptr_free(&d2);
    CHECK_OK(tsr_allocator_allocate(a, N, &d2));
    CHECK(d2.data == addr);
    TsrCachingStats s;
    s.struct_size = sizeof s;
    CHECK_OK(tsr_caching_allocator_stats(a, &s));
    CHECK(s.all.cache_hits >= 1);
    tsr_data_ptr_free(&d1);
    tsr_data_ptr_free(&d2);
    CHECK_OK(tsr_caching_allocator_empty_cache(a));
    CHECK_OK(tsr_allocator_decref(registered));
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_gpu_pinned_memory(void) {
    if (mode != TSR_OK) return;
    TsrAllocator *pinned = NULL, *dev = NULL;
    CHECK_OK(tsr_cuda_pinned_allocator(&pinned));
    CHECK_OK(tsr_cuda_raw_allocator(&dev));
    TsrDataPtr h, d;
    CHECK_OK(tsr_allocator_allocate(pinned, 4096, &h));
    CHECK_EQ(h.device.type, TSR_CPU);
    memset(h.data, 0x5a, 4096);
    CHECK_OK(tsr_allocator_allocate(dev, 4096, &d));
    CHECK_OK(tsr_allocator_copy_data(pinned, d.data, h.data, 4096));
    memset(h.data, 0, 4096);
    CHECK_OK(tsr_allocator_copy_data(pinned, h.data, d.data, 4096));
    CHECK(((unsigned char *)h.data)[4095] == 0x5a);
    tsr_data_ptr_free(&h);
    tsr_data_ptr_free(&d);
    CHECK_OK(tsr_allocator_decref(pinned));
    CHECK_OK(tsr_allocator_decref(dev));
}

int main(void) {
    RUN(test_init_says_which_case);
    RUN(test_without_cuda_every_call_says_why);
    RUN(test_gpu_device_memory_and_copies);
    RUN(test_gpu_pinned_memory);
    printf("all cuda tests passed (%d checks)\n", tsr_test_checks);
    return 0;
}
