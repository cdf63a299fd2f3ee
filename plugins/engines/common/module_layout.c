/* How a transformers model's modules hold a checkpoint (module_layout.h). */
#include "module_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "holding.h"
#include "plugin_fail.h"
#include "plugin_options.h"

wex_status ws_read_modules(const wex_host_services *h,
                           const wex_options *options, uint32_t *modules_p)
{
    static const char *const names[] = {"checkpoint", "transformers-4",
                                        "transformers-5", NULL};
    static const uint32_t values[] = {WS_MODULES_CHECKPOINT,
                                      WS_MODULES_TRANSFORMERS_4,
                                      WS_MODULES_TRANSFORMERS_5};
    int i = 0;
    wex_status st = wp_option_enum(h, options, "/modules", names, &i);

    if (st == WEX_OK)
        *modules_p = values[i];
    return st;
}

/* ---- reading names ------------------------------------------------------ */

/* The leaf names of an expert's three weights, transformers-4 style:
 * (gate, up, down), Qwen/DeepSeek and Mixtral. */
static const char *const leaves[2][3] = {
    {"gate_proj.weight", "up_proj.weight", "down_proj.weight"},
    {"w1.weight", "w3.weight", "w2.weight"}};

/* Whether `name` is expert 0's gate (part 0) or down (part 2) weight:
 * its prefix before ".experts.0." into prefix, its naming into *style. */
static int first_expert(const char *name, char *prefix, size_t cap, int *style,
                        int *part)
{
    const char *at = strstr(name, ".experts.0.");
    size_t n;

    if (at == NULL || (n = (size_t)(at - name)) + 1 > cap)
        return 0;
    for (int s = 0; s < 2; s++)
        for (int p = 0; p < 3; p += 2)
            if (strcmp(at + strlen(".experts.0."), leaves[s][p]) == 0) {
                memcpy(prefix, name, n);
                prefix[n] = '\0';
                *style = s;
                *part = p;
                return 1;
            }
    return 0;
}

/* `name` with its ".block_sparse_moe" segment as ".mlp" (Mixtral's MoE
 * block, as transformers 5 names it), into out. */
static void mlp_name(const char *name, char *out, size_t cap)
{
    static const char from[] = ".block_sparse_moe";
    const char *at = strstr(name, from);

    while (at != NULL && at[sizeof(from) - 1] != '.' &&
           at[sizeof(from) - 1] != '\0')
        at = strstr(at + 1, from);
    if (at == NULL) {
        snprintf(out, cap, "%s", name);
        return;
    }
    snprintf(out, cap, "%.*s.mlp%s", (int)(at - name), name,
             at + sizeof(from) - 1);
}

/* A layer transformers does not build: model.layers.K.* with K at or past
 * config.num_hidden_layers (DeepSeek-V3's MTP layer). */
static int beyond_layers(const char *name, int64_t layers)
{
    static const char head[] = "model.layers.";
    char *end;
    long long k;

    if (layers <= 0 || strncmp(name, head, sizeof(head) - 1) != 0)
        return 0;
    k = strtoll(name + sizeof(head) - 1, &end, 10);
    return end != name + sizeof(head) - 1 && *end == '.' && k >= layers;
}

/* DeepSeek's top-k router (a gate with a score-correction bias): its
 * weight and bias, which transformers 5 keeps in float32. */
static int fp32_router(const wex_host_services *h, const wex_model *model,
                       const char *name)
{
    static const char *const tails[] = {".mlp.gate.weight",
                                        ".mlp.gate.e_score_correction_bias"};
    char sibling[1024];
    uint64_t index;

    for (int t = 0; t < 2; t++) {
        size_t n = strlen(name), k = strlen(tails[t]);
        if (n <= k || strcmp(name + n - k, tails[t]) != 0 ||
            n - k + sizeof(".mlp.gate.e_score_correction_bias") >
                sizeof(sibling))
            continue;
        snprintf(sibling, sizeof(sibling), "%.*s%s", (int)(n - k), name,
                 tails[1]);
        return h->model_find(model, sibling, &index) == WEX_OK;
    }
    return 0;
}

/* ---- the module tensors ------------------------------------------------- */

typedef struct list {
    ws_module_tensor *t;
    size_t n, cap;
} list;

