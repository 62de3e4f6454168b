/*
 * Allocators: C plugins (TsrAllocatorVTable), the registry's priority
 * rules, replacing an allocator while its memory and storages live,
 * deleters, the built-in CPU allocator, statistics under two threads, the
 * memory reporter, failures and old plugins, and TSR_REGISTER_ALLOCATOR.
 *
 * The registry is process-wide, so the tests run in a fixed order: XPU is
 * taken by the file-scope registration, PRIVATE_USE1 by the priority tests.
 */
#include <pthread.h>

#include "tsr_test.h"

/* ---- a counting plugin: malloc'd blocks with a header ---- */

typedef struct {
    const char *name;
    pthread_mutex_t lock;
    long allocs, frees, releases;
    TsrStatus fail_with; /* non-zero: allocate fails with this status */
    const char *fail_message;
} Plugin;

#define PLUGIN(name) {(name), PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, TSR_OK, NULL}

/* The context of an allocation: the block, with the data after it. */
typedef struct {
    Plugin *owner;
    size_t nbytes;
    uint64_t pad; /* keeps the data 16-byte aligned */
} Block;

static long plugin_count(Plugin *p, const long *field) {
    long v;
    pthread_mutex_lock(&p->lock);
    v = *field;
    pthread_mutex_unlock(&p->lock);
    return v;
}

static void plugin_free(void *ctx) {
    Block *b = ctx;
    pthread_mutex_lock(&b->owner->lock);
    b->owner->frees++;
    pthread_mutex_unlock(&b->owner->lock);
    free(b);
}

/* Another deleter, for compare-exchange. */
static long other_free_calls = 0;
static void other_free(void *ctx) {
    other_free_calls++;
    free(ctx);
}

static TsrStatus plugin_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    Plugin *p = self;
    Block *b;
    if (p->fail_with != TSR_OK) {
        if (p->fail_message == NULL) return p->fail_with;
        return tsr_set_last_error(p->fail_with, p->fail_message);
    }
    b = malloc(sizeof(Block) + nbytes);
    if (b == NULL) return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "plugin: malloc failed");
    b->owner = p;
    b->nbytes = nbytes;
    /* zero bytes: no data, but a context the deleter must still free */
    out->data = nbytes == 0 ? NULL : (void *)(b + 1);
    out->ctx = b;
    out->deleter = plugin_free;
    out->device = device;
    pthread_mutex_lock(&p->lock);
    p->allocs++;
    pthread_mutex_unlock(&p->lock);
    return TSR_OK;
}

static void plugin_release(void *self) {
    Plugin *p = self;
    pthread_mutex_lock(&p->lock);
    p->releases++;
    pthread_mutex_unlock(&p->lock);
}

static TsrAllocatorVTable vtable_for(const char *name) {
    TsrAllocatorVTable v;
    memset(&v, 0, sizeof v);
    v.struct_size = sizeof v;
    v.name = name;
    v.allocate = plugin_allocate;
    v.release = plugin_release;
    return v;
}

static TsrAllocator *new_plugin_allocator(Plugin *p) {
    TsrAllocatorVTable v = vtable_for(p->name);
    TsrAllocator *a = NULL;
    CHECK_OK(tsr_allocator_new(&v, p, &a));
    CHECK(a != NULL);
    CHECK(strcmp(tsr_allocator_name(a), p->name) == 0);
    return a;
}

static TsrAllocatorStats stats_of(TsrAllocator *a) {
    TsrAllocatorStats s;
    memset(&s, 0xff, sizeof s);
    CHECK_OK(tsr_allocator_stats(a, &s));
    return s;
}

/* ---- registered at load time, before main ---- */

static Plugin registered = PLUGIN("registered");
static const TsrAllocatorVTable registered_vtable = {sizeof(TsrAllocatorVTable), "registered",
                                                     plugin_allocate, NULL, NULL, NULL};
TSR_REGISTER_ALLOCATOR(TSR_XPU, &registered_vtable, &registered, 1);

