/* Opening a planner from a rank's plan share (plan_share.h), in the
 * order plan_share_write.c wrote it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "error.h"
#include "fd_io.h"
#include "log.h"
#include "plan_share.h"
#include "plan_share_format.h"
#include "share_codec.h"

static void get_tensor(wex__in_buf *in, wex__local_tensor *t)
{
    t->name = wex__get_str(in);
    t->dtype = (uint32_t)wex__get_u64(in);
    t->ndim = (uint32_t)wex__get_below(in, WEX_MAX_DIMS + 1, "a tensor's ndim");
    wex__get_array(in, t->shape, t->ndim);
    t->bytes = wex__get_u64(in);
}

static void get_layout(wex__in_buf *in, wex__rank_layout *l)
{
    size_t n = wex__get_count(in);

    if ((l->coords = wex__get_table(in, n, sizeof(*l->coords))) == NULL)
        return;
    for (l->coord_count = 0; l->coord_count < n && !in->bad; l->coord_count++) {
        l->coords[l->coord_count].key = wex__get_str(in);
        l->coords[l->coord_count].value = wex__get_i64(in);
    }
    n = wex__get_count(in);
    if ((l->tensors = wex__get_table(in, n, sizeof(*l->tensors))) == NULL)
        return;
    l->tensor_cap = n;
    for (l->tensor_count = 0; l->tensor_count < n && !in->bad;
         l->tensor_count++) {
        get_tensor(in, &l->tensors[l->tensor_count]);
        l->bytes += l->tensors[l->tensor_count].bytes;
    }
    n = wex__get_count(in);
    if ((l->pieces = wex__get_table(in, n, sizeof(*l->pieces))) == NULL)
        return;
    l->piece_cap = n;
    for (l->piece_count = 0; l->piece_count < n && !in->bad; l->piece_count++) {
        wex__piece *pc = &l->pieces[l->piece_count];
        pc->canonical = wex__get_u64(in);
        pc->tensor = wex__get_below(in, l->tensor_count, "a piece's tensor");
        pc->transform = (uint32_t)wex__get_u64(in);
        pc->ndim =
            (uint32_t)wex__get_below(in, WEX_MAX_DIMS + 1, "a piece's ndim");
        wex__get_array(in, pc->offset, pc->ndim);
        wex__get_array(in, pc->extent, pc->ndim);
        wex__get_array(in, pc->at, WEX_MAX_DIMS);
    }
}

static void side_alloc(wex__in_buf *in, wex__side *s, const char *what,
                       uint64_t ranks)
{
    s->what = what;
    if (in->bad)
        return;
    if (ranks == 0 || ranks > WEX__SHARE_RANKS_MAX) {
        in->bad = "a side's rank count";
        return;
    }
    s->ranks = ranks;
    s->layouts = calloc(ranks, sizeof(*s->layouts));
    s->hosts = calloc(ranks, sizeof(*s->hosts));
    if (s->layouts == NULL || s->hosts == NULL) {
        in->bad = "out of memory";
        return;
    }
    for (uint64_t r = 0; r < ranks; r++)
        s->layouts[r].rank = r;
}

/* Peer tensor `t` of rank layout `l`, the tensors before it left empty
 * (named NULL) unless another operation names them too. */
static void get_peer_tensor(wex__in_buf *in, wex__rank_layout *l, uint64_t t)
{
    if (in->bad)
        return;
    if (t >= l->tensor_count) {
        wex__local_tensor *grown;
        if (t >= WEX__SHARE_TENSORS_MAX ||
            (grown = realloc(l->tensors, (t + 1) * sizeof(*grown))) == NULL) {
            in->bad = t >= WEX__SHARE_TENSORS_MAX ? "a peer tensor index"
                                                  : "out of memory";
            return;
        }
        memset(grown + l->tensor_count, 0,
               (t + 1 - l->tensor_count) * sizeof(*grown));
        l->tensors = grown;
        l->tensor_count = l->tensor_cap = t + 1;
    }
    if (l->tensors[t].name != NULL) {
        in->bad = "a peer tensor listed twice";
        return;
    }
    get_tensor(in, &l->tensors[t]);
}

static int tensor_known(const wex__side *s, uint64_t rank, uint64_t t)
{
    return t < s->layouts[rank].tensor_count &&
           s->layouts[rank].tensors[t].name != NULL;
}

