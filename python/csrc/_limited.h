/* The test plugin of _limited.c, for _handler.c. */
#ifndef TESSERA_NUMPY_LIMITED_H
#define TESSERA_NUMPY_LIMITED_H

#include <stddef.h>

#include "tessera.h"

/* A new malloc-backed plugin allocator named `name` (copied) refusing what
 * would take its live bytes past `limit`; TSR_OK with one reference in
 * *out, else the status with tessera's last error set. */
TsrStatus tsr_numpy_limited_new(size_t limit, const char *name, TsrAllocator **out);

#endif
