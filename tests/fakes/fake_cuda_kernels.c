/*
 * The quantization kernels of libwex_cuda.so (quantize_kernels.h), run on
 * the CPU over the fake runtime's "device" memory, so the tests drive
 * libwex's device quantization (cells, phases, rows in chunks, staging,
 * amaxes agreed between sources) on machines without a GPU. Each element
 * takes the conversions of numbers.h, as the CUDA kernels do; those
 * kernels themselves are checked against the CPU quantizer on a GPU
 * (tests/gpu/gpu_quantize.c).
 */
#include <stddef.h>
#include <stdint.h>

#include <wex/abi.h>

#include "delta_chunks.h"
#include "delta_scan_chunks.h"
#include "digest_blocks.h"
#include "numbers.h"
#include "quantize_kernels.h"

#define INVALID 1    /* cudaErrorInvalidValue */
#define INJECTED 999 /* fake_cudart.c's ERR_INJECTED */

unsigned char *fake_cuda_reach(const void *ptr, size_t *left);
int fake_cuda_injected(const char *entry);

static float load(uint32_t dtype, const unsigned char *src, uint64_t i)
{
    if (dtype == WEX_DTYPE_BF16)
        return wex__bf16_to_f32(((const uint16_t *)src)[i]);
    if (dtype == WEX_DTYPE_F16)
        return wex__f16_to_f32(((const uint16_t *)src)[i]);
    return ((const float *)src)[i];
}

/* The host alias of a device box of rows x cols elements, ld apart, or
 * NULL when it runs past its allocation. */
static const unsigned char *box(const void *src, uint32_t dtype, uint64_t ld,
                                uint64_t rows, uint64_t cols)
{
    size_t left;
    const unsigned char *p = fake_cuda_reach(src, &left);
    uint64_t need = ((rows - 1) * ld + cols) * wex_dtype_size(dtype);

    return need <= left ? p : NULL;
}

int wex_cuda_kernels_abi(void)
{
    return WEX_CUDA_KERNELS_ABI;
}

int wex_cuda_box_amax(const void *src, uint32_t dtype, uint64_t ld,
                      uint64_t rows, uint64_t cols, uint32_t row_phase,
                      uint32_t col_phase, float *amax, void *stream)
{
    uint64_t nbc = (col_phase + cols + 127) / 128;
    uint64_t nbr = (row_phase + rows + 127) / 128;
    const unsigned char *s = box(src, dtype, ld, rows, cols);
    size_t left;
    float *out = (float *)fake_cuda_reach(amax, &left);

    (void)stream;
    if (fake_cuda_injected("wex_cuda_box_amax"))
        return INJECTED;
    if (s == NULL || row_phase >= 128 || col_phase >= 128 ||
        left < nbr * nbc * sizeof(float))
        return INVALID;
    for (uint64_t c = 0; c < nbr * nbc; c++)
        out[c] = 0.0f;
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            float *cell =
                &out[(r + row_phase) / 128 * nbc + (c + col_phase) / 128];
            uint32_t a =
                wex__f32_bits(load(dtype, s, r * ld + c)) & 0x7fffffffu;
            if (a > wex__f32_bits(*cell))
                *cell = wex__f32_of_bits(a);
        }
    return 0;
}

int wex_cuda_box_quantize(const void *src, uint32_t dtype, uint64_t ld,
                          uint64_t rows, uint64_t cols, uint32_t row_phase,
                          uint32_t col_phase, const float *mult,
                          uint64_t mult_ld, uint8_t *dst, void *stream)
{
    const unsigned char *s = box(src, dtype, ld, rows, cols);
    size_t mleft, dleft;
    const float *m = (const float *)fake_cuda_reach(mult, &mleft);
    uint8_t *d = fake_cuda_reach(dst, &dleft);

    (void)stream;
    if (fake_cuda_injected("wex_cuda_box_quantize"))
        return INJECTED;
    if (s == NULL || row_phase >= 128 || col_phase >= 128 ||
        dleft < rows * cols ||
        mleft < ((row_phase + rows + 127) / 128) * mult_ld * sizeof(float))
        return INVALID;
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            d[r * cols + c] = (uint8_t)wex__e4m3_word_quantized(
                load(dtype, s, r * ld + c),
                m[(r + row_phase) / 128 * mult_ld + (c + col_phase) / 128]);
    return 0;
}

/* The delta kernel: each chunk by the chunk program of delta_chunks.h,
 * as a CUDA block of THREADS threads runs it, its threads one after the
 * other (three, so that the bitmap's parts come out uneven). */
#define THREADS 3u

