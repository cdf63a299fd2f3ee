/* Writing a rank's plan share (plan_share.h): its header, then the
 * sides' sizes and digest, the replicated sources, the rank's layout,
 * its peers' tensors, its operations and its fp8 cells. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "error.h"
#include "plan_share.h"
#include "plan_share_format.h"
#include "share_codec.h"

static void put_tensor(wex__out_buf *o, const wex__local_tensor *t)
{
    wex__put_str(o, t->name);
    wex__put_u64(o, t->dtype);
    wex__put_u64(o, t->ndim);
    wex__put_array(o, t->shape, t->ndim);
    wex__put_u64(o, t->bytes);
}

static void put_layout(wex__out_buf *o, const wex__rank_layout *l)
{
    wex__put_u64(o, l->coord_count);
    for (size_t i = 0; i < l->coord_count; i++) {
        wex__put_str(o, l->coords[i].key);
        wex__put_i64(o, l->coords[i].value);
    }
    wex__put_u64(o, l->tensor_count);
    for (size_t i = 0; i < l->tensor_count; i++)
        put_tensor(o, &l->tensors[i]);
    wex__put_u64(o, l->piece_count);
    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *pc = &l->pieces[i];
        wex__put_u64(o, pc->canonical);
        wex__put_u64(o, pc->tensor);
        wex__put_u64(o, pc->transform);
        wex__put_u64(o, pc->ndim);
        wex__put_array(o, pc->offset, pc->ndim);
        wex__put_array(o, pc->extent, pc->ndim);
        wex__put_array(o, pc->at, WEX_MAX_DIMS);
    }
}

static void put_op(wex__out_buf *o, const wex__op *op)
{
    wex__put_u64(o, op->src_rank);
    wex__put_u64(o, op->src_tensor);
    wex__put_u64(o, op->dst_rank);
    wex__put_u64(o, op->dst_tensor);
    wex__put_u64(o, op->ndim);
    wex__put_u64(o, op->src_ndim);
    wex__put_u64(o, op->dst_ndim);
    wex__put_u64(o, op->dtype_size);
    wex__put_u64(o, op->src_dtype_size);
    wex__put_u64(o, op->transform);
    wex__put_array(o, op->src_off, WEX_MAX_DIMS);
    wex__put_array(o, op->dst_off, WEX_MAX_DIMS);
    wex__put_array(o, op->extent, WEX_MAX_DIMS);
    wex__put_u64(o, op->bytes);
    wex__put_u64(o, op->src_bytes);
    wex__put_u64(o, op->canonical);
    wex__put_array(o, op->canon_off, 2);
    wex__put_u64(o, op->dst_piece);
    wex__put_u64(o, op->scale_tensor);
    wex__put_array(o, op->scale_block, 2);
    wex__put_array(o, op->scale_at, WEX_MAX_DIMS);
}

typedef struct pair {
    uint64_t a, b;
} pair;

static int pair_cmp(const void *x, const void *y)
{
    const pair *p = x, *q = y;

    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    return p->b < q->b ? -1 : p->b > q->b;
}

/* Sorted, without repeats; returns the count left. */
static size_t unique_pairs(pair *v, size_t n)
{
    size_t k = 0;

    qsort(v, n, sizeof(*v), pair_cmp);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || pair_cmp(&v[k - 1], &v[i]) != 0)
            v[k++] = v[i];
    return k;
}

/* The local tensors of other ranks the operations name. */
static wex_status put_peer_tensors(wex__out_buf *o, const wex__planner *p,
                                   uint32_t side, const wex__op *ops,
                                   size_t count)
{
    const wex__side *theirs = side == WEX_SIDE_SOURCE ? &p->dst : &p->src;
    pair *v = malloc((count ? count : 1) * sizeof(*v));
    size_t n;

    if (v == NULL)
        return wex__error(WEX_ERR_NOMEM, "plan share: out of memory");
    for (size_t i = 0; i < count; i++) {
        v[i].a = side == WEX_SIDE_SOURCE ? ops[i].dst_rank : ops[i].src_rank;
        v[i].b =
            side == WEX_SIDE_SOURCE ? ops[i].dst_tensor : ops[i].src_tensor;
    }
    n = unique_pairs(v, count);
    wex__put_u64(o, n);
    for (size_t i = 0; i < n; i++) {
        wex__put_u64(o, v[i].a);
        wex__put_u64(o, v[i].b);
        put_tensor(o, &theirs->layouts[v[i].a].tensors[v[i].b]);
    }
    free(v);
    return WEX_OK;
}

