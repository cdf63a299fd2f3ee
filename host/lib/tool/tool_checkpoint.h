/*
 * Hugging Face checkpoints as libwex reads and writes them (tool.h):
 * `wex check` and `wex run --from-checkpoint` open one against a model's
 * catalog; `wex run --save` asks first whether it can be saved.
 */
#ifndef WEX_TOOL_CHECKPOINT_H
#define WEX_TOOL_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include <wex/host.h>

typedef struct wex__checkpoint wex_tool_checkpoint;

/* Told one line per mismatch: "FILE: tensor NAME: expected ..., got ...". */
typedef void (*wex_tool_line_fn)(void *arg, const char *line);

/* Opens checkpoint directory `dir` (model.safetensors.index.json and
 * its shards, or model.safetensors) for `model`, mapped read-only. A
 * file that cannot be read or parsed fails at once, in one line; then
 * every canonical tensor must be there with the catalog's dtype and
 * shape: each that is not is told to `report` (may be NULL), and the
 * open fails naming the first and how many. Tensors the model lacks are
 * skipped (listed at info level). `model` must outlive the checkpoint. */
wex_status wex_tool_checkpoint_open(const char *dir, const wex_model *model,
                                    wex_tool_line_fn report, void *arg,
                                    wex_tool_checkpoint **ck_p);
void wex_tool_checkpoint_close(wex_tool_checkpoint *ck); /* NULL: no-op */
/* The files it is made of. */
size_t wex_tool_checkpoint_files(const wex_tool_checkpoint *ck);
/* The tensors it holds that the model does not, skipped. */
uint64_t wex_tool_checkpoint_skipped(const wex_tool_checkpoint *ck);

/* A tensor held as dtype `held` can be saved in a checkpoint storing it
 * as `stored`: the same dtype, or floats rounded (never an fp8 weight
 * held as floats, whose blocks would need quantizing). */
int wex_tool_checkpoint_savable(uint32_t held, uint32_t stored);
/* `dir` may be saved to: it does not exist, or is an empty directory. */
wex_status wex_tool_checkpoint_target_free(const char *dir);

#endif /* WEX_TOOL_CHECKPOINT_H */
