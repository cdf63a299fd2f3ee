/*
 * The transforms' arithmetic (host/lib/transform): float8 e4m3 and half
 * conversions at their edges, the fp8-block-128 quantization of a block
 * and its scale, and the way back. tests/python/test_fp8.py checks the
 * same rules against torch on every byte of real syncs.
 */
#include <check.h>
#include <math.h>
#include <string.h>

#include "check_run.h"
#include "numbers.h"
#include "quantize.h"

START_TEST(e4m3_rounds_and_saturates_as_torch)
{
    ck_assert_uint_eq(wex__e4m3_from_f32(0.0f), 0x00);
    ck_assert_uint_eq(wex__e4m3_from_f32(-0.0f), 0x80);
    ck_assert_uint_eq(wex__e4m3_from_f32(1.0f), 0x38);
    ck_assert_uint_eq(wex__e4m3_from_f32(448.0f), 0x7e);
    ck_assert_uint_eq(wex__e4m3_from_f32(470.0f), 0x7e); /* saturates */
    ck_assert_uint_eq(wex__e4m3_from_f32(1e30f), 0x7e);
    ck_assert_uint_eq(wex__e4m3_from_f32(INFINITY), 0x7e);
    ck_assert_uint_eq(wex__e4m3_from_f32(-INFINITY), 0xfe);
    ck_assert_uint_eq(wex__e4m3_from_f32(NAN) & 0x7f, 0x7f);
    /* 1.0625 is halfway between 1 (0x38) and 1.125 (0x39): to even */
    ck_assert_uint_eq(wex__e4m3_from_f32(1.0625f), 0x38);
    ck_assert_uint_eq(wex__e4m3_from_f32(1.1875f), 0x3a);
    /* subnormals: multiples of 2^-9; 2^-10 is halfway to 0 */
    ck_assert_uint_eq(wex__e4m3_from_f32(0x1p-9f), 0x01);
    ck_assert_uint_eq(wex__e4m3_from_f32(0x1p-10f), 0x00);
    ck_assert_uint_eq(wex__e4m3_from_f32(3 * 0x1p-10f), 0x02);
    ck_assert_uint_eq(wex__e4m3_from_f32(7.5f * 0x1p-9f), 0x08); /* to 2^-6 */
    for (unsigned b = 0; b < 256; b++)
        if ((b & 0x7f) != 0x7f)
            ck_assert_uint_eq(wex__e4m3_from_f32(wex__e4m3_to_f32((uint8_t)b)),
                              b);
    ck_assert_float_eq(wex__e4m3_to_f32(0x7e), 448.0f);
    ck_assert(isnan(wex__e4m3_to_f32(0xff)));
}
END_TEST

START_TEST(half_and_bfloat16_round_to_even)
{
    ck_assert_uint_eq(wex__bf16_from_f32(1.0f), 0x3f80);
    ck_assert_uint_eq(wex__bf16_from_f32(wex__f32_of_bits(0x3f808000u)),
                      0x3f80);
    ck_assert_uint_eq(wex__bf16_from_f32(wex__f32_of_bits(0x3f818000u)),
                      0x3f82);
    ck_assert_uint_eq(wex__f16_from_f32(1.0f), 0x3c00);
    ck_assert_uint_eq(wex__f16_from_f32(65504.0f), 0x7bff);
    ck_assert_uint_eq(wex__f16_from_f32(65520.0f), 0x7c00); /* infinity */
    ck_assert_uint_eq(wex__f16_from_f32(0x1p-24f), 0x0001);
    ck_assert_uint_eq(wex__f16_from_f32(0x1p-25f), 0x0000);
    for (unsigned h = 0; h < 0x7c00; h++)
        ck_assert_uint_eq(wex__f16_from_f32(wex__f16_to_f32((uint16_t)h)), h);
}
END_TEST

/* One 2 x 3 block as bf16: amax, every element and the scale_inv. */
START_TEST(a_block_quantizes_by_its_amax)
{
    const float values[6] = {1.0f, -2.0f, 0.5f, 3.5f, -7.0f, 0.0f};
    uint16_t x[6];
    uint8_t q[6];
    float amax, mult;

    for (int i = 0; i < 6; i++)
        x[i] = wex__bf16_from_f32(values[i]);
    amax = wex__amax(WEX_DTYPE_BF16, x, 6, 0.0f);
    ck_assert_float_eq(amax, 7.0f);
    mult = wex__quant_mult(amax);
    ck_assert_float_eq(mult,
                       (1.0f / 7.0f) * 448.0f); /* torch: 448 * reciprocal */
    ck_assert_float_eq(wex__quant_scale_inv(amax), 7.0f / 448.0f);
    wex__quantize_e4m3(WEX_DTYPE_BF16, x, 6, mult, q);
    ck_assert_uint_eq(q[4], 0xfe); /* -7 * 64 = -448 */
    for (int i = 0; i < 6; i++)
        ck_assert_uint_eq(q[i], wex__e4m3_from_f32(values[i] * mult));
    /* the largest element maps to 448 exactly, and back to itself */
    {
        uint16_t back[6];
        wex__dequantize_e4m3(q, 6, wex__quant_scale_inv(amax), WEX_DTYPE_BF16,
                             back);
        ck_assert_float_eq(wex__bf16_to_f32(back[4]), -7.0f);
        ck_assert_float_eq(wex__bf16_to_f32(back[5]), 0.0f);
    }
}
END_TEST

