/*
 * Reductions written with the iterator, checked against the built-in
 * kernels:
 * - a row-wise maximum: tsr_iter_reduce_op over a [4, 6] matrix into a
 *   [4, 1] output, then tsr_iter_foreach_reduced_elt, which hands out one
 *   sub-iterator per output element; each runs a 2-D loop callback;
 * - a sum of squares over the whole matrix: tsr_iter_parallel_reduce with
 *   one accumulator per chunk of work, combined in order.
 *
 * Build and run (from the repository root): examples/run.sh reduction
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

#define TRY(call)                                                                        \
    do {                                                                                 \
        TsrStatus s_ = (call);                                                           \
        if (s_ != TSR_OK) {                                                              \
            fprintf(stderr, "%s failed: %s\n", #call, tsr_last_error_message());         \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

/* out = max(out, a) along the reduced dim. data[0] is the output element
   (its stride is 0 along the reduced dim), data[1] the input; strides hold
   dim 0 of both operands, then dim 1. */
static void max_loop(void *user, char **data, const int64_t *strides, int64_t n0, int64_t n1) {
    int64_t i, j;
    (void)user;
    for (j = 0; j < n1; j++) {
        for (i = 0; i < n0; i++) {
            float *o = (float *)(data[0] + i * strides[0] + j * strides[2]);
            const float *a = (const float *)(data[1] + i * strides[1] + j * strides[3]);
            if (*a > *o) *o = *a;
        }
    }
}

/* One group of elements that reduce into the same output element. */
static void max_group(void *user, TsrIter *sub) {
    (void)user;
    TRY(tsr_iter_serial_for_each(sub, max_loop, NULL, 0, tsr_iter_numel(sub)));
}

/* acc += a * a over one chunk (one operand: the input). */
static void squares_loop(void *user, void *acc, char **data, const int64_t *strides, int64_t n0,
                         int64_t n1) {
    double *sum = acc;
    int64_t i, j;
    (void)user;
    for (j = 0; j < n1; j++)
        for (i = 0; i < n0; i++) {
            float v = *(const float *)(data[0] + i * strides[0] + j * strides[1]);
            *sum += (double)v * v;
        }
}

static void add_combine(void *user, void *acc, const void *other) {
    (void)user;
    *(double *)acc += *(const double *)other;
}

int main(void) {
    const TsrDevice cpu = {TSR_CPU, -1};
    const int64_t sizes[] = {4, 6}, keep_sizes[] = {4, 1}, dim1[] = {1};
    TsrTensor *a = NULL, *row_max = NULL, *expected = NULL;
    TsrIter *it = NULL;
    TsrIterConfig *config = NULL;
    double squares = 0.0;
    float *p;
    int64_t i;

    TRY(tsr_tensor_empty(2, sizes, TSR_FLOAT, cpu, &a));
    p = (float *)tsr_tensor_data(a);
    for (i = 0; i < 24; i++) p[i] = (float)((i * 7) % 11) - 3.0f; /* a little scrambled */

    /* Row-wise maximum: the output starts at -inf and keeps the reduced
       dim with size 1. */
    TRY(tsr_tensor_empty(2, keep_sizes, TSR_FLOAT, cpu, &row_max));
    TRY(tsr_tensor_fill(row_max, tsr_scalar_float(-INFINITY)));
    TRY(tsr_iter_reduce_op(row_max, a, &it));
    printf("reduction: %lld output elements, %lld reduced dim(s)\n",
           (long long)tsr_iter_num_output_elements(it), (long long)tsr_iter_num_reduce_dims(it));
    TRY(tsr_iter_foreach_reduced_elt(it, max_group, NULL, true));
    tsr_iter_free(it);
    p = (float *)tsr_tensor_data(row_max);
    printf("row maxima: %g %g %g %g\n", p[0], p[1], p[2], p[3]);

    /* The same with the built-in kernel. */
    TRY(tsr_amax(a, 1, dim1, true, &expected));
    if (memcmp(tsr_tensor_data(expected), p, 4 * sizeof(float)) != 0) {
        fprintf(stderr, "the iterator and tsr_amax disagree\n");
        return 1;
    }
    printf("tsr_amax agrees\n");

    /* Sum of squares: an iterator over the input alone, reduced in
       parallel chunks into a double. */
    TRY(tsr_iter_config_new(&config));
    TRY(tsr_iter_config_add_input(config, a));
    TRY(tsr_iter_build(config, &it));
    tsr_iter_config_free(config);
    TRY(tsr_iter_parallel_reduce(it, squares_loop, add_combine, NULL, &squares, sizeof squares, 0));
    tsr_iter_free(it);
    printf("sum of squares: %g\n", squares);

    TRY(tsr_tensor_decref(a));
    TRY(tsr_tensor_decref(row_max));
    TRY(tsr_tensor_decref(expected));
    return 0;
}
