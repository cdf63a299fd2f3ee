/*
 * The element types a transform reads and writes, one value at a time:
 * float8 e4m3 (the "fn" variant of the Hugging Face FP8 checkpoints:
 * no infinities, 0x7f/0xff NaN, largest finite 448), bfloat16 and IEEE
 * half. Every conversion to a narrower type rounds to nearest, ties to
 * even, exactly as torch converts on the CPU, so another implementation
 * (a test with torch, a GPU kernel) reproduces every byte:
 *   - to e4m3: NaN stays NaN (sign kept); a magnitude of 448 or more,
 *     infinity included, saturates to 448; below 2^-6 the subnormals,
 *     multiples of 2^-9;
 *   - to bfloat16 and half: NaN becomes the quiet NaN of its sign;
 *     half overflows to infinity.
 */
#ifndef WEX_HOST_NUMBERS_H
#define WEX_HOST_NUMBERS_H

#include <stdint.h>
#include <string.h>

#define WEX__E4M3_MAX 448.0f

/* Every function here is also compiled for the GPU (the quantization
 * kernels of host/cuda), so the two compute each byte the same way. */
#ifdef __CUDACC__
#define WEX__HD __host__ __device__
#else
#define WEX__HD
#endif

static inline WEX__HD uint32_t wex__f32_bits(float x)
{
    uint32_t u;

    memcpy(&u, &x, sizeof(u));
    return u;
}

static inline WEX__HD float wex__f32_of_bits(uint32_t u)
{
    float x;

    memcpy(&x, &u, sizeof(x));
    return x;
}

/* All ones when `c`, else zero: selects written as masks, which compilers
 * vectorise where they would not convert a branch. */
static inline WEX__HD uint32_t wex__mask(int c)
{
    return 0u - (uint32_t)(c != 0);
}

/* float32 -> e4m3 in the low byte of a 32-bit word, without branches so
 * loops over it vectorise (wex__e4m3_from_f32 narrows it). */
static inline WEX__HD uint32_t wex__e4m3_word_from_f32(float x)
{
    uint32_t u = wex__f32_bits(x);
    uint32_t sign = (u >> 24) & 0x80u, a = u & 0x7fffffffu;
    /* Normal results: keep 3 mantissa bits, rounding on bit 20 to even,
     * and rebias the exponent (127 - 7 = 120). */
    uint32_t r = a + 0x7ffffu + ((a >> 20) & 1u);
    uint32_t normal = ((r >> 20) - (120u << 3)) & 0x7fu;
    /* Subnormal results: adding 2^14 (whose ulp is 2^-9) rounds |x| to a
     * multiple of 2^-9 to even; the ulps counted are the mantissa. */
    float lifted = wex__f32_of_bits(a) + 16384.0f;
    uint32_t sub = wex__f32_bits(lifted) - 0x46800000u; /* bits of 2^14 */
    /* a < 2^31: signed compares, which every SIMD has */
    uint32_t m_sub = wex__mask((int32_t)a < 0x3c800000);  /* below 2^-6 */
    uint32_t m_sat = wex__mask((int32_t)a >= 0x43e00000); /* 448 and up */
    uint32_t m_nan = wex__mask((int32_t)a > 0x7f800000);
    uint32_t out = (sub & m_sub) | (normal & ~m_sub);

    out = (0x7eu & m_sat) | (out & ~m_sat);
    out = (0x7fu & m_nan) | (out & ~m_nan);
    return sign | (out & 0xffu);
}

/* e4m3(x * mult), a quantized element (mult is positive, or a NaN where
 * the block's amax is), signed as x is: where the product is a NaN, the
 * sign a multiply gives it depends on the hardware and on the order the
 * compiler puts the operands in (a GPU's NaN has none); x's is the same
 * everywhere. Elsewhere the product has x's sign already. */
static inline WEX__HD uint32_t wex__e4m3_word_quantized(float x, float mult)
{
    return (wex__e4m3_word_from_f32(x * mult) & 0x7fu) |
           ((wex__f32_bits(x) >> 24) & 0x80u);
}

static inline WEX__HD uint8_t wex__e4m3_from_f32(float x)
{
    return (uint8_t)wex__e4m3_word_from_f32(x);
}

/* The same for |x| <= 460 (so below 464, the first value to round past
 * 448) and not NaN: what the products of a quantization are when the
 * block's amax is finite. No saturation or NaN to look for. */
static inline WEX__HD uint32_t wex__e4m3_word_from_bounded(float x)
{
    uint32_t u = wex__f32_bits(x), a = u & 0x7fffffffu;
    uint32_t normal = ((a + 0x7ffffu + ((a >> 20) & 1u)) >> 20) - (120u << 3);
    uint32_t sub = wex__f32_bits(wex__f32_of_bits(a) + 16384.0f) - 0x46800000u;
    uint32_t m_sub = wex__mask((int32_t)a < 0x3c800000);

    return ((u >> 24) & 0x80u) | (sub & m_sub) | (normal & ~m_sub);
}

static inline WEX__HD float wex__e4m3_to_f32(uint8_t b)
{
    uint32_t e = (b >> 3) & 0xfu, m = b & 7u;
    float v;

    if ((b & 0x7fu) == 0x7fu)
        return wex__f32_of_bits(0x7fc00000u | ((uint32_t)(b & 0x80u) << 24));
    v = e == 0 ? (float)m * 0x1p-9f
               : wex__f32_of_bits(((e + 120u) << 23) | (m << 20));
    return (b & 0x80u) ? -v : v;
}

static inline WEX__HD uint16_t wex__bf16_from_f32(float x)
{
    uint32_t u = wex__f32_bits(x);

    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static inline WEX__HD float wex__bf16_to_f32(uint16_t h)
{
    return wex__f32_of_bits((uint32_t)h << 16);
}

static inline WEX__HD uint16_t wex__f16_from_f32(float x)
{
    uint32_t u = wex__f32_bits(x), sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;

    if (a > 0x7f800000u)
        return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) /* rounds to 65536 or more: infinity */
        return (uint16_t)(sign | 0x7c00u);
    if (a >= 0x38800000u) { /* normal half: 2^-14 and up */
        uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
        return (uint16_t)(sign | ((r >> 13) - (112u << 10)));
    }
    /* subnormal half: multiples of 2^-24, as for e4m3 above */
    return (uint16_t)(sign | (wex__f32_bits(wex__f32_of_bits(a) + 0.5f) -
                              wex__f32_bits(0.5f)));
}

static inline WEX__HD float wex__f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu;
    uint32_t m = h & 0x3ffu;
    float v;

    if (e == 0x1f)
        return wex__f32_of_bits(sign | 0x7f800000u | (m << 13));
    v = e == 0 ? (float)m * 0x1p-24f
               : wex__f32_of_bits(((e + 112u) << 23) | (m << 13));
    return sign ? -v : v;
}

#endif /* WEX_HOST_NUMBERS_H */
