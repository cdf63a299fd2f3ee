/*
 * fuzz_plan_share: the plan share decoder (wex__share_decode) on
 * arbitrary payloads, read as source rank 0's share and as destination
 * rank 0's. A share passes its key and checksum before it is decoded,
 * so only damage the checksum misses, or a bug of the writer, reaches
 * it; still, what it accepts must keep every promise the runtime relies
 * on (each operation is this rank's and names tensors the share holds,
 * each piece a tensor of its rank), and what it refuses it says and
 * frees.
 */
#include <stdint.h>
#include <string.h>

#include "plan_share.h"
#include "plan_share_format.h"

#include "fuzz_util.h"

static int known(const wex__side *s, uint64_t rank, uint64_t tensor)
{
    return rank < s->ranks && tensor < s->layouts[rank].tensor_count &&
           s->layouts[rank].tensors[tensor].name != NULL;
}

static void check_accepted(const wex__planner *p, uint32_t side,
                           const wex_plan_builder *b)
{
    const wex__side *mine = side == WEX_SIDE_SOURCE ? &p->src : &p->dst;
    const wex__rank_layout *l;

    FUZZ_CHECK(mine->ranks > 0 && p->kept_cells != NULL &&
               p->replicated != NULL);
    l = &mine->layouts[0];
    for (size_t i = 0; i < l->piece_count; i++) {
        FUZZ_CHECK(l->pieces[i].tensor < l->tensor_count);
        FUZZ_CHECK(l->pieces[i].ndim <= WEX_MAX_DIMS);
    }
    for (size_t i = 0; i < l->tensor_count; i++)
        FUZZ_CHECK(l->tensors[i].name != NULL &&
                   l->tensors[i].ndim <= WEX_MAX_DIMS);
    for (size_t i = 0; i < b->count; i++) {
        const wex__op *o = &b->ops[i];
        FUZZ_CHECK((side == WEX_SIDE_SOURCE ? o->src_rank : o->dst_rank) == 0);
        FUZZ_CHECK(known(&p->src, o->src_rank, o->src_tensor));
        FUZZ_CHECK(known(&p->dst, o->dst_rank, o->dst_tensor));
        FUZZ_CHECK(o->ndim <= WEX_MAX_DIMS && o->src_ndim <= WEX_MAX_DIMS &&
                   o->dst_ndim <= WEX_MAX_DIMS);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    for (uint32_t side = 0; side < 2; side++) {
        wex__planner p;
        wex_plan_builder b;
        const char *bad;

        memset(&p, 0, sizeof(p));
        wex__plan_builder_init(&b, &p.src, &p.dst);
        bad = wex__share_decode(&p, data, size, side, 0, &b);
        if (bad == NULL)
            check_accepted(&p, side, &b);
        else
            FUZZ_CHECK(bad[0] != '\0');
        wex__plan_builder_fini(&b);
        wex__planner_close(&p);
    }
    return 0;
}
