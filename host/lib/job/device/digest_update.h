/* The digest of an operation's bytes, and XXH3_64bits_update at the
 * widest vectors this CPU runs.
 *
 * An operation's digest, as every rank takes it, is XXH3-64 of the
 * XXH3-64 digests (8 bytes each, this machine's order: little-endian) of
 * its stream's blocks of WEX__DIGEST_BLOCK bytes, the last one short (an
 * empty stream has none): its blocks digest apart, so a GPU digests them
 * all at once (libwex_cuda.so, wex_cuda_digest_blocks) where one XXH3
 * stream is one thread's work, and the host takes the digest of their
 * digests (wex__digest_of_blocks).
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
#include <stdint.h>

#include <xxhash.h>

#define WEX__DIGEST_BLOCK 16384u

/* An operation's digest being taken: bytes added in stream order, cut
 * anywhere. */
typedef struct wex__digest wex__digest;
wex__digest *wex__digest_create(void); /* NULL: out of memory */
void wex__digest_free(wex__digest *d);
void wex__digest_reset(wex__digest *d);
void wex__digest_add(wex__digest *d, const void *bytes, size_t n);
/* The digest of what was added; add nothing more before a reset. */
uint64_t wex__digest_final(wex__digest *d);
/* The digest of `count` blocks' digests, in stream order. */
uint64_t wex__digest_of_blocks(const uint64_t *blocks, size_t count);

void wex__digest_update(XXH3_state_t *h, const void *bytes, size_t n);

/* XXH3-64 of one whole block (WEX__DIGEST_BLOCK bytes), as fast. */
uint64_t wex__digest_block(const void *bytes);

/* The AVX2 build (digest_update_avx2.c), on a state of the library's
 * layout, and its one-shot digest; called only where the CPU has AVX2. */
void wex__digest_update_avx2(void *h, const void *bytes, size_t n);
uint64_t wex__digest_block_avx2(const void *bytes, size_t n);
/* The AVX-512 build (digest_update_avx512.c), where the CPU has it. */
void wex__digest_update_avx512(void *h, const void *bytes, size_t n);
uint64_t wex__digest_block_avx512(const void *bytes, size_t n);

#endif /* WEX_JOB_DIGEST_UPDATE_H */
