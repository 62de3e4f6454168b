/*
 * The error model: status names, the thread-local last error message (it
 * names the function and the bad value), NULL out-pointers and handles,
 * unknown dtype and device numbers, and tsr_set_last_error for plugins.
 */
#include <pthread.h>

#include "tsr_test.h"

/* Whether the last error message contains `needle` (for computed needles). */
static int message_contains(const char *needle) {
    return strstr(tsr_last_error_message(), needle) != NULL;
}

static void test_status_names(void) {
    static const struct {
        TsrStatus status;
        const char *name;
    } names[] = {
        {TSR_OK, "TSR_OK"},
        {TSR_ERR_INVALID_ARGUMENT, "TSR_ERR_INVALID_ARGUMENT"},
        {TSR_ERR_NULL_POINTER, "TSR_ERR_NULL_POINTER"},
        {TSR_ERR_OUT_OF_MEMORY, "TSR_ERR_OUT_OF_MEMORY"},
        {TSR_ERR_SHAPE, "TSR_ERR_SHAPE"},
        {TSR_ERR_DTYPE, "TSR_ERR_DTYPE"},
        {TSR_ERR_DEVICE, "TSR_ERR_DEVICE"},
        {TSR_ERR_OVERLAP, "TSR_ERR_OVERLAP"},
        {TSR_ERR_NOT_RESIZABLE, "TSR_ERR_NOT_RESIZABLE"},
        {TSR_ERR_UNSUPPORTED, "TSR_ERR_UNSUPPORTED"},
        {TSR_ERR_INTERNAL, "TSR_ERR_INTERNAL"},
        {TSR_ERR_DEAD_OBJECT, "TSR_ERR_DEAD_OBJECT"},
        {TSR_ERR_ZERO_DIVISION, "TSR_ERR_ZERO_DIVISION"},
        {TSR_ERR_READ_ONLY, "TSR_ERR_READ_ONLY"},
        {TSR_ERR_IO, "TSR_ERR_IO"},
        {TSR_ERR_FORMAT, "TSR_ERR_FORMAT"},
        {TSR_ERR_CANCELLED, "TSR_ERR_CANCELLED"},
    };
    size_t i;
    CHECK_EQ(TSR_OK, 0);
    for (i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *got = tsr_status_name(names[i].status);
        if (strcmp(got, names[i].name) != 0) {
            fprintf(stderr, "tsr_status_name(%d) = %s, expected %s\n", (int)names[i].status,
                    got, names[i].name);
        }
        CHECK(strcmp(got, names[i].name) == 0);
        /* error codes are distinct and non-zero */
        if (i > 0) CHECK(names[i].status != TSR_OK);
    }
    CHECK(strcmp(tsr_status_name(-1), "TSR_ERR_UNKNOWN") == 0);
    CHECK(strcmp(tsr_status_name(9999), "TSR_ERR_UNKNOWN") == 0);
}