static ws_module_tensor *push(list *l)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        ws_module_tensor *grown = realloc(l->t, cap * sizeof(*grown));
        if (grown == NULL)
            return NULL;
        l->t = grown;
        l->cap = cap;
    }
    memset(&l->t[l->n], 0, sizeof(l->t[l->n]));
    return &l->t[l->n++];
}

/* The stacked tensor whose expert 0 `part` weight canonical tensor
 * `first` is: every expert e of `prefix` found, in order, marked taken. */
static wex_status stack(const wex_host_services *h, const wex_model *model,
                        const char *prefix, int style, int part, uint32_t hold,
                        uint8_t *taken, ws_module_tensor *t)
{
    uint32_t parts = part == 0 ? 2 : 1;
    uint64_t experts = 0, cap = 16;
    char name[1100], local[1024];

    if ((t->members = malloc(cap * parts * sizeof(*t->members))) == NULL)
        return WEX_ERR_NOMEM;
    for (;; experts++) {
        uint64_t index[2];
        int found = 1;
        for (uint32_t p = 0; p < parts && found; p++) {
            snprintf(name, sizeof(name), "%s.experts.%llu.%s", prefix,
                     (unsigned long long)experts, leaves[style][part + p]);
            found = h->model_find(model, name, &index[p]) == WEX_OK;
        }
        if (!found)
            break;
        if (experts == cap) {
            uint64_t *grown =
                realloc(t->members, 2 * cap * parts * sizeof(*grown));
            if (grown == NULL)
                return WEX_ERR_NOMEM;
            t->members = grown;
            cap *= 2;
        }
        for (uint32_t p = 0; p < parts; p++) {
            wex_tensor_info info = {sizeof(info), 0, 0, 0, NULL, NULL};
            t->members[experts * parts + p] = index[p];
            taken[index[p]] = 1;
            if (h->model_tensor(model, index[p], &info) == WEX_OK && !hold &&
                info.dtype == WEX_DTYPE_F8_E4M3)
                return WP_FAIL(h, WEX_ERR_INVALID,
                               "options/modules: transformers-5 stacks the "
                               "experts of %s, which the checkpoint holds as "
                               "fp8 blocks; hold them as floats "
                               "(options/dtype \"bf16\")",
                               prefix);
        }
    }
    mlp_name(prefix, local, sizeof(local));
    snprintf(name, sizeof(name), "%s.experts.%s", local,
             part == 0 ? "gate_up_proj" : "down_proj");
    t->name = strdup(name);
    t->canonical = t->members[0];
    t->experts = experts;
    t->parts = parts;
    return t->name != NULL ? WEX_OK : WEX_ERR_NOMEM;
}

wex_status ws_module_tensors(const wex_host_services *h, const wex_model *model,
                             uint32_t modules, uint32_t hold,
                             ws_module_tensor **out_p, size_t *count_p)
{
    uint64_t count = h->model_tensor_count(model);
    uint8_t *taken = calloc(count ? count : 1, 1);
    int64_t layers = 0;
    list l = {NULL, 0, 0};
    wex_status st = taken != NULL ? WEX_OK : WEX_ERR_NOMEM;

    if (modules != WS_MODULES_CHECKPOINT && h->model_config(model) != NULL &&
        h->opt_get_i64(h->model_config(model), "/num_hidden_layers", &layers) !=
            WEX_OK)
        layers = 0;
    for (uint64_t i = 0; st == WEX_OK && i < count; i++) {
        wex_tensor_info info = {sizeof(info), 0, 0, 0, NULL, NULL};
        char prefix[1024], name[1024];
        int style, part;
        ws_module_tensor *t;

        if (taken[i])
            continue;
        if ((st = h->model_tensor(model, i, &info)) != WEX_OK)
            break;
        if ((hold && ws_is_block_scale(h, model, i)) ||
            (modules != WS_MODULES_CHECKPOINT &&
             beyond_layers(info.name, layers)))
            continue; /* floats hold no block scales; no MTP module */
        if ((t = push(&l)) == NULL) {
            st = WEX_ERR_NOMEM;
            break;
        }
        if (modules == WS_MODULES_TRANSFORMERS_5 &&
            first_expert(info.name, prefix, sizeof(prefix), &style, &part)) {
            st = stack(h, model, prefix, style, part, hold, taken, t);
            continue;
        }
        t->canonical = i;
        if (modules == WS_MODULES_TRANSFORMERS_5) {
            mlp_name(info.name, name, sizeof(name));
            t->fp32 = fp32_router(h, model, info.name);
        } else {
            snprintf(name, sizeof(name), "%s", info.name);
        }
        if ((t->name = strdup(name)) == NULL)
            st = WEX_ERR_NOMEM;
    }
    free(taken);
    if (st != WEX_OK) {
        ws_module_tensors_free(l.t, l.n);
        return st == WEX_ERR_NOMEM ? WP_FAIL(h, st, "out of memory") : st;
    }
    *out_p = l.t;
    *count_p = l.n;
    return WEX_OK;
}

