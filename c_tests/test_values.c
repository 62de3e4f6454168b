#define _POSIX_C_SOURCE 200809L
/* Non-tensor values through the C API (issue 68): a torch.save
 * checkpoint's global_step and config read as JSON
 * (tsr_dict_value_count / _name / _json), values set from JSON saved
 * into torch, safetensors and GGUF and read back the same, and the
 * bounds refused. */
#include "portable.h"
#include "tsr_test.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* tests/data/values/checkpoint.pt (scripts/make_values_fixtures.py),
 * found from this file's path. */
static const char *fixture(void) {
    static char buf[4096];
    const char *file = __FILE__;
    const char *slash = strrchr(file, '/');
    if (slash == NULL) {
        snprintf(buf, sizeof buf, "../tests/data/values/checkpoint.pt");
    } else {
        snprintf(buf, sizeof buf, "%.*s/../tests/data/values/checkpoint.pt", (int)(slash - file),
                 file);
    }
    return buf;
}

static void test_torch_save_values(void) {
    TsrTensorDict *d = NULL;
    CHECK_OK(tsr_load(fixture(), TSR_FORMAT_AUTO, TSR_LOAD_SKIP_UNKNOWN, &d));
    CHECK(tsr_dict_value_count(d) == 11);
    CHECK(strcmp(tsr_dict_value_json(d, "global_step"), "1234") == 0);
    CHECK(strcmp(tsr_dict_value_json(d, "hidden_dims"), "[64,128,256]") == 0);
    CHECK(strcmp(tsr_dict_value_json(d, "config_dict"),
                 "{\"act\":\"gelu\",\"dropout\":0.1,\"n_layers\":4,\"sizes\":[1,2],"
                 "\"tied\":true}") == 0);
    CHECK(strcmp(tsr_dict_value_json(d, "state.epoch"), "3") == 0);
    CHECK(tsr_dict_value_json(d, "args") == NULL); /* an object: left out */
    bool found = false;
    for (size_t i = 0; i < tsr_dict_value_count(d); i++) {
        found = found || strcmp(tsr_dict_value_name(d, i), "note") == 0;
    }
    CHECK(found);
    CHECK(strcmp(tsr_dict_value_json(d, "note"), "null") == 0);
    tsr_dict_free(d);
}

static void test_round_trips(void) {
    char dir[] = "/tmp/tsr-values-XXXXXX";
    CHECK(tsr_mkdtemp(dir) != NULL);
    TsrTensorDict *d = NULL;
    CHECK_OK(tsr_dict_new(&d));
    TsrTensor *w = NULL;
    int64_t n = 2;
    TsrDevice cpu = {TSR_CPU, -1};
    CHECK_OK(tsr_tensor_empty(1, &n, TSR_FLOAT, cpu, &w));
    CHECK_OK(tsr_tensor_fill(w, tsr_scalar_float(1.0)));
    CHECK_OK(tsr_dict_set(d, "w", w));
    CHECK_OK(tsr_tensor_decref(w));
    CHECK_OK(tsr_dict_set_value_json(d, "step", "7"));
    CHECK_OK(tsr_dict_set_value_json(d, "lr", "0.5"));
    CHECK_OK(tsr_dict_set_value_json(d, "cfg", "{\"a\": [1, \"x\"], \"b\": null}"));
    CHECK(tsr_dict_set_value_json(d, "w", "1") == TSR_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tsr_last_error_message(), "a tensor has this name") != NULL);
    const char *exts[] = {"pt", "safetensors", "gguf"};
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/v.%s", dir, exts[i]);
        TsrFormat f = i == 0 ? TSR_FORMAT_TORCH : i == 1 ? TSR_FORMAT_SAFETENSORS : TSR_FORMAT_GGUF;
        CHECK_OK(tsr_save(d, path, f));
        TsrTensorDict *back = NULL;
        CHECK_OK(tsr_load(path, TSR_FORMAT_AUTO, 0, &back));
        CHECK(tsr_dict_value_count(back) == 3);
        CHECK(strcmp(tsr_dict_value_json(back, "step"), "7") == 0);
        CHECK(strcmp(tsr_dict_value_json(back, "lr"), "0.5") == 0);
        CHECK(strcmp(tsr_dict_value_json(back, "cfg"), "{\"a\":[1,\"x\"],\"b\":null}") == 0);
        CHECK(tsr_dict_metadata(back, "tessera.values") == NULL);
        tsr_dict_free(back);
        unlink(path);
    }
    tsr_dict_free(d);
    rmdir(dir);
}

static void test_bounds(void) {
    TsrTensorDict *d = NULL;
    CHECK_OK(tsr_dict_new(&d));
    char deep[100];
    memset(deep, '[', 33);
    memset(deep + 33, ']', 33);
    deep[66] = 0;
    CHECK(tsr_dict_set_value_json(d, "deep", deep) == TSR_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tsr_last_error_message(), "nested 33 deep") != NULL);
    CHECK(tsr_dict_set_value_json(d, "bad", "{") == TSR_ERR_INVALID_ARGUMENT);
    CHECK(strstr(tsr_last_error_message(), "tsr_dict_set_value_json") != NULL);
    CHECK(tsr_dict_value_count(d) == 0);
    tsr_dict_free(d);
}

int main(void) {
    RUN(test_torch_save_values);
    RUN(test_round_trips);
    RUN(test_bounds);
    return 0;
}
