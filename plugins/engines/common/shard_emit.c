#include "shard_emit.h"

#include "holding.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t zeros[WEX_MAX_DIMS];

/* fp8 checkpoints quantize in blocks (DeepSeek-V3, Kimi-K2: 128 x 128);
 * weight_block_size says so, 128 x 128 when the config is silent. */
static void read_block(ws_emit *e)
{
    const wex_host_services *h = e->host;
    const wex_options *cfg = h->model_config(e->model);
    const char *method = NULL;
    int64_t rows = 128, cols = 128;

    if (h->opt_get_str(cfg, "/quantization_config/quant_method", &method) !=
            WEX_OK ||
        strcmp(method, "fp8") != 0)
        return;
    if (h->opt_type(cfg, "/quantization_config/weight_block_size") ==
        WEX_JSON_ARRAY) {
        h->opt_get_i64(cfg, "/quantization_config/weight_block_size/0", &rows);
        h->opt_get_i64(cfg, "/quantization_config/weight_block_size/1", &cols);
    }
    if (rows > 0 && cols > 0) {
        e->block[0] = (uint64_t)rows;
        e->block[1] = (uint64_t)cols;
    }
}

void ws_emit_init(ws_emit *e, const wex_host_services *host,
                  const wex_model *model, wex_layout_builder *builder)
{
    memset(e, 0, sizeof(*e));
    e->host = host;
    e->model = model;
    e->builder = builder;
    read_block(e);
}

void ws_emit_fini(ws_emit *e)
{
    free(e->pieces);
    e->pieces = NULL;
    e->count = e->cap = 0;
}

wex_status ws_status(const ws_emit *e)
{
    return e->status;
}

wex_status ws_fail(ws_emit *e, wex_status status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    if (e->status != WEX_OK)
        return e->status;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    e->host->set_error(e->host->ctx, status, "%s", msg);
    e->status = status;
    return status;
}

static int64_t vfind(const ws_emit *e, const char *fmt, va_list ap)
{
    char name[WS_NAME_MAX];
    uint64_t index;
    int n = vsnprintf(name, sizeof(name), fmt, ap);

    if (n < 0 || (size_t)n >= sizeof(name))
        return -1;
    if (e->host->model_find(e->model, name, &index) != WEX_OK)
        return -1;
    return (int64_t)index;
}

int64_t ws_find(const ws_emit *e, const char *fmt, ...)
{
    va_list ap;
    int64_t index;

    va_start(ap, fmt);
    index = vfind(e, fmt, ap);
    va_end(ap);
    return index;
}

int64_t ws_find_kept(const ws_emit *e, int64_t *kept, const char *fmt, ...)
{
    va_list ap;

    if (kept != NULL && *kept != WS_NOT_LOOKED_UP)
        return *kept;
    va_start(ap, fmt);
    int64_t index = vfind(e, fmt, ap);
    va_end(ap);
    if (kept != NULL)
        *kept = index;
    return index;
}

ws_canon ws_canon_of(const ws_emit *e, int64_t canonical)
{
    wex_tensor_info info = {sizeof(info), 0, 0, 0, NULL, NULL};
    ws_canon c = {0, 0, zeros, ""};

    if (canonical >= 0 &&
        e->host->model_tensor(e->model, (uint64_t)canonical, &info) == WEX_OK) {
        c.dtype = info.dtype;
        c.ndim = info.ndim;
        c.shape = info.shape;
        c.name = info.name;
    }
    return c;
}

uint64_t ws_dim(const ws_emit *e, int64_t canonical, uint32_t dim)
{
    ws_canon c = ws_canon_of(e, canonical);

    return dim < c.ndim ? c.shape[dim] : 0;
}

wex_status ws_coord(ws_emit *e, const char *key, int64_t value)
{
    wex_status st;

    if (e->status != WEX_OK)
        return e->status;
    st = e->host->layout_set_coord(e->builder, key, value);
    if (st != WEX_OK)
        e->status = st;
    return e->status;
}

