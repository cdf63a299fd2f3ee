/*
 * How an engine holds a model's tensors (docs/design.md, "Transforms"):
 * as the checkpoint stores them (an fp8 weight as e4m3 beside its block
 * scales), or every tensor as values of one float dtype, without the
 * block scales. Trainers hold floats (bf16 unless their options say
 * "fp16" or "fp32"); serving engines and hf hold the checkpoint unless
 * their options say "bf16".
 *
 * Names here start with ws_ ("wex shared", the engines' shared helpers):
 * they belong to plugins/engines/common, a static library private to the
 * in-tree engine adapters, and are no part of the SDK.
 */
#ifndef WEX_ENGINE_COMMON_HOLDING_H
#define WEX_ENGINE_COMMON_HOLDING_H

#include <wex/plugin.h>

/* options/dtype into the float dtype held (WEX_DTYPE_*), or 0 for the
 * checkpoint's. A trainer takes "bf16" (its default), "fp16", "fp32";
 * a serving engine "checkpoint" (its default) or "bf16". */
wex_status ws_read_holding(const wex_host_services *h,
                           const wex_options *options, int trainer,
                           uint32_t *hold_p);

/* Canonical tensor `index` is the block scales (`<weight>_scale_inv`) of
 * an fp8 weight: not held by an engine that holds floats. */
int ws_is_block_scale(const wex_host_services *h, const wex_model *model,
                      uint64_t index);

/* The dtype a tensor whose checkpoint dtype is `dtype` is held in, and
 * the transform its pieces carry. */
static inline uint32_t ws_held_dtype(uint32_t hold, uint32_t dtype)
{
    return hold ? hold : dtype;
}

static inline uint32_t ws_held_transform(uint32_t hold, uint32_t dtype)
{
    return hold && hold != dtype ? WEX_TRANSFORM_CONVERT : WEX_TRANSFORM_NONE;
}

#endif /* WEX_ENGINE_COMMON_HOLDING_H */
