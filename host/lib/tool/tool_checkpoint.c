/* Checkpoints for the command (tool_checkpoint.h): checkpoint/. */
#include <stdlib.h>

#include "checkpoint.h"
#include "error.h"
#include "tool_checkpoint.h"

wex_status wex_tool_checkpoint_open(const char *dir, const wex_model *model,
                                    wex_tool_line_fn report, void *arg,
                                    wex_tool_checkpoint **ck_p)
{
    wex__checkpoint *ck = calloc(1, sizeof(*ck));
    wex_status st;

    *ck_p = NULL;
    if (ck == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    /* a failed open leaves nothing to close */
    st = wex__checkpoint_open(dir, model, report, arg, ck);
    if (st != WEX_OK) {
        free(ck);
        return st;
    }
    *ck_p = ck;
    return WEX_OK;
}

void wex_tool_checkpoint_close(wex_tool_checkpoint *ck)
{
    if (ck == NULL)
        return;
    wex__checkpoint_close(ck);
    free(ck);
}

size_t wex_tool_checkpoint_files(const wex_tool_checkpoint *ck)
{
    return ck->nfiles;
}

uint64_t wex_tool_checkpoint_skipped(const wex_tool_checkpoint *ck)
{
    return ck->extra;
}

int wex_tool_checkpoint_savable(uint32_t held, uint32_t stored)
{
    return wex__ckpt_savable(held, stored);
}

wex_status wex_tool_checkpoint_target_free(const char *dir)
{
    return wex__ckpt_target_free(dir);
}
