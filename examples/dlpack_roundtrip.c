/*
 * A DLPack round trip: make a tensor, export it as a
 * DLManagedTensorVersioned, print the DLTensor fields, import it back as a
 * second tessera tensor, show that both share one buffer, and show that
 * the export's deleter runs exactly once, when the last user lets go.
 *
 * Build and run (from the repository root, after ./scripts/quickstart.sh,
 * which builds target/release and its libtessera.so.0.MINOR link):
 *   cc -std=c99 -Wall -Iinclude examples/dlpack_roundtrip.c \
 *       -Ltarget/release -ltessera -Wl,-rpath,$PWD/target/release -o /tmp/dlpack_roundtrip
 *   /tmp/dlpack_roundtrip
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "tessera.h"

#define TRY(call)                                                                \
    do {                                                                         \
        TsrStatus s_ = (call);                                                   \
        if (s_ != TSR_OK) {                                                      \
            fprintf(stderr, "%s failed: %s\n", #call, tsr_last_error_message()); \
            exit(1);                                                             \
        }                                                                        \
    } while (0)

/* The demonstration counts deleter calls by wrapping the export's deleter. */
static void (*tessera_deleter)(DLManagedTensorVersioned *);
static int deleter_calls = 0;

static void counting_deleter(DLManagedTensorVersioned *m) {
    deleter_calls++;
    printf("  deleter called (call %d)\n", deleter_calls);
    tessera_deleter(m);
}

static void print_ints(const char *label, int32_t n, const int64_t *v) {
    printf("  %-12s [", label);
    for (int32_t i = 0; i < n; i++) printf(i ? ", %lld" : "%lld", (long long)v[i]);
    printf("]\n");
}

int main(void) {
    const TsrDevice cpu = {TSR_CPU, -1};
    const int64_t sizes[] = {2, 3};
    TsrTensor *base = NULL;
    TRY(tsr_tensor_empty(2, sizes, TSR_FLOAT, cpu, &base));
    float *values = (float *)tsr_tensor_data(base);
    for (int i = 0; i < 6; i++) values[i] = (float)i;

    /* Export a transposed view: strides [1, 3] travel with it. */
    TsrTensor *t = NULL;
    TRY(tsr_tensor_transpose(base, 0, 1, &t));
    DLManagedTensorVersioned *m = NULL;
    TRY(tsr_tensor_to_dlpack(t, &m));
    tessera_deleter = m->deleter;
    m->deleter = counting_deleter;

    const DLTensor *d = &m->dl_tensor;
    printf("exported DLManagedTensorVersioned:\n");
    printf("  version      %u.%u\n", (unsigned)m->version.major, (unsigned)m->version.minor);
    printf("  flags        %llu (read-only: %s, copied: %s)\n", (unsigned long long)m->flags,
           (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY) ? "yes" : "no",
           (m->flags & DLPACK_FLAG_BITMASK_IS_COPIED) ? "yes" : "no");
    /* Addresses as 0x<hex> on every platform (%p's form is the C library's). */
    printf("  data         0x%" PRIxPTR " (tessera data 0x%" PRIxPTR ")\n", (uintptr_t)d->data,
           (uintptr_t)tsr_tensor_data(t));
    printf("  device       type %d (kDLCPU = %d), id %d\n", (int)d->device.device_type,
           (int)kDLCPU, (int)d->device.device_id);
    printf("  dtype        code %u (kDLFloat = %d), bits %u, lanes %u\n", (unsigned)d->dtype.code,
           (int)kDLFloat, (unsigned)d->dtype.bits, (unsigned)d->dtype.lanes);
    printf("  ndim         %d\n", (int)d->ndim);
    print_ints("shape", d->ndim, d->shape);
    print_ints("strides", d->ndim, d->strides);
    printf("  byte_offset  %llu\n", (unsigned long long)d->byte_offset);

    /* The producer no longer needs its tensors: the export holds the memory. */
    TRY(tsr_tensor_decref(t));
    TRY(tsr_tensor_decref(base));

    /* Import it back: tessera now owns the managed tensor. */
    TsrTensor *back = NULL;
    TRY(tsr_tensor_from_dlpack(m, &back));
    const int64_t *bs = tsr_tensor_sizes(back);
    const int64_t *bt = tsr_tensor_strides(back);
    printf("imported tensor: sizes [%lld, %lld], strides [%lld, %lld], data 0x%" PRIxPTR "\n",
           (long long)bs[0], (long long)bs[1], (long long)bt[0], (long long)bt[1],
           (uintptr_t)tsr_tensor_data(back));
    printf("same buffer as the export: %s\n", tsr_tensor_data(back) == values ? "yes" : "no");

    /* base is released, but its buffer lives on in the import */
    values[4] = 42.0f; /* base[1][1] is back[1][1] */
    const float *b = (const float *)tsr_tensor_data(back);
    printf("after writing 42 through the original pointer, back[1][1] = %g\n",
           (double)b[1 * bt[0] + 1 * bt[1]]);

    printf("deleter calls before releasing the import: %d\n", deleter_calls);
    TRY(tsr_tensor_decref(back));
    printf("deleter calls after releasing the import: %d\n", deleter_calls);
    return deleter_calls == 1 ? 0 : 1;
}