/* Called first in main: nothing but the constructor can have registered. */
static void test_registered_before_main(void) {
    TsrAllocator *a;
    TsrDataPtr dp;
    CHECK_EQ(tsr_get_allocator_priority(TSR_XPU), 1);
    a = tsr_get_allocator(TSR_XPU);
    CHECK(a != NULL);
    CHECK(strcmp(tsr_allocator_name(a), "registered") == 0);
    CHECK_OK(tsr_allocator_allocate(a, 32, &dp));
    CHECK_EQ(plugin_count(&registered, &registered.allocs), 1);
    tsr_data_ptr_free(&dp);
    CHECK_EQ(plugin_count(&registered, &registered.frees), 1);
    CHECK_OK(tsr_allocator_decref(a));
}

/* ---- registry ---- */

static void check_current(TsrDeviceType t, TsrAllocator *expected, uint8_t priority) {
    TsrAllocator *got = tsr_get_allocator(t);
    CHECK(got == expected);
    CHECK_EQ(tsr_get_allocator_priority(t), priority);
    if (got != NULL) CHECK_OK(tsr_allocator_decref(got));
}

static Plugin pa = PLUGIN("a"), pb = PLUGIN("b"), pc = PLUGIN("c"), pd = PLUGIN("d");

static void test_priority_rules(void) {
    TsrAllocator *a = new_plugin_allocator(&pa), *b = new_plugin_allocator(&pb);
    TsrAllocator *c = new_plugin_allocator(&pc), *d = new_plugin_allocator(&pd);
    TsrAllocator *xpu;

    check_current(TSR_PRIVATE_USE1, NULL, 0); /* empty slot: NULL, not an error */
    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, a, 5));
    check_current(TSR_PRIVATE_USE1, a, 5);
    CHECK_EQ(tsr_allocator_use_count(a), 2); /* the registry holds one */

    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, b, 4)); /* lower: refused silently */
    check_current(TSR_PRIVATE_USE1, a, 5);
    CHECK_EQ(tsr_allocator_use_count(b), 1);

    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, c, 5)); /* equal: replaces */
    check_current(TSR_PRIVATE_USE1, c, 5);
    CHECK_EQ(tsr_allocator_use_count(a), 1);

    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, d, 9)); /* higher: replaces */
    check_current(TSR_PRIVATE_USE1, d, 9);

    /* the XPU slot is untouched */
    xpu = tsr_get_allocator(TSR_XPU);
    CHECK(strcmp(tsr_allocator_name(xpu), "registered") == 0);
    check_current(TSR_XPU, xpu, 1);
    CHECK_OK(tsr_allocator_decref(xpu));

    CHECK_OK(tsr_allocator_decref(a));
    CHECK_OK(tsr_allocator_decref(b));
    CHECK_OK(tsr_allocator_decref(c));
    CHECK_EQ(pa.releases + pb.releases + pc.releases, 3);
    CHECK_OK(tsr_allocator_decref(d));
    CHECK_EQ(pd.releases, 0); /* still registered */
}

static Plugin px = PLUGIN("x"), py = PLUGIN("y");

static void test_replace_while_allocations_live(void) {
    TsrAllocator *x = new_plugin_allocator(&px), *y = new_plugin_allocator(&py);
    TsrAllocator *current;
    TsrWeakAllocator *weak_x = NULL;
    TsrDataPtr from_x, from_y;

    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, x, 200));
    CHECK_EQ(pd.releases, 1); /* d (previous test) had nothing left */
    current = tsr_get_allocator(TSR_PRIVATE_USE1);
    CHECK_OK(tsr_allocator_allocate(current, 64, &from_x));
    CHECK_OK(tsr_allocator_decref(current));
    CHECK_EQ(px.allocs, 1);
    CHECK_OK(tsr_allocator_downgrade(x, &weak_x));
    CHECK_OK(tsr_allocator_decref(x));

    /* replace x while its allocation lives: x stays until it is freed */
    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, y, 200));
    CHECK_OK(tsr_allocator_decref(y));
    CHECK_EQ(px.releases, 0);
    CHECK(!tsr_weak_allocator_expired(weak_x));

    current = tsr_get_allocator(TSR_PRIVATE_USE1);
    CHECK(strcmp(tsr_allocator_name(current), "y") == 0);
    CHECK_OK(tsr_allocator_allocate(current, 16, &from_y));
    CHECK_OK(tsr_allocator_decref(current));
    CHECK_EQ(py.allocs, 1);
    CHECK_EQ(px.allocs, 1);

    memset(from_x.data, 0xab, 64); /* x's memory is still usable */
    tsr_data_ptr_free(&from_x);
    CHECK_EQ(px.frees, 1);
    CHECK(tsr_weak_allocator_expired(weak_x));
    /* `release` runs after the last handle and the last allocation are
     * gone; a weak reference does not keep the plugin alive */
    CHECK_EQ(px.releases, 1);
    CHECK_OK(tsr_weak_allocator_decref(weak_x));
    CHECK_EQ(px.releases, 1);

    tsr_data_ptr_free(&from_y);
    CHECK_EQ(py.frees, 1);
    CHECK_EQ(py.releases, 0); /* y is still registered */
}

