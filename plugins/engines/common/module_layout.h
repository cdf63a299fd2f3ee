/*
 * How a transformers model's modules hold a checkpoint's tensors: the
 * `hf` and `fsdp` engines' options/modules.
 *
 * "checkpoint" (the default): every checkpoint tensor under its own name,
 * as it is stored: what a checkpoint loader or writer holds.
 *
 * "transformers-4": what a transformers 4.x model holds (4.57): the
 * checkpoint's tensors and names, but the layers past
 * config.num_hidden_layers (DeepSeek-V3's multi-token-prediction layer
 * 61), which transformers does not build and skips on load.
 *
 * "transformers-5": what a transformers 5.x model holds (5.25,
 * conversion_mapping.py and the models' modeling files): as 4.x, but
 * each MoE layer's routed experts are two stacked parameters,
 * `<mlp>.experts.gate_up_proj` [E, 2I, H] (expert e's gate rows at
 * [e, :I], then its up rows: MergeModulelist(dim=0), Concatenate(dim=1))
 * and `<mlp>.experts.down_proj` [E, H, I]; Mixtral's `block_sparse_moe`
 * is named `mlp`; and DeepSeek's top-k router (DeepseekV3TopkRouter,
 * `_keep_in_fp32_modules_strict`) holds `gate.weight` and
 * `gate.e_score_correction_bias` in float32 whatever the model's dtype.
 */
#ifndef WEX_ENGINE_COMMON_MODULE_LAYOUT_H
#define WEX_ENGINE_COMMON_MODULE_LAYOUT_H

#include <stddef.h>

#include <wex/plugin.h>

#define WS_MODULES_CHECKPOINT 0u
#define WS_MODULES_TRANSFORMERS_4 4u
#define WS_MODULES_TRANSFORMERS_5 5u

/* options/modules into WS_MODULES_* (absent: checkpoint). */
wex_status ws_read_modules(const wex_host_services *h,
                           const wex_options *options, uint32_t *modules_p);

/* A tensor a module holds. */
typedef struct ws_module_tensor {
    char *name;         /* owned */
    uint64_t canonical; /* its canonical tensor, or its first member's */
    /* 0: canonical tensor `canonical` alone, shaped as the checkpoint
     * shapes it; else that many experts stacked on a new dim 0, each
     * `parts` canonical tensors (1, or gate then up: 2) stacked on dim 1 */
    uint64_t experts;
    uint32_t parts;
    uint64_t *members; /* experts * parts canonical indices: [e * parts + p] */
    int fp32;          /* held in float32 whatever the holding */
} ws_module_tensor;

/* The tensors the model's modules hold under `modules`, in checkpoint
 * order (a stacked tensor where its first member is). `hold` is the
 * engine's holding (holding.h): block scales are left out where it holds
 * floats; stacking experts held as fp8 is refused. */
wex_status ws_module_tensors(const wex_host_services *h, const wex_model *model,
                             uint32_t modules, uint32_t hold,
                             ws_module_tensor **out_p, size_t *count_p);
void ws_module_tensors_free(ws_module_tensor *t, size_t count);

/* Module tensor `t`'s dim-0 rows [lo, hi) (hi past its rows: to the end)
 * as one local tensor of this rank, held per `hold`, with its pieces; a
 * local tensor with no rows (lo at or past the end) has none. */
wex_status ws_module_emit(const wex_host_services *h, const wex_model *model,
                          wex_layout_builder *b, const ws_module_tensor *t,
                          uint32_t hold, uint64_t lo, uint64_t hi);

/* Module tensor `t`'s dim-0 rows. */
uint64_t ws_module_rows(const wex_host_services *h, const wex_model *model,
                        const ws_module_tensor *t);

#endif /* WEX_ENGINE_COMMON_MODULE_LAYOUT_H */
