/*
 * fuzz_delta: the delta payload a destination decodes (delta.h), as a
 * source on the network may send it.
 *
 * The input's first byte picks the element size (1, 2, 4 or 8 bytes),
 * the next three the stream's length (up to three chunks and a part);
 * the rest is the payload. The walk must stay inside the stream (every
 * position in its chunk, ascending), the vector and scalar decoders
 * must refuse the same payloads, and a payload the walk takes must
 * apply to the same bytes through the sink, directly, and cut into
 * pieces applied last first.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "delta.h"

#include "fuzz_util.h"

typedef struct target {
    uint8_t *buf;
    unsigned elem;
    uint64_t elems;
} target;

static int apply(void *arg, uint64_t base, const uint32_t *pos, uint32_t n,
                 const uint8_t *values)
{
    target *t = arg;

    FUZZ_CHECK(base % WEX__DELTA_CHUNK == 0 && base < t->elems);
    FUZZ_CHECK(n > 0 && n <= WEX__DELTA_CHUNK);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t at = base + (pos != NULL ? pos[i] : i);
        FUZZ_CHECK(at < t->elems);
        FUZZ_CHECK(pos == NULL || pos[i] < WEX__DELTA_CHUNK);
        FUZZ_CHECK(pos == NULL || i == 0 || pos[i] > pos[i - 1]);
        memcpy(t->buf + at * t->elem, values + (size_t)i * t->elem, t->elem);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const unsigned elems_of[] = {1, 2, 4, 8};
    unsigned elem;
    uint64_t elems;
    const uint8_t *payload;
    size_t len;
    uint8_t *a, *b;
    target t;
    char why[256];
    int vector, scalar;

    if (size < 4)
        return 0;
    elem = elems_of[data[0] & 3];
    elems = 1 + ((uint64_t)data[1] | (uint64_t)data[2] << 8 |
                 (uint64_t)data[3] << 16) %
                    (3 * WEX__DELTA_CHUNK + 1000);
    payload = data + 4;
    len = size - 4;
    a = calloc(elems, elem);
    b = calloc(elems, elem);
    FUZZ_CHECK(a != NULL && b != NULL);
    t = (target){a, elem, elems};
    vector =
        wex__delta_walk(payload, len, elem, elems, apply, &t, why, sizeof(why));
    FUZZ_CHECK(vector == 0 || why[0] != '\0');
    wex__delta_limit_isa(WEX__DELTA_ISA_SCALAR);
    memset(a, 0, elems * elem);
    scalar =
        wex__delta_walk(payload, len, elem, elems, apply, &t, why, sizeof(why));
    wex__delta_limit_isa(WEX__DELTA_ISA_AVX512);
    FUZZ_CHECK(vector == scalar);
    if (vector == 0) {
        wex__delta_piece pieces[5];
        size_t count = wex__delta_cut(payload, len, elem, elems, 5, pieces);

        FUZZ_CHECK(count >= 1 && count <= 5);
        for (size_t k = count; k-- > 0;)
            FUZZ_CHECK(wex__delta_apply_piece(payload, &pieces[k], elem, elems,
                                              b, why, sizeof(why)) == 0);
        FUZZ_CHECK(memcmp(a, b, elems * elem) == 0);
    } else {
        /* a refused payload, applied directly and in pieces anyway,
         * stays inside the stream (ASan watches) */
        wex__delta_piece pieces[3];
        size_t count = wex__delta_cut(payload, len, elem, elems, 3, pieces);
        for (size_t k = 0; k < count; k++)
            (void)wex__delta_apply_piece(payload, &pieces[k], elem, elems, b,
                                         why, sizeof(why));
    }
    free(a);
    free(b);
    return 0;
}
