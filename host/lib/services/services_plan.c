#include "services_plan.h"

#include <string.h>

#include "abi_copy.h"
#include "plan.h"
#include "side.h"

static uint64_t svc_rank_count(const wex_layout *side)
{
    return side ? side->ranks : 0;
}

static uint64_t svc_host(const wex_layout *side, uint64_t rank)
{
    return side && rank < side->ranks ? side->hosts[rank] : UINT64_MAX;
}

static wex_status svc_tensor(const wex_layout *side, uint64_t rank,
                             uint64_t tensor, wex_local_tensor_desc *desc)
{
    const wex__local_tensor *t;
    wex_local_tensor_desc full;

    if (side == NULL || desc == NULL || rank >= side->ranks ||
        tensor >= side->layouts[rank].tensor_count)
        return WEX_ERR_INVALID;
    t = &side->layouts[rank].tensors[tensor];
    memset(&full, 0, sizeof(full));
    full.dtype = t->dtype;
    full.ndim = t->ndim;
    full.name = t->name;
    full.shape = t->shape;
    wex__abi_out(desc, &full, sizeof(full));
    return WEX_OK;
}

static void give_view(const wex_layout *side, uint64_t rank, uint64_t piece,
                      wex_piece_view *out)
{
    wex_piece_view full;

    memset(&full, 0, sizeof(full));
    wex__side_view(side, rank, piece, &full);
    wex__abi_out(out, &full, sizeof(full));
}

/* Policies see the pieces the host has not hidden (wex__side_hide): the
 * ones it plans itself are someone else's business. */
static const wex_piece_view *svc_canonical_pieces(const wex_layout *side,
                                                  uint64_t canonical,
                                                  uint64_t *count_p)
{
    const uint64_t *start;
    const wex_piece_view *views;
    uint64_t first;

    *count_p = 0;
    if (side == NULL || canonical >= side->model->count)
        return NULL;
    start = side->visible ? side->policy_canon_start : side->canon_start;
    views = side->visible ? side->policy_canon_views : side->canon_views;
    first = start[canonical];
    *count_p = start[canonical + 1] - first;
    return *count_p ? &views[first] : NULL;
}

static uint64_t svc_rank_piece_count(const wex_layout *side, uint64_t rank)
{
    if (side == NULL || rank >= side->ranks)
        return 0;
    return side->visible ? side->visible_count[rank]
                         : side->layouts[rank].piece_count;
}

static wex_status svc_rank_piece(const wex_layout *side, uint64_t rank,
                                 uint64_t index, wex_piece_view *view)
{
    if (side == NULL || view == NULL ||
        index >= svc_rank_piece_count(side, rank))
        return WEX_ERR_INVALID;
    give_view(side, rank, side->visible ? side->visible[rank][index] : index,
              view);
    return WEX_OK;
}

void wex__services_plan_init(wex_host_services *s)
{
    s->layout_rank_count = svc_rank_count;
    s->layout_host = svc_host;
    s->layout_tensor = svc_tensor;
    s->layout_canonical_pieces = svc_canonical_pieces;
    s->layout_rank_piece_count = svc_rank_piece_count;
    s->layout_rank_piece = svc_rank_piece;
    s->plan_add_op = wex__plan_add_op;
}
