/*
 * An operation's digest (host/lib/job/device/digest_update.h: XXH3-64 of
 * its blocks' XXH3-64 digests) taken in device memory: a thread a block,
 * each running xxHash's XXH3-64 for inputs longer than 240 bytes (its
 * "long" path, the default secret, seed 0), which every whole block and
 * most last ones are; a last block of 240 bytes or fewer goes back to the
 * host for the library to digest. Written once for the device compiler
 * and the host's (the fake kernels and test_digest_blocks run it on the
 * CPU and compare it with the library).
 *
 * The long path: eight 64-bit accumulators take the input 64 bytes (a
 * stripe) at a time, each stripe's eight words mixed with the secret at
 * its place (8 bytes further a stripe); every 16 stripes the
 * accumulators are scrambled; the last stripe (the input's last 64
 * bytes) is taken again with the secret at another place; the
 * accumulators are merged with the length.
 */
#ifndef WEX_HOST_DIGEST_BLOCKS_H
#define WEX_HOST_DIGEST_BLOCKS_H

#include <stdint.h>

#ifdef __CUDACC__
#define WEX_XXH_FN __host__ __device__ static inline
#define WEX_XXH_SECRET __constant__ static const
#else
#define WEX_XXH_FN static inline
#define WEX_XXH_SECRET static const
#endif

/* host/lib/job/device/digest_update.h's WEX__DIGEST_BLOCK (digest_update.c
 * checks they agree) */
#define WEX_DIGEST_BLOCK_BYTES 16384u
/* The longest input the long path does not take. */
#define WEX_XXH3_MIDSIZE_MAX 240u

WEX_XXH_SECRET uint8_t wex_xxh3_secret[192] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c,
    0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb,
    0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e,
    0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6,
    0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb,
    0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97,
    0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7,
    0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31,
    0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83,
    0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26,
    0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc,
    0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f,
    0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

#define WEX_XXH_PRIME32_1 0x9E3779B1u
#define WEX_XXH_PRIME32_2 0x85EBCA77u
#define WEX_XXH_PRIME32_3 0xC2B2AE3Du
#define WEX_XXH_PRIME64_1 0x9E3779B185EBCA87ull
#define WEX_XXH_PRIME64_2 0xC2B2AE3D27D4EB4Full
#define WEX_XXH_PRIME64_3 0x165667B19E3779F9ull
#define WEX_XXH_PRIME64_4 0x85EBCA77C2B2AE63ull
#define WEX_XXH_PRIME64_5 0x27D4EB2F165667C5ull

/* 8 bytes as a little-endian word, from anywhere. */
WEX_XXH_FN uint64_t wex_xxh_read64(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    if (((uintptr_t)p & 7u) == 0)
        return *(const uint64_t *)p;
#endif
    uint64_t v = 0;

    for (unsigned b = 0; b < 8; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return v;
}

WEX_XXH_FN uint64_t wex_xxh_mul128_fold64(uint64_t a, uint64_t b)
{
#ifdef __CUDA_ARCH__
    return (a * b) ^ __umul64hi(a, b);
#else
    unsigned __int128 p = (unsigned __int128)a * b;
    return (uint64_t)p ^ (uint64_t)(p >> 64);
#endif
}

WEX_XXH_FN void wex_xxh_accumulate_512(uint64_t *acc, const uint8_t *input,
                                       const uint8_t *secret)
{
    for (unsigned i = 0; i < 8; i++) {
        uint64_t v = wex_xxh_read64(input + 8 * i);
        uint64_t k = v ^ wex_xxh_read64(secret + 8 * i);
        acc[i ^ 1] += v;
        acc[i] += (uint64_t)(uint32_t)k * (uint64_t)(uint32_t)(k >> 32);
    }
}

WEX_XXH_FN void wex_xxh_scramble(uint64_t *acc, const uint8_t *secret)
{
    for (unsigned i = 0; i < 8; i++) {
        uint64_t a = acc[i];
        a ^= a >> 47;
        a ^= wex_xxh_read64(secret + 8 * i);
        a *= WEX_XXH_PRIME32_1;
        acc[i] = a;
    }
}

/* XXH3-64 of `len` > 240 bytes at `input`: XXH3_64bits(input, len). */
WEX_XXH_FN uint64_t wex_xxh3_long(const uint8_t *input, uint64_t len)
{
    const uint8_t *secret = wex_xxh3_secret;
    const uint64_t stripes_per_block = (192 - 64) / 8, block = 64 * 16;
    uint64_t acc[8] = {WEX_XXH_PRIME32_3, WEX_XXH_PRIME64_1, WEX_XXH_PRIME64_2,
                       WEX_XXH_PRIME64_3, WEX_XXH_PRIME64_4, WEX_XXH_PRIME32_2,
                       WEX_XXH_PRIME64_5, WEX_XXH_PRIME32_1};
    uint64_t blocks = (len - 1) / block, stripes,
             result = len * WEX_XXH_PRIME64_1;

    for (uint64_t n = 0; n < blocks; n++) {
        for (uint64_t s = 0; s < stripes_per_block; s++)
            wex_xxh_accumulate_512(acc, input + n * block + s * 64,
                                   secret + s * 8);
        wex_xxh_scramble(acc, secret + 192 - 64);
    }
    stripes = ((len - 1) - block * blocks) / 64;
    for (uint64_t s = 0; s < stripes; s++)
        wex_xxh_accumulate_512(acc, input + blocks * block + s * 64,
                               secret + s * 8);
    /* the last stripe, with the secret 7 bytes before its end's stripe */
    wex_xxh_accumulate_512(acc, input + len - 64, secret + 192 - 64 - 7);
    for (unsigned i = 0; i < 4; i++) /* merged from secret byte 11 on */
        result += wex_xxh_mul128_fold64(
            acc[2 * i] ^ wex_xxh_read64(secret + 11 + 16 * i),
            acc[2 * i + 1] ^ wex_xxh_read64(secret + 11 + 16 * i + 8));
    result ^= result >> 37;
    result *= 0x165667919E3779F9ull;
    result ^= result >> 32;
    return result;
}

/* The blocks of a stream of `len` bytes, and how long block b is. */
WEX_XXH_FN uint64_t wex_digest_block_count(uint64_t len)
{
    return (len + WEX_DIGEST_BLOCK_BYTES - 1) / WEX_DIGEST_BLOCK_BYTES;
}

WEX_XXH_FN uint64_t wex_digest_block_len(uint64_t len, uint64_t b)
{
    uint64_t at = b * WEX_DIGEST_BLOCK_BYTES;

    return len - at < WEX_DIGEST_BLOCK_BYTES ? len - at
                                             : WEX_DIGEST_BLOCK_BYTES;
}

/* Block b's digest into digests[b]: by the long path, or, for a last
 * block of 240 bytes or fewer, its bytes copied to `tail` for the host
 * (digests[b] then 0). */
WEX_XXH_FN void wex_digest_one_block(const uint8_t *stream, uint64_t len,
                                     uint64_t b, uint64_t *digests,
                                     uint8_t *tail)
{
    uint64_t n = wex_digest_block_len(len, b);
    const uint8_t *p = stream + b * WEX_DIGEST_BLOCK_BYTES;

    if (n > WEX_XXH3_MIDSIZE_MAX) {
        digests[b] = wex_xxh3_long(p, n);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        tail[i] = p[i];
    digests[b] = 0;
}

#endif /* WEX_HOST_DIGEST_BLOCKS_H */
