/*
 * test_caching.c: the caching allocator through the C API, over a counting
 * C plugin that records every segment it hands out and takes back.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "tsr_test.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* ---- the counting plugin ------------------------------------------------ */

typedef struct {
    pthread_mutex_t lock;
    long allocs, frees, live;
    size_t live_bytes;
    int fail_next; /* refuse this many of the next allocations */
    int released;
} Counts;

static Counts counts = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0};

static void reset_counts(void) {
    pthread_mutex_lock(&counts.lock);
    counts.allocs = counts.frees = counts.live = 0;
    counts.live_bytes = 0;
    counts.fail_next = 0;
    counts.released = 0;
    pthread_mutex_unlock(&counts.lock);
}

/* The segment header before the data remembers the size. */
typedef struct {
    size_t size;
    size_t pad;
} Header;

static void counting_free(void *ctx) {
    Header *h = (Header *)ctx - 1;
    pthread_mutex_lock(&counts.lock);
    counts.frees++;
    counts.live--;
    counts.live_bytes -= h->size;
    pthread_mutex_unlock(&counts.lock);
    free(h);
}

static TsrStatus counting_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    (void)self;
    pthread_mutex_lock(&counts.lock);
    if (counts.fail_next > 0) {
        counts.fail_next--;
        pthread_mutex_unlock(&counts.lock);
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "counting plugin says no");
    }
    pthread_mutex_unlock(&counts.lock);
    Header *h = malloc(sizeof(Header) + nbytes);
    if (h == NULL) return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "malloc failed");
    h->size = nbytes;
    pthread_mutex_lock(&counts.lock);
    counts.allocs++;
    counts.live++;
    counts.live_bytes += nbytes;
    pthread_mutex_unlock(&counts.lock);
    out->data = h + 1;
    out->ctx = h + 1;
    out->deleter = counting_free;
    out->device = device;
    return TSR_OK;
}

static void counting_release(void *self) {
    (void)self;
    counts.released++;
}

static const TsrAllocatorVTable counting_vtable = {
    sizeof(TsrAllocatorVTable), "counting", counting_allocate, NULL, NULL, counting_release,
};

/* A caching allocator over a fresh counting plugin (the plugin handle is
   dropped: the caching allocator keeps it). */
static TsrAllocator *make_cached(const TsrCachingOptions *options) {
    TsrAllocator *inner = NULL, *cached = NULL;
    reset_counts();
    CHECK_OK(tsr_allocator_new(&counting_vtable, NULL, &inner));
    CHECK_OK(tsr_caching_allocator_new(inner, options, &cached));
    CHECK_OK(tsr_allocator_decref(inner));
    return cached;
}

static TsrCachingStats get_stats(TsrAllocator *a) {
    TsrCachingStats s;
    memset(&s, 0, sizeof s);
    s.struct_size = sizeof s;
    CHECK_OK(tsr_caching_allocator_stats(a, &s));
    CHECK_EQ(s.struct_size, sizeof s);
    return s;
}

static TsrDataPtr alloc(TsrAllocator *a, size_t n) {
    TsrDataPtr p;
    CHECK_OK(tsr_allocator_allocate(a, n, &p));
    CHECK(p.data != NULL);
    return p;
}

/* ---- tests --------------------------------------------------------------- */

static void test_reuse_hits_the_cache(void) {
    TsrAllocator *a = make_cached(NULL);
    CHECK(tsr_allocator_is_caching(a));
    CHECK(strcmp(tsr_allocator_name(a), "caching(counting)") == 0);
    TsrDataPtr p = alloc(a, 4096);
    void *addr = p.data;
    tsr_data_ptr_free(&p);
    CHECK_EQ(counts.allocs, 1);
    TsrDataPtr q = alloc(a, 4096);
    CHECK(q.data == addr);
    CHECK_EQ(counts.allocs, 1); /* the plugin was not called again */
    TsrCachingStats s = get_stats(a);
    CHECK_EQ(s.all.num_allocs, 2);
    CHECK_EQ(s.all.cache_hits, 1);
    CHECK_EQ(s.small.segments.current, 1);
    CHECK_EQ(s.small.reserved_bytes.current, 2 * MIB);
    CHECK_EQ(s.large.segments.current, 0);
    TsrAllocatorStats o;
    CHECK_OK(tsr_allocator_stats(a, &o));
    CHECK_EQ(o.allocated_bytes, 4096);
    CHECK_EQ(o.num_allocs, 2);
    CHECK_EQ(o.num_frees, 1);
    tsr_data_ptr_free(&q);
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_EQ(counts.released, 1);
    CHECK_EQ(counts.live, 0);
}

