/*
 * An element-wise kernel written as a 2-D loop callback: out = a * b + c on
 * float, run through the iterator on broadcast and permuted inputs. The
 * iterator works out the broadcast shape, allocates the output in the
 * inputs' layout and hands the callback byte strides.
 */
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

/* data[0] = out, data[1..3] = a, b, c; strides: dim 0 of each, then dim 1 */
static void fma_loop(void *user, char **data, const int64_t *strides, int64_t n0, int64_t n1) {
    (void)user;
    for (int64_t j = 0; j < n1; j++) {
        char *o = data[0] + j * strides[4], *a = data[1] + j * strides[5];
        char *b = data[2] + j * strides[6], *c = data[3] + j * strides[7];
        for (int64_t i = 0; i < n0; i++) {
            *(float *)(o + i * strides[0]) =
                *(float *)(a + i * strides[1]) * *(float *)(b + i * strides[2]) + *(float *)(c + i * strides[3]);
        }
    }
}

static TsrTensor *filled(int64_t ndim, const int64_t *sizes, float start) {
    const TsrDevice cpu = {TSR_CPU, -1};
    TsrTensor *t = NULL;
    TRY(tsr_tensor_empty(ndim, sizes, TSR_FLOAT, cpu, &t));
    float *p = (float *)tsr_tensor_data(t);
    for (int64_t i = 0; i < tsr_tensor_numel(t); i++) p[i] = start + (float)i;
    return t;
}

int main(void) {
    const int64_t a_sizes[] = {2, 3}, b_sizes[] = {3}, c_sizes[] = {3, 2};
    TsrTensor *a = filled(2, a_sizes, 0.0f);  /* [[0,1,2],[3,4,5]] */
    TsrTensor *b = filled(1, b_sizes, 1.0f);  /* [1,2,3], broadcast over rows */
    TsrTensor *c0 = filled(2, c_sizes, 10.0f);
    TsrTensor *c = NULL;                       /* a permuted (transposed) view */
    TRY(tsr_tensor_transpose(c0, 0, 1, &c));

    TsrIterConfig *config = NULL;
    TRY(tsr_iter_config_new(&config));
    TRY(tsr_iter_config_add_output(config, NULL));
    TRY(tsr_iter_config_add_input(config, a));
    TRY(tsr_iter_config_add_input(config, b));
    TRY(tsr_iter_config_add_input(config, c));
    TsrIter *it = NULL;
    TRY(tsr_iter_build(config, &it));
    tsr_iter_config_free(config);
    printf("iterator: %lld dims, %lld elements\n", (long long)tsr_iter_ndim(it), (long long)tsr_iter_numel(it));
    TRY(tsr_iter_for_each(it, fma_loop, NULL, 0));

    TsrTensor *out = tsr_iter_output(it, 0);
    const int64_t *sizes = tsr_tensor_sizes(out), *strides = tsr_tensor_strides(out);
    printf("out sizes [%lld, %lld] strides [%lld, %lld]\n", (long long)sizes[0], (long long)sizes[1],
           (long long)strides[0], (long long)strides[1]);
    const float *o = (const float *)tsr_tensor_data(out);
    for (int64_t i = 0; i < sizes[0]; i++) {
        printf("  ");
        for (int64_t j = 0; j < sizes[1]; j++) printf(" %5.1f", o[i * strides[0] + j * strides[1]]);
        printf("\n");
    }
    tsr_iter_free(it);
    TRY(tsr_tensor_decref(out));
    TRY(tsr_tensor_decref(a));
    TRY(tsr_tensor_decref(b));
    TRY(tsr_tensor_decref(c));
    TRY(tsr_tensor_decref(c0));
    return 0;
}