void ws_begin(ws_emit *e, uint32_t dtype, uint32_t ndim, const uint64_t *shape,
              const char *fmt, ...)
{
    va_list ap;
    int n;

    e->count = 0;
    e->scales_dropped = 0;
    e->dtype = dtype;
    e->ndim = ndim;
    if (e->status != WEX_OK)
        return;
    if (ndim == 0 || ndim > WEX_MAX_DIMS) {
        ws_fail(e, WEX_ERR_INTERNAL, "local tensor of rank %u", ndim);
        return;
    }
    memcpy(e->shape, shape, ndim * sizeof(*shape));
    va_start(ap, fmt);
    n = vsnprintf(e->name, sizeof(e->name), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(e->name))
        ws_fail(e, WEX_ERR_INTERNAL, "local tensor name too long: %s", e->name);
}

void ws_piece_add(ws_emit *e, int64_t canonical, const uint64_t *offset,
                  const uint64_t *extent, const uint64_t *at)
{
    ws_canon c;
    ws_piece *p;

    if (e->status != WEX_OK)
        return;
    c = ws_canon_of(e, canonical);
    if (e->hold != 0 && c.ndim != 0 &&
        ws_is_block_scale(e->host, e->model, (uint64_t)canonical)) {
        e->scales_dropped++; /* floats hold no block scales */
        return;
    }
    if (c.ndim == 0) {
        ws_fail(e, WEX_ERR_INTERNAL,
                "local tensor %s: no canonical tensor #%lld", e->name,
                (long long)canonical);
        return;
    }
    if (e->count == e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 16;
        ws_piece *grown = realloc(e->pieces, cap * sizeof(*grown));
        if (grown == NULL) {
            ws_fail(e, WEX_ERR_NOMEM, "out of memory");
            return;
        }
        e->pieces = grown;
        e->cap = cap;
    }
    p = &e->pieces[e->count++];
    p->canonical = canonical;
    p->ndim = c.ndim;
    memcpy(p->offset, offset, c.ndim * sizeof(*offset));
    memcpy(p->extent, extent, c.ndim * sizeof(*extent));
    memcpy(p->at, at, e->ndim * sizeof(*at));
    if (e->dtype == 0)
        e->dtype = c.dtype;
}

/* Local coordinates of a piece whose box starts at local `at_major` in
 * the canonical tensor's dimension `dim`, under leading index `lead`. */
static void place(const ws_emit *e, uint32_t cndim, uint32_t dim,
                  uint64_t at_major, uint64_t lead, uint64_t *at)
{
    uint32_t shift = e->ndim - cndim; /* leading (stacked) dims */

    memset(at, 0, sizeof(uint64_t) * WEX_MAX_DIMS);
    if (shift > 0 && lead != WS_NONE)
        at[shift - 1] = lead;
    at[shift + dim] = at_major;
}

static void slab(ws_emit *e, int64_t canonical, uint32_t dim, uint64_t start,
                 uint64_t count, uint64_t lead, uint64_t at_major)
{
    ws_canon c = ws_canon_of(e, canonical);
    uint64_t offset[WEX_MAX_DIMS] = {0}, extent[WEX_MAX_DIMS], at[WEX_MAX_DIMS];

    if (e->status != WEX_OK || count == 0)
        return;
    if (c.ndim == 0 || dim >= c.ndim || c.ndim > e->ndim) {
        ws_fail(e, WEX_ERR_INTERNAL,
                "local tensor %s: canonical tensor #%lld cannot be sliced on "
                "dimension %u",
                e->name, (long long)canonical, dim);
        return;
    }
    memcpy(extent, c.shape, c.ndim * sizeof(*extent));
    offset[dim] = start;
    extent[dim] = count;
    place(e, c.ndim, dim, at_major, lead, at);
    ws_piece_add(e, canonical, offset, extent, at);
}

void ws_rows(ws_emit *e, int64_t canonical, uint64_t row, uint64_t rows,
             uint64_t lead, uint64_t at_row)
{
    slab(e, canonical, 0, row, rows, lead, at_row);
}

void ws_cols(ws_emit *e, int64_t canonical, uint64_t col, uint64_t cols,
             uint64_t lead, uint64_t at_col)
{
    slab(e, canonical, 1, col, cols, lead, at_col);
}

/* ---- fp8 block scales ------------------------------------------------ */

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return (a + b - 1) / b;
}

/* The scale piece of one weight piece: the same box in block units. A box
 * edge may fall between blocks only where the tensor itself ends. */
