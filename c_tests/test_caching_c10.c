/*
 * test_caching_c10.c: c10's settings of the caching allocator through the
 * C API (TsrCachingOptions' expandable segments, rounding, limits), its
 * statistics per device (tsr_caching_allocator_memory_stats), older hosts'
 * shorter options, and out-of-memory observers told the device's memory.
 */
#include <stddef.h>
#include <stdint.h>

#include "tsr_test.h"

#define MIB ((size_t)1 << 20)

static const TsrDevice CPU = {TSR_CPU, -1};

static TsrAllocator *cached_over_cpu(const TsrCachingOptions *o) {
    TsrAllocator *cpu = tsr_cpu_allocator(), *a = NULL;
    CHECK_OK(tsr_caching_allocator_new(cpu, o, &a));
    CHECK_OK(tsr_allocator_decref(cpu));
    return a;
}

static TsrCachingMemoryStats memory_stats(TsrAllocator *a, const TsrDevice *d) {
    TsrCachingMemoryStats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(tsr_caching_allocator_memory_stats(a, d, &s));
    CHECK_EQ(s.struct_size, sizeof s);
    return s;
}

static void init_options(TsrCachingOptions *o) {
    memset(o, 0, sizeof *o);
    o->struct_size = sizeof *o;
}

/* The growing-request workload: i x 4 MiB + 512 B allocated and freed. */
static void grow(TsrAllocator *a) {
    for (size_t i = 1; i <= 16; i++) {
        TsrDataPtr p;
        CHECK_OK(tsr_allocator_allocate(a, i * 4 * MIB + 512, &p));
        memset(p.data, 1, 4096);
        tsr_data_ptr_free(&p);
    }
}

