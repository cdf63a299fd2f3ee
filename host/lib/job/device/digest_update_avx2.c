/* XXH3_64bits_update compiled for AVX2 (this file alone is built with
 * -mavx2; digest_update.c calls it only where the CPU has AVX2), and,
 * included by digest_update_avx512.c, for AVX-512 under another name.
 * XXH_INLINE_ALL gives the file private copies of xxHash's functions,
 * and the same header gives their state the library's layout. */
#define XXH_INLINE_ALL
#if defined(__AVX512F__)
#define XXH_VECTOR XXH_AVX512
#elif defined(__AVX2__)
#define XXH_VECTOR XXH_AVX2
#endif
/* Without -mavx2 (tools/fuzz.sh builds every host source with one set of
 * flags, and does not define WEX_DIGEST_AVX2, so nothing calls this) the
 * same file builds xxHash's best baseline code. */
/* xxHash asks for the line 384 or 512 bytes ahead of the stripe it
 * hashes: less than memory's latency at this speed. Asked 2 KiB ahead,
 * the blocks of a stream that is not in cache digested 25-30 % faster
 * (8.4 to 10.8 GB/s with AVX-512, on an Intel Xeon, Emerald Rapids):
 * what a destination's check of its full contents after a delta, and a
 * source's digest of a whole region, read at. */
#define XXH_PREFETCH_DIST 2048
#include <stdint.h>
#include <xxhash.h>

#ifndef WEX_DIGEST_UPDATE_WIDE
#define WEX_DIGEST_UPDATE_WIDE wex__digest_update_avx2
#define WEX_DIGEST_BLOCK_WIDE wex__digest_block_avx2
#endif

void WEX_DIGEST_UPDATE_WIDE(void *h, const void *bytes, size_t n);
uint64_t WEX_DIGEST_BLOCK_WIDE(const void *bytes, size_t n);

void WEX_DIGEST_UPDATE_WIDE(void *h, const void *bytes, size_t n)
{
    XXH3_64bits_update((XXH3_state_t *)h, bytes, n);
}

uint64_t WEX_DIGEST_BLOCK_WIDE(const void *bytes, size_t n)
{
    return XXH3_64bits(bytes, n);
}
