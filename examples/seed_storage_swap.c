/*
 * The seed scenario: make a tensor of ones, take its storage, clone the
 * storage, fill the clone with zeros, point the tensor at it with
 * tsr_tensor_set, and print the tensor before and after.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tessera.h"

#define TRY(call)                                                              \
    do {                                                                       \
        TsrStatus s_ = (call);                                                 \
        if (s_ != TSR_OK) {                                                    \
            fprintf(stderr, "%s failed: %s\n", #call, tsr_last_error_message()); \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

static void print_tensor(const char *label, const TsrTensor *t) {
    const float *p = (const float *)tsr_tensor_data(t);
    const int64_t *sizes = tsr_tensor_sizes(t);
    printf("%s [%lld x %lld]:", label, (long long)sizes[0], (long long)sizes[1]);
    for (int64_t i = 0; i < tsr_tensor_numel(t); i++) printf(" %g", p[i]);
    printf("\n");
}

int main(void) {
    const TsrDevice cpu = {TSR_CPU, -1};
    const int64_t sizes[] = {2, 3};
    TsrTensor *t = NULL;
    TRY(tsr_tensor_empty(2, sizes, TSR_FLOAT, cpu, &t));
    TRY(tsr_tensor_fill(t, tsr_scalar_float(1.0)));
    print_tensor("before", t);

    TsrStorage *storage = tsr_tensor_storage(t);
    TsrStorage *zeros = NULL;
    TRY(tsr_storage_clone(storage, &zeros));
    TRY(tsr_storage_fill(zeros, 0));
    TRY(tsr_tensor_set(t, zeros, 0, 2, sizes, NULL));
    print_tensor("after", t);
    printf("old storage still has %zu reference(s); the tensor now uses the clone: %s\n",
           tsr_storage_use_count(storage), tsr_tensor_data(t) == tsr_storage_data(zeros) ? "yes" : "no");

    TRY(tsr_storage_decref(storage));
    TRY(tsr_storage_decref(zeros));
    TRY(tsr_tensor_decref(t));
    return 0;
}