static void test_expandable_segments(void) {
    TsrCachingOptions o;
    init_options(&o);
    o.expandable_segments = 1;
    TsrAllocator *a = cached_over_cpu(&o);
    grow(a);
    TsrCachingMemoryStats s = memory_stats(a, &CPU);
    CHECK_EQ(s.all.active_bytes.peak, 64 * MIB + 512);
    CHECK_EQ(s.all.reserved_bytes.peak, 66 * MIB);
    CHECK_EQ(s.large.segments.peak, 1);
    CHECK_EQ(s.all.active_bytes.allocated, s.all.active_bytes.freed);
    CHECK_OK(tsr_caching_allocator_empty_cache(a));
    s = memory_stats(a, NULL);
    CHECK_EQ(s.all.reserved_bytes.current, 0);
    CHECK_EQ(s.all.segments.current, 0);
    CHECK_OK(tsr_allocator_decref(a));
    /* Without them, the sum. */
    init_options(&o);
    a = cached_over_cpu(&o);
    grow(a);
    s = memory_stats(a, &CPU);
    CHECK_EQ(s.all.reserved_bytes.peak, 548 * MIB);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_rounding_and_limits(void) {
    TsrCachingOptions o;
    init_options(&o);
    o.roundup_power2_divisions = 4;
    o.memory_limit = 32 * MIB;
    TsrAllocator *a = cached_over_cpu(&o);
    TsrDataPtr p;
    CHECK_OK(tsr_allocator_allocate(a, 5 * MIB + 1, &p));
    TsrCachingMemoryStats s = memory_stats(a, &CPU);
    CHECK_EQ(s.large.active_bytes.current, 6 * MIB);
    CHECK_EQ(s.memory_limit, 32 * MIB);
    TsrDataPtr q;
    CHECK_STATUS(tsr_allocator_allocate(a, 30 * MIB, &q), TSR_ERR_OUT_OF_MEMORY);
    CHECK_MSG_CONTAINS("would pass the limit of 33554432 bytes");
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_caching_allocator_reset_accumulated(a));
    s = memory_stats(a, NULL);
    CHECK_EQ(s.all.num_allocs, 0);
    CHECK_EQ(s.all.ooms, 0);
    CHECK_EQ(s.all.active_bytes.allocated, 0);
    CHECK_EQ(s.all.reserved_bytes.current, 20 * MIB);
    /* A fraction lifts the byte limit only where lower: 1.0 keeps 32 MiB. */
    CHECK_OK(tsr_caching_allocator_set_memory_fraction(a, CPU, 1.0));
    CHECK_EQ(memory_stats(a, &CPU).memory_limit, 32 * MIB);
    CHECK_STATUS(tsr_caching_allocator_set_memory_fraction(a, CPU, 2.0), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("fraction 2");
    CHECK_OK(tsr_allocator_decref(a));
    /* c10's list form, and bad settings. */
    init_options(&o);
    o.roundup_power2_divisions_list = "[1:4,>:1]";
    a = cached_over_cpu(&o);
    CHECK_OK(tsr_allocator_allocate(a, 3000, &p));
    CHECK_EQ(memory_stats(a, &CPU).small.active_bytes.current, 3072);
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_allocator_decref(a));
    TsrAllocator *cpu = tsr_cpu_allocator(), *bad = NULL;
    init_options(&o);
    o.roundup_power2_divisions = 3;
    CHECK_STATUS(tsr_caching_allocator_new(cpu, &o, &bad), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("roundup_power2_divisions 3 is not a power of two");
    init_options(&o);
    o.roundup_power2_divisions_list = "[256:3]";
    CHECK_STATUS(tsr_caching_allocator_new(cpu, &o, &bad), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("roundup_power2_divisions_list");
    init_options(&o);
    o.garbage_collection_threshold = 1.5;
    CHECK_STATUS(tsr_caching_allocator_new(cpu, &o, &bad), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("garbage_collection_threshold 1.5");
    init_options(&o);
    o.max_non_split_rounding = 4 * MIB;
    CHECK_STATUS(tsr_caching_allocator_new(cpu, &o, &bad), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("max_non_split_rounding 4194304");
    init_options(&o);
    o.memory_fraction = 1.5;
    CHECK_STATUS(tsr_caching_allocator_new(cpu, &o, &bad), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("memory_fraction 1.5");
    CHECK(bad == NULL);
    CHECK_OK(tsr_allocator_decref(cpu));
}

/* A host built against the header before c10's settings: its struct ends
   at default_device, and the bytes after it (its padding) may hold
   anything. None of it is read as a setting. */
static void test_older_hosts_options(void) {
    size_t old_size = offsetof(TsrCachingOptions, expandable_segments) + 5;
    unsigned char raw[sizeof(TsrCachingOptions)];
    memset(raw, 0xff, sizeof raw);
    TsrCachingOptions o;
    memcpy(&o, raw, sizeof o);
    o.struct_size = (uint32_t)old_size;
    o.max_split_size = 0;
    o.name = NULL;
    o.use_default_device = 0;
    /* old_size is the old struct's sizeof: its last field ends before
       expandable_segments, and 8-byte alignment rounds it up. */
    CHECK_EQ(old_size % 8, 0);
    TsrAllocator *a = cached_over_cpu(&o);
    TsrDataPtr p;
    CHECK_OK(tsr_allocator_allocate(a, 3 * MIB, &p));
    /* Not expandable (a 20 MiB segment), no limit, no rounding. */
    TsrCachingMemoryStats s = memory_stats(a, &CPU);
    CHECK_EQ(s.all.reserved_bytes.current, 20 * MIB);
    CHECK_EQ(s.memory_limit, 0);
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_allocator_decref(a));
    /* A host that has c10's three settings but not the limits. */
    memcpy(&o, raw, sizeof o);
    o.struct_size = (uint32_t)(offsetof(TsrCachingOptions, garbage_collection_threshold) + 8);
    o.max_split_size = 0;
    o.name = NULL;
    o.use_default_device = 0;
    o.expandable_segments = 1;
    o.roundup_power2_divisions = 0;
    o.garbage_collection_threshold = 0.0;
    a = cached_over_cpu(&o);
    CHECK_OK(tsr_allocator_allocate(a, 3 * MIB, &p));
    s = memory_stats(a, &CPU);
    CHECK_EQ(s.all.reserved_bytes.current, 4 * MIB); /* expandable: 2 pages */
    CHECK_EQ(s.memory_limit, 0);                      /* 0xff.. not read */
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_allocator_decref(a));
    /* A shorter stats struct is filled up to its size. */
    a = cached_over_cpu(NULL);
    TsrCachingMemoryStats part;
    memset(&part, 0xee, sizeof part);
    part.struct_size = offsetof(TsrCachingMemoryStats, max_split_size);
    CHECK_OK(tsr_caching_allocator_memory_stats(a, NULL, &part));
    CHECK_EQ(part.struct_size, offsetof(TsrCachingMemoryStats, max_split_size));
    CHECK_EQ(part.max_split_size, 0xeeeeeeeeeeeeeeeeull);
    CHECK_EQ(part.all.segments.current, 0);
    CHECK_OK(tsr_allocator_decref(a));
}

static int info_calls = 0;
static TsrOomInfo last_info;

static void info_observer(void *user, const TsrOomInfo *info) {
    (void)user;
    info_calls++;
    memcpy(&last_info, info, sizeof last_info);
    last_info.allocator = NULL;
}

static void test_oom_observers_get_the_devices_memory(void) {
    CHECK_OK(tsr_add_oom_info_observer(info_observer, NULL));
    TsrCachingOptions o;
    init_options(&o);
    o.memory_limit = 8 * MIB;
    TsrAllocator *a = cached_over_cpu(&o);
    TsrDataPtr p;
    CHECK_STATUS(tsr_allocator_allocate(a, 9 * MIB, &p), TSR_ERR_OUT_OF_MEMORY);
    CHECK_EQ(info_calls, 1);
    CHECK_EQ(last_info.struct_size, sizeof(TsrOomInfo));
    CHECK_EQ(last_info.requested, 9 * MIB);
    CHECK_EQ(last_info.has_device_memory, 1);
    CHECK(last_info.device_total > 0);
    CHECK(last_info.device_free <= last_info.device_total);
    CHECK_OK(tsr_allocator_decref(a));
}

int main(void) {
    RUN(test_expandable_segments);
    RUN(test_rounding_and_limits);
    RUN(test_older_hosts_options);
    RUN(test_oom_observers_get_the_devices_memory);
    printf("all c10 settings tests passed (%d checks)\n", tsr_test_checks);
    return 0;
}