static Plugin ps1 = PLUGIN("storage-1"), ps2 = PLUGIN("storage-2");

static void test_replace_while_storages_live(void) {
    TsrAllocator *s1 = new_plugin_allocator(&ps1), *s2 = new_plugin_allocator(&ps2);
    TsrDevice device;
    TsrStorage *old_storage = NULL, *new_storage = NULL;
    device.type = TSR_PRIVATE_USE1;
    device.index = 0;

    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, s1, 250));
    CHECK_OK(tsr_allocator_decref(s1));
    CHECK_OK(tsr_storage_new(128, device, false, &old_storage));
    CHECK_EQ(ps1.allocs, 1);
    CHECK_EQ(tsr_storage_device(old_storage).type, TSR_PRIVATE_USE1);
    CHECK_EQ(tsr_storage_nbytes(old_storage), 128);

    /* replaced while its storage lives: s1 stays until the storage dies */
    CHECK_OK(tsr_set_allocator(TSR_PRIVATE_USE1, s2, 250));
    CHECK_OK(tsr_allocator_decref(s2));
    CHECK_EQ(ps1.releases, 0);
    CHECK_OK(tsr_storage_new(64, device, false, &new_storage));
    CHECK_EQ(ps2.allocs, 1); /* new storages come from s2 */
    CHECK_EQ(ps1.allocs, 1);

    memset(tsr_storage_data(old_storage), 7, 128);
    CHECK_OK(tsr_storage_decref(old_storage));
    CHECK_EQ(ps1.frees, 1);
    CHECK_EQ(ps1.releases, 1);

    CHECK_OK(tsr_storage_decref(new_storage));
    CHECK_EQ(ps2.frees, 1);
    CHECK_EQ(ps2.releases, 0); /* still registered */
}

/* ---- deleters ---- */

static Plugin pdel = PLUGIN("deleters");

static long host_deleter_calls = 0;
static void host_deleter(void *ctx) {
    host_deleter_calls++;
    free(ctx);
}

static void test_deleter_runs_once(void) {
    TsrAllocator *a = new_plugin_allocator(&pdel);
    TsrDataPtr dp, zero, host;

    CHECK_OK(tsr_allocator_allocate(a, 100, &dp));
    CHECK(dp.data != NULL);
    CHECK(dp.ctx != NULL);
    CHECK(dp.deleter != NULL);
    CHECK_EQ(dp.device.type, TSR_CPU);
    tsr_data_ptr_free(&dp);
    CHECK_EQ(pdel.frees, 1);
    CHECK(dp.data == NULL && dp.ctx == NULL && dp.deleter == NULL);
    tsr_data_ptr_free(&dp); /* zeroed: nothing runs twice */
    CHECK_EQ(pdel.frees, 1);

    /* zero bytes: no data, but the plugin's context is freed exactly once */
    CHECK_OK(tsr_allocator_allocate(a, 0, &zero));
    CHECK(zero.data == NULL);
    tsr_data_ptr_free(&zero);
    tsr_data_ptr_free(&zero);
    CHECK_EQ(pdel.frees, 2);
    CHECK_EQ(stats_of(a).num_allocs, 2);
    CHECK_EQ(stats_of(a).num_frees, 2);

    /* a host-made pointer: the deleter runs with ctx even if data is NULL */
    host.data = NULL;
    host.ctx = malloc(8);
    host.deleter = host_deleter;
    host.device.type = TSR_CPU;
    host.device.index = -1;
    tsr_data_ptr_free(&host);
    tsr_data_ptr_free(&host);
    CHECK_EQ(host_deleter_calls, 1);

    /* a NULL context runs nothing */
    host.ctx = NULL;
    host.deleter = host_deleter;
    tsr_data_ptr_free(&host);
    CHECK_EQ(host_deleter_calls, 1);

    /* release_context hands the context over: nothing runs on free */
    host.ctx = malloc(8);
    host.deleter = host_deleter;
    {
        void *ctx = tsr_data_ptr_release_context(&host);
        CHECK(ctx != NULL);
        CHECK(host.ctx == NULL && host.deleter == NULL);
        tsr_data_ptr_free(&host);
        CHECK_EQ(host_deleter_calls, 1);
        free(ctx);
    }
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_EQ(pdel.releases, 1);
}

