/*
 * The values of the test oracle: what a source rank writes into element
 * `element` (row-major in its canonical tensor) of canonical tensor
 * `canonical` at step `step`, as a pure function of the three, in the
 * dtype the rank holds the tensor in:
 *  - bf16, f16, f32: a finite number, 0 or of magnitude 2^-6 to 2^2
 *    (normal in every one of them), rounded to the dtype, so converting
 *    and quantizing them stays finite;
 *  - e4m3: any finite code;
 *  - the rest: the raw bits of a 64-bit hash.
 */
#ifndef WEX_HOST_SYNTH_VALUES_H
#define WEX_HOST_SYNTH_VALUES_H

#include <stdint.h>

/* Every element takes a new value at every step (1, the default), or
 * only a fraction of them do at each (`wex run --changed`): the same
 * elements on every rank, so destinations still check every element. */
void wex__synth_set_changed(double fraction);

/* Writes wex_dtype_size(dtype) bytes into `out`. */
void wex__synth_value(uint32_t dtype, uint64_t canonical, uint64_t element,
                      uint64_t step, void *out);

/* The same element as a float32 (bf16, f16, f32 and e4m3 only). */
float wex__synth_float(uint32_t dtype, uint64_t canonical, uint64_t element,
                       uint64_t step);

/* max |x| over block (br, bc) (128 x 128, partial at the edges) of the
 * 2-d canonical tensor `canonical` of `rows` x `cols`, its elements held
 * in float dtype `dtype`. */
float wex__synth_block_amax(uint32_t dtype, uint64_t canonical, uint64_t rows,
                            uint64_t cols, uint64_t br, uint64_t bc,
                            uint64_t step);

#endif /* WEX_HOST_SYNTH_VALUES_H */
