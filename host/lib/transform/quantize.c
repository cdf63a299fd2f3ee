#include "quantize.h"

#include <wex/abi.h>

#include "numbers.h"

#include <stdlib.h>

#include "clock.h"

/* The hot loops are built twice where the compiler can, for AVX2 and for
 * the baseline, and the loader picks one per machine (ifunc): one binary,
 * twice the lanes where the CPU has them. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) &&         \
    !defined(__SANITIZE_ADDRESS__)
#define HOT __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define HOT
#endif

int wex__is_float_dtype(uint32_t dtype)
{
    return dtype == WEX_DTYPE_BF16 || dtype == WEX_DTYPE_F16 ||
           dtype == WEX_DTYPE_F32;
}

/* One element of a float dtype as float32 (exact: float32 holds every
 * bf16 and f16 value). */
static inline float load(uint32_t dtype, const void *src, uint64_t i)
{
    if (dtype == WEX_DTYPE_BF16)
        return wex__bf16_to_f32(((const uint16_t *)src)[i]);
    if (dtype == WEX_DTYPE_F16)
        return wex__f16_to_f32(((const uint16_t *)src)[i]);
    return ((const float *)src)[i];
}

static inline void store(uint32_t dtype, void *dst, uint64_t i, float v)
{
    if (dtype == WEX_DTYPE_BF16)
        ((uint16_t *)dst)[i] = wex__bf16_from_f32(v);
    else if (dtype == WEX_DTYPE_F16)
        ((uint16_t *)dst)[i] = wex__f16_from_f32(v);
    else
        ((float *)dst)[i] = v;
}

/* |x| as bits compares as |x| for every non-NaN float; a NaN's bits are
 * above infinity's, so the max of the bits propagates it. One loop per
 * dtype keeps each simple enough to vectorise. */
HOT float wex__amax(uint32_t dtype, const void *src, uint64_t n, float amax)
{
    uint32_t m = wex__f32_bits(amax) & 0x7fffffffu;

    if (dtype == WEX_DTYPE_BF16) {
        const int16_t *s = src;
        int16_t mb = 0; /* |x| bits fit a positive int16: a signed max */
        for (uint64_t i = 0; i < n; i++) {
            int16_t a = (int16_t)(s[i] & 0x7fff);
            mb = a > mb ? a : mb;
        }
        m = ((uint32_t)mb << 16) > m ? ((uint32_t)mb << 16) : m;
    } else if (dtype == WEX_DTYPE_F32) {
        const uint32_t *s = src;
        for (uint64_t i = 0; i < n; i++) {
            uint32_t a = s[i] & 0x7fffffffu;
            m = a > m ? a : m;
        }
    } else {
        for (uint64_t i = 0; i < n; i++) {
            uint32_t a = wex__f32_bits(load(dtype, src, i)) & 0x7fffffffu;
            m = a > m ? a : m;
        }
    }
    return wex__f32_of_bits(m);
}

/* torch evaluates `448.0 / amax` (a number over a tensor) as
 * 448 * reciprocal(amax): two roundings, not one division. The rule is
 * torch's, so is this. */
float wex__quant_mult(float amax)
{
    float a =
        amax > WEX__QUANT_AMAX_MIN || amax != amax ? amax : WEX__QUANT_AMAX_MIN;
    float reciprocal = 1.0f / a; /* rounded before the product */

    return reciprocal * WEX__E4M3_MAX;
}

float wex__quant_scale_inv(float amax)
{
    return (amax > WEX__QUANT_AMAX_MIN || amax != amax ? amax
                                                       : WEX__QUANT_AMAX_MIN) /
           WEX__E4M3_MAX;
}

/* Elements are converted into 32-bit words, a chunk at a time, and then
 * narrowed to bytes: two simple loops, each of which vectorises without
 * the register spills of one loop that does both. */
#define CHUNK 256

HOT void wex__quantize_e4m3(uint32_t dtype, const void *src, uint64_t n,
                            float mult, uint8_t *dst)
{
    /* A finite amax makes mult finite and every product at most 448 (and
     * a rounding): the bounded conversion is exact then. An infinite or
     * NaN amax (mult 0 or NaN) takes the full one. */
    int bounded = mult > 0.0f && mult <= WEX__E4M3_MAX / WEX__QUANT_AMAX_MIN;
    uint32_t words[CHUNK];

    for (uint64_t at = 0; at < n; at += CHUNK) {
        uint64_t m = n - at < CHUNK ? n - at : CHUNK;
        if (dtype == WEX_DTYPE_BF16 && bounded) {
            const uint16_t *s = (const uint16_t *)src + at;
            for (uint64_t i = 0; i < m; i++)
                words[i] =
                    wex__e4m3_word_from_bounded(wex__bf16_to_f32(s[i]) * mult);
        } else if (dtype == WEX_DTYPE_F32 && bounded) {
            const float *s = (const float *)src + at;
            for (uint64_t i = 0; i < m; i++)
                words[i] = wex__e4m3_word_from_bounded(s[i] * mult);
        } else {
            for (uint64_t i = 0; i < m; i++)
                words[i] =
                    wex__e4m3_word_quantized(load(dtype, src, at + i), mult);
        }
        for (uint64_t i = 0; i < m; i++)
            dst[at + i] = (uint8_t)words[i];
    }
}

/* A whole block row segment (128 elements, the common case) as a loop
 * of a known trip count, which compiles to straight vector code. */
static inline void quantize_128_bf16(const uint16_t *restrict x, float m,
                                     uint32_t *restrict words)
{
    for (int i = 0; i < 128; i++)
        words[i] = wex__e4m3_word_from_bounded(wex__bf16_to_f32(x[i]) * m);
}

