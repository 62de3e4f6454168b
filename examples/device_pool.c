/*
 * A custom "device" memory pool written in C, wrapped in tessera's caching
 * layer and installed for TSR_PRIVATE_USE1.
 *
 * The plugin plays the part of a device driver: it owns one big region
 * (here a malloc'd 64 MiB block standing in for device memory) and hands
 * out runs of 2 MiB chunks from it, first fit. That granularity is enough
 * because the caching layer only ever asks its inner allocator for whole
 * segments, and every segment size is a multiple of 2 MiB. The caching
 * layer does the rest: 512-byte rounding, small and large pools, splitting,
 * merging, reuse, statistics.
 *
 * Build and run (from the repository root, after ./scripts/quickstart.sh,
 * which builds target/release and its libtessera.so.0.MINOR link):
 *   gcc -std=c99 -Wall -Wextra -Iinclude examples/device_pool.c \
 *       -Ltarget/release -ltessera -Wl,-rpath,$PWD/target/release -o /tmp/device_pool
 *   /tmp/device_pool
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

#define TRY(call)                                                                 \
    do {                                                                          \
        TsrStatus s_ = (call);                                                    \
        if (s_ != TSR_OK) {                                                       \
            fprintf(stderr, "%s failed: %s\n", #call, tsr_last_error_message());  \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

#define MIB ((size_t)1 << 20)
#define CHUNK (2 * MIB)
#define NCHUNKS 32 /* a 64 MiB "device" */

/* ---- the plugin: a chunk arena over one region -------------------------- */

typedef struct {
    unsigned char *base;   /* the region */
    int used[NCHUNKS];     /* run length at the first chunk of a run, -1 inside, 0 free */
    size_t bytes_in_use;
    int calls, frees;
} Arena;

static Arena arena;

/* Frees a run given its address; ctx == data, so this is also the raw
   deleter. (A real plugin would look its state up from the pointer; this
   one has a single arena.) */
static void arena_free(void *ptr) {
    size_t first = (size_t)((unsigned char *)ptr - arena.base) / CHUNK;
    int n = arena.used[first];
    for (int i = 0; i < n; i++) arena.used[first + (size_t)i] = 0;
    arena.bytes_in_use -= (size_t)n * CHUNK;
    arena.frees++;
}

static TsrStatus arena_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    Arena *a = self;
    size_t need = (nbytes + CHUNK - 1) / CHUNK;
    a->calls++;
    for (size_t start = 0; start + need <= NCHUNKS; start++) {
        size_t i = 0;
        while (i < need && a->used[start + i] == 0) i++;
        if (i == need) {
            a->used[start] = (int)need;
            for (i = 1; i < need; i++) a->used[start + i] = -1;
            a->bytes_in_use += need * CHUNK;
            out->data = a->base + start * CHUNK;
            out->ctx = out->data;
            out->deleter = arena_free;
            out->device = device;
            return TSR_OK;
        }
    }
    char msg[128];
    snprintf(msg, sizeof msg, "device pool has no %zu free contiguous chunks of 2 MiB", need);
    return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, msg);
}

static void arena_release(void *self) {
    Arena *a = self;
    printf("plugin released: %d segment allocations, %d frees, %zu bytes still in use\n",
           a->calls, a->frees, a->bytes_in_use);
    free(a->base);
    a->base = NULL;
}

static const TsrAllocatorVTable arena_vtable = {
    sizeof(TsrAllocatorVTable), "device_arena", arena_allocate, arena_free, NULL, arena_release,
};

/* ---- printing ------------------------------------------------------------ */

static void print_pool(const char *name, const TsrCachingPoolStats *p) {
    printf("  %-5s segments %llu (peak %llu), reserved %6.2f MiB, active %3llu blocks %7.2f MiB "
           "(requested %.2f MiB), split free %llu blocks %.2f MiB, hits %llu/%llu\n",
           name, (unsigned long long)p->segments.current, (unsigned long long)p->segments.peak,
           (double)p->reserved_bytes.current / MIB, (unsigned long long)p->active_blocks.current,
           (double)p->active_bytes.current / MIB, (double)p->requested_bytes.current / MIB,
           (unsigned long long)p->inactive_split_blocks.current,
           (double)p->inactive_split_bytes.current / MIB, (unsigned long long)p->cache_hits,
           (unsigned long long)p->num_allocs);
}