void ws_module_tensors_free(ws_module_tensor *t, size_t count)
{
    for (size_t i = 0; t != NULL && i < count; i++) {
        free(t[i].name);
        free(t[i].members);
    }
    free(t);
}

/* ---- emitting ----------------------------------------------------------- */

uint64_t ws_module_rows(const wex_host_services *h, const wex_model *model,
                        const ws_module_tensor *t)
{
    wex_tensor_info info = {sizeof(info), 0, 0, 0, NULL, NULL};

    if (t->experts > 0)
        return t->experts;
    if (h->model_tensor(model, t->canonical, &info) != WEX_OK)
        return 0;
    return info.ndim > 0 ? info.shape[0] : 1;
}

wex_status ws_module_emit(const wex_host_services *h, const wex_model *model,
                          wex_layout_builder *b, const ws_module_tensor *t,
                          uint32_t hold, uint64_t lo, uint64_t hi)
{
    wex_tensor_info info = {sizeof(info), 0, 0, 0, NULL, NULL};
    wex_local_tensor_desc local = {sizeof(local), 0, 0, 0, NULL, NULL};
    uint64_t shape[WEX_MAX_DIMS], offset[WEX_MAX_DIMS] = {0};
    uint64_t extent[WEX_MAX_DIMS], at[WEX_MAX_DIMS] = {0}, rows, tensor;
    wex_piece_desc piece = {
        sizeof(piece), WEX_TRANSFORM_NONE, t->canonical, offset, extent, at};
    wex_status st = h->model_tensor(model, t->canonical, &info);

    if (st != WEX_OK)
        return st;
    rows = ws_module_rows(h, model, t);
    if (hi > rows)
        hi = rows;
    if (lo > hi)
        lo = hi;
    local.dtype = t->fp32 ? WEX_DTYPE_F32 : ws_held_dtype(hold, info.dtype);
    piece.transform =
        local.dtype != info.dtype ? WEX_TRANSFORM_CONVERT : WEX_TRANSFORM_NONE;
    local.name = t->name;
    local.shape = shape;
    if (t->experts == 0) { /* the canonical tensor's rows [lo, hi) */
        local.ndim = info.ndim;
        for (uint32_t d = 0; d < info.ndim; d++)
            shape[d] = extent[d] = info.shape[d];
        if (info.ndim > 0) {
            shape[0] = hi - lo;
            offset[0] = lo;
            extent[0] = hi - lo;
        }
        st = h->layout_add_tensor(b, &local, &tensor);
        if (st == WEX_OK && (info.ndim == 0 || hi > lo))
            st = h->layout_add_piece(b, tensor, &piece);
        return st;
    }
    /* experts [lo, hi), each `parts` canonical tensors on dim 1 */
    local.ndim = info.ndim + 1;
    shape[0] = hi - lo;
    for (uint32_t d = 0; d < info.ndim; d++)
        shape[d + 1] = extent[d] = info.shape[d];
    shape[1] *= t->parts;
    st = h->layout_add_tensor(b, &local, &tensor);
    for (uint64_t e = lo; st == WEX_OK && e < hi; e++)
        for (uint32_t p = 0; st == WEX_OK && p < t->parts; p++) {
            piece.canonical = t->members[e * t->parts + p];
            at[0] = e - lo;
            at[1] = (uint64_t)p * info.shape[0];
            st = h->layout_add_piece(b, tensor, &piece);
        }
    return st;
}