static void test_rounding(void) {
    TsrAllocator *a = make_cached(NULL);
    TsrDataPtr p = alloc(a, 1), q = alloc(a, 600);
    CHECK_EQ((char *)q.data - (char *)p.data, 512);
    TsrCachingStats s = get_stats(a);
    CHECK_EQ(s.small.active_bytes.current, 512 + 1024);
    CHECK_EQ(s.small.requested_bytes.current, 601);
    tsr_data_ptr_free(&p);
    tsr_data_ptr_free(&q);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_split_and_merge(void) {
    TsrAllocator *a = make_cached(NULL);
    TsrDataPtr x = alloc(a, 64 * KIB), y = alloc(a, 64 * KIB), z = alloc(a, 64 * KIB);
    char *base = x.data;
    CHECK((char *)y.data == base + 64 * KIB);
    CHECK((char *)z.data == base + 128 * KIB);
    CHECK_EQ(get_stats(a).small.inactive_split_blocks.current, 1);
    tsr_data_ptr_free(&y); /* a hole between x and z */
    TsrCachingStats s = get_stats(a);
    CHECK_EQ(s.small.inactive_split_blocks.current, 2);
    CHECK_EQ(s.small.inactive_split_bytes.current, 2 * MIB - 128 * KIB);
    tsr_data_ptr_free(&x); /* merges with the hole */
    s = get_stats(a);
    CHECK_EQ(s.small.inactive_split_blocks.current, 2);
    CHECK_EQ(s.small.inactive_split_bytes.current, 2 * MIB - 64 * KIB);
    tsr_data_ptr_free(&z); /* the segment is whole again */
    s = get_stats(a);
    CHECK_EQ(s.small.inactive_split_blocks.current, 0);
    CHECK_EQ(s.small.inactive_split_bytes.current, 0);
    CHECK_EQ(s.small.inactive_split_blocks.peak, 2);
    TsrDataPtr big = alloc(a, MIB);
    CHECK((char *)big.data == base);
    CHECK_EQ(counts.allocs, 1);
    tsr_data_ptr_free(&big);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_oversize_and_options(void) {
    TsrCachingOptions o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.max_split_size = 4 * MIB;
    o.name = "pool";
    TsrAllocator *a = make_cached(&o);
    CHECK(strcmp(tsr_allocator_name(a), "pool") == 0);
    TsrDataPtr p = alloc(a, 5 * MIB);
    TsrCachingStats s = get_stats(a);
    CHECK_EQ(s.large.reserved_bytes.current, 6 * MIB); /* rounded to 2 MiB */
    CHECK_EQ(s.large.active_bytes.current, 6 * MIB);   /* handed out whole */
    CHECK_EQ(s.large.inactive_split_blocks.current, 0);
    void *seg = p.data;
    tsr_data_ptr_free(&p);
    TsrDataPtr q = alloc(a, 3 * MIB); /* ordinary: not from the oversize block */
    CHECK(q.data != seg);
    TsrDataPtr r = alloc(a, 4 * MIB + 1); /* oversize: reuses it */
    CHECK(r.data == seg);
    CHECK_EQ(counts.allocs, 2);
    tsr_data_ptr_free(&q);
    tsr_data_ptr_free(&r);
    CHECK_OK(tsr_allocator_decref(a));

    TsrAllocator *inner = tsr_cpu_allocator(), *bad = NULL;
    o.max_split_size = MIB;
    CHECK_STATUS(tsr_caching_allocator_new(inner, &o, &bad), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("max_split_size 1048576");
    o.max_split_size = 0;
    o.use_default_device = 1;
    o.default_device.type = 99;
    CHECK_STATUS(tsr_caching_allocator_new(inner, &o, &bad), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("default_device");
    o.struct_size = 2;
    CHECK_STATUS(tsr_caching_allocator_new(inner, &o, &bad), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("struct_size");
    CHECK(bad == NULL);
    /* An older host's shorter options: only max_split_size. */
    o.struct_size = offsetof(TsrCachingOptions, name);
    o.max_split_size = 32 * MIB;
    CHECK_OK(tsr_caching_allocator_new(inner, &o, &bad));
    CHECK(strcmp(tsr_allocator_name(bad), "caching(cpu)") == 0);
    CHECK_OK(tsr_allocator_decref(bad));
    CHECK_OK(tsr_allocator_decref(inner));
}

static void test_empty_cache_returns_unused_segments(void) {
    TsrAllocator *a = make_cached(NULL);
    TsrDataPtr x1 = alloc(a, MIB), x2 = alloc(a, MIB); /* segment S1, full */
    TsrDataPtr x3 = alloc(a, MIB), x4 = alloc(a, MIB); /* segment S2, full */
    TsrDataPtr l = alloc(a, 3 * MIB);                  /* 20 MiB segment L1 */
    TsrDataPtr n = alloc(a, 18 * MIB);                 /* 18 MiB segment L2 */
    CHECK_EQ(counts.live, 4);
    tsr_data_ptr_free(&x3);
    tsr_data_ptr_free(&x4);
    tsr_data_ptr_free(&n);
    tsr_data_ptr_free(&x2); /* S1 still holds x1 */
    CHECK_OK(tsr_caching_allocator_empty_cache(a));
    CHECK_EQ(counts.frees, 2); /* S2 and L2, nothing else */
    CHECK_EQ(counts.live_bytes, 2 * MIB + 20 * MIB);
    TsrCachingStats s = get_stats(a);
    CHECK_EQ(s.all.segments.current, 2);
    CHECK_EQ(s.all.segment_frees, 2);
    CHECK_EQ(s.all.segments.peak, 4);
    tsr_data_ptr_free(&x1);
    tsr_data_ptr_free(&l);
    CHECK_OK(tsr_caching_allocator_empty_cache(a));
    CHECK_EQ(counts.live, 0);
    CHECK_EQ(get_stats(a).all.reserved_bytes.current, 0);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_retry_after_inner_failure(void) {
    TsrAllocator *a = make_cached(NULL);
    TsrDataPtr p = alloc(a, 3 * MIB);
    tsr_data_ptr_free(&p); /* a cached, unused 20 MiB segment */
    counts.fail_next = 1;
    p = alloc(a, 22 * MIB); /* needs a new segment: fails, frees, retries */
    TsrCachingStats s = get_stats(a);
    CHECK_EQ(s.large.retries, 1);
    CHECK_EQ(s.large.segment_frees, 1);
    CHECK_EQ(s.large.ooms, 0);
    CHECK_EQ(counts.live, 1);

    counts.fail_next = 2;
    TsrDataPtr q;
    CHECK_STATUS(tsr_allocator_allocate(a, 30 * MIB, &q), TSR_ERR_OUT_OF_MEMORY);
    CHECK_MSG_CONTAINS("tsr_allocator_allocate: caching allocator 'caching(counting)' is out of memory");
    CHECK_MSG_CONTAINS("31457280 bytes");
    CHECK_MSG_CONTAINS("counting plugin says no");
    CHECK_MSG_CONTAINS("bytes reserved in 1 segments");
    s = get_stats(a);
    CHECK_EQ(s.large.retries, 2);
    CHECK_EQ(s.large.ooms, 1);
    TsrAllocatorStats o;
    CHECK_OK(tsr_allocator_stats(a, &o));
    CHECK_EQ(o.num_failed, 1);
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_stats_struct_size(void) {
    TsrAllocator *a = make_cached(NULL);
    TsrDataPtr p = alloc(a, 4096);
    /* An older host that knows only the overall statistics. */
    TsrCachingStats s;
    memset(&s, 0xee, sizeof s);
    s.struct_size = offsetof(TsrCachingStats, small);
    CHECK_OK(tsr_caching_allocator_stats(a, &s));
    CHECK_EQ(s.struct_size, offsetof(TsrCachingStats, small));
    CHECK_EQ(s.all.num_allocs, 1);
    CHECK_EQ(s.small.num_allocs, 0xeeeeeeeeeeeeeeeeULL); /* untouched */
    /* A newer host with a bigger struct: told how much was written. */
    unsigned char big[sizeof(TsrCachingStats) + 64];
    memset(big, 0xee, sizeof big);
    uint32_t size = sizeof big;
    memcpy(big, &size, sizeof size);
    CHECK_OK(tsr_caching_allocator_stats(a, (TsrCachingStats *)(void *)big));
    memcpy(&size, big, sizeof size);
    CHECK_EQ(size, sizeof(TsrCachingStats));
    CHECK_EQ(big[sizeof(TsrCachingStats)], 0xee);
    s.struct_size = 0;
    CHECK_STATUS(tsr_caching_allocator_stats(a, &s), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("set it to sizeof(TsrCachingStats)");
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_errors(void) {
    TsrAllocator *cpu = tsr_cpu_allocator(), *out = NULL;
    TsrCachingStats s;
    s.struct_size = sizeof s;
    CHECK_STATUS(tsr_caching_allocator_new(NULL, NULL, &out), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_caching_allocator_new(cpu, NULL, NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_caching_allocator_empty_cache(NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_caching_allocator_stats(NULL, &s), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_caching_allocator_stats(cpu, NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_caching_allocator_reset_peak(NULL), TSR_ERR_NULL_POINTER);
    CHECK_STATUS(tsr_caching_allocator_empty_cache(cpu), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_caching_allocator_empty_cache: allocator 'cpu' is not a caching allocator");
    CHECK_STATUS(tsr_caching_allocator_stats(cpu, &s), TSR_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tsr_caching_allocator_reset_peak(cpu), TSR_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(tsr_caching_allocator_inner(cpu, &out), TSR_ERR_INVALID_ARGUMENT);
    CHECK(!tsr_allocator_is_caching(cpu));
    CHECK(!tsr_allocator_is_caching(NULL));
    /* Raw allocation needs context == data, which blocks do not have. */
    CHECK_OK(tsr_caching_allocator_new(cpu, NULL, &out));
    void *raw = NULL;
    CHECK_STATUS(tsr_allocator_raw_allocate(out, 16, &raw), TSR_ERR_UNSUPPORTED);
    TsrAllocator *inner = NULL;
    CHECK_OK(tsr_caching_allocator_inner(out, &inner));
    CHECK(inner == cpu); /* the built-in CPU allocator is one object */
    CHECK_OK(tsr_allocator_decref(inner));
    CHECK_OK(tsr_allocator_decref(out));
    CHECK_OK(tsr_allocator_decref(cpu));
}

static void test_reset_peak(void) {
    TsrAllocator *a = make_cached(NULL);
    TsrDataPtr p = alloc(a, 8 * KIB), q = alloc(a, 64 * KIB);
    tsr_data_ptr_free(&q);
    CHECK_EQ(get_stats(a).all.active_bytes.peak, 72 * KIB);
    CHECK_OK(tsr_caching_allocator_reset_peak(a));
    TsrCachingStats s = get_stats(a);
    CHECK_EQ(s.all.active_bytes.peak, 8 * KIB);
    CHECK_EQ(s.small.requested_bytes.peak, 8 * KIB);
    TsrAllocatorStats o;
    CHECK_OK(tsr_allocator_stats(a, &o));
    CHECK_EQ(o.peak_bytes, 8 * KIB);
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_outlives_its_handle(void) {
    TsrAllocator *a = make_cached(NULL);
    TsrDataPtr p = alloc(a, 100);
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_EQ(counts.released, 0); /* a block is out */
    CHECK_EQ(counts.live, 1);
    tsr_data_ptr_free(&p);
    CHECK_EQ(counts.released, 1); /* the last free released everything */
    CHECK_EQ(counts.live, 0);
}

typedef struct {
    long events;
    int64_t net;
    uint64_t last_total;
    void *watch;
} Seen;

static void reporter(void *user, const void *ptr, int64_t delta, uint64_t total, TsrDevice dev) {
    Seen *seen = user;
    (void)dev;
    if (ptr != seen->watch) return;
    seen->events++;
    seen->net += delta;
    seen->last_total = total;
}

static void test_reporter_sees_blocks(void) {
    TsrAllocator *a = make_cached(NULL);
    TsrDataPtr keep = alloc(a, 1000);
    Seen seen = {0, 0, 0, NULL};
    seen.watch = (char *)keep.data + 1024; /* where the next block goes */
    CHECK_OK(tsr_set_memory_reporter(reporter, &seen));
    TsrDataPtr p = alloc(a, 700);
    CHECK(p.data == seen.watch);
    CHECK_EQ(seen.events, 1);
    CHECK_EQ(seen.net, 700);
    CHECK_EQ(seen.last_total, 1700); /* the allocator's bytes after the event */
    tsr_data_ptr_free(&p);
    CHECK_EQ(seen.events, 2);
    CHECK_EQ(seen.net, 0);
    CHECK_EQ(seen.last_total, 1000);
    CHECK_OK(tsr_set_memory_reporter(NULL, NULL));
    tsr_data_ptr_free(&keep);
    CHECK_OK(tsr_allocator_decref(a));
}

static void test_registry_and_storage_device(void) {
    TsrCachingOptions o;
    memset(&o, 0, sizeof o);
    o.struct_size = sizeof o;
    o.use_default_device = 1;
    o.default_device.type = TSR_PRIVATE_USE1;
    o.default_device.index = 0;
    TsrAllocator *a = make_cached(&o);
    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, a, 0));
    TsrAllocator *got = tsr_get_allocator(TSR_PRIVATE_USE1);
    CHECK(got == a);
    TsrDataPtr p = alloc(got, 4096);
    CHECK_EQ(p.device.type, TSR_PRIVATE_USE1);
    CHECK_EQ(p.device.index, 0);
    tsr_data_ptr_free(&p);
    CHECK_OK(tsr_allocator_decref(got));
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_EQ(counts.released, 0); /* the registry holds it */
}

#define THREAD_OPS 20000

static void *hammer(void *arg) {
    TsrAllocator *a = arg;
    TsrDataPtr live[64];
    int n = 0;
    unsigned seed = (unsigned)(uintptr_t)&n;
    for (int i = 0; i < THREAD_OPS; i++) {
        seed = seed * 1103515245u + 12345u;
        if ((seed >> 16) % 2 == 0 && n < 64) {
            size_t size = 1 + (seed >> 8) % (256 * KIB);
            if (tsr_allocator_allocate(a, size, &live[n]) != TSR_OK) abort();
            n++;
        } else if (n > 0) {
            tsr_data_ptr_free(&live[--n]);
        }
    }
    while (n > 0) tsr_data_ptr_free(&live[--n]);
    return NULL;
}

static void test_two_threads(void) {
    TsrAllocator *a = make_cached(NULL);
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, hammer, a) == 0);
    CHECK(pthread_create(&t2, NULL, hammer, a) == 0);
    CHECK(pthread_join(t1, NULL) == 0);
    CHECK(pthread_join(t2, NULL) == 0);
    TsrCachingStats s = get_stats(a);
    CHECK(s.all.num_allocs > 0);
    CHECK_EQ(s.all.num_allocs, s.all.num_frees);
    CHECK_EQ(s.all.active_blocks.current, 0);
    CHECK_EQ(s.all.requested_bytes.current, 0);
    CHECK_EQ(s.all.inactive_split_bytes.current, 0);
    CHECK_EQ(s.all.reserved_bytes.current, counts.live_bytes);
    TsrAllocatorStats o;
    CHECK_OK(tsr_allocator_stats(a, &o));
    CHECK_EQ(o.allocated_bytes, 0);
    CHECK_EQ(o.num_allocs, s.all.num_allocs);
    CHECK_OK(tsr_allocator_decref(a));
}

int main(void) {
    RUN(test_reuse_hits_the_cache);
    RUN(test_rounding);
    RUN(test_split_and_merge);
    RUN(test_oversize_and_options);
    RUN(test_empty_cache_returns_unused_segments);
    RUN(test_retry_after_inner_failure);
    RUN(test_stats_struct_size);
    RUN(test_errors);
    RUN(test_reset_peak);
    RUN(test_outlives_its_handle);
    RUN(test_reporter_sees_blocks);
    RUN(test_registry_and_storage_device);
    RUN(test_two_threads);
    printf("all caching tests passed (%d checks)\n", tsr_test_checks);
    return 0;
}
