/*
 * tessera quick start: the first program to run.
 *
 * 1. Registers a tiny allocator plugin for CPU memory (it counts calls and
 *    hands out 64-byte aligned blocks: aligned_block.h).
 * 2. Builds two float tensors, a [2, 3] matrix and a [3] row, and adds
 *    them with broadcasting (tsr_add runs the kernel through the iterator).
 * 3. Sums the result, in total and per row.
 * 4. Prints the results and the allocator statistics: every tensor above
 *    got its memory from the plugin.
 * 5. Given a file name (`quickstart sums.safetensors`), also saves a, b and
 *    a + b there, in the format its extension names, for `tessera ls`.
 *
 * Build and run (from the repository root): examples/run.sh quickstart
 */
#define _POSIX_C_SOURCE 200112L /* posix_memalign */

#include <stdio.h>
#include <stdlib.h>

#include "aligned_block.h"
#include "tessera.h"

/* Exits with tessera's error message when a call fails. */
#define TRY(call)                                                                        \
    do {                                                                                 \
        TsrStatus s_ = (call);                                                           \
        if (s_ != TSR_OK) {                                                              \
            fprintf(stderr, "%s failed: %s\n", #call, tsr_last_error_message());         \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* ---- the allocator plugin ---- */

static unsigned long plugin_allocs, plugin_frees;

static void plugin_free(void *ctx) {
    plugin_frees++;
    aligned_block_free(ctx);
}

static TsrStatus plugin_allocate(void *self, size_t nbytes, TsrDevice device, TsrDataPtr *out) {
    void *p = aligned_block(64, nbytes);
    (void)self;
    if (p == NULL)
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "quickstart plugin: out of memory");
    plugin_allocs++;
    out->data = p;          /* the address tensors use */
    out->ctx = p;           /* what the deleter receives */
    out->deleter = plugin_free;
    out->device = device;
    return TSR_OK;
}

static const TsrAllocatorVTable plugin = {
    sizeof(TsrAllocatorVTable), "quickstart-counter", plugin_allocate, NULL, NULL, NULL};

/* Installed for TSR_CPU when the program loads, priority 1: above the
   built-in CPU allocator (priority 0). */
TSR_REGISTER_ALLOCATOR(TSR_CPU, &plugin, NULL, 1);

/* ---- helpers ---- */

static TsrTensor *float_tensor(int64_t ndim, const int64_t *sizes, const float *values) {
    const TsrDevice cpu = {TSR_CPU, -1};
    TsrTensor *t = NULL;
    int64_t i;
    float *p;
    TRY(tsr_tensor_empty(ndim, sizes, TSR_FLOAT, cpu, &t));
    p = (float *)tsr_tensor_data(t);
    for (i = 0; i < tsr_tensor_numel(t); i++) p[i] = values[i];
    return t;
}

static void print_tensor(const char *name, const TsrTensor *t) {
    const float *p = (const float *)tsr_tensor_data(t); /* results are contiguous */
    const int64_t *sizes = tsr_tensor_sizes(t);
    int64_t i;
    printf("%-9s %s, sizes [", name, tsr_dtype_name(tsr_tensor_dtype(t)));
    for (i = 0; i < tsr_tensor_ndim(t); i++) printf(i ? ", %lld" : "%lld", (long long)sizes[i]);
    printf("]:");
    for (i = 0; i < tsr_tensor_numel(t); i++) printf(" %g", p[i]);
    printf("\n");
}

static void print_stats(const char *when) {
    TsrAllocator *cpu = tsr_get_allocator(TSR_CPU); /* a new reference */
    TsrAllocatorStats s;
    TRY(tsr_allocator_stats(cpu, &s));
    printf("%-12s allocator '%s': %llu B in use, peak %llu B, %llu allocations, %llu frees\n",
           when, tsr_allocator_name(cpu), (unsigned long long)s.allocated_bytes,
           (unsigned long long)s.peak_bytes, (unsigned long long)s.num_allocs,
           (unsigned long long)s.num_frees);
    TRY(tsr_allocator_decref(cpu));
}

/* Saves the tensors under their names in `path` (tsr_save: the format from
   the extension; written beside it, then renamed). */
static void save(const char *path, TsrTensor *a, TsrTensor *b, TsrTensor *c) {
    TsrTensorDict *d = NULL;
    TRY(tsr_dict_new(&d));
    TRY(tsr_dict_set(d, "a", a)); /* the dict keeps its own references */
    TRY(tsr_dict_set(d, "b", b));
    TRY(tsr_dict_set(d, "a_plus_b", c));
    TRY(tsr_save(d, path, TSR_FORMAT_AUTO));
    tsr_dict_free(d);
    printf("saved a, b and a_plus_b to %s\n", path);
}

int main(int argc, char **argv) {
    const int64_t matrix_sizes[] = {2, 3}, row_sizes[] = {3}, row_dim[] = {1};
    const float matrix[] = {1, 2, 3, 4, 5, 6}, row[] = {10, 20, 30};
    TsrTensor *a, *b, *c = NULL, *total = NULL, *row_sums = NULL;

    printf("tessera %s\n", tsr_version());
    a = float_tensor(2, matrix_sizes, matrix);
    b = float_tensor(1, row_sizes, row);

    /* c = a + 1 * b: b is broadcast over the rows of a; c is allocated */
    TRY(tsr_add(NULL, a, b, tsr_scalar_int(1), &c));
    print_tensor("a + b", c);

    TRY(tsr_sum(c, 0, NULL, false, &total)); /* ndims 0: every dim */
    print_tensor("sum", total);
    TRY(tsr_sum(c, 1, row_dim, false, &row_sums));
    print_tensor("row sums", row_sums);
    print_stats("in use:");
    if (argc > 1) save(argv[1], a, b, c);

    TRY(tsr_tensor_decref(a));
    TRY(tsr_tensor_decref(b));
    TRY(tsr_tensor_decref(c));
    TRY(tsr_tensor_decref(total));
    TRY(tsr_tensor_decref(row_sums));
    print_stats("released:");
    printf("the plugin saw %lu allocations and %lu frees\n", plugin_allocs, plugin_frees);
    return plugin_allocs == plugin_frees ? 0 : 1;
}
