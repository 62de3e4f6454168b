/*
 * Model weights mapped from disk without a copy: write a small file of
 * floats (a 2 x 3 weight matrix followed by a bias of 2), map it
 * read-only with tsr_storage_from_file, view the two parts as tensors on
 * the one storage, compute y = rowsum(W) + b with them, and show that a
 * write into the mapped weights is refused with a clear message.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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
    int64_t i;
    printf("%s:", label);
    for (i = 0; i < tsr_tensor_numel(t); i++) printf(" %g", p[i]);
    printf("\n");
}

int main(void) {
    const float weights[8] = {1, 2, 3, 4, 5, 6, /* bias */ 0.5f, -0.5f};
    const int64_t w_sizes[2] = {2, 3}, b_size = 2, dim = 1;
    char path[96];
    FILE *f;
    TsrStorage *s = NULL;
    TsrTensor *w = NULL, *b = NULL, *rowsum = NULL, *y = NULL, *r = NULL;
    TsrStatus status;

    /* the "checkpoint" on disk */
    snprintf(path, sizeof path, "/tmp/tessera-mmap-weights-%ld.bin", (long)getpid());
    f = fopen(path, "wb");
    if (f == NULL || fwrite(weights, sizeof weights, 1, f) != 1 || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        return 1;
    }

    /* mapped read-only: no copy, the page cache is the tensor memory */
    TRY(tsr_storage_from_file(path, TSR_FILE_READ_ONLY, 0, &s));
    printf("mapped %zu bytes, read-only: %s\n", tsr_storage_nbytes(s),
           tsr_storage_is_read_only(s) ? "yes" : "no");
    TRY(tsr_tensor_from_storage(s, 0, 2, w_sizes, NULL, TSR_FLOAT, &w));
    TRY(tsr_tensor_from_storage(s, 6, 1, &b_size, NULL, TSR_FLOAT, &b));
    TRY(tsr_storage_decref(s)); /* the tensors keep the mapping alive */
    print_tensor("W", w);
    print_tensor("b", b);

    /* reading works as for any tensor; results are ordinary memory */
    TRY(tsr_sum(w, 1, &dim, false, &rowsum));
    TRY(tsr_add(NULL, rowsum, b, tsr_scalar_int(1), &y));
    print_tensor("y = rowsum(W) + b", y);
    printf("y is read-only: %s\n", tsr_tensor_is_read_only(y) ? "yes" : "no");

    /* writing into the weights is refused, and nothing changes */
    status = tsr_tensor_fill(w, tsr_scalar_float(0));
    printf("fill W: %s: %s\n", tsr_status_name(status), tsr_last_error_message());
    status = tsr_add(b, b, b, tsr_scalar_int(1), &r);
    printf("b += b: %s: %s\n", tsr_status_name(status), tsr_last_error_message());
    print_tensor("W after", w);

    TRY(tsr_tensor_decref(y));
    TRY(tsr_tensor_decref(rowsum));
    TRY(tsr_tensor_decref(b));
    TRY(tsr_tensor_decref(w)); /* the last user: unmapped and closed here */
    remove(path);
    return 0;
}
