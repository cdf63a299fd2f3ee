/*
 * Reading an engine's parallel config: the sizes it supports, a refusal
 * for sizes it does not, and the pipeline stage split.
 *
 * Names here start with ws_ ("wex shared", the engines' shared helpers):
 * they belong to plugins/engines/common, a static library private to the
 * in-tree engine adapters, and are no part of the SDK.
 */
#ifndef WEX_ENGINE_COMMON_PARALLEL_CFG_H
#define WEX_ENGINE_COMMON_PARALLEL_CFG_H

#include <wex/plugin.h>

/* Reads the integer sizes named in `keys` (NULL-terminated, without the
 * leading '/') into `values`, 1 when absent. Any other size key set to
 * something other than 1 is refused with a message naming the engine and
 * what it supports. Keys in `extra` (pp_layers, ...) are allowed and left
 * to the caller. */
wex_status ws_parallel_read(const wex_host_services *host,
                            const wex_options *parallel, const char *engine,
                            const char *const *keys, const char *const *extra,
                            int64_t *values);

/* Layers per pipeline stage. `counts` receives pp entries.
 *  - pp_layers, when given, is taken as is (it must have pp entries that
 *    add up to `layers`);
 *  - first_stage_layers / last_stage_layers (Megatron) fix the ends and the
 *    middle stages split the rest evenly, which must divide;
 *  - otherwise `even` (Megatron) requires layers % pp == 0, and the
 *    vLLM-style split (even = 0) gives the remainder to the stages just
 *    before the last one. */
wex_status ws_pp_split(const wex_host_services *host,
                       const wex_options *parallel, const char *engine,
                       int64_t layers, int64_t pp, int even, int64_t *counts);

/* The same split as a table: (*first_p)[s] is the first layer of stage s
 * and (*first_p)[pp] the layer count; free() it. */
wex_status ws_stage_table(const wex_host_services *host,
                          const wex_options *parallel, const char *engine,
                          int64_t layers, int64_t pp, int even,
                          int64_t **first_p);

/* Rank decomposition: rank = ((c0 * n1 + c1) * n2 + c2) ... with the last
 * size varying fastest. */
void ws_unrank(uint64_t rank, const int64_t *sizes, int n, int64_t *coords);

#endif /* WEX_ENGINE_COMMON_PARALLEL_CFG_H */
