/*
 * dlopen_thread_slot.c: the shared library loaded with dlopen, four
 * threads allocating and freeing through the CPU allocator (whose
 * per-thread cache and statistics live in the library's thread slot,
 * src/allocator/thread_slot.rs), every block written with a pattern of
 * its thread and checked before it is freed. CTest runs it twice: as is
 * (the slot in glibc's static TLS block: each access is the thread
 * pointer plus a learned offset) and with
 * GLIBC_TUNABLES=glibc.rtld.optional_static_tls=0 (no static TLS to
 * spare for a dlopen-ed library: the slot in dynamic TLS, reached
 * through its TLS descriptor every time). A thread that saw another
 * thread's slot would hand out, or check, another thread's blocks.
 *
 * Usage: dlopen_thread_slot PATH_TO_LIBTESSERA_SO
 */
#define _POSIX_C_SOURCE 200809L

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

#define THREADS 4
#define BLOCKS 64
#define ROUNDS 2000

static TsrAllocator *(*get_allocator)(TsrDeviceType);
static TsrStatus (*allocate)(TsrAllocator *, size_t, TsrDataPtr *);
static void (*free_data_ptr)(TsrDataPtr *);
static TsrStatus (*allocator_decref)(TsrAllocator *);

/* dlsym's object pointer as a function pointer, without the cast ISO C
 * leaves undefined. */
static void resolve(void *lib, const char *name, void *fn, size_t size) {
    void *sym = dlsym(lib, name);
    if (!sym) {
        fprintf(stderr, "FAIL dlsym(%s): %s\n", name, dlerror());
        exit(1);
    }
    memcpy(fn, &sym, size);
}

static void *run(void *arg) {
    unsigned id = (unsigned)(size_t)arg;
    TsrAllocator *cpu = get_allocator(TSR_CPU);
    TsrDataPtr blocks[BLOCKS];
    if (!cpu) {
        fprintf(stderr, "FAIL thread %u: tsr_get_allocator(TSR_CPU) returned NULL\n", id);
        exit(1);
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BLOCKS; i++) {
            size_t n = 64 * (size_t)(1 + i % 4);
            if (allocate(cpu, n, &blocks[i]) != TSR_OK) {
                fprintf(stderr, "FAIL thread %u: allocate %zu bytes\n", id, n);
                exit(1);
            }
            memset(blocks[i].data, (int)(id * BLOCKS + (unsigned)i), n);
        }
        for (int i = 0; i < BLOCKS; i++) {
            const unsigned char *p = blocks[i].data;
            unsigned char want = (unsigned char)(id * BLOCKS + (unsigned)i);
            if (p[0] != want || p[63] != want) {
                fprintf(stderr, "FAIL thread %u block %d: read %u/%u, wrote %u\n", id, i,
                        p[0], p[63], want);
                exit(1);
            }
            free_data_ptr(&blocks[i]);
        }
    }
    if (allocator_decref(cpu) != TSR_OK) {
        fprintf(stderr, "FAIL thread %u: tsr_allocator_decref\n", id);
        exit(1);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH_TO_LIBTESSERA_SO\n", argv[0]);
        return 2;
    }
    void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "FAIL dlopen(%s): %s\n", argv[1], dlerror());
        return 1;
    }
    resolve(lib, "tsr_get_allocator", &get_allocator, sizeof get_allocator);
    resolve(lib, "tsr_allocator_allocate", &allocate, sizeof allocate);
    resolve(lib, "tsr_data_ptr_free", &free_data_ptr, sizeof free_data_ptr);
    resolve(lib, "tsr_allocator_decref", &allocator_decref, sizeof allocator_decref);
    pthread_t threads[THREADS];
    for (size_t t = 0; t < THREADS; t++) {
        if (pthread_create(&threads[t], NULL, run, (void *)t) != 0) {
            fprintf(stderr, "FAIL pthread_create\n");
            return 1;
        }
    }
    for (int t = 0; t < THREADS; t++) pthread_join(threads[t], NULL);
    const char *tunables = getenv("GLIBC_TUNABLES");
    printf("ok: %d threads x %d rounds x %d blocks through a dlopen-ed library (GLIBC_TUNABLES=%s)\n",
           THREADS, ROUNDS, BLOCKS, tunables ? tunables : "");
    return 0;
}
