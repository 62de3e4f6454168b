/* README.md's hello tensor, built inside a project that includes tessera
 * with FetchContent or add_subdirectory. Prints "3 3 3 3 3 3". */
#include <stdio.h>
#include "tessera.h"

int main(void) {
    int64_t sizes[] = {2, 3};
    TsrDevice cpu = {TSR_CPU, -1};
    TsrTensor *a = NULL, *b = NULL;
    if (tsr_tensor_empty(2, sizes, TSR_FLOAT, cpu, &a) != TSR_OK ||
        tsr_tensor_fill(a, tsr_scalar_float(1.5)) != TSR_OK ||
        tsr_add(NULL, a, a, tsr_scalar_float(1.0), &b) != TSR_OK) {
        fprintf(stderr, "%s\n", tsr_last_error_message());
        return 1;
    }
    const float *x = tsr_tensor_data(b);
    for (int64_t i = 0; i < tsr_tensor_numel(b); i++)
        printf("%g%s", x[i], i + 1 < tsr_tensor_numel(b) ? " " : "\n");
    tsr_tensor_decref(b);
    tsr_tensor_decref(a);
    return 0;
}
