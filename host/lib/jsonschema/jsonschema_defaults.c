/*
 * Filling in "default" values (wex__schema_apply_defaults, jsonschema.h).
 */
#include "jsonschema.h"
#include "jsonschema_priv.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Defaults                                                            */
/* ------------------------------------------------------------------ */

struct filler {
    const cJSON *root;
    int depth; /* as in struct validator */
    int ref_hops;
    int frames;
    /* Properties whose default was inserted on the way down: a default that
     * (through $ref) implies itself again would otherwise grow forever. */
    const cJSON *inserted[WEX__SCHEMA_MAX_DEPTH];
    int ninserted;
};

static int fill(struct filler *f, const cJSON *schema, cJSON *inst);

/* The default a property's subschema declares, directly or behind $ref. */
static const cJSON *find_default(const cJSON *root, const cJSON *schema)
{
    int hops;

    for (hops = 0; cJSON_IsObject(schema) && hops <= WEX__SCHEMA_MAX_REF_HOPS;
         hops++) {
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(schema, "default");
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(schema, "$ref");

        if (def)
            return def;
        if (!cJSON_IsString(ref))
            return NULL;
        schema = wex__js_resolve(root, ref->valuestring);
    }
    return NULL;
}

static int fill_child(struct filler *f, const cJSON *schema, cJSON *child)
{
    int hops = f->ref_hops, rc;

    if (f->depth >= WEX__SCHEMA_MAX_DEPTH)
        return 0;
    f->depth++;
    f->ref_hops = 0;
    rc = fill(f, schema, child);
    f->depth--;
    f->ref_hops = hops;
    return rc;
}

static bool inserted_above(const struct filler *f, const cJSON *prop)
{
    int i;

    for (i = 0; i < f->ninserted; i++)
        if (f->inserted[i] == prop)
            return true;
    return false;
}

/* Adds a copy of the property's default, and its own defaults beneath. */
static int insert_default(struct filler *f, const cJSON *prop, cJSON *inst)
{
    const cJSON *def = find_default(f->root, prop);
    cJSON *copy;
    int rc;

    if (!def || inserted_above(f, prop) ||
        f->ninserted >= WEX__SCHEMA_MAX_DEPTH)
        return 0;
    copy = cJSON_Duplicate(def, 1);
    if (!copy || !cJSON_AddItemToObject(inst, prop->string, copy)) {
        cJSON_Delete(copy);
        return -ENOMEM;
    }
    f->inserted[f->ninserted++] = prop;
    rc = fill_child(f, prop, copy);
    f->ninserted--;
    return rc;
}

static int fill_properties(struct filler *f, const cJSON *props, cJSON *inst)
{
    const cJSON *prop;
    int rc = 0;

    for (prop = props->child; prop && rc == 0; prop = prop->next) {
        cJSON *child = cJSON_GetObjectItemCaseSensitive(inst, prop->string);

        rc = child ? fill_child(f, prop, child) : insert_default(f, prop, inst);
    }
    return rc;
}

static int fill(struct filler *f, const cJSON *schema, cJSON *inst)
{
    const cJSON *props, *items, *ref, *all, *sub;
    cJSON *elem;
    int rc = 0;

    if (!cJSON_IsObject(schema) || f->frames >= WEX__SCHEMA_MAX_FRAMES)
        return 0;
    f->frames++;
    /* The schema's own properties first: the most specific defaults win. */
    props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    if (cJSON_IsObject(props) && cJSON_IsObject(inst))
        rc = fill_properties(f, props, inst);
    items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    if (items && cJSON_IsArray(inst))
        for (elem = inst->child; elem && rc == 0; elem = elem->next)
            rc = fill_child(f, items, elem);
    ref = cJSON_GetObjectItemCaseSensitive(schema, "$ref");
    if (rc == 0 && cJSON_IsString(ref) &&
        f->ref_hops < WEX__SCHEMA_MAX_REF_HOPS) {
        f->ref_hops++;
        rc = fill(f, wex__js_resolve(f->root, ref->valuestring), inst);
        f->ref_hops--;
    }
    all = cJSON_GetObjectItemCaseSensitive(schema, "allOf");
    if (cJSON_IsArray(all))
        for (sub = all->child; sub && rc == 0; sub = sub->next)
            rc = fill(f, sub, inst);
    f->frames--;
    return rc;
}

int wex__schema_apply_defaults(const cJSON *schema, cJSON *document)
{
    struct filler f = {.root = schema};

    if (!schema || !document)
        return -EINVAL;
    return fill(&f, schema, document);
}
