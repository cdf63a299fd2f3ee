#include "services_plan.h"

#include <string.h>

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
    full.struct_size = desc->struct_size;
    full.dtype = t->dtype;
    full.ndim = t->ndim;
    full.name = t->name;
    full.shape = t->shape;
    memcpy(desc, &full, desc->struct_size < sizeof(full) ? desc->struct_size
                                                         : sizeof(full));
    return WEX_OK;
}

/* Copies no more than the caller's struct holds (an older plugin). */
static void give_view(const wex_layout *side, uint64_t rank, uint64_t piece,
                      wex_piece_view *out)
{
    wex_piece_view full;

    memset(&full, 0, sizeof(full));
    full.struct_size = out->struct_size;
    wex__side_view(side, rank, piece, &full);
    memcpy(out, &full, out->struct_size < sizeof(full) ? out->struct_size
                                                       : sizeof(full));
}

static const wex_piece_view *svc_canonical_pieces(const wex_layout *side,
                                                  uint64_t canonical,
                                                  uint64_t *count_p)
{
    uint64_t first;

    *count_p = 0;
    if (side == NULL || canonical >= side->model->count)
        return NULL;
    first = side->canon_start[canonical];
    *count_p = side->canon_start[canonical + 1] - first;
    return *count_p ? &side->canon_views[first] : NULL;
}

static uint64_t svc_rank_piece_count(const wex_layout *side, uint64_t rank)
{
    return side && rank < side->ranks ? side->layouts[rank].piece_count : 0;
}

static wex_status svc_rank_piece(const wex_layout *side, uint64_t rank,
                                 uint64_t index, wex_piece_view *view)
{
    if (side == NULL || view == NULL || index >= svc_rank_piece_count(side, rank))
        return WEX_ERR_INVALID;
    give_view(side, rank, index, view);
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