/* One row of a slab: `nb` blocks of 128 columns (the last `last` wide),
 * block j by the amax amax[j] (a division a block row is cheaper than
 * keeping the multipliers too). Words for 16 blocks at a time, then one
 * narrowing loop over them. */
HOT static void quantize_row_bf16(const uint16_t *s, uint64_t nb, uint64_t last,
                                  const float *amax, uint8_t *dst)
{
    uint32_t words[16 * WEX__QUANT_BLOCK];

    for (uint64_t j0 = 0; j0 < nb; j0 += 16) {
        uint64_t j1 = nb - j0 < 16 ? nb : j0 + 16, n = 0;
        for (uint64_t j = j0; j < j1; j++) {
            const uint16_t *x = s + j * WEX__QUANT_BLOCK;
            if (j + 1 < nb || last == WEX__QUANT_BLOCK) {
                quantize_128_bf16(x, wex__quant_mult(amax[j]), words + n);
                n += WEX__QUANT_BLOCK;
                continue;
            }
            for (uint64_t i = 0; i < last; i++)
                words[n + i] = wex__e4m3_word_from_bounded(
                    wex__bf16_to_f32(x[i]) * wex__quant_mult(amax[j]));
            n += last;
        }
        for (uint64_t i = 0; i < n; i++)
            dst[j0 * WEX__QUANT_BLOCK + i] = (uint8_t)words[i];
    }
}

/* A slab of 128 rows at a time, walked row by row (sequential memory,
 * which the prefetchers follow): first every block's amax, then every
 * element, while the slab is still in cache. */
void wex__quantize_blocks(uint32_t dtype, const void *src, uint64_t src_ld,
                          uint64_t rows, uint64_t cols, uint8_t *dst,
                          uint64_t dst_ld, float *scales, uint64_t scale_ld)
{
    const unsigned char *s = src;
    uint64_t esize = wex_dtype_size(dtype);
    uint64_t nbc = (cols + WEX__QUANT_BLOCK - 1) / WEX__QUANT_BLOCK;
    uint64_t last = cols - (nbc - 1) * WEX__QUANT_BLOCK;

    for (uint64_t r0 = 0; r0 < rows; r0 += WEX__QUANT_BLOCK) {
        uint64_t r1 =
            rows - r0 < WEX__QUANT_BLOCK ? rows : r0 + WEX__QUANT_BLOCK;
        float *scale = scales + (r0 / WEX__QUANT_BLOCK) * scale_ld;
        int fast = dtype == WEX_DTYPE_BF16;

        /* the scale row holds the amaxes until they are final */
        for (uint64_t j = 0; j < nbc; j++)
            scale[j] = 0.0f;
        for (uint64_t r = r0; r < r1; r++)
            for (uint64_t j = 0; j < nbc; j++)
                scale[j] = wex__amax(
                    dtype, s + (r * src_ld + j * WEX__QUANT_BLOCK) * esize,
                    j + 1 == nbc ? last : WEX__QUANT_BLOCK, scale[j]);
        for (uint64_t j = 0; j < nbc; j++) {
            float mult = wex__quant_mult(scale[j]);
            /* an infinite or NaN amax needs the full conversion */
            fast = fast && mult > 0.0f &&
                   mult <= WEX__E4M3_MAX / WEX__QUANT_AMAX_MIN;
        }
        for (uint64_t r = r0; r < r1; r++) {
            const unsigned char *row = s + r * src_ld * esize;
            if (fast) {
                quantize_row_bf16((const uint16_t *)row, nbc, last, scale,
                                  dst + r * dst_ld);
                continue;
            }
            for (uint64_t j = 0; j < nbc; j++)
                wex__quantize_e4m3(dtype, row + j * WEX__QUANT_BLOCK * esize,
                                   j + 1 == nbc ? last : WEX__QUANT_BLOCK,
                                   wex__quant_mult(scale[j]),
                                   dst + r * dst_ld + j * WEX__QUANT_BLOCK);
        }
        for (uint64_t j = 0; j < nbc; j++)
            scale[j] = wex__quant_scale_inv(scale[j]);
    }
}

void wex__dequantize_e4m3(const uint8_t *src, uint64_t n, float scale_inv,
                          uint32_t dtype, void *dst)
{
    for (uint64_t i = 0; i < n; i++)
        store(dtype, dst, i, wex__e4m3_to_f32(src[i]) * scale_inv);
}

void wex__convert_floats(uint32_t from, const void *src, uint64_t n,
                         uint32_t to, void *dst)
{
    for (uint64_t i = 0; i < n; i++)
        store(to, dst, i, load(from, src, i));
}

double wex__quantize_rate(void)
{
    enum { ROWS = 1024, COLS = 2048 };
    uint16_t *x = malloc((size_t)ROWS * COLS * sizeof(*x));
    uint8_t *q = malloc((size_t)ROWS * COLS);
    float scales[(ROWS / 128) * (COLS / 128)];
    double best = 0;

    if (x == NULL || q == NULL) {
        free(x);
        free(q);
        return 0;
    }
    for (size_t i = 0; i < (size_t)ROWS * COLS; i++)
        x[i] = wex__bf16_from_f32((float)(i % 977) * 0.01f - 4.0f);
    for (int pass = 0; pass < 3; pass++) {
        double t0 = wex__now(), dt;
        wex__quantize_blocks(WEX_DTYPE_BF16, x, COLS, ROWS, COLS, q, COLS,
                             scales, COLS / 128);
        dt = wex__now() - t0;
        if (dt > 0 && (best == 0 || (double)ROWS * COLS * 2 / dt > best))
            best = (double)ROWS * COLS * 2 / dt;
    }
    free(x);
    free(q);
    return best;
}
