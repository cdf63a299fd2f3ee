/* An operation's digest, block by block, and the XXH3 update this CPU
 * runs fastest (see digest_update.h). */
#include <stdlib.h>

#include "digest_update.h"

struct wex__digest {
    XXH3_state_t *outer; /* the blocks' digests so far */
    XXH3_state_t *block; /* the current block's bytes */
    size_t fill;         /* ... how many */
};

wex__digest *wex__digest_create(void)
{
    wex__digest *d = calloc(1, sizeof(*d));

    if (d == NULL || (d->outer = XXH3_createState()) == NULL ||
        (d->block = XXH3_createState()) == NULL) {
        wex__digest_free(d);
        return NULL;
    }
    wex__digest_reset(d);
    return d;
}

void wex__digest_free(wex__digest *d)
{
    if (d == NULL)
        return;
    XXH3_freeState(d->outer);
    XXH3_freeState(d->block);
    free(d);
}

void wex__digest_reset(wex__digest *d)
{
    XXH3_64bits_reset(d->outer);
    XXH3_64bits_reset(d->block);
    d->fill = 0;
}

static void add_block_digest(wex__digest *d, uint64_t digest)
{
    XXH3_64bits_update(d->outer, &digest, sizeof(digest));
}

void wex__digest_add(wex__digest *d, const void *bytes, size_t n)
{
    const unsigned char *p = bytes;

    while (n > 0) {
        size_t take = WEX__DIGEST_BLOCK - d->fill;
        if (d->fill == 0 && n >= WEX__DIGEST_BLOCK) {
            /* a whole block in one piece: in one call */
            add_block_digest(d, wex__digest_block(p));
            p += WEX__DIGEST_BLOCK;
            n -= WEX__DIGEST_BLOCK;
            continue;
        }
        if (take > n)
            take = n;
        wex__digest_update(d->block, p, take);
        d->fill += take;
        p += take;
        n -= take;
        if (d->fill == WEX__DIGEST_BLOCK) {
            add_block_digest(d, XXH3_64bits_digest(d->block));
            XXH3_64bits_reset(d->block);
            d->fill = 0;
        }
    }
}

uint64_t wex__digest_final(wex__digest *d)
{
    if (d->fill > 0) {
        add_block_digest(d, XXH3_64bits_digest(d->block));
        XXH3_64bits_reset(d->block);
        d->fill = 0;
    }
    return XXH3_64bits_digest(d->outer);
}

uint64_t wex__digest_of_blocks(const uint64_t *blocks, size_t count)
{
    return XXH3_64bits(blocks, count * sizeof(*blocks));
}

void wex__digest_update(XXH3_state_t *h, const void *bytes, size_t n)
{
#ifdef WEX_DIGEST_AVX2
    /* A load and a test: libgcc fills the CPU model before any
     * constructor of ours runs. */
    if (__builtin_cpu_supports("avx512f")) {
        wex__digest_update_avx512(h, bytes, n);
        return;
    }
    if (__builtin_cpu_supports("avx2")) {
        wex__digest_update_avx2(h, bytes, n);
        return;
    }
#endif
    XXH3_64bits_update(h, bytes, n);
}

uint64_t wex__digest_block(const void *bytes)
{
#ifdef WEX_DIGEST_AVX2
    if (__builtin_cpu_supports("avx512f"))
        return wex__digest_block_avx512(bytes, WEX__DIGEST_BLOCK);
    if (__builtin_cpu_supports("avx2"))
        return wex__digest_block_avx2(bytes, WEX__DIGEST_BLOCK);
#endif
    return XXH3_64bits(bytes, WEX__DIGEST_BLOCK);
}