static void test_compare_exchange_and_cast_context(void) {
    TsrAllocator *a = new_plugin_allocator(&pdel);
    TsrDataPtr dp, host;
    bool swapped = true;
    Block *block;

    /* through tessera's statistics wrapper: the plugin's deleter is seen */
    CHECK_OK(tsr_allocator_allocate(a, 24, &dp));
    block = tsr_data_ptr_cast_context(&dp, plugin_free);
    CHECK(block != NULL);
    CHECK(block->owner == &pdel);
    CHECK(dp.data == (void *)(block + 1));
    CHECK(tsr_data_ptr_cast_context(&dp, other_free) == NULL);
    CHECK(tsr_data_ptr_cast_context(&dp, NULL) == NULL);

    CHECK_OK(tsr_data_ptr_compare_exchange_deleter(&dp, other_free, host_deleter, &swapped));
    CHECK(!swapped);
    CHECK_OK(tsr_data_ptr_compare_exchange_deleter(&dp, plugin_free, other_free, &swapped));
    CHECK(swapped);
    CHECK(tsr_data_ptr_cast_context(&dp, other_free) == block);
    CHECK(tsr_data_ptr_cast_context(&dp, plugin_free) == NULL);
    tsr_data_ptr_free(&dp);
    CHECK_EQ(other_free_calls, 1); /* the new deleter ran, once */
    CHECK_EQ(pdel.frees, 2);       /* the old one did not */
    CHECK_EQ(stats_of(a).num_frees, 1); /* the free was still counted */
    CHECK_EQ(stats_of(a).allocated_bytes, 0);

    /* a host-made pointer */
    host.data = NULL;
    host.ctx = malloc(4);
    host.deleter = NULL;
    host.device.type = TSR_CPU;
    host.device.index = -1;
    CHECK(tsr_data_ptr_cast_context(&host, host_deleter) == NULL);
    CHECK_OK(tsr_data_ptr_compare_exchange_deleter(&host, NULL, host_deleter, &swapped));
    CHECK(swapped); /* NULL matches NULL */
    CHECK(tsr_data_ptr_cast_context(&host, host_deleter) == host.ctx);
    tsr_data_ptr_free(&host);
    CHECK_EQ(host_deleter_calls, 2);
    CHECK_OK(tsr_allocator_decref(a));
}

/* ---- the built-in CPU allocator ---- */

static void test_cpu_allocator(void) {
    static const size_t sizes[] = {1, 63, 64, 4097, 1 << 20};
    TsrAllocator *cpu = tsr_cpu_allocator();
    TsrAllocator *registered_cpu = tsr_get_allocator(TSR_CPU);
    TsrDataPtr dp;
    void *raw = NULL;
    size_t i;

    CHECK(cpu != NULL);
    CHECK(cpu == registered_cpu); /* the CPU slot holds the built-in one */
    CHECK(strcmp(tsr_allocator_name(cpu), "cpu") == 0);
    CHECK_EQ(tsr_get_allocator_priority(TSR_CPU), 0);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        CHECK_OK(tsr_allocator_allocate(cpu, sizes[i], &dp));
        CHECK(dp.data != NULL);
        CHECK_EQ((uintptr_t)dp.data % 64, 0);
        CHECK_EQ(dp.device.type, TSR_CPU);
        memset(dp.data, 1, sizes[i]);
        tsr_data_ptr_free(&dp);
    }
    CHECK_OK(tsr_allocator_allocate(cpu, 0, &dp));
    CHECK(dp.data == NULL);
    tsr_data_ptr_free(&dp);

    CHECK_OK(tsr_allocator_raw_allocate(cpu, 100, &raw));
    CHECK(raw != NULL);
    CHECK_EQ((uintptr_t)raw % 64, 0);
    CHECK_OK(tsr_allocator_raw_deallocate(cpu, raw));

    /* zero-fill and junk-fill, exclusive */
    CHECK_OK(tsr_cpu_allocator_set_zero_fill(true));
    CHECK_STATUS(tsr_cpu_allocator_set_junk_fill(true), TSR_ERR_INVALID_ARGUMENT);
    CHECK_OK(tsr_allocator_allocate(cpu, 256, &dp));
    for (i = 0; i < 256; i++) CHECK_EQ(((unsigned char *)dp.data)[i], 0);
    tsr_data_ptr_free(&dp);
    CHECK_OK(tsr_cpu_allocator_set_zero_fill(false));
    CHECK_OK(tsr_cpu_allocator_set_junk_fill(true));
    CHECK_OK(tsr_allocator_allocate(cpu, 256, &dp));
    for (i = 0; i < 64; i++) CHECK_EQ(((uint32_t *)dp.data)[i], 0x7fedbeefu);
    tsr_data_ptr_free(&dp);
    CHECK_OK(tsr_cpu_allocator_set_junk_fill(false));

    CHECK_OK(tsr_allocator_decref(registered_cpu));
    CHECK_OK(tsr_allocator_decref(cpu));
}

