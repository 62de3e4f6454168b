/*
 * Aligned blocks for the examples' allocators, on every platform:
 * posix_memalign / free on POSIX systems, _aligned_malloc / _aligned_free
 * on Windows (whose C library has no posix_memalign, and whose aligned
 * blocks must not go to free()). A program that includes this defines
 * _POSIX_C_SOURCE 200112L first (posix_memalign).
 */
#ifndef TESSERA_EXAMPLES_ALIGNED_BLOCK_H
#define TESSERA_EXAMPLES_ALIGNED_BLOCK_H

#include <stddef.h>
#include <stdlib.h>
#ifdef _WIN32
#include <malloc.h>
#endif

/* nbytes at an address that is a multiple of align (a power of two, at
   least sizeof(void *)), or NULL when there is no memory. */
static inline void *aligned_block(size_t align, size_t nbytes) {
#ifdef _WIN32
    return _aligned_malloc(nbytes, align);
#else
    void *p = NULL;
    return posix_memalign(&p, align, nbytes) == 0 ? p : NULL;
#endif
}

/* Frees a block of aligned_block (NULL: nothing). */
static inline void aligned_block_free(void *p) {
#ifdef _WIN32
    _aligned_free(p);
#else
    free(p);
#endif
}

#endif
