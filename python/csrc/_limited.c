/*
 * tessera.numpy_allocator's allocator plugin for testing failure paths (install
 * 'failing' and 'limited'): a malloc-backed C plugin (TsrAllocatorVTable)
 * that refuses an allocation which would take its live bytes past a
 * limit ("failing" is a limit of 0 bytes, refusing all).
 */
#define _POSIX_C_SOURCE 200809L /* posix_memalign */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"
#include "_limited.h"

/* The plugin's own header before each block it hands out. */
#define HEADER_BYTES 64


/* "limited": malloc-backed, refuses an allocation that would take its live
 * bytes past `limit` ("failing" is a limit of 0 bytes, refusing all). */
typedef struct {
    size_t limit;
    atomic_size_t live_bytes;
} LimitedPlugin;

typedef struct {
    LimitedPlugin *plugin;
    size_t size;
    char pad[HEADER_BYTES - sizeof(void *) - sizeof(size_t)];
} PluginHeader;

_Static_assert(sizeof(PluginHeader) == HEADER_BYTES, "PluginHeader must be 64 bytes");

static void limited_deleter(void *ctx) {
    PluginHeader *h = (PluginHeader *)ctx;
    atomic_fetch_sub(&h->plugin->live_bytes, h->size);
    free(h);
}

static TsrStatus limited_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    LimitedPlugin *p = (LimitedPlugin *)self;
    size_t live = atomic_load(&p->live_bytes);
    for (;;) {
        if (nbytes > p->limit || live > p->limit - nbytes) {
            char msg[200];
            snprintf(msg, sizeof msg,
                     "tessera.numpy_allocator limited plugin: refusing %zu bytes (%zu live, limit %zu)",
                     nbytes, live, p->limit);
            return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, msg);
        }
        if (atomic_compare_exchange_weak(&p->live_bytes, &live, live + nbytes)) {
            break;
        }
    }
    void *base = NULL;
    if (nbytes > SIZE_MAX - HEADER_BYTES || posix_memalign(&base, 64, HEADER_BYTES + nbytes) != 0) {
        atomic_fetch_sub(&p->live_bytes, nbytes);
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY,
                                  "tessera.numpy_allocator limited plugin: posix_memalign failed");
    }
    PluginHeader *h = (PluginHeader *)base;
    h->plugin = p;
    h->size = nbytes;
    out->data = (char *)base + HEADER_BYTES;
    out->ctx = h;
    out->deleter = limited_deleter;
    out->device = device;
    return TSR_OK;
}

static void limited_release(void *self) { free(self); }

TsrStatus tsr_numpy_limited_new(size_t limit, const char *name, TsrAllocator **out) {
    LimitedPlugin *p = calloc(1, sizeof *p);
    if (p == NULL) {
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "tessera.numpy_allocator limited plugin: calloc failed");
    }
    p->limit = limit;
    TsrAllocatorVTable vt;
    memset(&vt, 0, sizeof vt);
    vt.struct_size = sizeof vt;
    vt.name = name;
    vt.allocate = limited_allocate;
    vt.release = limited_release;
    TsrStatus st = tsr_allocator_new(&vt, p, out);
    if (st != TSR_OK) {
        free(p); /* on error release is not called */
    }
    return st;
}
