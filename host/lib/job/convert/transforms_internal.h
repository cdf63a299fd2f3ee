/*
 * What transforms.c and transforms_device.c share: a source's quantization
 * state (the blocks it quantizes, their amaxes and partners) and the
 * device path for operations whose source tensor is CUDA memory.
 */
#ifndef WEX_HOST_TRANSFORMS_INTERNAL_H
#define WEX_HOST_TRANSFORMS_INTERNAL_H

#include "job.h"
#include "numbers.h"
#include "quantize.h"

/* One block a source quantizes for one destination piece. */
typedef struct qslot {
    uint64_t dst, piece, br, bc; /* the key, in this order */
    float amax;
    uint32_t partners, npartners; /* into quant_state.partner_ranks */
} qslot;

struct wex__quant_state {
    qslot *slots; /* sorted by key */
    size_t nslots;
    uint64_t *partner_ranks;
    size_t npartner_ranks, partner_cap;
    uint64_t *readers; /* distinct partners, whose amaxes this rank reads */
    size_t nreaders;
    size_t *op_grid;   /* per op: offset into grid (QUANTIZE, SCALE) */
    size_t *op_blocks; /* per op: its entries in grid */
    size_t *grid;      /* slot index per (op, block row, block col) */
    float *own;        /* per grid entry: the op's own amax of the block */
    /* Twins (quantize_twins.c): per op, the first that makes the same
     * bytes (itself if none); the order ops run in (NULL: plan order). */
    size_t *leader, *order;
    unsigned char *arena;
    size_t arena_used;
    /* pinned (the transport reads device memory only: nccl's kernels
     * reach pinned host memory, never pageable) */
    int arena_pinned;
    /* per leader: where its twins' bytes lie whole in the arena, valid
     * while made_gen matches gen (bumped each time the arena is reused) */
    unsigned char **made;
    uint32_t *made_gen, gen;
    size_t made_op;                    /* the op that made the last bytes */
    uint64_t made_bytes, reused_bytes; /* this step: floats read, skipped */
};

/* The larger magnitude of two amaxes (signs dropped; NaN bits win). */
static inline float wex__amax_max(float a, float b)
{
    return (wex__f32_bits(b) & 0x7fffffffu) > (wex__f32_bits(a) & 0x7fffffffu)
               ? wex__f32_of_bits(wex__f32_bits(b) & 0x7fffffffu)
               : a;
}

/* After the quantization state is built: each op's leader, and an order
 * that runs twins one after the other where the transport allows. */
wex_status wex__twins_prepare(wex_job *job);

/* The blocks an operation touches: rows [b0[0], b1[0]) x cols [b0[1], b1[1]). */
static inline void wex__op_blocks(const wex__op *o, uint64_t *b0, uint64_t *b1)
{
    for (int k = 0; k < 2; k++) {
        if (o->transform == WEX__OP_SCALE) {
            b0[k] = o->canon_off[k];
            b1[k] = o->canon_off[k] + o->extent[k];
        } else {
            b0[k] = o->canon_off[k] / WEX__QUANT_BLOCK;
            b1[k] = (o->canon_off[k] + o->extent[k] + WEX__QUANT_BLOCK - 1) /
                    WEX__QUANT_BLOCK;
        }
    }
}

/* Whether a converting operation's rows that follow each other at the
 * destination may leave as one put: not over matched sends and receives
 * (nccl), whose destination receives such an operation a row at a time
 * (wex__recv_op), so each row is a put. */
static inline int wex__merge_rows(const wex_job *job)
{
    return !(job->transport.ops->caps & WEX_TRANSPORT_CAP_TWO_SIDED);
}

/* The element offset in a tensor of `shape` (`tn` dims) of box
 * coordinate `idx` placed at `off`. */
static inline uint64_t wex__element_at(const uint64_t *shape, uint32_t tn,
                                       const uint64_t *off, uint32_t bn,
                                       const uint64_t *idx)
{
    uint64_t e = 0;
    uint32_t lead = tn - bn;

    for (uint32_t d = 0; d < tn; d++)
        e = e * shape[d] + off[d] + (d >= lead ? idx[d - lead] : 0);
    return e;
}

/* The slot of block (br, bc), counted from the operation's first block
 * (wex__op_blocks' b0), of quantizing operation i. */
static inline struct qslot *wex__op_slot(wex_job *job, size_t i, uint64_t br,
                                         uint64_t bc)
{
    struct wex__quant_state *q = job->src.quant;
    uint64_t b0[2], b1[2];

    wex__op_blocks(&job->ops[i], b0, b1);
    return &q->slots[q->grid[q->op_grid[i] + br * (b1[1] - b0[1]) + bc]];
}

static inline int wex__on_device(const wex_job *job, uint64_t tensor)
{
    return job->memory_kind != NULL &&
           job->memory_kind[tensor] == WEX_MEMORY_CUDA;
}

/* Operation i (QUANTIZE) from a CUDA source: its blocks' amaxes folded
 * into their slots, computed on the device. */
wex_status wex__transforms_amax_device(wex_job *job, size_t i);
/* Operation i (QUANTIZE) from a CUDA source: quantized on the device,
 * staged, put (and digested into `h`, may be NULL). */
wex_status wex__transforms_put_device(wex_job *job, size_t i, wex__digest *h);

/* Converting a CUDA source between float dtypes: the `width` source
 * elements of operation i's row at box coordinate `idx` copied into
 * pinned staging, where the CPU converts them; *host_p is where. */
wex_status wex__transforms_stage_row(wex_job *job, size_t i,
                                     const uint64_t *idx, uint64_t width,
                                     const unsigned char **host_p);

#endif /* WEX_HOST_TRANSFORMS_INTERNAL_H */
