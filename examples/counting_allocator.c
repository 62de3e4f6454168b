/*
 * A counting allocator plugin in C: every CPU allocation of the program goes
 * through malloc/free here, and the plugin counts calls and bytes on its
 * own. TSR_REGISTER_ALLOCATOR installs it for TSR_CPU with priority 1 when
 * the program loads, above the built-in allocator (priority 0), so the
 * tensors below use it without asking. The plugin's own counts and the
 * statistics tessera keeps for every allocator must agree.
 *
 * Build and run (from the repository root, after ./scripts/quickstart.sh,
 * which builds target/release and its libtessera.so.0.MINOR link):
 *   gcc -std=c99 -Wall -Wextra -pedantic -Iinclude examples/counting_allocator.c \
 *       -Ltarget/release -ltessera -Wl,-rpath,$PWD/target/release -lpthread -o /tmp/counting
 *   /tmp/counting
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "aligned_block.h"
#include "tessera.h"

#define TRY(call)                                                                               \
    do {                                                                                        \
        TsrStatus s_ = (call);                                                                  \
        if (s_ != TSR_OK) {                                                                     \
            fprintf(stderr, "%s failed: %s (%s)\n", #call, tsr_last_error_message(),           \
                    tsr_status_name(s_));                                                       \
            exit(1);                                                                            \
        }                                                                                       \
    } while (0)

/* ---- the plugin ---------------------------------------------------------- */

/* The plugin's state. tessera may call it from any thread: a mutex guards
   the counters. */
typedef struct {
    pthread_mutex_t lock;
    unsigned long allocations, frees;
    size_t live_bytes, peak_bytes;
} Counter;

/* Each block starts with a 64-byte header recording its size and its
   counter, so the deleter (which receives only the context) can account
   for it; the data follows, 64-byte aligned like tessera's own allocator. */
typedef struct {
    Counter *owner;
    size_t nbytes;
} Header;
#define HEADER_BYTES 64

static void counting_free(void *ctx) {
    Header *h = ctx;
    Counter *c = h->owner;
    pthread_mutex_lock(&c->lock);
    c->frees++;
    c->live_bytes -= h->nbytes;
    pthread_mutex_unlock(&c->lock);
    aligned_block_free(h);
}

static TsrStatus counting_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    Counter *c = self;
    void *block = NULL;
    Header *h;
    if (nbytes > SIZE_MAX - HEADER_BYTES ||
        (block = aligned_block(64, HEADER_BYTES + nbytes)) == NULL) {
        char msg[96];
        snprintf(msg, sizeof msg, "counting allocator: cannot allocate %zu bytes", nbytes);
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, msg);
    }
    h = block;
    h->owner = c;
    h->nbytes = nbytes;
    pthread_mutex_lock(&c->lock);
    c->allocations++;
    c->live_bytes += nbytes;
    if (c->live_bytes > c->peak_bytes) c->peak_bytes = c->live_bytes;
    pthread_mutex_unlock(&c->lock);
    out->data = (unsigned char *)block + HEADER_BYTES;
    out->ctx = block;
    out->deleter = counting_free;
    out->device = device;
    return TSR_OK;
}

static Counter counter = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};

static const TsrAllocatorVTable counting_vtable = {
    sizeof(TsrAllocatorVTable), /* struct_size */
    "counting",                 /* name */
    counting_allocate,          /* allocate */
    NULL,                       /* raw_deleter: ctx != data, so no raw allocation */
    NULL,                       /* copy_data: memcpy */
    NULL,                       /* release: the counter is static */
};

/* Installed for the CPU at load time, above the built-in allocator. */
TSR_REGISTER_ALLOCATOR(TSR_CPU, &counting_vtable, &counter, 1);

/* ---- the program ----------------------------------------------------------- */

static void report(const char *when) {
    TsrAllocator *cpu = tsr_get_allocator(TSR_CPU);
    TsrAllocatorStats s;
    TRY(tsr_allocator_stats(cpu, &s));
    pthread_mutex_lock(&counter.lock);
    printf("%-28s plugin: %lu allocs, %lu frees, %zu B live, %zu B peak\n", when,
           counter.allocations, counter.frees, counter.live_bytes, counter.peak_bytes);
    printf("%-28s tessera: %llu allocs, %llu frees, %llu B live, %llu B peak\n", "",
           (unsigned long long)s.num_allocs, (unsigned long long)s.num_frees,
           (unsigned long long)s.allocated_bytes, (unsigned long long)s.peak_bytes);
    pthread_mutex_unlock(&counter.lock);
    TRY(tsr_allocator_decref(cpu));
}

int main(void) {
    const TsrDevice cpu = {TSR_CPU, -1};
    const int64_t sizes[] = {64, 64};
    TsrAllocator *current = tsr_get_allocator(TSR_CPU);
    TsrTensor *a = NULL, *b = NULL, *c = NULL, *t = NULL;

    printf("CPU allocator: %s (priority %u)\n", tsr_allocator_name(current),
           (unsigned)tsr_get_allocator_priority(TSR_CPU));
    TRY(tsr_allocator_decref(current));
    report("at start");

    TRY(tsr_tensor_empty(2, sizes, TSR_FLOAT, cpu, &a)); /* 16 KiB */
    TRY(tsr_tensor_empty(2, sizes, TSR_DOUBLE, cpu, &b)); /* 32 KiB */
    report("two tensors");

    TRY(tsr_tensor_fill(a, tsr_scalar_float(1.0)));
    TRY(tsr_tensor_transpose(a, 0, 1, &t)); /* a view: no allocation */
    TRY(tsr_tensor_clone(t, &c));           /* a copy: 16 KiB more */
    report("a view and a clone");

    TRY(tsr_tensor_decref(t));
    TRY(tsr_tensor_decref(a)); /* the view is gone too: a's memory is freed */
    report("after freeing a");

    TRY(tsr_tensor_decref(b));
    TRY(tsr_tensor_decref(c));
    report("after freeing everything");
    return 0;
}
