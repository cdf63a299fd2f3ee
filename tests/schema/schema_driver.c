/*
 * schema_driver SCHEMA.json DOC.json
 *
 * Command-line face of wex__schema_validate for tests/schema/crosscheck.py.
 * Prints "valid" and exits 0; or one "POINTER: MESSAGE" line per error and
 * exits 1; exits 2 when it cannot validate: an unreadable file, invalid
 * JSON, a malformed schema (its "schema:..." line is printed) or no memory.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "jsonschema.h"

/* Reads and parses a whole file; NULL (after saying why) on failure. */
static cJSON *load(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    cJSON *json = NULL;
    long size;

    if (!f) {
        fprintf(stderr, "schema_driver: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "schema_driver: %s: cannot seek\n", path);
        goto out;
    }
    text = malloc((size_t)size + 1);
    if (!text || fread(text, 1, (size_t)size, f) != (size_t)size) {
        fprintf(stderr, "schema_driver: %s: cannot read\n", path);
        goto out;
    }
    text[size] = '\0';
    json = cJSON_ParseWithLength(text, (size_t)size);
    if (!json)
        fprintf(stderr, "schema_driver: %s: invalid JSON near byte %ld\n", path,
                (long)(cJSON_GetErrorPtr() - text));
out:
    free(text);
    fclose(f);
    return json;
}

int main(int argc, char **argv)
{
    wex__schema_result result = {0};
    cJSON *schema = NULL, *doc = NULL;
    int status = 2, rc;
    size_t i;

    if (argc != 3) {
        fprintf(stderr, "usage: %s SCHEMA.json DOC.json\n", argv[0]);
        return 2;
    }
    schema = load(argv[1]);
    doc = schema ? load(argv[2]) : NULL;
    if (!doc)
        goto out;
    rc = wex__schema_validate(schema, doc, &result);
    if (rc == 0)
        printf("valid\n");
    for (i = 0; i < result.count; i++)
        printf("%s: %s\n", result.errors[i].pointer, result.errors[i].message);
    if (rc == -ENOMEM)
        fprintf(stderr, "schema_driver: out of memory\n");
    status = rc == 0 ? 0 : rc > 0 ? 1 : 2;
out:
    wex__schema_result_free(&result);
    cJSON_Delete(doc);
    cJSON_Delete(schema);
    return status;
}