static void get_op(wex__in_buf *in, const wex__planner *p, wex__op *op)
{
    op->src_rank =
        wex__get_below(in, p->src.ranks, "an operation's source rank");
    op->src_tensor = wex__get_u64(in);
    op->dst_rank =
        wex__get_below(in, p->dst.ranks, "an operation's destination rank");
    op->dst_tensor = wex__get_u64(in);
    op->ndim =
        (uint32_t)wex__get_below(in, WEX_MAX_DIMS + 1, "an operation's ndim");
    op->src_ndim =
        (uint32_t)wex__get_below(in, WEX_MAX_DIMS + 1, "an operation's ndim");
    op->dst_ndim =
        (uint32_t)wex__get_below(in, WEX_MAX_DIMS + 1, "an operation's ndim");
    op->dtype_size = (uint32_t)wex__get_u64(in);
    op->src_dtype_size = (uint32_t)wex__get_u64(in);
    op->transform = (uint32_t)wex__get_u64(in);
    wex__get_array(in, op->src_off, WEX_MAX_DIMS);
    wex__get_array(in, op->dst_off, WEX_MAX_DIMS);
    wex__get_array(in, op->extent, WEX_MAX_DIMS);
    op->bytes = wex__get_u64(in);
    op->src_bytes = wex__get_u64(in);
    op->canonical = wex__get_u64(in);
    wex__get_array(in, op->canon_off, 2);
    op->dst_piece = wex__get_u64(in);
    op->scale_tensor = wex__get_u64(in);
    wex__get_array(in, op->scale_block, 2);
    wex__get_array(in, op->scale_at, WEX_MAX_DIMS);
    if (!in->bad && (!tensor_known(&p->src, op->src_rank, op->src_tensor) ||
                     !tensor_known(&p->dst, op->dst_rank, op->dst_tensor)))
        in->bad = "an operation names a tensor the share does not hold";
}

static void get_cells(wex__in_buf *in, wex__kept_cells *s)
{
    size_t groups = wex__get_count(in), total = 0;

    if ((s->groups = wex__get_table(in, groups, sizeof(*s->groups))) == NULL)
        return;
    for (size_t g = 0; g < groups && !in->bad; g++) {
        wex__kept_group *cg = &s->groups[g];
        size_t n;
        wex__qcell *grown;
        cg->dst_rank = wex__get_u64(in);
        cg->piece = wex__get_u64(in);
        n = wex__get_count(in);
        if (in->bad)
            break;
        if (g > 0 &&
            (cg->dst_rank < cg[-1].dst_rank ||
             (cg->dst_rank == cg[-1].dst_rank && cg->piece <= cg[-1].piece))) {
            in->bad = "fp8 cells out of order";
            break;
        }
        if ((grown = realloc(s->cells, (total + n + 1) * sizeof(*grown))) ==
            NULL) {
            in->bad = "out of memory";
            break;
        }
        s->cells = grown;
        cg->first = total;
        cg->count = n;
        for (size_t c = 0; c < n; c++) {
            wex__qcell *cell = &s->cells[total++];
            wex__get_array(in, cell->lo, 2);
            wex__get_array(in, cell->hi, 2);
            cell->src_rank = wex__get_u64(in);
            cell->src_piece = NULL;
        }
        s->group_count = g + 1;
    }
}

static void *read_whole(const char *path, size_t *len_p, int *missing)
{
    FILE *f = NULL;
    struct stat st;
    void *data = NULL;
    int fd;

    /* a FIFO or a device where a share should be is no share: refused at
     * once, never waited on */
    *missing = access(path, F_OK) != 0 && errno == ENOENT;
    if (*missing || wex__open_regular(path, O_RDONLY, &fd) != WEX_OK)
        return NULL;
    if ((f = fdopen(fd, "rb")) == NULL) {
        close(fd);
        return NULL;
    }
    if (fstat(fileno(f), &st) == 0 && st.st_size > 0 &&
        (data = malloc((size_t)st.st_size)) != NULL &&
        fread(data, (size_t)st.st_size, 1, f) != 1) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *len_p = data ? (size_t)st.st_size : 0;
    return data;
}

