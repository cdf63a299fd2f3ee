/*
 * libwex's device quantization (device_memory.h: wex__device_box_amax,
 * wex__device_box_quantize_rows) against the CPU quantizer, element by
 * element, over boxes that start inside a 128 x 128 block and cross
 * block boundaries, quantized a few rows at a time (each chunk starting
 * at another phase), with NaN, infinity, subnormal and zero blocks.
 *
 *   test_device_quantize FAKE_CUDART.so   the fake runtime and kernels
 *                                         (tests/fakes), no GPU needed
 *   test_device_quantize                  the CUDA runtime and
 *                                         libwex_cuda.so on a GPU (exit
 *                                         77 where there is none)
 */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "device_memory.h"
#include "error.h"
#include "numbers.h"
#include "quantize.h"

#define ROWS 300
#define COLS 400

static uint16_t matrix[ROWS * COLS]; /* bf16, the canonical weight */

/* Values over many magnitudes; one block holds a NaN, one an infinity,
 * one only zeros, one only subnormal products. */
static void fill(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;

    for (size_t i = 0; i < ROWS * COLS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        matrix[i] =
            (uint16_t)(((x >> 8) & 0x80ffu) | ((0x70u + (x >> 40) % 24u) << 7));
    }
    matrix[5 * COLS + 7] = 0x7fc1;     /* NaN, block (0, 0) */
    matrix[130 * COLS + 260] = 0xff80; /* -inf, block (1, 2) */
    for (size_t r = 256; r < ROWS; r++)
        for (size_t c = 128; c < 256; c++)
            matrix[r * COLS + c] = (c & 1) ? 0x8000 : 0; /* block (2, 1) */
    matrix[260 * COLS + 300] = 0x4700; /* 32768, block (2, 2) */
}

typedef struct box {
    uint64_t r0, c0, rows, cols, chunk;
} box;

static void check_box(wex__device *dev, const void *dmatrix, const box *b)
{
    uint32_t rp = b->r0 % 128, cp = b->c0 % 128;
    uint64_t nbr = (rp + b->rows + 127) / 128, nbc = (cp + b->cols + 127) / 128;
    float *amax = calloc(nbr * nbc, sizeof(float));
    float *mult = calloc(nbr * nbc, sizeof(float));
    const unsigned char *src =
        (const unsigned char *)dmatrix + (b->r0 * COLS + b->c0) * 2;

    ck_assert_int_eq(wex__device_box_amax(dev, src, WEX_DTYPE_BF16, COLS,
                                          b->rows, b->cols, rp, cp, amax),
                     WEX_OK);
    for (uint64_t i = 0; i < nbr; i++)
        for (uint64_t j = 0; j < nbc; j++) {
            float want = 0.0f;
            for (uint64_t r = 0; r < b->rows; r++)
                if ((r + rp) / 128 == i) {
                    uint64_t c0 = j * 128 > cp ? j * 128 - cp : 0;
                    uint64_t c1 = (j + 1) * 128 - cp;
                    c1 = c1 < b->cols ? c1 : b->cols;
                    want = wex__amax(WEX_DTYPE_BF16,
                                     &matrix[(b->r0 + r) * COLS + b->c0 + c0],
                                     c1 - c0, want);
                }
            ck_assert_msg(wex__f32_bits(amax[i * nbc + j]) ==
                              wex__f32_bits(want),
                          "box at (%llu, %llu): cell (%llu, %llu) amax %a, "
                          "the CPU's %a",
                          (unsigned long long)b->r0, (unsigned long long)b->c0,
                          (unsigned long long)i, (unsigned long long)j,
                          amax[i * nbc + j], want);
            mult[i * nbc + j] = wex__quant_mult(want);
        }
    for (uint64_t first = 0; first < b->rows; first += b->chunk) {
        uint64_t n = b->rows - first < b->chunk ? b->rows - first : b->chunk;
        const unsigned char *host = NULL;
        ck_assert_int_eq(wex__device_box_quantize_rows(
                             dev, src, WEX_DTYPE_BF16, COLS, b->cols, rp, cp,
                             mult, nbc, first, n, (const void **)&host),
                         WEX_OK);
        ck_assert_ptr_nonnull(host);
        for (uint64_t r = 0; r < n; r++)
            for (uint64_t c = 0; c < b->cols; c++) {
                uint8_t want;
                float m = mult[(first + r + rp) / 128 * nbc + (c + cp) / 128];
                wex__quantize_e4m3(
                    WEX_DTYPE_BF16,
                    &matrix[(b->r0 + first + r) * COLS + b->c0 + c], 1, m,
                    &want);
                ck_assert_msg(
                    host[r * b->cols + c] == want,
                    "box at (%llu, %llu), row %llu col %llu: "
                    "0x%02x, the CPU's 0x%02x",
                    (unsigned long long)b->r0, (unsigned long long)b->c0,
                    (unsigned long long)(first + r), (unsigned long long)c,
                    host[r * b->cols + c], want);
            }
        wex__device_stage_reset(dev);
    }
    free(amax);
    free(mult);
}