/* A source's fp8 cells: who else writes each block it quantizes. */
static wex_status put_cells(wex__out_buf *o, const wex__planner *p,
                            uint32_t side, const wex__op *ops, size_t count)
{
    pair *v = malloc((count ? count : 1) * sizeof(*v));
    size_t n = 0;
    wex_status st = WEX_OK;

    if (v == NULL)
        return wex__error(WEX_ERR_NOMEM, "plan share: out of memory");
    for (size_t i = 0; side == WEX_SIDE_SOURCE && i < count; i++)
        if (ops[i].transform == WEX__OP_QUANTIZE ||
            ops[i].transform == WEX__OP_SCALE) {
            v[n].a = ops[i].dst_rank;
            v[n++].b = ops[i].dst_piece;
        }
    n = unique_pairs(v, n);
    wex__put_u64(o, n);
    for (size_t i = 0; i < n && st == WEX_OK; i++) {
        wex__qcell *cells;
        size_t k;
        st = wex__quantize_cells(p, v[i].a, v[i].b, NULL, 0, &cells, &k);
        if (st != WEX_OK)
            break;
        wex__put_u64(o, v[i].a);
        wex__put_u64(o, v[i].b);
        wex__put_u64(o, k);
        for (size_t c = 0; c < k; c++) {
            wex__put_array(o, cells[c].lo, 2);
            wex__put_array(o, cells[c].hi, 2);
            wex__put_u64(o, cells[c].src_rank);
        }
        free(cells);
    }
    free(v);
    return st;
}

static wex_status write_file(const char *path, const wex__share_header *h,
                             const wex__out_buf *o)
{
    char tmp[4200];
    FILE *f;
    int ok;

    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", path, (long)getpid());
    if ((f = fopen(tmp, "wb")) == NULL)
        return wex__error(WEX_ERR_SYSTEM, "%s: %s", tmp, strerror(errno));
    ok = fwrite(h, sizeof(*h), 1, f) == 1 &&
         (o->len == 0 || fwrite(o->p, o->len, 1, f) == 1);
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return wex__error(WEX_ERR_SYSTEM, "%s: %s", path,
                          ok ? strerror(e) : "write failed");
    }
    return WEX_OK;
}

wex_status wex__share_write(wex__planner *p, const char *dir, uint32_t side,
                            uint64_t rank, const wex__op *ops, size_t count,
                            uint64_t *bytes)
{
    const wex__side *mine = side == WEX_SIDE_SOURCE ? &p->src : &p->dst;
    const uint8_t *replicated = wex__planner_replicated(p);
    wex__share_header h;
    wex__out_buf o = {0};
    char path[4096];
    wex_status st;

    if (replicated == NULL)
        return WEX_ERR_NOMEM;
    if (rank >= mine->ranks)
        return wex__error(WEX_ERR_INVALID, "%s rank %llu is outside 0..%llu",
                          mine->what, (unsigned long long)rank,
                          (unsigned long long)(mine->ranks - 1));
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, WEX__SHARE_MAGIC, sizeof(h.magic));
    h.format = WEX__SHARE_FORMAT;
    h.side = side;
    h.rank = rank;
    if ((st = wex__share_key(p->job, h.key)) != WEX_OK ||
        (st = wex__share_file(h.key, dir, side, rank, path, sizeof(path))) !=
            WEX_OK)
        return st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return wex__error(WEX_ERR_SYSTEM,
                          "%s: cannot make the directory: "
                          "%s",
                          dir, strerror(errno));
    wex__put_u64(&o, p->src.ranks);
    wex__put_u64(&o, p->dst.ranks);
    wex__put_u64(&o, wex__planner_sides_digest(p));
    wex__put_u64(&o, (p->src.ranks + 7) / 8 + 1);
    wex__put_bytes(&o, replicated, (p->src.ranks + 7) / 8 + 1);
    put_layout(&o, &mine->layouts[rank]);
    st = put_peer_tensors(&o, p, side, ops, count);
    wex__put_u64(&o, count);
    for (size_t i = 0; i < count; i++)
        put_op(&o, &ops[i]);
    if (st == WEX_OK)
        st = put_cells(&o, p, side, ops, count);
    if (st == WEX_OK && o.failed)
        st = wex__error(WEX_ERR_NOMEM, "plan share: out of memory");
    if (st == WEX_OK) {
        h.payload_bytes = o.len;
        h.payload_hash = XXH3_64bits(o.p, o.len);
        st = write_file(path, &h, &o);
    }
    if (st == WEX_OK && bytes != NULL)
        *bytes += sizeof(h) + o.len;
    free(o.p);
    return st;
}

wex_status wex__share_make(wex__planner *p, const char *dir, uint32_t side,
                           uint64_t rank, uint64_t *bytes)
{
    wex_plan_builder b;
    wex_status st;

    wex__plan_builder_init(&b, &p->src, &p->dst);
    st = wex__planner_rank(p, side, rank, &b);
    if (st == WEX_OK)
        st = wex__share_write(p, dir, side, rank, b.ops, b.count, bytes);
    wex__plan_builder_fini(&b);
    return st;
}
