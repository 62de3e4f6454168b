/* Storages through the C API: creation, external memory, resize, weak
 * references, copies, share_external, bad input. */
#include "tsr_test.h"

static int deleter_calls = 0;
static void count_deleter(void *ctx) {
    deleter_calls++;
    free(ctx);
}

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

static void test_new_and_getters(void) {
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(64, cpu(), true, &s));
    CHECK_EQ(tsr_storage_nbytes(s), 64);
    CHECK(tsr_storage_data(s) != NULL);
    CHECK(((uintptr_t)tsr_storage_data(s)) % 64 == 0);
    CHECK(tsr_storage_resizable(s));
    CHECK_EQ(tsr_storage_device(s).type, TSR_CPU);
    TsrAllocator *a = tsr_storage_allocator(s);
    TsrAllocator *cpu_a = tsr_cpu_allocator();
    CHECK(a == cpu_a);
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_OK(tsr_allocator_decref(cpu_a));
    CHECK_EQ(tsr_storage_use_count(s), 1);
    CHECK_OK(tsr_storage_decref(s));
}

static void test_from_data_ptr_consumes(void) {
    TsrDataPtr dp = {0};
    dp.data = malloc(16);
    dp.ctx = dp.data;
    dp.deleter = count_deleter;
    dp.device = cpu();
    TsrStorage *s = NULL;
    deleter_calls = 0;
    CHECK_OK(tsr_storage_from_data_ptr(&dp, 16, &s));
    CHECK(dp.data == NULL && dp.ctx == NULL && dp.deleter == NULL);
    CHECK(!tsr_storage_resizable(s));
    CHECK(tsr_storage_allocator(s) == NULL);
    CHECK_STATUS(tsr_storage_resize(s, 32), TSR_ERR_NOT_RESIZABLE);
    CHECK_MSG_CONTAINS("tsr_storage_resize");
    CHECK_EQ(deleter_calls, 0);
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(deleter_calls, 1);

    /* zero bytes: the deleter still runs exactly once */
    dp.data = NULL;
    dp.ctx = malloc(1);
    dp.deleter = count_deleter;
    dp.device = cpu();
    CHECK_OK(tsr_storage_from_data_ptr(&dp, 0, &s));
    CHECK_OK(tsr_storage_decref(s));
    CHECK_EQ(deleter_calls, 2);

    /* a failing call leaves the pointer to the caller */
    dp.data = NULL;
    dp.ctx = malloc(1);
    dp.deleter = count_deleter;
    CHECK_STATUS(tsr_storage_from_data_ptr(&dp, 8, &s), TSR_ERR_INVALID_ARGUMENT);
    CHECK(dp.ctx != NULL);
    tsr_data_ptr_free(&dp);
    CHECK_EQ(deleter_calls, 3);
}

static void test_resize_keeps_prefix(void) {
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(4, cpu(), true, &s));
    memcpy(tsr_storage_data(s), "abcd", 4);
    CHECK_OK(tsr_storage_resize(s, 1000));
    CHECK_EQ(tsr_storage_nbytes(s), 1000);
    CHECK(memcmp(tsr_storage_data(s), "abcd", 4) == 0);
    CHECK_OK(tsr_storage_resize(s, 2));
    CHECK(memcmp(tsr_storage_data(s), "ab", 2) == 0);
    CHECK_OK(tsr_storage_decref(s));
}

