/*
 * The transforms a piece may carry between a source's dtype and a
 * destination's, over runs of contiguous elements (docs/design.md,
 * "Transforms"):
 *
 * fp8-block-128 (the quantization of the Hugging Face FP8 checkpoints,
 * DeepGEMM's per_block_cast_to_fp8, slime's and SGLang's): per 128 x 128
 * block of the canonical weight (partial blocks at the edges)
 *     amax      = max(|x|) over the block in float32, at least 1e-4
 *     mult      = 448 * (1 / amax)           (float32, rounded twice: how
 *                                             torch evaluates 448.0 / amax)
 *     element   = e4m3(x * mult)             (float32 product, numbers.h;
 *                                             x's sign where it is NaN)
 *     scale_inv = amax / 448                 (one float32 division; the
 *                                             weight_scale_inv entry)
 * and back: x = e4m3 * scale_inv in float32, rounded to the destination's
 * dtype. Between float dtypes (bf16, f16, f32): the value, rounded.
 *
 * amax propagates a NaN, as torch's amax does.
 */
#ifndef WEX_HOST_QUANTIZE_H
#define WEX_HOST_QUANTIZE_H

#include <stdint.h>

#include <wex/abi.h>

/* The name jobs and docs give the rule above. */
#define WEX__QUANT_RULE "fp8-block-128"
#define WEX__QUANT_BLOCK 128u
#define WEX__QUANT_AMAX_MIN 1e-4f

/* Nonzero for the dtypes a transform reads or writes as floats (BF16,
 * F16, F32). */
int wex__is_float_dtype(uint32_t dtype);

/* max(amax, |x|) over `n` elements of float dtype `dtype`. */
float wex__amax(uint32_t dtype, const void *src, uint64_t n, float amax);

/* What a block's elements are multiplied by, and its scale_inv entry. */
float wex__quant_mult(float amax);
float wex__quant_scale_inv(float amax);

/* dst[i] = e4m3(x_i * mult) for `n` elements of float dtype `dtype`. */
void wex__quantize_e4m3(uint32_t dtype, const void *src, uint64_t n, float mult,
                        uint8_t *dst);

/* dst[i] = round_dtype(e4m3_i * scale_inv) for `n` e4m3 elements. */
void wex__dequantize_e4m3(const uint8_t *src, uint64_t n, float scale_inv,
                          uint32_t dtype, void *dst);

/* A rows x cols box of whole blocks, row-major with row strides in
 * elements: block (i, j) is rows [128 i, 128 i + 128) and cols
 * [128 j, 128 j + 128) of the box (the last ones partial), quantized into
 * `dst` with its scale_inv at scales[i * scale_ld + j]. Each block is
 * read twice while it is still in cache: once for its amax, once to
 * quantize it. */
void wex__quantize_blocks(uint32_t dtype, const void *src, uint64_t src_ld,
                          uint64_t rows, uint64_t cols, uint8_t *dst,
                          uint64_t dst_ld, float *scales, uint64_t scale_ld);

/* Bytes of bf16 this CPU quantizes per second, one thread: the best of a
 * few passes over 4 MiB (about 10 ms), for the cost model. */
double wex__quantize_rate(void);

/* `n` values from float dtype `from` to float dtype `to`, rounded. */
void wex__convert_floats(uint32_t from, const void *src, uint64_t n,
                         uint32_t to, void *dst);

#endif /* WEX_HOST_QUANTIZE_H */
