/* XXH3_64bits_update for AVX-512: this file alone is built with
 * -mavx512f, and digest_update.c calls it only where the CPU has it
 * (half as fast again as AVX2 on cache-hot bytes). */
#define WEX_DIGEST_UPDATE_WIDE wex__digest_update_avx512
#define WEX_DIGEST_BLOCK_WIDE wex__digest_block_avx512
#include "digest_update_avx2.c"