static int scale_piece(ws_emit *e, const ws_piece *w, int64_t scale,
                       ws_piece *s)
{
    ws_canon c = ws_canon_of(e, w->canonical);
    uint32_t lead = e->ndim - w->ndim;

    *s = *w;
    s->canonical = scale;
    for (uint32_t d = 0; d < w->ndim; d++) {
        uint64_t b = e->block[d + 2 - w->ndim];
        uint64_t lo = w->offset[d], hi = lo + w->extent[d];
        uint64_t at_lo = w->at[lead + d], at_hi = at_lo + w->extent[d];
        const char *what = d + 2 == w->ndim ? "row" : "column";

        if (lo % b || at_lo % b || (hi % b && hi != c.shape[d]) ||
            (at_hi % b && at_hi != e->shape[lead + d])) {
            ws_fail(e, WEX_ERR_INVALID,
                    "local tensor %s: %s %ss [%llu, %llu) do not fall on the "
                    "fp8 quantization blocks of %llu %ss (weight_block_size); "
                    "the engine refuses a parallel config that splits a block",
                    e->name, c.name, what, (unsigned long long)lo,
                    (unsigned long long)hi, (unsigned long long)b, what);
            return 0;
        }
        s->offset[d] = lo / b;
        s->extent[d] = ceil_div(hi, b) - lo / b;
        s->at[lead + d] = at_lo / b;
    }
    return 1;
}

/* Index of each piece's scale tensor; -1 entries mean "no scale". Returns
 * 1 when every piece has one, 0 when none has, and fails when mixed. */
static int scales_of(ws_emit *e, int64_t *scales)
{
    size_t with = 0;

    for (size_t i = 0; i < e->count; i++) {
        ws_canon c = ws_canon_of(e, e->pieces[i].canonical);
        scales[i] = -1;
        if (c.dtype == WEX_DTYPE_F8_E4M3 || c.dtype == WEX_DTYPE_F8_E5M2)
            scales[i] = ws_find_kept(
                e,
                e->scale_memo ? &e->scale_memo[e->pieces[i].canonical] : NULL,
                "%s_scale_inv", c.name);
        with += scales[i] >= 0;
    }
    if (with != 0 && with != e->count)
        ws_fail(
            e, WEX_ERR_INVALID,
            "local tensor %s mixes fp8 pieces with and without block scales",
            e->name);
    return with != 0 && with == e->count;
}

static wex_status add_tensor(ws_emit *e, const char *name, uint32_t dtype,
                             const uint64_t *shape, uint64_t *tensor_p)
{
    wex_local_tensor_desc d = {sizeof(d), dtype, e->ndim, 0, name, shape};
    wex_status st = e->host->layout_add_tensor(e->builder, &d, tensor_p);

    if (st != WEX_OK)
        e->status = st;
    return st;
}

static wex_status add_piece(ws_emit *e, uint64_t tensor, const ws_piece *p)
{
    wex_piece_desc d = {
        sizeof(d),
        ws_held_transform(e->hold, ws_canon_of(e, p->canonical).dtype),
        (uint64_t)p->canonical,
        p->offset,
        p->extent,
        p->at};
    wex_status st = e->host->layout_add_piece(e->builder, tensor, &d);

    if (st != WEX_OK)
        e->status = st;
    return st;
}

static void emit_scales(ws_emit *e, const int64_t *scales)
{
    char name[WS_NAME_MAX + 16];
    uint64_t shape[WEX_MAX_DIMS], tensor;
    uint32_t dtype = ws_canon_of(e, scales[0]).dtype;
    ws_piece s;

    if (e->ndim < 2) {
        ws_fail(e, WEX_ERR_INTERNAL, "local tensor %s: fp8 scales need 2 dims",
                e->name);
        return;
    }
    memcpy(shape, e->shape, e->ndim * sizeof(*shape));
    shape[e->ndim - 2] = ceil_div(shape[e->ndim - 2], e->block[0]);
    shape[e->ndim - 1] = ceil_div(shape[e->ndim - 1], e->block[1]);
    snprintf(name, sizeof(name), "%s_scale_inv", e->name);
    if (add_tensor(e, name, dtype, shape, &tensor) != WEX_OK)
        return;
    for (size_t i = 0; i < e->count && e->status == WEX_OK; i++)
        if (scale_piece(e, &e->pieces[i], scales[i], &s))
            add_piece(e, tensor, &s);
}

void ws_hold(ws_emit *e, uint32_t hold)
{
    e->hold = hold;
    if (hold != 0) { /* no scales to derive, no blocks to keep whole */
        e->block[0] = 0;
        e->block[1] = 0;
    }
}