static void print_stats(const char *when, TsrAllocator *pool) {
    TsrCachingStats s;
    s.struct_size = sizeof s;
    TRY(tsr_caching_allocator_stats(pool, &s));
    printf("%s (device arena: %zu MiB in use)\n", when, arena.bytes_in_use / MIB);
    print_pool("small", &s.small);
    print_pool("large", &s.large);
    print_pool("all", &s.all);
}

int main(void) {
    arena.base = malloc(NCHUNKS * CHUNK);
    if (arena.base == NULL) return 1;

    TsrAllocator *plugin = NULL, *pool = NULL;
    TRY(tsr_allocator_new(&arena_vtable, &arena, &plugin));
    TsrCachingOptions options;
    memset(&options, 0, sizeof options);
    options.struct_size = sizeof options;
    options.name = "device_pool";
    options.use_default_device = 1;
    options.default_device.type = TSR_PRIVATE_USE1;
    options.default_device.index = 0;
    TRY(tsr_caching_allocator_new(plugin, &options, &pool));
    TRY(tsr_allocator_decref(plugin)); /* the pool keeps it */
    TRY(tsr_set_allocator(TSR_PRIVATE_USE1, pool, 0));

    /* A few blocks straight from the allocator... */
    const size_t sizes[] = {4096, 300 * 1024, 700 * 1024, 3 * MIB, 12 * MIB};
    TsrDataPtr blocks[5];
    for (int i = 0; i < 5; i++) TRY(tsr_allocator_allocate(pool, sizes[i], &blocks[i]));
    /* ...and a storage on the device, which finds the pool in the registry. */
    const TsrDevice dev = {TSR_PRIVATE_USE1, 0};
    TsrStorage *storage = NULL;
    TRY(tsr_storage_new(5 * MIB, dev, false, &storage));
    print_stats("after 5 blocks and a 5 MiB storage", pool);

    /* Free some; the next requests of those sizes are cache hits. */
    tsr_data_ptr_free(&blocks[1]);
    tsr_data_ptr_free(&blocks[3]);
    int calls = arena.calls;
    TRY(tsr_allocator_allocate(pool, 256 * 1024, &blocks[1]));
    TRY(tsr_allocator_allocate(pool, 2 * MIB, &blocks[3]));
    printf("\nreallocated 256 KiB and 2 MiB: %d new segment(s) from the plugin\n",
           arena.calls - calls);
    print_stats("after reuse", pool);

    for (int i = 0; i < 5; i++) tsr_data_ptr_free(&blocks[i]);
    TRY(tsr_storage_decref(storage));
    print_stats("\nafter freeing everything (segments stay cached)", pool);
    TRY(tsr_caching_allocator_empty_cache(pool));
    print_stats("\nafter tsr_caching_allocator_empty_cache", pool);

    TsrAllocatorStats totals;
    TRY(tsr_allocator_stats(pool, &totals));
    printf("\nallocator '%s': %llu allocations, %llu frees, peak %.2f MiB requested\n",
           tsr_allocator_name(pool), (unsigned long long)totals.num_allocs,
           (unsigned long long)totals.num_frees, (double)totals.peak_bytes / MIB);

    /* Drop our reference, then uninstall the pool: the registry held the
       last one, so the plugin is released. */
    TRY(tsr_allocator_decref(pool));
    TsrAllocator *cpu = tsr_cpu_allocator();
    TRY(tsr_set_allocator(TSR_PRIVATE_USE1, cpu, 0)); /* replaces ours in the slot */
    TRY(tsr_allocator_decref(cpu));
    return 0;
}
