#include "plan_share.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "error.h"
#include "log.h"
#include "source_id.h"

/* Bumped whenever what a share holds, or how, changes. */
#define SHARE_FORMAT 1u
static const char share_magic[8] = "WEXPLAN";

/* Every field of these is written; one added must be too. */
_Static_assert(sizeof(wex__op) == 384, "encode the new wex__op field");
_Static_assert(sizeof(wex__piece) == 216, "encode the new wex__piece field");

typedef struct share_header {
    char magic[8];
    uint32_t format, side;
    uint64_t rank;
    uint64_t key[2];
    uint64_t payload_bytes, payload_hash; /* XXH3 of the payload */
} share_header;

typedef struct cell_group {
    uint64_t dst_rank, piece;
    size_t first, count; /* in cells */
} cell_group;

struct wex__share {
    cell_group *groups; /* ascending (dst_rank, piece) */
    size_t group_count;
    wex__qcell *cells;
};

void wex__share_free(wex__share *share)
{
    if (share == NULL)
        return;
    free(share->groups);
    free(share->cells);
    free(share);
}

/* ---- the key ------------------------------------------------------------ */

static void hash_stat(XXH3_state_t *h, const char *path)
{
    struct stat s;
    uint64_t id[5] = {0};

    if (path != NULL && stat(path, &s) == 0) {
        id[0] = (uint64_t)s.st_dev;
        id[1] = (uint64_t)s.st_ino;
        id[2] = (uint64_t)s.st_size;
        id[3] = (uint64_t)s.st_mtim.tv_sec;
        id[4] = (uint64_t)s.st_mtim.tv_nsec;
    }
    XXH3_128bits_update(h, id, sizeof(id));
}

static void hash_text(XXH3_state_t *h, const char *s)
{
    XXH3_128bits_update(h, s ? s : "", s ? strlen(s) + 1 : 1);
}

static void hash_plugin(XXH3_state_t *h, const wex__plugin *p)
{
    if (p == NULL) {
        hash_text(h, NULL);
        return;
    }
    hash_text(h, p->manifest.path);
    hash_text(h, p->manifest.version);
    hash_text(h, p->manifest.library);
    hash_stat(h, p->manifest.path);
    hash_stat(h, p->manifest.library);
}

static wex_status hash_file(XXH3_state_t *h, const char *path)
{
    char buf[65536];
    size_t n;
    FILE *f = fopen(path, "rb");

    if (f == NULL)
        return wex__error(WEX_ERR_SYSTEM, "%s: %s", path, strerror(errno));
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        XXH3_128bits_update(h, buf, n);
    n = (size_t)ferror(f);
    fclose(f);
    return n ? wex__error(WEX_ERR_SYSTEM, "%s: read error", path) : WEX_OK;
}

static wex_status share_key(const wex__job_config *j, uint64_t key[2])
{
    XXH3_state_t *h = XXH3_createState();
    cJSON *doc = cJSON_Duplicate(j->doc, 1);
    char *text = NULL;
    wex_status st = WEX_OK;
    XXH128_hash_t k;
    uint32_t format = SHARE_FORMAT;

    if (h == NULL || doc == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "plan share: out of memory");
        goto out;
    }
    XXH3_128bits_reset(h);
    XXH3_128bits_update(h, &format, sizeof(format));
    /* Where the ranks meet and where shares lie change no plan. */
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "rendezvous");
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "plan_shares");
    if ((text = cJSON_PrintUnformatted(doc)) == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "plan share: out of memory");
        goto out;
    }
    hash_text(h, text);
    st = hash_file(h, j->source_model_path);
    if (st == WEX_OK)
        st = hash_file(h, j->destination_model_path);
    hash_plugin(h, j->source.plugin);
    hash_plugin(h, j->destination.plugin);
    hash_plugin(h, j->policy.plugin);
    /* The host library's own code: its catalogs and its checks shape
     * every plan. */
    hash_text(h, WEX_SOURCE_ID);
    k = XXH3_128bits_digest(h);
    key[0] = k.low64;
    key[1] = k.high64;
