/* XXH3_64bits_update compiled for AVX2 (this file alone is built with
 * -mavx2; digest_update.c calls it only where the CPU has AVX2).
 * XXH_INLINE_ALL gives this file private copies of xxHash's functions,
 * and the same header gives their state the library's layout. */
#define XXH_INLINE_ALL
#if defined(__AVX2__)
#define XXH_VECTOR XXH_AVX2
#endif
/* Without -mavx2 (tools/fuzz.sh builds every host source with one set of
 * flags, and does not define WEX_DIGEST_AVX2, so nothing calls this) the
 * same file builds xxHash's best baseline code. */
#include <xxhash.h>

void wex__digest_update_avx2(void *h, const void *bytes, size_t n);

void wex__digest_update_avx2(void *h, const void *bytes, size_t n)
{
    XXH3_64bits_update((XXH3_state_t *)h, bytes, n);
}