int wex_cuda_delta_apply(const uint8_t *payload,
                         const struct wex_delta_chunk *chunks, uint32_t count,
                         const struct wex_delta_map *map, uint8_t *dst,
                         void *stream)
{
    size_t pleft, cleft, dleft;
    const uint8_t *p = fake_cuda_reach(payload, &pleft);
    const wex_delta_chunk *c =
        (const wex_delta_chunk *)fake_cuda_reach(chunks, &cleft);
    uint8_t *d = fake_cuda_reach(dst, &dleft);

    (void)stream;
    if (fake_cuda_injected("wex_cuda_delta_apply"))
        return INJECTED;
    if (cleft < (size_t)count * sizeof(*c) || map->elem == 0 ||
        map->run_elems == 0 || map->outer > WEX_DELTA_MAP_DIMS)
        return INVALID;
    for (uint32_t k = 0; k < count; k++) {
        uint32_t before[THREADS], sum = 0;
        for (uint32_t t = 0; t < THREADS; t++)
            before[t] = wex_delta_count(&c[k], p, t, THREADS);
        for (uint32_t t = 0; t < THREADS; t++) {
            uint32_t v = before[t];
            before[t] = sum;
            sum += v;
        }
        for (uint32_t t = 0; t < THREADS; t++)
            wex_delta_emit(&c[k], p, t, THREADS, before[t], map, d);
    }
    (void)pleft;
    (void)dleft;
    return 0;
}

/* The delta encoder's passes (delta_scan_chunks.h), each group's threads
 * one after the other, THREADS of them. */
int wex_cuda_delta_count(const uint8_t *cur, const struct wex_delta_map *map,
                         const uint8_t *snap, uint64_t elems, uint32_t *counts,
                         void *stream)
{
    uint64_t chunks =
        (elems + WEX_DELTA_CHUNK_ELEMS - 1) / WEX_DELTA_CHUNK_ELEMS;
    size_t sleft, kleft, cleft;
    const uint8_t *c = fake_cuda_reach(cur, &cleft);
    const uint8_t *s = fake_cuda_reach(snap, &sleft);
    uint32_t *k = (uint32_t *)fake_cuda_reach(counts, &kleft);

    (void)stream;
    if (fake_cuda_injected("wex_cuda_delta_count"))
        return INJECTED;
    if (c == NULL || s == NULL || k == NULL || sleft < elems * map->elem ||
        kleft < chunks * sizeof(uint32_t) || map->elem == 0 ||
        map->run_elems == 0 || map->outer > WEX_DELTA_MAP_DIMS ||
        (elems > 0 && wex_delta_place(map, elems - 1) + map->elem > cleft))
        return INVALID;
    for (uint64_t x = 0; x < chunks; x++) {
        uint64_t base = x * WEX_DELTA_CHUNK_ELEMS;
        uint32_t u = (uint32_t)(elems - base < WEX_DELTA_CHUNK_ELEMS
                                    ? elems - base
                                    : WEX_DELTA_CHUNK_ELEMS);
        k[x] = wex_delta_scan_count_serial(c, map, s, base, u, THREADS);
    }
    return 0;
}

int wex_cuda_delta_encode(const uint8_t *cur, const struct wex_delta_map *map,
                          uint8_t *snap, const struct wex_delta_slot *slots,
                          uint32_t count, uint8_t *payload, void *stream)
{
    size_t cleft, sleft, lleft, pleft = 0;
    const uint8_t *c = fake_cuda_reach(cur, &cleft);
    uint8_t *s = fake_cuda_reach(snap, &sleft);
    const wex_delta_slot *l =
        (const wex_delta_slot *)fake_cuda_reach(slots, &lleft);
    uint8_t *p = payload != NULL ? fake_cuda_reach(payload, &pleft) : NULL;

    (void)stream;
    if (fake_cuda_injected("wex_cuda_delta_encode"))
        return INJECTED;
    if (c == NULL || s == NULL || l == NULL || (payload != NULL && p == NULL) ||
        lleft < (size_t)count * sizeof(*l) || map->elem == 0 ||
        map->run_elems == 0 || map->outer > WEX_DELTA_MAP_DIMS)
        return INVALID;
    for (uint32_t k = 0; k < count; k++) {
        uint64_t end = l[k].base + l[k].u;
        if ((l[k].u > 0 &&
             (end * map->elem > sleft ||
              wex_delta_place(map, end - 1) + map->elem > cleft)) ||
            (p != NULL && l[k].head_at + l[k].head_len > pleft))
            return INVALID;
        wex_delta_scan_write_serial(&l[k], c, map, s, THREADS, p);
    }
    return 0;
}

/* The digest kernel: each block by digest_blocks.h's program. */
int wex_cuda_digest_blocks(const uint8_t *stream, uint64_t len,
                           uint64_t *digests, uint8_t *tail,
                           void *stream_handle)
{
    uint64_t count = wex_digest_block_count(len);
    size_t sleft, dleft, tleft;
    const uint8_t *s = fake_cuda_reach(stream, &sleft);
    uint64_t *d = (uint64_t *)fake_cuda_reach(digests, &dleft);
    uint8_t *t = fake_cuda_reach(tail, &tleft);

    (void)stream_handle;
    if (fake_cuda_injected("wex_cuda_digest_blocks"))
        return INJECTED;
    if (s == NULL || d == NULL || t == NULL || sleft < len ||
        dleft < count * sizeof(*d) || tleft < WEX_XXH3_MIDSIZE_MAX)
        return INVALID;
    for (uint64_t b = 0; b < count; b++)
        wex_digest_one_block(s, len, b, d, t);
    return 0;
}