out:
    free(text);
    cJSON_Delete(doc);
    XXH3_freeState(h);
    return st;
}

static const char *side_word(uint32_t side)
{
    return side == WEX_SIDE_SOURCE ? "source" : "destination";
}

static wex_status path_for(const uint64_t key[2], const char *dir,
                           uint32_t side, uint64_t rank, char *path,
                           size_t cap)
{
    int n = snprintf(path, cap, "%s/%016llx%016llx-%s-%llu.wexplan", dir,
                     (unsigned long long)key[1], (unsigned long long)key[0],
                     side_word(side), (unsigned long long)rank);

    if (n < 0 || (size_t)n >= cap)
        return wex__error(WEX_ERR_INVALID, "%s: plan share directory path "
                          "too long", dir);
    return WEX_OK;
}

wex_status wex__share_path(const wex__job_config *job, const char *dir,
                           uint32_t side, uint64_t rank, char *path,
                           size_t cap)
{
    uint64_t key[2];
    wex_status st = share_key(job, key);

    return st == WEX_OK ? path_for(key, dir, side, rank, path, cap) : st;
}

/* ---- writing ------------------------------------------------------------ */

typedef struct out_buf {
    unsigned char *p;
    size_t len, cap;
    int failed;
} out_buf;

static void put_bytes(out_buf *o, const void *src, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        unsigned char *grown;
        while (cap < o->len + n)
            cap *= 2;
        if ((grown = realloc(o->p, cap)) == NULL) {
            o->failed = 1;
            return;
        }
        o->p = grown;
        o->cap = cap;
    }
    memcpy(o->p + o->len, src, n);
    o->len += n;
}

