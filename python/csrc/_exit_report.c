/*
 * tessera.numpy_allocator's exit report (no Python API: it runs as the library is
 * unloaded, after Python's finalization).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

/* With TESSERA_NUMPY_EXIT_STATS=PATH ("-" for stderr) set, the process's
 * final tessera statistics are written there as one JSON line when the
 * library is unloaded, after Python's finalization freed what it frees. */
__attribute__((destructor)) static void exit_report(void) {
    const char *dest = getenv("TESSERA_NUMPY_EXIT_STATS");
    if (dest == NULL || *dest == '\0') {
        return;
    }
    TsrAllocator *a = tsr_get_allocator(TSR_CPU);
    TsrAllocatorStats s;
    if (a == NULL || tsr_allocator_stats(a, &s) != TSR_OK) {
        return;
    }
    FILE *f = strcmp(dest, "-") == 0 ? stderr : fopen(dest, "w");
    if (f == NULL) {
        return;
    }
    fprintf(f,
            "{\"when\": \"process exit\", \"allocator\": \"%s\", \"allocations\": %llu, "
            "\"frees\": %llu, \"live_blocks\": %llu, \"current_bytes\": %llu, "
            "\"peak_bytes\": %llu, \"failed\": %llu}\n",
            tsr_allocator_name(a), (unsigned long long)s.num_allocs,
            (unsigned long long)s.num_frees, (unsigned long long)(s.num_allocs - s.num_frees),
            (unsigned long long)s.allocated_bytes, (unsigned long long)s.peak_bytes,
            (unsigned long long)s.num_failed);
    if (f != stderr) {
        fclose(f);
    }
    tsr_allocator_decref(a);
}
