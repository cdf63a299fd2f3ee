/*
 * fuzz_schema: the JSON Schema validator (jsonschema.h).
 *
 * The input is split at its first NUL byte into a schema and a document
 * (no NUL: the whole input is the document). With both parts JSON, the
 * document is validated against the schema; when the schema is well
 * formed, defaults are applied to a copy of the document and the copy
 * validated again. Whatever the split, the document is also validated
 * against every schema libwex embeds (wex__schema), defaults applied when
 * it is valid, as the job and manifest readers do.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonschema.h"
#include "schema_store.h"

#include "fuzz_util.h"

static const char *const embedded[] = {"job", "manifest", "layout", "plan",
                                       "run-report"};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (size_t i = 0; i < sizeof(embedded) / sizeof(embedded[0]); i++)
        if (wex__schema(embedded[i]) == NULL) {
            fprintf(stderr, "fuzz_schema: no embedded schema %s\n",
                    embedded[i]);
            exit(1);
        }
    return 0;
}

/* Checks the shape of a result against its return value. */
static void check_result(int rc, const wex__schema_result *r)
{
    FUZZ_CHECK(rc == 0 || rc > 0 || rc == -EINVAL || rc == -ENOMEM);
    if (rc == 0)
        FUZZ_CHECK(r->count == 0);
    if (rc > 0)
        FUZZ_CHECK(r->count == (size_t)rc);
    if (rc == -EINVAL) {
        FUZZ_CHECK(r->count >= 1);
        FUZZ_CHECK(strncmp(r->errors[0].pointer, "schema:", 7) == 0);
    }
    for (size_t i = 0; i < r->count; i++)
        FUZZ_CHECK(r->errors[i].pointer != NULL &&
                   r->errors[i].message != NULL &&
                   strchr(r->errors[i].message, '\n') == NULL);
}

/* Validates, then (schema well formed, or document valid when `only_valid`)
 * applies defaults to a copy and validates the copy again. */
static void validate(const cJSON *schema, const cJSON *doc, int only_valid)
{
    wex__schema_result r = {0, NULL};
    int rc = wex__schema_validate(schema, doc, &r);
    cJSON *copy;

    check_result(rc, &r);
    wex__schema_result_free(&r);
    FUZZ_CHECK(r.count == 0 && r.errors == NULL);
    if (rc < 0 || (only_valid && rc != 0))
        return;
    copy = cJSON_Duplicate(doc, 1);
    if (copy == NULL)
        return; /* cJSON refuses to copy past its nesting limit */
    FUZZ_CHECK(wex__schema_apply_defaults(schema, copy) == 0);
    rc = wex__schema_validate(schema, copy, &r);
    check_result(rc, &r);
    wex__schema_result_free(&r);
    cJSON_Delete(copy);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nul = memchr(data, 0, size);
    cJSON *schema = NULL, *doc;

    if (nul != NULL) {
        size_t n = (size_t)(nul - data);
        schema = cJSON_ParseWithLength((const char *)data, n);
        doc = cJSON_ParseWithLength((const char *)nul + 1, size - n - 1);
    } else {
        doc = cJSON_ParseWithLength((const char *)data, size);
    }
    if (schema != NULL && doc != NULL)
        validate(schema, doc, 0);
    if (doc != NULL)
        for (size_t i = 0; i < sizeof(embedded) / sizeof(embedded[0]); i++)
            validate(wex__schema(embedded[i]), doc, 1);
    /* NULL arguments are an error, not a crash. */
    FUZZ_CHECK(wex__schema_validate(schema, NULL, NULL) == -EINVAL);
    cJSON_Delete(schema);
    cJSON_Delete(doc);
    return 0;
}
