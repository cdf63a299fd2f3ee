/*
 * fuzz_catalog: the model catalog (wex__model_from_json) on arbitrary
 * config.json text. It must build a catalog or fail with an error; a
 * catalog it builds must be self-consistent: every tensor found by name at
 * its own index, sizes that add up to the totals.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "catalog.h"
#include "error.h"

#include "fuzz_util.h"

static void check_model(const wex_model *model)
{
    uint64_t bytes = 0, elements = 0;
    /* Name lookups on a sample of a huge catalog (a config can describe
     * millions of tensors; checking each would only slow the fuzzer). */
    uint64_t stride = model->count / 65536 + 1;

    FUZZ_CHECK(model->count > 0 && model->architecture != NULL);
    for (uint64_t i = 0; i < model->count; i++) {
        const wex__tensor *t = &model->tensors[i];
        uint64_t n = wex__tensor_elements(t);

        FUZZ_CHECK(t->name != NULL && t->name[0] != '\0');
        FUZZ_CHECK(t->ndim >= 1 && t->ndim <= WEX_MAX_DIMS);
        FUZZ_CHECK(n > 0 && t->bytes == n * wex_dtype_size(t->dtype));
        FUZZ_CHECK(i % stride != 0 ||
                   wex__model_find(model, t->name) == (int64_t)i);
        bytes += t->bytes;
        elements += n;
    }
    FUZZ_CHECK(bytes == model->total_bytes);
    FUZZ_CHECK(elements == model->total_elements);
    FUZZ_CHECK(wex__model_find(model, "no.such.tensor") == -1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *config = cJSON_ParseWithLength((const char *)data, size);
    wex_model *model = NULL;
    wex_status st;

    st = wex__model_from_json(config, "fuzz/config.json", &model);
    if (st == WEX_OK) {
        FUZZ_CHECK(model != NULL);
        check_model(model);
    } else {
        FUZZ_CHECK(model == NULL);
        FUZZ_CHECK(wex__last_error()[0] != '\0');
    }
    wex__model_free(model);
    cJSON_Delete(config);
    return 0;
}