static void test_size_max(void) {
    TsrAllocator *cpu = tsr_cpu_allocator();
    TsrAllocatorStats before = stats_of(cpu), after;
    TsrDataPtr dp;
    void *raw = &raw;
    char size[32];
    TsrStatus s;

    memset(&dp, 0x5a, sizeof dp);
    s = tsr_allocator_allocate(cpu, SIZE_MAX, &dp);
    CHECK(s == TSR_ERR_OUT_OF_MEMORY || s == TSR_ERR_INVALID_ARGUMENT);
    snprintf(size, sizeof size, "%zu", (size_t)SIZE_MAX);
    CHECK(strstr(tsr_last_error_message(), size) != NULL);
    CHECK_MSG_CONTAINS("tsr_allocator_allocate");
    CHECK_EQ(((unsigned char *)&dp)[0], 0x5a); /* untouched */

    s = tsr_allocator_allocate(cpu, SIZE_MAX / 2, &dp);
    CHECK(s == TSR_ERR_OUT_OF_MEMORY || s == TSR_ERR_INVALID_ARGUMENT);
    snprintf(size, sizeof size, "%zu", (size_t)SIZE_MAX / 2);
    CHECK(strstr(tsr_last_error_message(), size) != NULL);

    s = tsr_allocator_raw_allocate(cpu, SIZE_MAX, &raw);
    CHECK(s == TSR_ERR_OUT_OF_MEMORY || s == TSR_ERR_INVALID_ARGUMENT);
    CHECK(raw == &raw);

    after = stats_of(cpu);
    CHECK_EQ(after.num_failed - before.num_failed, 3);
    CHECK_EQ(after.num_allocs, before.num_allocs);
    CHECK_EQ(after.allocated_bytes, before.allocated_bytes);
    CHECK_OK(tsr_allocator_decref(cpu));
}

/* ---- statistics under two threads ---- */

enum { STATS_ROUNDS = 20000, STATS_RING = 8, STATS_KEEP = 3 };

typedef struct {
    TsrAllocator *allocator;
    size_t salt;
    TsrDataPtr kept[STATS_KEEP];
    uint64_t kept_bytes;
    int failures;
} StatsArg;

static size_t size_for(size_t i, size_t salt) { return 16 * (1 + (i * 7 + salt) % 13); }

static void *stats_thread(void *varg) {
    StatsArg *arg = varg;
    TsrDataPtr ring[STATS_RING];
    size_t i, k;
    memset(ring, 0, sizeof ring);
    for (i = 0; i < STATS_ROUNDS; i++) {
        TsrDataPtr *slot = &ring[i % STATS_RING];
        tsr_data_ptr_free(slot); /* the oldest (or an empty one) */
        arg->failures += tsr_allocator_allocate(arg->allocator, size_for(i, arg->salt), slot) !=
                         TSR_OK;
    }
    for (k = 0; k < STATS_RING; k++) {
        if (k < STATS_KEEP) {
            arg->kept[k] = ring[k];
            arg->kept_bytes += size_for(STATS_ROUNDS - STATS_RING + k, arg->salt);
        } else {
            tsr_data_ptr_free(&ring[k]);
        }
    }
    return NULL;
}

