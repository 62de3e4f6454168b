/*
 * portable.h: the few POSIX helpers that C tests use and MinGW-w64's C
 * library lacks, for the Windows stage (.ci/windows.sh): a temporary
 * directory (mkdtemp) and aligned blocks (the examples' aligned_block.h:
 * aligned_block / aligned_block_free). On POSIX systems these are the
 * POSIX calls themselves. A test that includes this defines
 * _POSIX_C_SOURCE 200809L first.
 */
#ifndef TSR_PORTABLE_H
#define TSR_PORTABLE_H

#include <stddef.h>
#include <stdlib.h>
#ifdef _WIN32
#include <direct.h>
#include <io.h>
#else
#include <unistd.h>
#endif

#include "../examples/aligned_block.h"

/* mkdtemp: TEMPLATE ends in XXXXXX, replaced by a name that did not
   exist, made a directory; NULL on failure. */
static inline char *tsr_mkdtemp(char *template_path) {
#ifdef _WIN32
    if (_mktemp(template_path) == NULL || _mkdir(template_path) != 0) return NULL;
    return template_path;
#else
    return mkdtemp(template_path);
#endif
}

#endif
