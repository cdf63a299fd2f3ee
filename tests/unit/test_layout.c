/* The layout builder refuses pieces that do not fit, naming what is wrong. */
#include <check.h>
#include <string.h>

#include "check_run.h"
#include "error.h"
#include "layout.h"

static wex_model *model;
static wex__rank_layout layout;
static wex_layout_builder builder;
static uint64_t tensor;
static const uint64_t zeros[WEX_MAX_DIMS];

static void setup(void)
{
    static const uint64_t shape[2] = {1024, 1024};
    wex_local_tensor_desc d = {sizeof(d), WEX_DTYPE_BF16, 2, 0, "local", shape};

    ck_assert_int_eq(
        wex__model_load(WEX_MODELS_DIR "/Qwen3-0.6B.config.json", &model),
        WEX_OK);
    wex__rank_layout_init(&layout, 3);
    builder.model = model;
    builder.out = &layout;
    ck_assert_int_eq(wex__layout_add_tensor(&builder, &d, &tensor), WEX_OK);
    ck_assert_uint_eq(layout.bytes, 1024 * 1024 * 2);
}

static void teardown(void)
{
    wex__rank_layout_fini(&layout);
    wex__model_free(model);
}

static wex_status add(const char *canonical, const uint64_t *offset,
                      const uint64_t *extent, const uint64_t *at)
{
    int64_t index = wex__model_find(model, canonical);
    wex_piece_desc p = {
        sizeof(p), WEX_TRANSFORM_NONE, (uint64_t)index, offset, extent, at};

    ck_assert_int_ge(index, 0);
    return wex__layout_add_piece(&builder, tensor, &p);
}

START_TEST(piece_inside_both_tensors_is_kept)
{
    const uint64_t ext[2] = {512, 1024}, at[2] = {512, 0}, off[2] = {1024, 0};

    ck_assert_int_eq(
        add("model.layers.0.self_attn.q_proj.weight", off, ext, at), WEX_OK);
    ck_assert_uint_eq(layout.piece_count, 1);
    ck_assert_uint_eq(layout.pieces[0].offset[0], 1024);
    ck_assert_uint_eq(layout.pieces[0].at[0], 512);
}
END_TEST

START_TEST(piece_overflowing_the_local_tensor)
{
    const uint64_t ext[2] = {1024, 1024}, at[2] = {512, 0};

    ck_assert_int_eq(
        add("model.layers.0.self_attn.q_proj.weight", zeros, ext, at),
        WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(),
               "rank 3: local tensor local: piece of "
               "model.layers.0.self_attn.q_proj.weight overflows dim 0"));
    ck_assert_uint_eq(layout.piece_count, 0);
}
END_TEST

START_TEST(piece_outside_the_canonical_tensor)
{
    const uint64_t ext[2] = {512, 1024}, off[2] = {1800, 0};

    ck_assert_int_eq(
        add("model.layers.0.self_attn.q_proj.weight", off, ext, zeros),
        WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(),
               "is outside model.layers.0.self_attn.q_proj.weight's 2048"));
}
END_TEST

START_TEST(piece_needing_a_dtype_conversion)
{
    static const uint64_t shape[1] = {1024};
    wex_local_tensor_desc d = {sizeof(d), WEX_DTYPE_F32, 1, 0, "norm32", shape};
    const uint64_t ext[1] = {128};
    uint64_t t32;
    int64_t index =
        wex__model_find(model, "model.layers.0.self_attn.q_norm.weight");
    wex_piece_desc p = {
        sizeof(p), WEX_TRANSFORM_NONE, (uint64_t)index, zeros, ext, zeros};

    ck_assert_int_eq(wex__layout_add_tensor(&builder, &d, &t32), WEX_OK);
    ck_assert_int_eq(wex__layout_add_piece(&builder, t32, &p), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(),
                                 "norm32 (F32): piece of "
                                 "model.layers.0.self_attn.q_norm.weight "
                                 "(BF16) needs a dtype conversion"));
}
END_TEST