START_TEST(device_quantization_is_the_cpu_quantization)
{
    static const box boxes[] = {
        {0, 0, ROWS, COLS, ROWS}, /* whole, aligned, one chunk */
        {0, 0, ROWS, COLS, 37},   /* chunks starting at other phases */
        {64, 64, 192, 200, 50},   /* inside blocks, crossing them */
        {127, 255, 140, 145, 1},  /* one row at a time */
        {200, 3, 100, 397, 129},
    };
    wex__device *dev = NULL;
    void *dmatrix = NULL;

    ck_assert_int_eq(wex__device_open(&dev), WEX_OK);
    ck_assert_int_eq(wex__device_alloc(dev, sizeof(matrix), &dmatrix), WEX_OK);
    ck_assert_int_eq(wex__device_copy_in(dev, dmatrix, matrix, sizeof(matrix)),
                     WEX_OK);
    ck_assert_int_eq(wex__device_copy_in_end(dev), WEX_OK);
    for (size_t k = 0; k < sizeof(boxes) / sizeof(boxes[0]); k++)
        check_box(dev, dmatrix, &boxes[k]);
    wex__device_free(dev, dmatrix);
    wex__device_close(dev);
}
END_TEST

/* The aligned whole matches wex__quantize_blocks, scales included. */
START_TEST(a_whole_weight_matches_quantize_blocks)
{
    enum { NBR = (ROWS + 127) / 128, NBC = (COLS + 127) / 128 };
    static uint8_t want[ROWS * COLS];
    float scales[NBR * NBC], amax[NBR * NBC], mult[NBR * NBC];
    wex__device *dev = NULL;
    const unsigned char *host = NULL;
    void *dmatrix = NULL;

    wex__quantize_blocks(WEX_DTYPE_BF16, matrix, COLS, ROWS, COLS, want, COLS,
                         scales, NBC);
    ck_assert_int_eq(wex__device_open(&dev), WEX_OK);
    ck_assert_int_eq(wex__device_alloc(dev, sizeof(matrix), &dmatrix), WEX_OK);
    ck_assert_int_eq(wex__device_copy_in(dev, dmatrix, matrix, sizeof(matrix)),
                     WEX_OK);
    ck_assert_int_eq(wex__device_copy_in_end(dev), WEX_OK);
    ck_assert_int_eq(wex__device_box_amax(dev, dmatrix, WEX_DTYPE_BF16, COLS,
                                          ROWS, COLS, 0, 0, amax),
                     WEX_OK);
    for (int c = 0; c < NBR * NBC; c++) {
        ck_assert_uint_eq(wex__f32_bits(wex__quant_scale_inv(amax[c])),
                          wex__f32_bits(scales[c]));
        mult[c] = wex__quant_mult(amax[c]);
    }
    ck_assert_int_eq(wex__device_box_quantize_rows(
                         dev, dmatrix, WEX_DTYPE_BF16, COLS, COLS, 0, 0, mult,
                         NBC, 0, ROWS, (const void **)&host),
                     WEX_OK);
    ck_assert_ptr_nonnull(host);
    ck_assert_int_eq(memcmp(host, want, sizeof(want)), 0);
    wex__device_free(dev, dmatrix);
    wex__device_close(dev);
}
END_TEST

/* A kernels library that is missing, or is not one, is refused in one
 * line naming it, and nothing is left loaded half-way. */
START_TEST(a_wrong_kernels_library_is_refused)
{
    static const struct {
        const char *path, *says;
    } cases[] = {
        {"/nonexistent/libwex_cuda.so", "WEX_CUDA_KERNELS: /nonexistent"},
        {"libc.so.6", "is not the kernels library of this libwex"},
    };
    float amax[1];

    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        wex__device *dev = NULL;
        void *d = NULL;
        setenv("WEX_CUDA_KERNELS", cases[k].path, 1);
        ck_assert_int_eq(wex__device_open(&dev), WEX_OK);
        ck_assert_int_eq(wex__device_alloc(dev, 256, &d), WEX_OK);
        ck_assert_int_eq(wex__device_box_amax(dev, d, WEX_DTYPE_BF16, 128, 1,
                                              128, 0, 0, amax),
                         WEX_ERR_UNSUPPORTED);
        ck_assert_msg(strstr(wex_last_error(), cases[k].says) != NULL &&
                          strstr(wex_last_error(), "libwex_cuda.so") != NULL,
                      "%s: %s", cases[k].path, wex_last_error());
        ck_assert_ptr_null(strchr(wex_last_error(), '\n'));
        wex__device_free(dev, d);
        wex__device_close(dev);
    }
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s;
    TCase *tc;
    SRunner *sr;
    wex__device *probe = NULL;
    int failed;

    if (argc > 1) {
        setenv("WEX_CUDA_RUNTIME", argv[1], 1);
        setenv("WEX_CUDA_KERNELS", argv[1], 1);
    }
    if (wex__device_open(&probe) != WEX_OK) {
        printf("skipped: %s\n", wex_last_error());
        return 77;
    }
    wex__device_close(probe);
    fill();
    s = suite_create("device_quantize");
    tc = tcase_create("device_quantize");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, device_quantization_is_the_cpu_quantization);
    tcase_add_test(tc, a_whole_weight_matches_quantize_blocks);
    tcase_add_test(tc, a_wrong_kernels_library_is_refused);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
