/*
 * An arena (bump) allocator plugin in C. The plugin owns one 1 MiB region;
 * an allocation takes the next 64-byte aligned run of it, and freeing does
 * nothing but count: the whole arena is reused once everything in it has
 * been freed. This is the allocator of a workload made of phases (a
 * request, a frame, a batch) whose memory all dies together, where
 * allocating costs one addition.
 *
 * TSR_REGISTER_ALLOCATOR installs it for TSR_CPU with priority 1 when the
 * program loads, so the tensors below use it. An allocation that does not
 * fit fails with TSR_ERR_OUT_OF_MEMORY and the plugin's message reaches
 * the caller.
 *
 * Build and run (from the repository root, after ./scripts/quickstart.sh,
 * which builds target/release and its libtessera.so.0.MINOR link):
 *   gcc -std=c99 -Wall -Wextra -pedantic -Iinclude examples/arena_allocator.c \
 *       -Ltarget/release -ltessera -Wl,-rpath,$PWD/target/release -lpthread -o /tmp/arena
 *   /tmp/arena
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "aligned_block.h"
#include "tessera.h"

#define TRY(call)                                                                     \
    do {                                                                              \
        TsrStatus s_ = (call);                                                        \
        if (s_ != TSR_OK) {                                                           \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, tsr_last_error_message(), \
                    tsr_status_name(s_));                                             \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define ARENA_BYTES ((size_t)1 << 20)
#define ALIGNMENT ((size_t)64)

/* ---- the plugin ---------------------------------------------------------- */

typedef struct {
    pthread_mutex_t lock; /* tessera may allocate and free from any thread */
    unsigned char *base;  /* the region, allocated on first use */
    size_t top;           /* bytes handed out since the last reset */
    size_t live;          /* allocations not yet freed */
    unsigned long resets; /* times the arena was emptied and reused */
} Arena;

static Arena arena = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, 0, 0};

/* ctx is the arena: freeing only counts, and the last free of a phase
   rewinds the arena. */
static void arena_free(void *ctx) {
    Arena *a = ctx;
    pthread_mutex_lock(&a->lock);
    if (--a->live == 0) {
        a->top = 0;
        a->resets++;
    }
    pthread_mutex_unlock(&a->lock);
}

static TsrStatus arena_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    Arena *a = self;
    size_t start;
    char msg[128];
    pthread_mutex_lock(&a->lock);
    if (a->base == NULL) {
        void *region = aligned_block(ALIGNMENT, ARENA_BYTES);
        if (region == NULL) {
            pthread_mutex_unlock(&a->lock);
            return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "arena: no memory for the region");
        }
        a->base = region;
    }
    start = (a->top + ALIGNMENT - 1) & ~(ALIGNMENT - 1);
    if (start > ARENA_BYTES || nbytes > ARENA_BYTES - start) {
        size_t used = a->top;
        pthread_mutex_unlock(&a->lock);
        snprintf(msg, sizeof msg, "arena: %zu bytes requested, %zu of %zu bytes left", nbytes,
                 ARENA_BYTES - (used < ARENA_BYTES ? used : ARENA_BYTES), ARENA_BYTES);
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, msg);
    }
    a->top = start + nbytes;
    a->live++;
    pthread_mutex_unlock(&a->lock);
    out->data = a->base + start;
    out->ctx = a;
    out->deleter = arena_free;
    out->device = device;
    return TSR_OK;
}

static const TsrAllocatorVTable arena_vtable = {
    sizeof(TsrAllocatorVTable), /* struct_size */
    "arena",                    /* name */
    arena_allocate,             /* allocate */
    NULL,                       /* raw_deleter: ctx is the arena, not the data */
    NULL,                       /* copy_data: memcpy */
    NULL,                       /* release: the arena is static */
};

TSR_REGISTER_ALLOCATOR(TSR_CPU, &arena_vtable, &arena, 1);

/* ---- the program ----------------------------------------------------------- */

static void report(const char *when) {
    TsrAllocator *cpu = tsr_get_allocator(TSR_CPU);
    TsrAllocatorStats s;
    TRY(tsr_allocator_stats(cpu, &s));
    pthread_mutex_lock(&arena.lock);
    printf("%-24s arena: top %7zu B, %zu live, %lu resets | tessera: %llu allocs, %llu frees, "
           "%llu failed, %llu B peak\n",
           when, arena.top, arena.live, arena.resets, (unsigned long long)s.num_allocs,
           (unsigned long long)s.num_frees, (unsigned long long)s.num_failed,
           (unsigned long long)s.peak_bytes);
    pthread_mutex_unlock(&arena.lock);
    TRY(tsr_allocator_decref(cpu));
}

/* One phase: a few tensors that die together. */
static void phase(int n) {
    const TsrDevice cpu = {TSR_CPU, -1};
    const int64_t sizes[] = {100, 100};
    TsrTensor *t[3];
    char label[32];
    for (int i = 0; i < 3; i++) {
        TRY(tsr_tensor_empty(2, sizes, i == 2 ? TSR_DOUBLE : TSR_FLOAT, cpu, &t[i]));
        TRY(tsr_tensor_fill(t[i], tsr_scalar_int(n)));
    }
    snprintf(label, sizeof label, "phase %d, 3 tensors", n);
    report(label);
    for (int i = 0; i < 3; i++) TRY(tsr_tensor_decref(t[i]));
}

int main(void) {
    const TsrDevice cpu = {TSR_CPU, -1};
    TsrAllocator *current = tsr_get_allocator(TSR_CPU);
    const int64_t big[] = {512, 1024}; /* 2 MiB of float: more than the arena */
    TsrTensor *t = NULL;
    TsrStatus status;

    printf("CPU allocator: %s (priority %u)\n", tsr_allocator_name(current),
           (unsigned)tsr_get_allocator_priority(TSR_CPU));
    TRY(tsr_allocator_decref(current));

    phase(1);
    report("after phase 1");
    phase(2);
    report("after phase 2");

    status = tsr_tensor_empty(2, big, TSR_FLOAT, cpu, &t);
    printf("a 2 MiB tensor: %s\n  %s\n", tsr_status_name(status), tsr_last_error_message());
    report("after the refusal");
    return t == NULL ? 0 : 1;
}
