/* Picks the XXH3 update this CPU runs fastest (see digest_update.h). */
#include "digest_update.h"

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