/* LEB128: most fields are small, and a share is mostly fields. */
static void put_u64(out_buf *o, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;

    do {
        b[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        b[n++] |= v ? 0x80 : 0;
    } while (v);
    put_bytes(o, b, n);
}

static void put_i64(out_buf *o, int64_t v)
{
    put_u64(o, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

static void put_str(out_buf *o, const char *s)
{
    size_t n = strlen(s);

    put_u64(o, n);
    put_bytes(o, s, n);
}

static void put_array(out_buf *o, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        put_u64(o, v[i]);
}

static void put_tensor(out_buf *o, const wex__local_tensor *t)
{
    put_str(o, t->name);
    put_u64(o, t->dtype);
    put_u64(o, t->ndim);
    put_array(o, t->shape, t->ndim);
    put_u64(o, t->bytes);
}

static void put_layout(out_buf *o, const wex__rank_layout *l)
{
    put_u64(o, l->coord_count);
    for (size_t i = 0; i < l->coord_count; i++) {
        put_str(o, l->coords[i].key);
        put_i64(o, l->coords[i].value);
    }
    put_u64(o, l->tensor_count);
    for (size_t i = 0; i < l->tensor_count; i++)
        put_tensor(o, &l->tensors[i]);
    put_u64(o, l->piece_count);
    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *pc = &l->pieces[i];
        put_u64(o, pc->canonical);
        put_u64(o, pc->tensor);
        put_u64(o, pc->transform);
        put_u64(o, pc->ndim);
        put_array(o, pc->offset, pc->ndim);
        put_array(o, pc->extent, pc->ndim);
        put_array(o, pc->at, WEX_MAX_DIMS);
    }
}

static void put_op(out_buf *o, const wex__op *op)
{
    put_u64(o, op->src_rank);
    put_u64(o, op->src_tensor);
    put_u64(o, op->dst_rank);
    put_u64(o, op->dst_tensor);
    put_u64(o, op->ndim);
    put_u64(o, op->src_ndim);
    put_u64(o, op->dst_ndim);
    put_u64(o, op->dtype_size);
    put_u64(o, op->src_dtype_size);
    put_u64(o, op->transform);
    put_array(o, op->src_off, WEX_MAX_DIMS);
    put_array(o, op->dst_off, WEX_MAX_DIMS);
    put_array(o, op->extent, WEX_MAX_DIMS);
    put_u64(o, op->bytes);
    put_u64(o, op->src_bytes);
    put_u64(o, op->canonical);
    put_array(o, op->canon_off, 2);
    put_u64(o, op->dst_piece);
    put_u64(o, op->scale_tensor);
    put_array(o, op->scale_block, 2);
    put_array(o, op->scale_at, WEX_MAX_DIMS);
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
static wex_status put_peer_tensors(out_buf *o, const wex__planner *p,
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
        v[i].b = side == WEX_SIDE_SOURCE ? ops[i].dst_tensor
                                         : ops[i].src_tensor;
    }
    n = unique_pairs(v, count);
    put_u64(o, n);
    for (size_t i = 0; i < n; i++) {
        put_u64(o, v[i].a);
        put_u64(o, v[i].b);
        put_tensor(o, &theirs->layouts[v[i].a].tensors[v[i].b]);
    }
    free(v);
    return WEX_OK;
}

/* A source's fp8 cells: who else writes each block it quantizes. */
static wex_status put_cells(out_buf *o, const wex__planner *p,
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
    put_u64(o, n);
    for (size_t i = 0; i < n && st == WEX_OK; i++) {
        wex__qcell *cells;
        size_t k;
        st = wex__quantize_cells(p, v[i].a, v[i].b, NULL, 0, &cells, &k);
        if (st != WEX_OK)
            break;
        put_u64(o, v[i].a);
        put_u64(o, v[i].b);
        put_u64(o, k);
        for (size_t c = 0; c < k; c++) {
            put_array(o, cells[c].lo, 2);
            put_array(o, cells[c].hi, 2);
            put_u64(o, cells[c].src_rank);
        }
        free(cells);
    }
    free(v);
    return st;
}

static wex_status write_file(const char *path, const share_header *h,
                             const out_buf *o)
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
    share_header h;
    out_buf o = {0};
    char path[4096];
    wex_status st;

    if (replicated == NULL)
        return WEX_ERR_NOMEM;
    if (rank >= mine->ranks)
        return wex__error(WEX_ERR_INVALID, "%s rank %llu is outside 0..%llu",
                          mine->what, (unsigned long long)rank,
                          (unsigned long long)(mine->ranks - 1));
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, share_magic, sizeof(h.magic));
    h.format = SHARE_FORMAT;
    h.side = side;
    h.rank = rank;
    if ((st = share_key(p->job, h.key)) != WEX_OK ||
        (st = path_for(h.key, dir, side, rank, path, sizeof(path))) !=
            WEX_OK)
        return st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return wex__error(WEX_ERR_SYSTEM, "%s: cannot make the directory: %s", dir,
                          strerror(errno));
    put_u64(&o, p->src.ranks);
    put_u64(&o, p->dst.ranks);
    put_u64(&o, wex__planner_sides_digest(p));
    put_u64(&o, (p->src.ranks + 7) / 8 + 1);
    put_bytes(&o, replicated, (p->src.ranks + 7) / 8 + 1);
    put_layout(&o, &mine->layouts[rank]);
    st = put_peer_tensors(&o, p, side, ops, count);
    put_u64(&o, count);
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

/* ---- reading ------------------------------------------------------------ */

typedef struct in_buf {
    const unsigned char *p;
    size_t len, at;
    const char *bad; /* what first did not fit; NULL while all did */
} in_buf;

static uint64_t get_u64(in_buf *in)
{
    uint64_t v = 0;

    for (unsigned shift = 0; !in->bad; shift += 7) {
        unsigned char b;
        if (in->at >= in->len || shift > 63) {
            in->bad = "a field runs past the end";
            break;
        }
        b = in->p[in->at++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    return 0;
}

static int64_t get_i64(in_buf *in)
{
    uint64_t v = get_u64(in);

    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A count of things at least one byte each: never more than what is
 * left, so damage cannot ask for a huge allocation. */
static size_t get_count(in_buf *in)
{
    uint64_t n = get_u64(in);

    if (!in->bad && n > in->len - in->at) {
        in->bad = "a count exceeds the data";
        return 0;
    }
    return (size_t)n;
}

static uint64_t get_below(in_buf *in, uint64_t limit, const char *what)
{
    uint64_t v = get_u64(in);

    if (!in->bad && v >= limit) {
        in->bad = what;
        return 0;
    }
    return v;
}

static char *get_str(in_buf *in)
{
    size_t n = get_count(in);
    char *s;

    if (in->bad || (s = malloc(n + 1)) == NULL) {
        if (!in->bad)
            in->bad = "out of memory";
        return NULL;
    }
    memcpy(s, in->p + in->at, n);
    s[n] = '\0';
    in->at += n;
    return s;
}

static void get_array(in_buf *in, uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = get_u64(in);
}

static void get_tensor(in_buf *in, wex__local_tensor *t)
{
    t->name = get_str(in);
    t->dtype = (uint32_t)get_u64(in);
    t->ndim = (uint32_t)get_below(in, WEX_MAX_DIMS + 1, "a tensor's ndim");
    get_array(in, t->shape, t->ndim);
    t->bytes = get_u64(in);
}

static void *get_table(in_buf *in, size_t n, size_t size)
{
    void *v;

    if (in->bad)
        return NULL;
    if ((v = calloc(n ? n : 1, size)) == NULL)
        in->bad = "out of memory";
    return v;
}

static void get_layout(in_buf *in, wex__rank_layout *l)
{
    size_t n = get_count(in);

    if ((l->coords = get_table(in, n, sizeof(*l->coords))) == NULL)
        return;
    for (l->coord_count = 0; l->coord_count < n && !in->bad;
         l->coord_count++) {
        l->coords[l->coord_count].key = get_str(in);
        l->coords[l->coord_count].value = get_i64(in);
    }
    n = get_count(in);
    if ((l->tensors = get_table(in, n, sizeof(*l->tensors))) == NULL)
        return;
    l->tensor_cap = n;
    for (l->tensor_count = 0; l->tensor_count < n && !in->bad;
         l->tensor_count++) {
        get_tensor(in, &l->tensors[l->tensor_count]);
        l->bytes += l->tensors[l->tensor_count].bytes;
    }
    n = get_count(in);
    if ((l->pieces = get_table(in, n, sizeof(*l->pieces))) == NULL)
        return;
    l->piece_cap = n;
    for (l->piece_count = 0; l->piece_count < n && !in->bad;
         l->piece_count++) {
        wex__piece *pc = &l->pieces[l->piece_count];
        pc->canonical = get_u64(in);
        pc->tensor = get_below(in, l->tensor_count, "a piece's tensor");
        pc->transform = (uint32_t)get_u64(in);
        pc->ndim = (uint32_t)get_below(in, WEX_MAX_DIMS + 1, "a piece's ndim");
        get_array(in, pc->offset, pc->ndim);
        get_array(in, pc->extent, pc->ndim);
        get_array(in, pc->at, WEX_MAX_DIMS);
    }
}

static void side_alloc(in_buf *in, wex__side *s, const char *what,
                       uint64_t ranks)
{
    s->what = what;
    if (in->bad)
        return;
    if (ranks == 0 || ranks > UINT32_MAX) {
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
static void get_peer_tensor(in_buf *in, wex__rank_layout *l, uint64_t t)
{
    if (in->bad)
        return;
    if (t >= l->tensor_count) {
        wex__local_tensor *grown;
        if (t >= UINT32_MAX ||
            (grown = realloc(l->tensors, (t + 1) * sizeof(*grown))) == NULL) {
            in->bad = t >= UINT32_MAX ? "a peer tensor index" : "out of memory";
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

static void get_op(in_buf *in, const wex__planner *p, wex__op *op)
{
    op->src_rank = get_below(in, p->src.ranks, "an operation's source rank");
    op->src_tensor = get_u64(in);
    op->dst_rank = get_below(in, p->dst.ranks,
                             "an operation's destination rank");
    op->dst_tensor = get_u64(in);
    op->ndim = (uint32_t)get_below(in, WEX_MAX_DIMS + 1, "an operation's ndim");
    op->src_ndim = (uint32_t)get_below(in, WEX_MAX_DIMS + 1,
                                       "an operation's ndim");
    op->dst_ndim = (uint32_t)get_below(in, WEX_MAX_DIMS + 1,
                                       "an operation's ndim");
    op->dtype_size = (uint32_t)get_u64(in);
    op->src_dtype_size = (uint32_t)get_u64(in);
    op->transform = (uint32_t)get_u64(in);
    get_array(in, op->src_off, WEX_MAX_DIMS);
    get_array(in, op->dst_off, WEX_MAX_DIMS);
    get_array(in, op->extent, WEX_MAX_DIMS);
    op->bytes = get_u64(in);
    op->src_bytes = get_u64(in);
    op->canonical = get_u64(in);
    get_array(in, op->canon_off, 2);
    op->dst_piece = get_u64(in);
    op->scale_tensor = get_u64(in);
    get_array(in, op->scale_block, 2);
    get_array(in, op->scale_at, WEX_MAX_DIMS);
    if (!in->bad && (!tensor_known(&p->src, op->src_rank, op->src_tensor) ||
                     !tensor_known(&p->dst, op->dst_rank, op->dst_tensor)))
        in->bad = "an operation names a tensor the share does not hold";
}

static void get_cells(in_buf *in, wex__share *s)
{
    size_t groups = get_count(in), total = 0;

    if ((s->groups = get_table(in, groups, sizeof(*s->groups))) == NULL)
        return;
    for (size_t g = 0; g < groups && !in->bad; g++) {
        cell_group *cg = &s->groups[g];
        size_t n;
        wex__qcell *grown;
        cg->dst_rank = get_u64(in);
        cg->piece = get_u64(in);
        n = get_count(in);
        if (in->bad)
            break;
        if (g > 0 && (cg->dst_rank < cg[-1].dst_rank ||
                      (cg->dst_rank == cg[-1].dst_rank &&
                       cg->piece <= cg[-1].piece))) {
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
            get_array(in, cell->lo, 2);
            get_array(in, cell->hi, 2);
            cell->src_rank = get_u64(in);
            cell->src_piece = NULL;
        }
        s->group_count = g + 1;
    }
}

static void *read_whole(const char *path, size_t *len_p, int *missing)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    void *data = NULL;

    *missing = f == NULL && errno == ENOENT;
    if (f == NULL)
        return NULL;
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

/* Fills p's sides, its share and b from the payload; what did not fit
 * is named in in->bad. */
static void decode(in_buf *in, wex__planner *p, uint32_t side, uint64_t rank,
                   wex_plan_builder *b)
{
    wex__side *mine = side == WEX_SIDE_SOURCE ? &p->src : &p->dst;
    wex__side *theirs = side == WEX_SIDE_SOURCE ? &p->dst : &p->src;
    uint64_t src_ranks = get_u64(in), dst_ranks = get_u64(in);
    size_t n;

    side_alloc(in, &p->src, "source", src_ranks);
    side_alloc(in, &p->dst, "destination", dst_ranks);
    if (!in->bad && rank >= mine->ranks)
        in->bad = "the rank is outside its side";
    p->sides_digest = get_u64(in);
    p->sides_digest_known = 1;
    n = get_count(in);
    if (!in->bad && n != (src_ranks + 7) / 8 + 1)
        in->bad = "the replicated sources' bits";
    if ((p->replicated = get_table(in, n, 1)) != NULL) {
        memcpy(p->replicated, in->p + in->at, n);
        in->at += n;
    }
    if (!in->bad)
        get_layout(in, &mine->layouts[rank]);
    n = get_count(in);
    for (size_t i = 0; i < n && !in->bad; i++) {
        uint64_t r = get_below(in, theirs->ranks, "a peer's rank");
        get_peer_tensor(in, &theirs->layouts[r], get_u64(in));
    }
    n = get_count(in);
    if (!in->bad && (b->ops = calloc(n ? n : 1, sizeof(*b->ops))) == NULL)
        in->bad = "out of memory";
    for (size_t i = 0; i < n && !in->bad; i++) {
        get_op(in, p, &b->ops[i]);
        if (!in->bad && (side == WEX_SIDE_SOURCE ? b->ops[i].src_rank
                                                 : b->ops[i].dst_rank) != rank)
            in->bad = "an operation of another rank";
        b->count = b->cap = i + 1;
    }
    if (!in->bad && (p->share = calloc(1, sizeof(*p->share))) == NULL)
        in->bad = "out of memory";
    if (!in->bad)
        get_cells(in, p->share);
    if (!in->bad && in->at != in->len)
        in->bad = "bytes past the end of what it holds";
}

int wex__planner_open_share(wex__planner *p, wex__registry *registry,
                            wex__job_config *job, const char *dir,
                            uint32_t side, uint64_t rank, wex_plan_builder *b)
{
    char path[4096];
    uint64_t key[2];
    size_t len = 0;
    int missing = 0;
    const share_header *h;
    unsigned char *data;
    in_buf in = {0};

    memset(p, 0, sizeof(*p));
    if (share_key(job, key) != WEX_OK ||
        path_for(key, dir, side, rank, path, sizeof(path)) != WEX_OK) {
        WEX__DEBUG("plan share: %s", wex__last_error());
        return 0;
    }
    if ((data = read_whole(path, &len, &missing)) == NULL) {
        if (missing)
            WEX__DEBUG("plan share: none at %s: planning", path);
        else
            WEX__WARN("plan share %s: cannot read it: planning instead",
                      path);
        return 0;
    }
    h = (const share_header *)data;
    if (len < sizeof(*h) || memcmp(h->magic, share_magic, 8) != 0)
        in.bad = "not a plan share";
    else if (h->format != SHARE_FORMAT || h->side != side ||
             h->rank != rank || h->key[0] != key[0] || h->key[1] != key[1])
        in.bad = "made for another job, rank or format";
    else if (h->payload_bytes != len - sizeof(*h) ||
             XXH3_64bits(data + sizeof(*h), len - sizeof(*h)) !=
                 h->payload_hash)
        in.bad = "its checksum does not match (damaged or cut short)";
    wex__plan_builder_init(b, &p->src, &p->dst);
    if (!in.bad) {
        in.p = data + sizeof(*h);
        in.len = len - sizeof(*h);
        p->job = job;
        p->registry = registry;
        decode(&in, p, side, rank, b);
    }
    if (!in.bad &&
        wex__topology_place(job->topology, job->path, &p->src, &p->dst,
                            &p->topology) != WEX_OK)
        in.bad = wex__last_error();
    free(data);
    if (in.bad) {
        WEX__WARN("plan share %s: %s: planning instead", path, in.bad);
        wex__plan_builder_fini(b);
        p->job = NULL; /* still the caller's */
        wex__planner_close(p);
        return 0;
    }
    p->topology_view = wex__options_view(job->topology);
    WEX__DEBUG("plan share: %s rank %llu opened from %s (%zu operations)",
               side_word(side), (unsigned long long)rank, path, b->count);
    return 1;
}

int wex__share_cells(const wex__share *share, uint64_t dst_rank,
                     uint64_t piece, const wex__qcell **cells, size_t *count)
{
    size_t lo = 0, hi = share->group_count;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const cell_group *g = &share->groups[mid];
        if (g->dst_rank == dst_rank && g->piece == piece) {
            *cells = share->cells + g->first;
            *count = g->count;
            return 1;
        }
        if (g->dst_rank < dst_rank ||
            (g->dst_rank == dst_rank && g->piece < piece))
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}
