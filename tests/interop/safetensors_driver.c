/* The tessera side of the safetensors interop check
 * (.ci/serialization-interop.sh, with safetensors_interop.py):
 *   safetensors_driver write PATH   writes the reference dict
 *   safetensors_driver check PATH   loads PATH (copied and mapped) and
 *                                   checks it holds the reference dict
 * The reference dict: for each dtype below a tensor "t_<dtype>" of shape
 * [2, 3, 4] whose element i is (i * 7 + 3) % 100 in that dtype (bool:
 * i % 3 == 0), "scalar" (float, 0-dim, 2.5), "empty" (float, [0, 4]) and
 * the metadata {"origin": ..., "format": "pt"}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tessera.h"

#define FAIL(...)                                   \
    do {                                            \
        fprintf(stderr, "FAILED: " __VA_ARGS__);    \
        fprintf(stderr, "\n");                      \
        exit(1);                                    \
    } while (0)

#define OK(call)                                                                          \
    do {                                                                                  \
        if ((call) != TSR_OK) FAIL("%s: %s", #call, tsr_last_error_message());            \
    } while (0)

typedef struct {
    const char *name;
    TsrDType dtype;
} Kind;

static const Kind KINDS[] = {
    {"float32", TSR_FLOAT}, {"float64", TSR_DOUBLE}, {"float16", TSR_HALF},
    {"int8", TSR_CHAR},     {"int16", TSR_SHORT},    {"int32", TSR_INT},
    {"int64", TSR_LONG},    {"uint8", TSR_BYTE},     {"uint16", TSR_UINT16},
    {"uint32", TSR_UINT32}, {"uint64", TSR_UINT64},  {"bool", TSR_BOOL},
};
#define NKINDS (sizeof KINDS / sizeof KINDS[0])

/* IEEE half of a small integer (exact for 0..99). */
static uint16_t half_of(int v) {
    if (v == 0) return 0;
    int e = 0;
    while ((1 << (e + 1)) <= v) e++;
    int mant = (v << 10 >> e) & 0x3ff;
    return (uint16_t)(((e + 15) << 10) | mant);
}

static void value(TsrDType d, int64_t i, void *out) {
    int v = (int)((i * 7 + 3) % 100);
    switch (d) {
        case TSR_FLOAT: *(float *)out = (float)v; break;
        case TSR_DOUBLE: *(double *)out = v; break;
        case TSR_HALF: *(uint16_t *)out = half_of(v); break;
        case TSR_CHAR: *(int8_t *)out = (int8_t)v; break;
        case TSR_SHORT: *(int16_t *)out = (int16_t)v; break;
        case TSR_INT: *(int32_t *)out = v; break;
        case TSR_LONG: *(int64_t *)out = v; break;
        case TSR_BYTE: *(uint8_t *)out = (uint8_t)v; break;
        case TSR_UINT16: *(uint16_t *)out = (uint16_t)v; break;
        case TSR_UINT32: *(uint32_t *)out = (uint32_t)v; break;
        case TSR_UINT64: *(uint64_t *)out = (uint64_t)v; break;
        case TSR_BOOL: *(uint8_t *)out = i % 3 == 0; break;
        default: FAIL("dtype %d", d);
    }
}

static const int64_t SHAPE[3] = {2, 3, 4};

static void write_file(const char *path) {
    TsrTensorDict *d = NULL;
    OK(tsr_dict_new(&d));
    TsrDevice cpu = {TSR_CPU, -1};
    for (size_t k = 0; k < NKINDS; k++) {
        TsrTensor *t = NULL;
        OK(tsr_tensor_empty(3, SHAPE, KINDS[k].dtype, cpu, &t));
        size_t item = tsr_tensor_itemsize(t);
        for (int64_t i = 0; i < 24; i++) value(KINDS[k].dtype, i, (char *)tsr_tensor_data(t) + i * item);
        char name[64];
        snprintf(name, sizeof name, "t_%s", KINDS[k].name);
        OK(tsr_dict_set(d, name, t));
        OK(tsr_tensor_decref(t));
    }
    TsrTensor *s = NULL, *e = NULL;
    int64_t empty_shape[2] = {0, 4};
    OK(tsr_tensor_empty(0, NULL, TSR_FLOAT, cpu, &s));
    *(float *)tsr_tensor_data(s) = 2.5f;
    OK(tsr_tensor_empty(2, empty_shape, TSR_FLOAT, cpu, &e));
    OK(tsr_dict_set(d, "scalar", s));
    OK(tsr_dict_set(d, "empty", e));
    OK(tsr_dict_set_metadata(d, "origin", "tessera"));
    OK(tsr_dict_set_metadata(d, "format", "pt"));
    OK(tsr_save(d, path, TSR_FORMAT_SAFETENSORS));
    OK(tsr_tensor_decref(s));
    OK(tsr_tensor_decref(e));
    tsr_dict_free(d);
}

static void check_file(const char *path, uint32_t flags) {
    TsrTensorDict *d = NULL;
    OK(tsr_load(path, TSR_FORMAT_AUTO, flags, &d));
    if (tsr_dict_size(d) != NKINDS + 2) FAIL("%zu tensors, expected %zu", tsr_dict_size(d), NKINDS + 2);
    for (size_t k = 0; k < NKINDS; k++) {
        char name[64];
        snprintf(name, sizeof name, "t_%s", KINDS[k].name);
        TsrTensor *t = tsr_dict_get(d, name);
        if (!t) FAIL("no tensor %s", name);
        if (tsr_tensor_dtype(t) != KINDS[k].dtype) FAIL("%s: dtype %d", name, tsr_tensor_dtype(t));
        if (tsr_tensor_ndim(t) != 3) FAIL("%s: ndim", name);
        for (int d2 = 0; d2 < 3; d2++)
            if (tsr_tensor_size(t, d2) != SHAPE[d2]) FAIL("%s: size %d", name, d2);
        size_t item = tsr_tensor_itemsize(t);
        for (int64_t i = 0; i < 24; i++) {
            char want[16];
            value(KINDS[k].dtype, i, want);
            if (memcmp(want, (char *)tsr_tensor_data(t) + i * item, item) != 0)
                FAIL("%s: element %lld differs", name, (long long)i);
        }
        OK(tsr_tensor_decref(t));
    }
    TsrTensor *s = tsr_dict_get(d, "scalar"), *e = tsr_dict_get(d, "empty");
    if (!s || tsr_tensor_ndim(s) != 0 || *(const float *)tsr_tensor_data(s) != 2.5f) FAIL("scalar");
    if (!e || tsr_tensor_numel(e) != 0 || tsr_tensor_size(e, 1) != 4) FAIL("empty");
    const char *fmt = tsr_dict_metadata(d, "format");
    if (!fmt || strcmp(fmt, "pt") != 0) FAIL("metadata format");
    if (!tsr_dict_metadata(d, "origin")) FAIL("metadata origin");
    OK(tsr_tensor_decref(s));
    OK(tsr_tensor_decref(e));
    tsr_dict_free(d);
}

int main(int argc, char **argv) {
    if (argc != 3) FAIL("usage: %s write|check PATH", argv[0]);
    if (strcmp(argv[1], "write") == 0) {
        write_file(argv[2]);
    } else {
        check_file(argv[2], 0);
        check_file(argv[2], TSR_LOAD_MMAP);
        printf("tessera read %s (copied and mapped): values, dtypes, shapes, metadata match\n", argv[2]);
    }
    return 0;
}
