/*
 * tessera quick start: the first program to run.
 *
 * Prints the library version, promotes two dtypes (Int + Float -> Float,
 * as in PyTorch) and allocates and frees memory through the built-in CPU
 * allocator, printing its statistics. Every call is checked: the program
 * exits with status 1 and tessera's error message if one fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

/* Exits with tessera's last error message if `status` is not TSR_OK. */
static void check(TsrStatus status, const char *what) {
    if (status != TSR_OK) {
        fprintf(stderr, "%s failed: %s (%s)\n", what, tsr_status_name(status),
                tsr_last_error_message());
        exit(1);
    }
}

/* Prints the allocator's statistics; returns the bytes it has allocated. */
static unsigned long long print_stats(const char *when, const TsrAllocator *allocator) {
    TsrAllocatorStats s;
    check(tsr_allocator_stats(allocator, &s), "tsr_allocator_stats");
    printf("  %-22s allocated %8llu B, peak %8llu B, %llu allocs, %llu frees\n", when,
           (unsigned long long)s.allocated_bytes, (unsigned long long)s.peak_bytes,
           (unsigned long long)s.num_allocs, (unsigned long long)s.num_frees);
    return (unsigned long long)s.allocated_bytes;
}

int main(void) {
    TsrDType result;
    TsrAllocator *cpu;
    TsrDataPtr buffers[3];
    size_t sizes[3] = {1024, 64 * 1024, 1024 * 1024};
    unsigned long long before, during, after;
    int i;

    printf("tessera %s\n", tsr_version());

    /* dtype promotion follows c10's table */
    check(tsr_promote_types(TSR_INT, TSR_FLOAT, &result), "tsr_promote_types");
    printf("promote_types(%s, %s) = %s\n", tsr_dtype_name(TSR_INT), tsr_dtype_name(TSR_FLOAT),
           tsr_dtype_name(result));
    if (result != TSR_FLOAT) {
        fprintf(stderr, "expected Float\n");
        return 1;
    }

    /* the built-in CPU allocator: a new reference, released at the end */
    cpu = tsr_cpu_allocator();
    printf("allocator '%s':\n", tsr_allocator_name(cpu));
    before = print_stats("before:", cpu);
    for (i = 0; i < 3; i++) {
        check(tsr_allocator_allocate(cpu, sizes[i], &buffers[i]), "tsr_allocator_allocate");
        memset(buffers[i].data, 0, sizes[i]);
    }
    during = print_stats("after 3 allocations:", cpu);
    for (i = 0; i < 3; i++) tsr_data_ptr_free(&buffers[i]); /* runs each deleter once */
    after = print_stats("after freeing them:", cpu);
    if (during != before + sizes[0] + sizes[1] + sizes[2] || after != before) {
        fprintf(stderr, "unexpected allocator statistics\n");
        return 1;
    }

    /* errors are statuses with a message, never a crash */
    if (tsr_promote_types(TSR_QINT8, TSR_FLOAT, &result) != TSR_OK) {
        printf("an error, as expected: %s\n", tsr_last_error_message());
    }

    check(tsr_allocator_decref(cpu), "tsr_allocator_decref");
    return 0;
}
