/* XXH3_64bits_update at the widest vectors this CPU runs.
 *
 * Debian's libxxhash is built for baseline x86-64 (SSE2): it hashes
 * cache-hot bytes at about memcpy's speed, so hashing what a step moves
 * costs as much again as moving it. Built for AVX2 the same function is
 * three times faster, for AVX-512 half as fast again. The state is the library's and the digests are the
 * same (XXH3 is defined alike at every vector width), so ranks on CPUs
 * of either kind agree. */
#ifndef WEX_JOB_DIGEST_UPDATE_H
#define WEX_JOB_DIGEST_UPDATE_H

#include <stddef.h>

#include <xxhash.h>

void wex__digest_update(XXH3_state_t *h, const void *bytes, size_t n);

/* The AVX2 build (digest_update_avx2.c), on a state of the library's
 * layout; called only where the CPU has AVX2. */
void wex__digest_update_avx2(void *h, const void *bytes, size_t n);
/* The AVX-512 build (digest_update_avx512.c), where the CPU has it. */
void wex__digest_update_avx512(void *h, const void *bytes, size_t n);

#endif /* WEX_JOB_DIGEST_UPDATE_H */