START_TEST(an_all_zero_block_uses_the_floor)
{
    float x[4] = {0, 0, -0.0f, 0};
    uint8_t q[4];
    float amax = wex__amax(WEX_DTYPE_F32, x, 4, 0.0f);

    ck_assert_float_eq(amax, 0.0f);
    ck_assert_float_eq(wex__quant_mult(amax), (1.0f / 1e-4f) * 448.0f);
    ck_assert_float_eq(wex__quant_scale_inv(amax), 1e-4f / 448.0f);
    wex__quantize_e4m3(WEX_DTYPE_F32, x, 4, wex__quant_mult(amax), q);
    ck_assert_uint_eq(q[0], 0x00);
    ck_assert_uint_eq(q[2], 0x80);
}
END_TEST

START_TEST(one_huge_value_sends_the_rest_to_subnormals_or_zero)
{
    float x[3] = {1e6f, 1.0f, 3.0f};
    uint8_t q[3];
    float mult = wex__quant_mult(wex__amax(WEX_DTYPE_F32, x, 3, 0.0f));

    wex__quantize_e4m3(WEX_DTYPE_F32, x, 3, mult, q);
    ck_assert_uint_eq(q[0], 0x7e);
    ck_assert_uint_eq(q[1], wex__e4m3_from_f32(1.0f * mult)); /* 4.48e-4 */
    ck_assert_uint_eq(q[1], 0x00);
    ck_assert_uint_eq(q[2], 0x01); /* 1.344e-3 rounds to 2^-9 */
}
END_TEST

START_TEST(nan_propagates_through_amax)
{
    float x[3] = {1.0f, NAN, 2.0f};

    ck_assert(isnan(wex__amax(WEX_DTYPE_F32, x, 3, 0.0f)));
    ck_assert(isnan(wex__quant_mult(NAN)));
}
END_TEST

/* A NaN block quantizes every element to NaN, each with its own sign,
 * whichever NaN the multiply would have made. */
START_TEST(a_nan_block_keeps_each_element_sign)
{
    float x[4] = {-1.0f, NAN, 2.0f, -NAN};
    float mult = wex__quant_mult(wex__amax(WEX_DTYPE_F32, x, 4, 0.0f));
    uint8_t q[4];

    wex__quantize_e4m3(WEX_DTYPE_F32, x, 4, mult, q);
    ck_assert_uint_eq(q[0], 0xff);
    ck_assert_uint_eq(q[1], 0x7f);
    ck_assert_uint_eq(q[2], 0x7f);
    ck_assert_uint_eq(q[3], 0xff);
    ck_assert_uint_eq(wex__e4m3_word_quantized(-3.0f, NAN), 0xff);
    ck_assert_uint_eq(wex__e4m3_word_quantized(-0.0f, 0.0f), 0x80);
}
END_TEST

START_TEST(floats_convert_with_rounding)
{
    float x[3] = {1.0f, wex__f32_of_bits(0x3f808001u), -256.5f};
    uint16_t b[3], h[3];
    float back[3];

    wex__convert_floats(WEX_DTYPE_F32, x, 3, WEX_DTYPE_BF16, b);
    ck_assert_uint_eq(b[1], 0x3f81); /* just above halfway: up */
    wex__convert_floats(WEX_DTYPE_BF16, b, 3, WEX_DTYPE_F16, h);
    wex__convert_floats(WEX_DTYPE_F16, h, 3, WEX_DTYPE_F32, back);
    ck_assert_float_eq(back[0], 1.0f);
    ck_assert_float_eq(back[2], -256.0f); /* bf16 kept 8 bits */
    ck_assert(wex__is_float_dtype(WEX_DTYPE_F16));
    ck_assert(!wex__is_float_dtype(WEX_DTYPE_F8_E4M3));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("transform");
    TCase *tc = tcase_create("transform");

    tcase_add_test(tc, e4m3_rounds_and_saturates_as_torch);
    tcase_add_test(tc, half_and_bfloat16_round_to_even);
    tcase_add_test(tc, a_block_quantizes_by_its_amax);
    tcase_add_test(tc, an_all_zero_block_uses_the_floor);
    tcase_add_test(tc, one_huge_value_sends_the_rest_to_subnormals_or_zero);
    tcase_add_test(tc, nan_propagates_through_amax);
    tcase_add_test(tc, a_nan_block_keeps_each_element_sign);
    tcase_add_test(tc, floats_convert_with_rounding);
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