static void check_stats_under_two_threads(TsrAllocator *a) {
    TsrAllocatorStats before, during, after;
    StatsArg args[2];
    pthread_t threads[2];
    int t, k;
    uint64_t kept = 0;

    tsr_allocator_reset_peak(a);
    before = stats_of(a);
    CHECK_EQ(before.peak_bytes, before.allocated_bytes);

    memset(args, 0, sizeof args);
    for (t = 0; t < 2; t++) {
        args[t].allocator = a;
        args[t].salt = (size_t)t * 5;
        CHECK_EQ(pthread_create(&threads[t], NULL, stats_thread, &args[t]), 0);
    }
    for (t = 0; t < 2; t++) {
        CHECK_EQ(pthread_join(threads[t], NULL), 0);
        CHECK_EQ(args[t].failures, 0);
        kept += args[t].kept_bytes;
    }
    /* ring slot k (k < KEEP) holds allocation ROUNDS - RING + k */
    during = stats_of(a);
    CHECK_EQ(during.num_allocs - before.num_allocs, 2 * STATS_ROUNDS);
    CHECK_EQ(during.num_frees - before.num_frees, 2 * (STATS_ROUNDS - STATS_KEEP));
    CHECK_EQ(during.allocated_bytes - before.allocated_bytes, kept);
    CHECK(during.peak_bytes >= during.allocated_bytes);
    /* each thread had RING blocks of 16 to 16 * 13 bytes live at times */
    CHECK(during.peak_bytes >= before.allocated_bytes + STATS_RING * 16);
    CHECK(during.peak_bytes <= before.allocated_bytes + 2 * STATS_RING * 16 * 13);
    CHECK_EQ(during.num_failed, before.num_failed);

    for (t = 0; t < 2; t++)
        for (k = 0; k < STATS_KEEP; k++) tsr_data_ptr_free(&args[t].kept[k]);
    after = stats_of(a);
    CHECK_EQ(after.num_frees - before.num_frees, 2 * STATS_ROUNDS);
    CHECK_EQ(after.allocated_bytes, before.allocated_bytes);
    tsr_allocator_reset_peak(a);
    CHECK_EQ(stats_of(a).peak_bytes, after.allocated_bytes);
}

static Plugin pstats = PLUGIN("stats");

static void test_stats_two_threads(void) {
    TsrAllocator *plugin = new_plugin_allocator(&pstats);
    TsrAllocator *cpu = tsr_cpu_allocator();
    TsrAllocatorStats fresh = stats_of(plugin);
    CHECK_EQ(fresh.allocated_bytes, 0);
    CHECK_EQ(fresh.peak_bytes, 0);
    CHECK_EQ(fresh.num_allocs, 0);
    check_stats_under_two_threads(plugin);
    CHECK_EQ(plugin_count(&pstats, &pstats.allocs), 2 * STATS_ROUNDS);
    CHECK_EQ(plugin_count(&pstats, &pstats.frees), 2 * STATS_ROUNDS);
    check_stats_under_two_threads(cpu);
    CHECK_OK(tsr_allocator_decref(plugin));
    CHECK_OK(tsr_allocator_decref(cpu));
}

/* ---- the memory reporter ---- */

enum { MAX_EVENTS = 64 };
typedef struct {
    const void *ptr;
    int64_t delta;
    uint64_t total;
    TsrDevice device;
} Event;
static Event events[MAX_EVENTS];
static int n_events = 0;

static void reporter(void *user, const void *ptr, int64_t delta, uint64_t total, TsrDevice device) {
    int *calls = user;
    (*calls)++;
    if (n_events < MAX_EVENTS) {
        events[n_events].ptr = ptr;
        events[n_events].delta = delta;
        events[n_events].total = total;
        events[n_events].device = device;
    }
    n_events++;
}

static Plugin preport = PLUGIN("reported");