static void test_message_names_function_and_value(void) {
    TsrDType out = TSR_BOOL;
    tsr_clear_last_error();
    CHECK(strcmp(tsr_last_error_message(), "") == 0);

    CHECK_STATUS(tsr_promote_types(TSR_FLOAT, 47, &out), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_promote_types");
    CHECK_MSG_CONTAINS("47");
    CHECK_MSG_CONTAINS("argument 'b'");
    CHECK_EQ(out, TSR_BOOL); /* untouched on failure */

    CHECK_STATUS(tsr_promote_types(-7, TSR_FLOAT, &out), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("argument 'a'");
    CHECK_MSG_CONTAINS("-7");
    CHECK_EQ(out, TSR_BOOL);
}

static void test_message_survives_successful_calls(void) {
    TsrDType out;
    char saved[256];
    CHECK_STATUS(tsr_promote_types(TSR_QINT8, TSR_FLOAT, &out), TSR_ERR_DTYPE);
    snprintf(saved, sizeof saved, "%s", tsr_last_error_message());
    CHECK_OK(tsr_promote_types(TSR_INT, TSR_FLOAT, &out));
    CHECK_EQ(out, TSR_FLOAT);
    CHECK(strcmp(tsr_last_error_message(), saved) == 0);
    tsr_clear_last_error();
    CHECK(strcmp(tsr_last_error_message(), "") == 0);
}

static void test_null_out_pointers(void) {
    TsrAllocator *cpu = tsr_cpu_allocator();
    TsrObject *obj = NULL;
    bool swapped = false;
    TsrDataPtr dp;
    memset(&dp, 0, sizeof dp);

    CHECK_STATUS(tsr_promote_types(TSR_INT, TSR_INT, NULL), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_promote_types");
    CHECK_MSG_CONTAINS("'out'");

    CHECK(cpu != NULL);
    CHECK_STATUS(tsr_allocator_stats(cpu, NULL), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_allocator_stats");
    CHECK_STATUS(tsr_allocator_allocate(cpu, 16, NULL), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_allocator_allocate");
    CHECK_STATUS(tsr_allocator_raw_allocate(cpu, 16, NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_allocator_new(NULL, NULL, NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_object_new(8, NULL, NULL), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_object_new");

    CHECK_OK(tsr_object_new(8, NULL, &obj));
    CHECK_STATUS(tsr_object_downgrade(obj, NULL), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_object_downgrade");
    CHECK_OK(tsr_object_decref(obj));

    CHECK_STATUS(tsr_data_ptr_compare_exchange_deleter(&dp, NULL, NULL, NULL),
                 TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("'swapped'");
    CHECK_STATUS(tsr_data_ptr_compare_exchange_deleter(NULL, NULL, NULL, &swapped),
                 TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("'p'");

    /* NULL is fine where documented as "does nothing" */
    tsr_data_ptr_free(NULL);
    CHECK(tsr_data_ptr_release_context(NULL) == NULL);
    CHECK_OK(tsr_allocator_decref(cpu));
}

static void test_null_handles(void) {
    TsrAllocatorStats stats;
    TsrWeakObject *weak = NULL;
    TsrObject *locked = (TsrObject *)&locked;

    CHECK_STATUS(tsr_allocator_stats(NULL, &stats), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("'allocator'");
    CHECK_STATUS(tsr_allocator_incref(NULL), TSR_ERR_NULL_POINTER);
    CHECK_MSG_CONTAINS("tsr_allocator_incref");
    CHECK_STATUS(tsr_allocator_decref(NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_object_incref(NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_object_decref(NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_object_downgrade(NULL, &weak), TSR_ERR_NULL_POINTER);
    CHECK(weak == NULL);
    CHECK_STATUS(tsr_weak_object_lock(NULL, &locked), TSR_ERR_NULL_POINTER);
    CHECK(locked == (TsrObject *)&locked); /* untouched */
    CHECK_STATUS(tsr_weak_object_decref(NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_set_allocator(TSR_CPU, NULL, 0), TSR_ERR_NULL_POINTER);

    /* getters document their NULL result and leave a message */
    tsr_clear_last_error();
    CHECK_EQ(tsr_object_use_count(NULL), 0);
    CHECK_MSG_CONTAINS("tsr_object_use_count");
    CHECK_EQ(tsr_allocator_weak_use_count(NULL), 0);
    CHECK(tsr_allocator_name(NULL) == NULL);
    CHECK_MSG_CONTAINS("tsr_allocator_name");
    CHECK(tsr_object_data(NULL) == NULL);
    CHECK(tsr_weak_object_expired(NULL));
    tsr_allocator_reset_peak(NULL);
    CHECK_MSG_CONTAINS("tsr_allocator_reset_peak");
}

static void test_unknown_numbers(void) {
    static const int bad_dtypes[] = {-128, -1, 47, 48, 100, 127};
    TsrAllocator *cpu = tsr_cpu_allocator();
    size_t i;
    for (i = 0; i < sizeof bad_dtypes / sizeof bad_dtypes[0]; i++) {
        TsrDType bad = (TsrDType)bad_dtypes[i];
        TsrDType out = TSR_BOOL;
        char number[16];
        snprintf(number, sizeof number, "%d", bad_dtypes[i]);
        CHECK(!tsr_dtype_is_valid(bad));
        CHECK_EQ(tsr_dtype_itemsize(bad), 0);
        CHECK(strcmp(tsr_dtype_name(bad), "Undefined") == 0);
        CHECK(!tsr_can_cast(bad, TSR_FLOAT));
        CHECK(!tsr_can_cast(TSR_FLOAT, bad));
        CHECK_STATUS(tsr_promote_types(bad, TSR_FLOAT, &out), TSR_ERR_INVALID_ARGUMENT);
        CHECK(message_contains(number));
        CHECK_STATUS(tsr_promote_types(bad, bad, &out), TSR_ERR_INVALID_ARGUMENT);
        CHECK_EQ(out, TSR_BOOL);
    }

    /* device types: 2 is not one tessera knows */
    tsr_clear_last_error();
    CHECK(tsr_get_allocator(2) == NULL);
    CHECK_MSG_CONTAINS("tsr_get_allocator");
    CHECK_MSG_CONTAINS("unknown device type 2");
    CHECK_EQ(tsr_get_allocator_priority(2), 0);
    CHECK_STATUS(tsr_set_allocator(99, cpu, 0), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_set_allocator");
    CHECK_MSG_CONTAINS("99");
    CHECK_OK(tsr_allocator_decref(cpu));
}

static void test_set_last_error(void) {
    CHECK_EQ(tsr_set_last_error(TSR_ERR_SHAPE, "plugin: shape [2, 3] is wrong"), TSR_ERR_SHAPE);
    CHECK(strcmp(tsr_last_error_message(), "plugin: shape [2, 3] is wrong") == 0);
    CHECK_EQ(tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, NULL), TSR_ERR_OUT_OF_MEMORY);
    CHECK(strcmp(tsr_last_error_message(), "") == 0);
    /* any status is passed through unchanged, even TSR_OK */
    CHECK_EQ(tsr_set_last_error(TSR_OK, "note"), TSR_OK);
    CHECK(strcmp(tsr_last_error_message(), "note") == 0);
    tsr_clear_last_error();
}

/* The last error is per thread: a failure in another thread does not touch
 * this thread's message, and a new thread starts with "". */
static void *fail_in_thread(void *arg) {
    char *seen_at_start = arg;
    TsrDType out;
    snprintf(seen_at_start, 64, "%s", tsr_last_error_message());
    (void)tsr_promote_types(TSR_QUINT8, TSR_INT, &out);
    return NULL;
}

static void test_last_error_is_thread_local(void) {
    pthread_t thread;
    char seen_at_start[64] = "not run";
    (void)tsr_set_last_error(TSR_ERR_SHAPE, "main thread message");
    CHECK_EQ(pthread_create(&thread, NULL, fail_in_thread, seen_at_start), 0);
    CHECK_EQ(pthread_join(thread, NULL), 0);
    CHECK(strcmp(seen_at_start, "") == 0);
    CHECK(strcmp(tsr_last_error_message(), "main thread message") == 0);
    tsr_clear_last_error();
}

int main(void) {
    RUN(test_status_names);
    RUN(test_message_names_function_and_value);
    RUN(test_message_survives_successful_calls);
    RUN(test_null_out_pointers);
    RUN(test_null_handles);
    RUN(test_unknown_numbers);
    RUN(test_set_last_error);
    RUN(test_last_error_is_thread_local);
    return 0;
}
