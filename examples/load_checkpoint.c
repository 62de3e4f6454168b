/* Loading a checkpoint: list its tensors (name, dtype, shape) and sum one.
 *
 *   load_checkpoint FILE [NAME]   a .pt file (torch.save, torch::pickle_save,
 *                                 tessera) or a .safetensors file; sums
 *                                 NAME, or the first floating tensor
 *   load_checkpoint               writes a small checkpoint first, with
 *                                 two views sharing one storage, and shows
 *                                 the sharing is still there after loading
 *
 * Loading maps the file (TSR_LOAD_MMAP): nothing is copied, the tensors
 * view a private mapping that lives as long as they do. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera.h"

static int check(TsrStatus status, const char *what) {
    if (status != TSR_OK) {
        fprintf(stderr, "%s failed: %s\n", what, tsr_last_error_message());
        exit(1);
    }
    return 0;
}

static void print_tensor(const char *name, const TsrTensor *t) {
    printf("  %-12s %-8s [", name, tsr_dtype_name(tsr_tensor_dtype(t)));
    for (int64_t d = 0; d < tsr_tensor_ndim(t); d++) {
        printf(d ? ", %lld" : "%lld", (long long)tsr_tensor_size(t, d));
    }
    printf("]\n");
}

static double sum_of(const TsrTensor *t) {
    TsrTensor *as_double = NULL, *total = NULL;
    TsrDevice cpu = {TSR_CPU, -1};
    check(tsr_tensor_empty(tsr_tensor_ndim(t), tsr_tensor_sizes(t), TSR_DOUBLE, cpu, &as_double),
          "tsr_tensor_empty");
    check(tsr_tensor_copy(as_double, t), "tsr_tensor_copy"); /* casts */
    check(tsr_sum(as_double, 0, NULL, false, &total), "tsr_sum");
    double v = *(const double *)tsr_tensor_data(total);
    tsr_tensor_decref(total);
    tsr_tensor_decref(as_double);
    return v;
}

/* A checkpoint with "weight" (2 x 3), "weight_t" (its transpose) and
 * "row" (its second row): three tensors, one storage. */
static void write_demo(const char *path) {
    TsrDevice cpu = {TSR_CPU, -1};
    int64_t shape[2] = {2, 3}, perm[2] = {1, 0};
    TsrTensor *w = NULL, *wt = NULL, *row = NULL;
    check(tsr_tensor_empty(2, shape, TSR_FLOAT, cpu, &w), "tsr_tensor_empty");
    for (int i = 0; i < 6; i++) ((float *)tsr_tensor_data(w))[i] = (float)i + 0.5f;
    check(tsr_tensor_permute(w, 2, perm, &wt), "tsr_tensor_permute");
    check(tsr_tensor_select(w, 0, 1, &row), "tsr_tensor_select");
    TsrTensorDict *d = NULL;
    check(tsr_dict_new(&d), "tsr_dict_new");
    check(tsr_dict_set(d, "weight", w), "tsr_dict_set");
    check(tsr_dict_set(d, "weight_t", wt), "tsr_dict_set");
    check(tsr_dict_set(d, "row", row), "tsr_dict_set");
    check(tsr_save(d, path, TSR_FORMAT_TORCH), "tsr_save");
    tsr_dict_free(d);
    tsr_tensor_decref(row);
    tsr_tensor_decref(wt);
    tsr_tensor_decref(w);
}

int main(int argc, char **argv) {
    char demo[64] = "";
    const char *path = argc > 1 ? argv[1] : NULL;
    if (!path) {
        snprintf(demo, sizeof demo, "/tmp/tessera-checkpoint-%ld.pt", (long)getpid());
        write_demo(demo);
        path = demo;
        printf("wrote a checkpoint: weight, weight_t (its transpose), row (its row 1)\n");
    }
    TsrTensorDict *d = NULL;
    check(tsr_load(path, TSR_FORMAT_AUTO, TSR_LOAD_MMAP, &d), "tsr_load");
    printf("%zu tensors:\n", tsr_dict_size(d));
    const char *pick = argc > 2 ? argv[2] : NULL;
    for (size_t i = 0; i < tsr_dict_size(d); i++) {
        const char *name = tsr_dict_name(d, i);
        TsrTensor *t = tsr_dict_get(d, name);
        print_tensor(name, t);
        TsrDType dt = tsr_tensor_dtype(t);
        if (!pick && (dt == TSR_FLOAT || dt == TSR_DOUBLE || dt == TSR_HALF || dt == TSR_BFLOAT16)) {
            pick = name;
        }
        tsr_tensor_decref(t);
    }
    /* a training checkpoint's global_step, its config: JSON per name */
    if (tsr_dict_value_count(d) > 0) printf("values:\n");
    for (size_t i = 0; i < tsr_dict_value_count(d); i++) {
        const char *name = tsr_dict_value_name(d, i);
        printf("  %s = %s\n", name, tsr_dict_value_json(d, name));
    }
    const char *skipped = tsr_dict_metadata(d, "tessera.skipped");
    if (skipped) printf("left out (objects tessera does not load):\n%s\n", skipped);
    if (pick) {
        TsrTensor *t = tsr_dict_get(d, pick);
        if (!t) {
            fprintf(stderr, "no tensor named %s\n", pick);
            return 1;
        }
        printf("sum of %s: %g\n", pick, sum_of(t));
        tsr_tensor_decref(t);
    }
    if (demo[0]) {
        TsrTensor *w = tsr_dict_get(d, "weight"), *wt = tsr_dict_get(d, "weight_t"),
                  *row = tsr_dict_get(d, "row");
        TsrStorage *sw = tsr_tensor_storage(w), *swt = tsr_tensor_storage(wt),
                   *srow = tsr_tensor_storage(row);
        printf("one storage for the three: %s\n", sw == swt && sw == srow ? "yes" : "no");
        printf("weight_t strides: [%lld, %lld]\n", (long long)tsr_tensor_stride(wt, 0),
               (long long)tsr_tensor_stride(wt, 1));
        ((float *)tsr_tensor_data(w))[3] = 100.0f; /* weight[1][0] */
        printf("after weight[1][0] = 100: row[0] = %g, weight_t[0][1] = %g\n",
               ((const float *)tsr_tensor_data(row))[0],
               ((const float *)tsr_tensor_data(wt))[tsr_tensor_stride(wt, 1)]);
        tsr_storage_decref(sw);
        tsr_storage_decref(swt);
        tsr_storage_decref(srow);
        tsr_tensor_decref(w);
        tsr_tensor_decref(wt);
        tsr_tensor_decref(row);
        remove(demo);
    }
    tsr_dict_free(d);
    return 0;
}