static void decode(wex__in_buf *in, wex__planner *p, uint32_t side,
                   uint64_t rank, wex_plan_builder *b)
{
    wex__side *mine = side == WEX_SIDE_SOURCE ? &p->src : &p->dst;
    wex__side *theirs = side == WEX_SIDE_SOURCE ? &p->dst : &p->src;
    uint64_t src_ranks = wex__get_u64(in), dst_ranks = wex__get_u64(in);
    size_t n;

    side_alloc(in, &p->src, "source", src_ranks);
    side_alloc(in, &p->dst, "destination", dst_ranks);
    if (!in->bad && rank >= mine->ranks)
        in->bad = "the rank is outside its side";
    p->sides_digest = wex__get_u64(in);
    p->sides_digest_known = 1;
    n = wex__get_count(in);
    if (!in->bad && n != (src_ranks + 7) / 8 + 1)
        in->bad = "the replicated sources' bits";
    if ((p->replicated = wex__get_table(in, n, 1)) != NULL) {
        memcpy(p->replicated, in->p + in->at, n);
        in->at += n;
    }
    if (!in->bad)
        get_layout(in, &mine->layouts[rank]);
    n = wex__get_count(in);
    for (size_t i = 0; i < n && !in->bad; i++) {
        uint64_t r = wex__get_below(in, theirs->ranks, "a peer's rank");
        get_peer_tensor(in, &theirs->layouts[r], wex__get_u64(in));
    }
    n = wex__get_count(in);
    if (!in->bad && (b->ops = calloc(n ? n : 1, sizeof(*b->ops))) == NULL)
        in->bad = "out of memory";
    for (size_t i = 0; i < n && !in->bad; i++) {
        get_op(in, p, &b->ops[i]);
        if (!in->bad && (side == WEX_SIDE_SOURCE ? b->ops[i].src_rank
                                                 : b->ops[i].dst_rank) != rank)
            in->bad = "an operation of another rank";
        b->count = b->cap = i + 1;
    }
    if (!in->bad && (p->kept_cells = calloc(1, sizeof(*p->kept_cells))) == NULL)
        in->bad = "out of memory";
    if (!in->bad)
        get_cells(in, p->kept_cells);
    if (!in->bad && in->at != in->len)
        in->bad = "bytes past the end of what it holds";
}

const char *wex__share_decode(wex__planner *p, const void *payload, size_t len,
                              uint32_t side, uint64_t rank, wex_plan_builder *b)
{
    wex__in_buf in = {payload, len, 0, NULL};

    decode(&in, p, side, rank, b);
    return in.bad;
}

int wex__planner_open_share(wex__planner *p, wex__registry *registry,
                            wex__job_config *job, const char *dir,
                            uint32_t side, uint64_t rank, wex_plan_builder *b)
{
    char path[4096];
    uint64_t key[2];
    size_t len = 0;
    int missing = 0;
    const wex__share_header *h;
    unsigned char *data;
    const char *bad = NULL;

    memset(p, 0, sizeof(*p));
    if (wex__share_key(job, key) != WEX_OK ||
        wex__share_file(key, dir, side, rank, path, sizeof(path)) != WEX_OK) {
        WEX__DEBUG("plan share: %s", wex__last_error());
        return 0;
    }
    if ((data = read_whole(path, &len, &missing)) == NULL) {
        if (missing)
            WEX__DEBUG("plan share: none at %s: planning", path);
        else
            WEX__WARN("plan share %s: cannot read it: planning instead", path);
        return 0;
    }
    h = (const wex__share_header *)data;
    if (len < sizeof(*h) || memcmp(h->magic, WEX__SHARE_MAGIC, 8) != 0)
        bad = "not a plan share";
    else if (h->format != WEX__SHARE_FORMAT || h->side != side ||
             h->rank != rank || h->key[0] != key[0] || h->key[1] != key[1])
        bad = "made for another job, rank or format";
    else if (h->payload_bytes != len - sizeof(*h) ||
             XXH3_64bits(data + sizeof(*h), len - sizeof(*h)) !=
                 h->payload_hash)
        bad = "its checksum does not match (damaged or cut short)";
    wex__plan_builder_init(b, &p->src, &p->dst);
    if (!bad) {
        p->job = job;
        p->registry = registry;
        bad = wex__share_decode(p, data + sizeof(*h), len - sizeof(*h), side,
                                rank, b);
    }
    if (!bad && wex__topology_place(job->topology, job->path, &p->src, &p->dst,
                                    &p->topology) != WEX_OK)
        bad = wex__last_error();
    free(data);
    if (bad) {
        WEX__WARN("plan share %s: %s: planning instead", path, bad);
        wex__plan_builder_fini(b);
        p->job = NULL; /* still the caller's */
        wex__planner_close(p);
        return 0;
    }
    p->topology_view = wex__options_view(job->topology);
    p->from_share = 1;
    WEX__DEBUG("plan share: %s rank %llu opened from %s (%zu operations)",
               wex__share_side_word(side), (unsigned long long)rank, path,
               b->count);
    return 1;
}
