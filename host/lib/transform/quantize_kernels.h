/*
 * The entry points of libwex_cuda.so: the fp8-block-128 quantization as
 * CUDA kernels (host/cuda/quantize_kernels.cu), and a delta payload
 * applied in and encoded from device memory (host/cuda/delta_kernels.cu),
 * and an operation's digest taken there (host/cuda/digest_kernels.cu). libwex never
 * links CUDA: it dlopens this library the first time a job quantizes or
 * applies a delta in device memory (host/lib/job/device/device_kernels.c),
 * so this header is the contract between the two, versioned by
 * WEX_CUDA_KERNELS_ABI.
 *
 * A box is `rows` x `cols` elements of a float dtype (WEX_DTYPE_BF16,
 * F16, F32) in device memory, `ld` elements from the start of one row to
 * the next. Its element (0, 0) lies at row `row_phase`, column
 * `col_phase` of the 128 x 128 block that holds it (both below 128), so
 * the box meets a grid of cells: cell (i, j) is the part of the box in
 * the i-th block row and j-th block column it touches. Every call only
 * queues work on `stream` (a cudaStream_t) and returns a cudaError_t:
 * 0 when it was queued.
 */
#ifndef WEX_HOST_QUANTIZE_KERNELS_H
#define WEX_HOST_QUANTIZE_KERNELS_H

#include <stdint.h>

#define WEX_CUDA_KERNELS_ABI 4

#ifdef __cplusplus
extern "C" {
#endif

/* WEX_CUDA_KERNELS_ABI of the library. */
int wex_cuda_kernels_abi(void);

/* amax[i * cell_cols + j] = max |x| over cell (i, j), where cell_cols =
 * (col_phase + cols + 127) / 128: the largest absolute value's float32,
 * or a NaN if the cell holds one (as the CPU's wex__amax). */
int wex_cuda_box_amax(const void *src, uint32_t dtype, uint64_t ld,
                      uint64_t rows, uint64_t cols, uint32_t row_phase,
                      uint32_t col_phase, float *amax, void *stream);

/* dst[r * cols + c] = e4m3(x[r][c] * mult[i * mult_ld + j]) for the cell
 * (i, j) holding element (r, c): the bytes wex__quantize_e4m3 makes. */
int wex_cuda_box_quantize(const void *src, uint32_t dtype, uint64_t ld,
                          uint64_t rows, uint64_t cols, uint32_t row_phase,
                          uint32_t col_phase, const float *mult,
                          uint64_t mult_ld, uint8_t *dst, void *stream);

/* The `count` chunks at `chunks` (device memory, delta_chunks.h) of the
 * payload at `payload` (device memory) written into `dst` (device
 * memory), its stream placed as *map (host memory) says: a CUDA block a
 * chunk. */
struct wex_delta_chunk;
struct wex_delta_map;
int wex_cuda_delta_apply(const uint8_t *payload,
                         const struct wex_delta_chunk *chunks, uint32_t count,
                         const struct wex_delta_map *map, uint8_t *dst,
                         void *stream);

/* A delta encoded on the device (delta_scan_chunks.h), the count pass:
 * counts[c] = how many elements of chunk c of the `elems` elements at
 * `cur` (device memory, placed as *map, host memory, says) differ from
 * the snapshot `snap` (device memory, one contiguous stream); a CUDA
 * block a chunk. */
int wex_cuda_delta_count(const uint8_t *cur, const struct wex_delta_map *map,
                         const uint8_t *snap, uint64_t elems, uint32_t *counts,
                         void *stream);

/* The write pass: the `count` slots at `slots` (device memory, laid out
 * by wex__delta_slots) written into `payload` (device memory), and the
 * snapshot brought up to date; a NULL payload (it outgrew its room) only
 * brings the snapshot up to date. A CUDA block a slot. */
struct wex_delta_slot;
int wex_cuda_delta_encode(const uint8_t *cur, const struct wex_delta_map *map,
                          uint8_t *snap, const struct wex_delta_slot *slots,
                          uint32_t count, uint8_t *payload, void *stream);

/* The digests of the blocks of the `len` bytes at `stream` (device
 * memory, digest_blocks.h) into digests[] (device memory, a block
 * each); a last block of 240 bytes or fewer copied to tail[] (device
 * memory, 240 bytes) for the host to digest instead. A thread a block. */
int wex_cuda_digest_blocks(const uint8_t *stream, uint64_t len,
                           uint64_t *digests, uint8_t *tail,
                           void *stream_handle);

typedef int (*wex_cuda_kernels_abi_fn)(void);
typedef int (*wex_cuda_box_amax_fn)(const void *, uint32_t, uint64_t, uint64_t,
                                    uint64_t, uint32_t, uint32_t, float *,
                                    void *);
typedef int (*wex_cuda_box_quantize_fn)(const void *, uint32_t, uint64_t,
                                        uint64_t, uint64_t, uint32_t, uint32_t,
                                        const float *, uint64_t, uint8_t *,
                                        void *);
typedef int (*wex_cuda_delta_apply_fn)(const uint8_t *,
                                       const struct wex_delta_chunk *, uint32_t,
                                       const struct wex_delta_map *, uint8_t *,
                                       void *);
typedef int (*wex_cuda_delta_count_fn)(const uint8_t *,
                                       const struct wex_delta_map *,
                                       const uint8_t *, uint64_t, uint32_t *,
                                       void *);
typedef int (*wex_cuda_delta_encode_fn)(const uint8_t *,
                                        const struct wex_delta_map *, uint8_t *,
                                        const struct wex_delta_slot *, uint32_t,
                                        uint8_t *, void *);

typedef int (*wex_cuda_digest_blocks_fn)(const uint8_t *, uint64_t, uint64_t *,
                                         uint8_t *, void *);

#ifdef __cplusplus
}
#endif

#endif /* WEX_HOST_QUANTIZE_KERNELS_H */
