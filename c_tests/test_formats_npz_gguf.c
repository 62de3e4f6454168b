#define _POSIX_C_SOURCE 200809L
/* NumPy's .npz (TSR_FORMAT_NPZ) and llama.cpp's GGUF (TSR_FORMAT_GGUF)
 * through the C API: saved by extension and by number, loaded copied and
 * mapped with values, dims and metadata; hostile bytes refused with
 * TSR_ERR_FORMAT naming the function and what is wrong. (Interop with
 * NumPy and the gguf package: tests/format_npz.rs, tests/format_gguf.rs.) */
#include "portable.h"
#include "tsr_test.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static TsrDevice cpu(void) {
    TsrDevice d = {TSR_CPU, -1};
    return d;
}

static TsrTensorDict *sample(bool metadata) {
    TsrTensorDict *d = NULL;
    CHECK_OK(tsr_dict_new(&d));
    int64_t shape[2] = {2, 3};
    TsrTensor *t = NULL;
    CHECK_OK(tsr_tensor_empty(2, shape, TSR_FLOAT, cpu(), &t));
    float *p = (float *)tsr_tensor_data(t);
    for (int i = 0; i < 6; i++) p[i] = (float)i * 0.5f;
    CHECK_OK(tsr_dict_set(d, "w", t));
    CHECK_OK(tsr_tensor_decref(t));
    if (metadata) CHECK_OK(tsr_dict_set_metadata(d, "general.name", "tiny"));
    return d;
}

static void check_sample(TsrTensorDict *d) {
    CHECK_EQ(tsr_dict_size(d), 1);
    TsrTensor *t = tsr_dict_get(d, "w");
    CHECK(t != NULL);
    CHECK_EQ(tsr_tensor_ndim(t), 2);
    CHECK_EQ(tsr_tensor_size(t, 0), 2); /* GGUF's ne {3, 2} reversed */
    CHECK_EQ(tsr_tensor_size(t, 1), 3);
    const float *p = (const float *)tsr_tensor_data(t);
    for (int i = 0; i < 6; i++) CHECK(p[i] == (float)i * 0.5f);
    CHECK_OK(tsr_tensor_decref(t)); /* tsr_dict_get gave a new reference */
}

static void test_round_trips(void) {
    char dir[] = "/tmp/tsr-formats-XXXXXX";
    CHECK(tsr_mkdtemp(dir) != NULL);
    const char *names[2] = {"m.npz", "m.gguf"};
    int formats[2] = {TSR_FORMAT_NPZ, TSR_FORMAT_GGUF};
    for (int i = 0; i < 2; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        bool gguf = formats[i] == TSR_FORMAT_GGUF;
        TsrTensorDict *d = sample(gguf);
        CHECK_OK(tsr_save(d, path, TSR_FORMAT_AUTO)); /* by extension */
        for (uint32_t flags = 0; flags <= TSR_LOAD_MMAP; flags++) {
            TsrTensorDict *back = NULL;
            CHECK_OK(tsr_load(path, formats[i], flags, &back));
            check_sample(back);
            if (gguf) CHECK(strcmp(tsr_dict_metadata(back, "general.name"), "tiny") == 0);
            tsr_dict_free(back);
            CHECK_OK(tsr_load(path, TSR_FORMAT_AUTO, flags, &back)); /* detected */
            check_sample(back);
            tsr_dict_free(back);
        }
        TsrStorage *bytes = NULL;
        CHECK_OK(tsr_save_to_storage(d, formats[i], &bytes));
        TsrTensorDict *back = NULL;
        CHECK_OK(tsr_load_from_storage(bytes, TSR_FORMAT_AUTO, 0, &back));
        check_sample(back);
        tsr_dict_free(back);
        CHECK_OK(tsr_storage_decref(bytes));
        tsr_dict_free(d);
        unlink(path);
    }
    /* npz holds no metadata: refused, nothing written */
    char path[256];
    snprintf(path, sizeof path, "%s/meta.npz", dir);
    TsrTensorDict *d = sample(true);
    CHECK_STATUS(tsr_save(d, path, TSR_FORMAT_AUTO), TSR_ERR_INVALID_ARGUMENT);
    CHECK_MSG_CONTAINS("metadata");
    CHECK(access(path, F_OK) != 0);
    tsr_dict_free(d);
    rmdir(dir);
}

static void test_hostile_gguf(void) {
    /* GGUF v3 claiming 2^60 tensors in a 24-byte file */
    unsigned char b[24] = {'G', 'G', 'U', 'F', 3, 0, 0, 0};
    b[15] = 0x10; /* tensor count 2^60, little-endian */
    TsrStorage *s = NULL;
    CHECK_OK(tsr_storage_new(sizeof b, cpu(), false, &s));
    memcpy(tsr_storage_data(s), b, sizeof b);
    TsrTensorDict *d = (TsrTensorDict *)0x1;
    CHECK_STATUS(tsr_load_from_storage(s, TSR_FORMAT_GGUF, 0, &d), TSR_ERR_FORMAT);
    CHECK_MSG_CONTAINS("tsr_load_from_storage");
    CHECK_MSG_CONTAINS("tensor count is 1152921504606846976");
    CHECK(d == (TsrTensorDict *)0x1); /* untouched */
    CHECK_STATUS(tsr_load_from_storage(s, TSR_FORMAT_AUTO, 0, &d), TSR_ERR_FORMAT);
    CHECK_OK(tsr_storage_decref(s));
}

int main(void) {
    RUN(test_round_trips);
    RUN(test_hostile_gguf);
    return 0;
}
