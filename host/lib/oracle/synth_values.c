#include "synth_values.h"

#include <string.h>

#include <wex/abi.h>

#include "numbers.h"
#include "quantize.h"

static uint64_t mix(uint64_t canonical, uint64_t element, uint64_t step)
{
    uint64_t z = canonical * 0x9e3779b97f4a7c15ull ^
                 element * 0xbf58476d1ce4e5b9ull ^ step * 0x94d049bb133111ebull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The fraction of elements a step changes (wex run --changed): one
 * setting for the whole process, which runs one rank of one job. */
static double changed = 1.0;

void wex__synth_set_changed(double fraction)
{
    changed = fraction < 0 ? 0 : fraction > 1 ? 1 : fraction;
}

/* An element takes a new value at the steps where step * F + its phase
 * (a number in [0, 1) drawn from its hash) passes an integer: a fraction
 * F of the elements each step, the same ones on every rank, and each
 * element's value at any step without looking at the steps before. */
static uint64_t hash(uint64_t canonical, uint64_t element, uint64_t step)
{
    if (changed < 1.0) {
        double phase =
            (double)(mix(canonical, element, UINT64_MAX) >> 11) * 0x1p-53;
        step = (uint64_t)((double)step * changed + phase);
    }
    return mix(canonical, element, step);
}

/* A sign, an exponent in [-6, 1] and 23 bits of mantissa; one value in
 * 256 is zero. */
static float finite(uint64_t z)
{
    uint32_t sign = (uint32_t)(z >> 63) << 31;
    uint32_t exponent = (uint32_t)(127 - 6 + ((z >> 56) & 7u)) << 23;

    if (((z >> 40) & 0xffu) == 0)
        return 0.0f;
    return wex__f32_of_bits(sign | exponent | (uint32_t)(z & 0x7fffffu));
}

void wex__synth_value(uint32_t dtype, uint64_t canonical, uint64_t element,
                      uint64_t step, void *out)
{
    uint64_t z = hash(canonical, element, step);
    float f = finite(z);
    uint16_t h;
    uint8_t b;

    switch (dtype) {
    case WEX_DTYPE_F32: memcpy(out, &f, 4); return;
    case WEX_DTYPE_BF16:
        h = wex__bf16_from_f32(f);
        memcpy(out, &h, 2);
        return;
    case WEX_DTYPE_F16:
        h = wex__f16_from_f32(f);
        memcpy(out, &h, 2);
        return;
    case WEX_DTYPE_F8_E4M3:
        b = (uint8_t)z;
        if ((b & 0x7fu) == 0x7fu) /* NaN: 448 instead */
            b ^= 1u;
        memcpy(out, &b, 1);
        return;
    default: memcpy(out, &z, wex_dtype_size(dtype));
    }
}

float wex__synth_float(uint32_t dtype, uint64_t canonical, uint64_t element,
                       uint64_t step)
{
    unsigned char bytes[8] = {0};
    uint16_t h;
    float f;

    wex__synth_value(dtype, canonical, element, step, bytes);
    switch (dtype) {
    case WEX_DTYPE_BF16: memcpy(&h, bytes, 2); return wex__bf16_to_f32(h);
    case WEX_DTYPE_F16: memcpy(&h, bytes, 2); return wex__f16_to_f32(h);
    case WEX_DTYPE_F8_E4M3: return wex__e4m3_to_f32(bytes[0]);
    default: memcpy(&f, bytes, 4); return f;
    }
}

float wex__synth_block_amax(uint32_t dtype, uint64_t canonical, uint64_t rows,
                            uint64_t cols, uint64_t br, uint64_t bc,
                            uint64_t step)
{
    uint64_t r1 = (br + 1) * WEX__QUANT_BLOCK, c1 = (bc + 1) * WEX__QUANT_BLOCK;
    float amax = 0.0f;

    if (r1 > rows)
        r1 = rows;
    if (c1 > cols)
        c1 = cols;
    for (uint64_t r = br * WEX__QUANT_BLOCK; r < r1; r++)
        for (uint64_t c = bc * WEX__QUANT_BLOCK; c < c1; c++) {
            float x = wex__synth_float(dtype, canonical, r * cols + c, step);
            if (x < 0)
                x = -x;
            if (x > amax)
                amax = x;
        }
    return amax;
}