wex_status ws_end(ws_emit *e)
{
    int64_t *scales = NULL;
    uint64_t tensor;
    int scaled = 0;

    if (e->status != WEX_OK)
        return e->status;
    /* A tensor of block scales alone goes, as floats do without them; one
     * that holds no canonical rows at all (a shard of vocabulary padding)
     * stays. */
    if (e->hold != 0 && e->count == 0 && e->scales_dropped > 0)
        return WEX_OK;
    if (e->hold != 0)
        e->dtype = e->hold;
    if (e->dtype == 0)
        return ws_fail(e, WEX_ERR_INTERNAL,
                       "local tensor %s has neither pieces nor a dtype",
                       e->name);
    if (e->block[0] != 0 && e->count > 0) {
        scales = malloc(e->count * sizeof(*scales));
        if (scales == NULL)
            return ws_fail(e, WEX_ERR_NOMEM, "out of memory");
        scaled = scales_of(e, scales);
    }
    if (e->status == WEX_OK &&
        add_tensor(e, e->name, e->dtype, e->shape, &tensor) == WEX_OK)
        for (size_t i = 0; i < e->count && e->status == WEX_OK; i++)
            add_piece(e, tensor, &e->pieces[i]);
    if (scaled && e->status == WEX_OK)
        emit_scales(e, scales);
    free(scales);
    e->count = 0;
    return e->status;
}

/* ---- one-call forms -------------------------------------------------- */

static void vbegin_like(ws_emit *e, int64_t canonical, uint32_t dim,
                        uint64_t size, const char *fmt, va_list ap)
{
    ws_canon c = ws_canon_of(e, canonical);
    uint64_t shape[WEX_MAX_DIMS];
    char name[WS_NAME_MAX];
    int n;

    n = vsnprintf(name, sizeof(name), fmt, ap);
    if (n < 0 || (size_t)n >= sizeof(name)) {
        ws_fail(e, WEX_ERR_INTERNAL, "local tensor name too long: %s", name);
        return;
    }
    if (c.ndim == 0) {
        ws_fail(e, WEX_ERR_INTERNAL,
                "local tensor %s: missing canonical tensor", name);
        return;
    }
    memcpy(shape, c.shape, c.ndim * sizeof(*shape));
    if (dim < c.ndim)
        shape[dim] = size;
    ws_begin(e, c.dtype, c.ndim, shape, "%s", name);
}

wex_status ws_whole(ws_emit *e, int64_t canonical, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vbegin_like(e, canonical, WEX_MAX_DIMS, 0, fmt, ap);
    va_end(ap);
    ws_rows(e, canonical, 0, ws_dim(e, canonical, 0), WS_NONE, 0);
    return ws_end(e);
}

wex_status ws_row_shard(ws_emit *e, int64_t canonical, uint64_t row,
                        uint64_t rows, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vbegin_like(e, canonical, 0, rows, fmt, ap);
    va_end(ap);
    ws_rows(e, canonical, row, rows, WS_NONE, 0);
    return ws_end(e);
}

wex_status ws_col_shard(ws_emit *e, int64_t canonical, uint64_t col,
                        uint64_t cols, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vbegin_like(e, canonical, 1, cols, fmt, ap);
    va_end(ap);
    ws_cols(e, canonical, col, cols, WS_NONE, 0);
    return ws_end(e);
}

uint64_t ws_share(const ws_emit *e, int64_t canonical, uint32_t dim,
                  int64_t parts)
{
    return ws_dim(e, canonical, dim) / (uint64_t)parts;
}

void ws_whole_if(ws_emit *e, int64_t canonical, const char *pre,
                 const char *rest)
{
    if (canonical >= 0)
        ws_whole(e, canonical, "%s%s", pre, rest);
}

void ws_row_part(ws_emit *e, int64_t canonical, int64_t parts, int64_t part,
                 const char *pre, const char *rest)
{
    uint64_t n = ws_share(e, canonical, 0, parts);

    if (canonical >= 0)
        ws_row_shard(e, canonical, (uint64_t)part * n, n, "%s%s", pre, rest);
}

void ws_col_part(ws_emit *e, int64_t canonical, int64_t parts, int64_t part,
                 const char *pre, const char *rest)
{
    uint64_t n = ws_share(e, canonical, 1, parts);

    if (canonical >= 0)
        ws_col_shard(e, canonical, (uint64_t)part * n, n, "%s%s", pre, rest);
}