/* fp8 asked for a tensor no FP8 checkpoint stores in fp8 (Qwen3-0.6B is
 * bf16 throughout; in DeepSeek-V3's FP8 checkpoint too, norms, embeddings,
 * router gates and lm_head stay bf16), with or without a conversion. */
START_TEST(fp8_for_a_tensor_no_fp8_checkpoint_quantizes)
{
    static const uint64_t shape[1] = {1024};
    wex_local_tensor_desc d = {sizeof(d), WEX_DTYPE_F8_E4M3, 1,
                               0,         "norm8",           shape};
    const uint64_t ext[1] = {1024};
    uint64_t t8;
    int64_t index = wex__model_find(model, "model.norm.weight");

    ck_assert_int_eq(wex__layout_add_tensor(&builder, &d, &t8), WEX_OK);
    for (uint32_t transform = WEX_TRANSFORM_NONE;
         transform <= WEX_TRANSFORM_CONVERT; transform++) {
        wex_piece_desc p = {sizeof(p), transform, (uint64_t)index,
                            zeros,     ext,       zeros};
        ck_assert_int_eq(wex__layout_add_piece(&builder, t8, &p),
                         WEX_ERR_INVALID);
        ck_assert_ptr_nonnull(
            strstr(wex__last_error(),
                   "local tensor norm8 (F8_E4M3): piece of model.norm.weight "
                   "(BF16): an FP8 checkpoint stores no such tensor in fp8"));
    }
    ck_assert_uint_eq(layout.piece_count, 0);
}
END_TEST

START_TEST(piece_naming_no_canonical_tensor_or_local_tensor)
{
    wex_piece_desc p = {sizeof(p), WEX_TRANSFORM_NONE, 1u << 30, zeros, zeros,
                        zeros};

    ck_assert_int_eq(wex__layout_add_piece(&builder, tensor, &p),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(
        wex__last_error(), "piece names canonical tensor 1073741824 of 310"));
    ck_assert_int_eq(wex__layout_add_piece(&builder, 7, &p), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(), "rank 3: piece for local tensor 7 of 1"));
}
END_TEST

START_TEST(tensor_with_bad_dtype_or_rank)
{
    static const uint64_t shape[1] = {4};
    wex_local_tensor_desc d = {sizeof(d), 99, 1, 0, "odd", shape};
    uint64_t t;

    ck_assert_int_eq(wex__layout_add_tensor(&builder, &d, &t), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(), "local tensor odd: bad dtype 99"));
    d.dtype = WEX_DTYPE_BF16;
    d.ndim = 0;
    ck_assert_int_eq(wex__layout_add_tensor(&builder, &d, &t), WEX_ERR_INVALID);
    ck_assert_uint_eq(layout.tensor_count, 1);
}
END_TEST

START_TEST(coords_are_set_and_overwritten)
{
    ck_assert_int_eq(wex__layout_set_coord(&builder, "tp", 1), WEX_OK);
    ck_assert_int_eq(wex__layout_set_coord(&builder, "tp", 2), WEX_OK);
    ck_assert_int_eq(wex__layout_set_coord(&builder, "", 2), WEX_ERR_INVALID);
    ck_assert_uint_eq(layout.coord_count, 1);
    ck_assert_int_eq(layout.coords[0].value, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("builder");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, piece_inside_both_tensors_is_kept);
    tcase_add_test(tc, piece_overflowing_the_local_tensor);
    tcase_add_test(tc, piece_outside_the_canonical_tensor);
    tcase_add_test(tc, piece_needing_a_dtype_conversion);
    tcase_add_test(tc, fp8_for_a_tensor_no_fp8_checkpoint_quantizes);
    tcase_add_test(tc, piece_naming_no_canonical_tensor_or_local_tensor);
    tcase_add_test(tc, tensor_with_bad_dtype_or_rank);
    tcase_add_test(tc, coords_are_set_and_overwritten);
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