static void test_weak_storage_frees_data(void) {
    TsrAllocator *cpu_a = tsr_cpu_allocator();
    TsrAllocatorStats before, after;
    CHECK_OK(tsr_allocator_stats(cpu_a, &before));
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(4096, cpu(), false, &s));
    TsrWeakStorage *w = NULL;
    CHECK_OK(tsr_storage_downgrade(s, &w));
    CHECK_EQ(tsr_storage_weak_use_count(s), 2);
    CHECK_OK(tsr_storage_decref(s));
    CHECK(tsr_weak_storage_expired(w));
    CHECK_OK(tsr_allocator_stats(cpu_a, &after));
    CHECK_EQ(after.num_frees - before.num_frees, 1);
    TsrStorage *locked = (TsrStorage *)1;
    CHECK_OK(tsr_weak_storage_lock(w, &locked));
    CHECK(locked == NULL);
    /* the memory of the object is still there: misuse is detected */
    CHECK_STATUS(tsr_storage_decref(s), TSR_ERR_DEAD_OBJECT);
    CHECK_STATUS(tsr_storage_fill(s, 0), TSR_ERR_DEAD_OBJECT);
    CHECK_OK(tsr_weak_storage_decref(w));
    CHECK_OK(tsr_allocator_decref(cpu_a));
}

static void test_copy_clone_share(void) {
    TsrStorage *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(tsr_storage_new(8, cpu(), false, &a));
    CHECK_OK(tsr_storage_new(8, cpu(), false, &b));
    CHECK_OK(tsr_storage_fill(a, 0x5a));
    CHECK_OK(tsr_storage_copy(b, a));
    CHECK(((unsigned char *)tsr_storage_data(b))[7] == 0x5a);
    CHECK_OK(tsr_storage_clone(b, &c));
    CHECK(tsr_storage_data(c) != tsr_storage_data(b));
    CHECK(((unsigned char *)tsr_storage_data(c))[0] == 0x5a);
    TsrStorage *small = NULL;
    CHECK_OK(tsr_storage_new(4, cpu(), false, &small));
    CHECK_STATUS(tsr_storage_copy(small, a), TSR_ERR_SHAPE);

    TsrDataPtr dp = {0};
    dp.data = malloc(32);
    dp.ctx = dp.data;
    dp.deleter = count_deleter;
    dp.device = cpu();
    deleter_calls = 0;
    CHECK_OK(tsr_storage_incref(c));
    CHECK_STATUS(tsr_storage_share_external(c, &dp, 32), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("2 strong references");
    CHECK(dp.data != NULL);
    CHECK_OK(tsr_storage_decref(c));
    CHECK_OK(tsr_storage_share_external(c, &dp, 32));
    CHECK(dp.data == NULL);
    CHECK_EQ(tsr_storage_nbytes(c), 32);
    CHECK(!tsr_storage_resizable(c));
    CHECK_OK(tsr_storage_decref(c));
    CHECK_EQ(deleter_calls, 1);
    CHECK_OK(tsr_storage_decref(a));
    CHECK_OK(tsr_storage_decref(b));
    CHECK_OK(tsr_storage_decref(small));
}

static void test_bad_input(void) {
    TsrStorage *s = NULL;
    TsrDevice bad = {TSR_CPU, -1};
    bad.type = 2;
    CHECK_STATUS(tsr_storage_new(8, bad, false, &s), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("unknown device type 2");
    CHECK_STATUS(tsr_storage_new(8, cpu(), false, NULL), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_storage_new: argument 'out' is NULL");
    TsrDevice cuda = {TSR_XPU, 0};
    CHECK_STATUS(tsr_storage_new(8, cuda, false, &s), TSR_ERR_DEVICE);
    CHECK_STATUS(tsr_storage_new(SIZE_MAX, cpu(), false, &s), TSR_ERR_OUT_OF_MEMORY);
    CHECK_MSG_CONTAINS("18446744073709551615");
    CHECK_STATUS(tsr_storage_resize(NULL, 1), TSR_ERR_NULL_POINTER);
    CHECK_EQ(tsr_storage_nbytes(NULL), 0);
    CHECK(tsr_storage_data(NULL) == NULL);
    CHECK_STATUS(tsr_storage_decref(NULL), TSR_ERR_NULL_POINTER);
}

int main(void) {
    RUN(test_new_and_getters);
    RUN(test_from_data_ptr_consumes);
    RUN(test_resize_keeps_prefix);
    RUN(test_weak_storage_frees_data);
    RUN(test_copy_clone_share);
    RUN(test_bad_input);
    return 0;
}
