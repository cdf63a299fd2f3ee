/*
 * fuzz_safetensors: the safetensors header parser (wex__st_parse) on
 * arbitrary bytes, as a whole file and as a prefix of one (a file read
 * before its end). A header it accepts must keep every promise the
 * reader relies on: tensors sorted by offset, inside the data, sized by
 * their dtype and shape, and not overlapping.
 */
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "safetensors.h"

#include "fuzz_util.h"

static void check_accepted(const wex__st_header *h, uint64_t size)
{
    FUZZ_CHECK(h->data_start >= 10 && h->data_start <= size);
    FUZZ_CHECK(h->data_size == size - h->data_start);
    for (size_t i = 0; i < h->count; i++) {
        const wex__st_tensor *t = &h->tensors[i];
        uint64_t elements = 1;
        FUZZ_CHECK(t->name != NULL);
        FUZZ_CHECK(wex_dtype_size(t->dtype) > 0 && t->ndim <= WEX_MAX_DIMS);
        for (uint32_t d = 0; d < t->ndim; d++)
            elements *= t->shape[d];
        FUZZ_CHECK(t->begin <= t->end && t->end <= h->data_size);
        FUZZ_CHECK(elements * wex_dtype_size(t->dtype) == t->end - t->begin);
        FUZZ_CHECK(i == 0 || t->begin >= h->tensors[i - 1].begin);
        FUZZ_CHECK(i == 0 || t->begin == t->end ||
                   t->begin >= h->tensors[i - 1].end);
        FUZZ_CHECK(wex__st_find(h, t->name) != NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wex__st_header h;

    if (wex__st_parse("fuzz.safetensors", data, size, size, &h) == WEX_OK) {
        check_accepted(&h, size);
        wex__st_free(&h);
    } else {
        FUZZ_CHECK(wex__last_error()[0] != '\0');
        FUZZ_CHECK(h.tensors == NULL && h.count == 0);
    }
    /* the same bytes as the first half of a file twice as long */
    if (wex__st_parse("fuzz.safetensors", data, size, 2 * (uint64_t)size, &h) ==
        WEX_OK) {
        check_accepted(&h, 2 * (uint64_t)size);
        wex__st_free(&h);
    }
    return 0;
}