static void test_reporter(void) {
    static const size_t sizes[3] = {10, 20, 30};
    TsrAllocator *a = new_plugin_allocator(&preport);
    TsrAllocator *cpu = tsr_cpu_allocator();
    TsrDataPtr dp[4];
    int calls = 0, i, j;
    int64_t sum = 0;

    CHECK_OK(tsr_set_memory_reporter(reporter, &calls));
    for (i = 0; i < 3; i++) CHECK_OK(tsr_allocator_allocate(a, sizes[i], &dp[i]));
    CHECK_OK(tsr_allocator_allocate(cpu, 64, &dp[3]));
    for (i = 3; i >= 0; i--) tsr_data_ptr_free(&dp[i]);
    CHECK_OK(tsr_set_memory_reporter(NULL, NULL));
    CHECK_OK(tsr_allocator_allocate(a, 5, &dp[0])); /* not reported */
    tsr_data_ptr_free(&dp[0]);

    CHECK_EQ(calls, 8);
    CHECK_EQ(n_events, 8);
    /* the plugin's running totals */
    CHECK_EQ(events[0].delta, 10);
    CHECK_EQ(events[0].total, 10);
    CHECK_EQ(events[1].total, 30);
    CHECK_EQ(events[2].total, 60);
    CHECK_EQ(events[3].delta, 64); /* cpu */
    CHECK_EQ(events[4].delta, -64);
    CHECK_EQ(events[5].delta, -30);
    CHECK_EQ(events[5].total, 30);
    CHECK_EQ(events[7].total, 0);
    /* every + has a later - for the same pointer and size */
    for (i = 0; i < 8; i++) {
        sum += events[i].delta;
        CHECK_EQ(events[i].device.type, TSR_CPU);
        if (events[i].delta > 0) {
            int matched = 0;
            for (j = i + 1; j < 8; j++)
                matched += events[j].ptr == events[i].ptr && events[j].delta == -events[i].delta;
            CHECK_EQ(matched, 1);
        }
    }
    CHECK_EQ(sum, 0);
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_OK(tsr_allocator_decref(cpu));
}

/* ---- failures and plugins of other sizes ---- */

static Plugin pfail = PLUGIN("failing");

static void test_failing_plugin(void) {
    TsrAllocator *a = new_plugin_allocator(&pfail);
    TsrDataPtr dp;
    memset(&dp, 0x5a, sizeof dp);

    pfail.fail_with = TSR_ERR_OUT_OF_MEMORY;
    pfail.fail_message = "arena exhausted: 100 bytes asked, 64 left";
    CHECK_STATUS(tsr_allocator_allocate(a, 100, &dp), TSR_ERR_OUT_OF_MEMORY);
    CHECK_MSG_CONTAINS("tsr_allocator_allocate");
    CHECK_MSG_CONTAINS("arena exhausted: 100 bytes asked, 64 left");
    CHECK_MSG_CONTAINS("failing"); /* the allocator's name */
    CHECK_EQ(((unsigned char *)&dp)[0], 0x5a);

    /* another status passes through; no message still gives one */
    pfail.fail_with = TSR_ERR_DEVICE;
    pfail.fail_message = NULL;
    CHECK_STATUS(tsr_allocator_allocate(a, 8, &dp), TSR_ERR_DEVICE);
    CHECK_MSG_CONTAINS("tsr_allocator_allocate");

    CHECK_EQ(stats_of(a).num_failed, 2);
    CHECK_EQ(stats_of(a).num_allocs, 0);
    pfail.fail_with = TSR_OK;
    CHECK_OK(tsr_allocator_allocate(a, 8, &dp));
    tsr_data_ptr_free(&dp);
    CHECK_OK(tsr_allocator_decref(a));
}

static Plugin pold = PLUGIN("old");

static void test_old_size_vtable(void) {
    /* a plugin built when the table ended with `allocate`: the fields after
     * struct_size are treated as NULL, even though they are set here */
    TsrAllocatorVTable v = vtable_for("old");
    TsrAllocator *a = NULL;
    TsrDataPtr dp;
    v.struct_size = (uint32_t)(offsetof(TsrAllocatorVTable, allocate) + sizeof v.allocate);
    CHECK_OK(tsr_allocator_new(&v, &pold, &a));
    CHECK_OK(tsr_allocator_allocate(a, 40, &dp));
    CHECK_EQ(pold.allocs, 1);
    tsr_data_ptr_free(&dp);
    CHECK_OK(tsr_allocator_decref(a));
    CHECK_EQ(pold.frees, 1);
    CHECK_EQ(pold.releases, 0); /* `release` lies past struct_size */
}

static void test_bad_vtables(void) {
    TsrAllocatorVTable v = vtable_for("bad");
    TsrAllocator *a = NULL, *xpu;

    v.allocate = NULL;
    CHECK_STATUS(tsr_allocator_new(&v, NULL, &a), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("tsr_allocator_new");
    CHECK_MSG_CONTAINS("allocate");
    CHECK(a == NULL);

    v = vtable_for("bad");
    v.struct_size = 4;
    CHECK_STATUS(tsr_allocator_new(&v, NULL, &a), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("struct_size");
    CHECK(a == NULL);

    /* a refused registration leaves the slot as it was */
    xpu = tsr_get_allocator(TSR_XPU);
    v = vtable_for("bad");
    v.allocate = NULL;
    CHECK_STATUS(tsr_register_allocator(TSR_XPU, &v, NULL, 255), TSR_ERR_INVALID_ARGUMENT);
    check_current(TSR_XPU, xpu, 1);
    CHECK_OK(tsr_allocator_decref(xpu));
}

static Plugin pself = PLUGIN("self");

static void test_plugin_self_and_device_names(void) {
    TsrAllocator *a = new_plugin_allocator(&pself);
    CHECK(tsr_allocator_plugin_self(a) == (void *)&pself);
    TsrAllocator *cpu = tsr_cpu_allocator();
    CHECK(tsr_allocator_plugin_self(cpu) == NULL);
    CHECK(tsr_allocator_plugin_self(NULL) == NULL);
    CHECK_MSG_CONTAINS("tsr_allocator_plugin_self");
    CHECK_OK(tsr_allocator_decref(cpu));
    CHECK_OK(tsr_allocator_decref(a));
    CHECK(strcmp(tsr_device_type_name(TSR_CUDA), "cuda") == 0);
    CHECK(strcmp(tsr_device_type_name(TSR_PRIVATE_USE1), "privateuseone") == 0);
    CHECK(strcmp(tsr_device_type_name(3), "unknown") == 0);
    CHECK_MSG_CONTAINS("unknown device type 3");
    TsrDevice d = tsr_device(TSR_CUDA, 2);
    CHECK(d.type == TSR_CUDA && d.index == 2);
}

static void test_cpu_cache(void) {
    TsrAllocator *cpu = tsr_cpu_allocator();
    size_t limit = tsr_cpu_allocator_cache_limit();
    CHECK(limit > 0);
    tsr_cpu_allocator_release_cache();
    TsrDataPtr p;
    CHECK_OK(tsr_allocator_allocate(cpu, 5000, &p));
    void *first = p.data;
    tsr_data_ptr_free(&p);
    CHECK(tsr_cpu_allocator_cached_bytes() >= 5000);
    CHECK_OK(tsr_allocator_allocate(cpu, 5000, &p));
    CHECK(p.data == first); /* the cached block came back */
    tsr_data_ptr_free(&p);
    CHECK(tsr_cpu_allocator_release_cache() >= 5000);
    CHECK_EQ(tsr_cpu_allocator_cached_bytes(), 0);
    tsr_cpu_allocator_set_cache_limit(0); /* off */
    CHECK_OK(tsr_allocator_allocate(cpu, 5000, &p));
    tsr_data_ptr_free(&p);
    CHECK_EQ(tsr_cpu_allocator_cached_bytes(), 0);
    tsr_cpu_allocator_set_cache_limit(limit);
    CHECK_EQ(tsr_cpu_allocator_cache_limit(), limit);
    CHECK_OK(tsr_allocator_decref(cpu));
}

int main(void) {
    RUN(test_cpu_cache);
    RUN(test_plugin_self_and_device_names);
    RUN(test_registered_before_main);
    RUN(test_priority_rules);
    RUN(test_replace_while_allocations_live);
    RUN(test_replace_while_storages_live);
    RUN(test_deleter_runs_once);
    RUN(test_compare_exchange_and_cast_context);
    RUN(test_cpu_allocator);
    RUN(test_size_max);
    RUN(test_stats_two_threads);
    RUN(test_reporter);
    RUN(test_failing_plugin);
    RUN(test_old_size_vtable);
    RUN(test_bad_vtables);
    return 0;
}
