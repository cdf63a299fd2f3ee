#include "json_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fd_io.h"

wex_status wex__read_file(const char *path, char **data_p, size_t *len_p)
{
    wex_status status = WEX_OK;
    struct stat st;
    char *data = NULL;
    size_t done = 0;
    int fd;

    status = wex__open_regular(path, O_RDONLY, &fd);
    if (status != WEX_OK)
        return status;
    if (fstat(fd, &st) != 0) {
        status =
            wex__error(WEX_ERR_SYSTEM, "%s: fstat: %s", path, strerror(errno));
        goto out;
    }
    if ((unsigned long long)st.st_size > WEX__JSON_FILE_MAX) {
        status = wex__error(WEX_ERR_INVALID,
                            "%s: %lld bytes, more than the %u allowed", path,
                            (long long)st.st_size, WEX__JSON_FILE_MAX);
        goto out;
    }
    data = malloc((size_t)st.st_size + 1);
    if (data == NULL) {
        status = wex__error(WEX_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    while (done < (size_t)st.st_size) {
        ssize_t n = read(fd, data + done, (size_t)st.st_size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            status = wex__error(WEX_ERR_SYSTEM, "%s: read failed: %s", path,
                                n < 0 ? strerror(errno) : "short file");
            goto out;
        }
        done += (size_t)n;
    }
    data[done] = '\0';
    *data_p = data;
    *len_p = done;
    data = NULL;
out:
    free(data);
    close(fd);
    return status;
}

/* Line and column (both from 1) of `at` inside `text`. */
static void locate(const char *text, const char *at, int *line_p, int *col_p)
{
    int line = 1, col = 1;

    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    *line_p = line;
    *col_p = col;
}

/* `key` as one JSON Pointer reference token appended to `ptr` (RFC 6901:
 * "~" as "~0", "/" as "~1"); NULL when out of memory. */
static char *pointer_append(const char *ptr, const char *key)
{
    size_t n = strlen(ptr) + 2 * strlen(key) + 2, at;
    char *out = malloc(n);

    if (out == NULL)
        return NULL;
    at = (size_t)snprintf(out, n, "%s/", ptr);
    for (const char *k = key; *k; k++) {
        if (*k == '~' || *k == '/') {
            out[at++] = '~';
            out[at++] = *k == '~' ? '0' : '1';
        } else {
            out[at++] = *k;
        }
    }
    out[at] = '\0';
    return out;
}

static int by_key(const void *a, const void *b)
{
    const cJSON *const *x = a, *const *y = b;

    return strcmp((*x)->string, (*y)->string);
}

/* Refuses an object inside `v` (at JSON Pointer `ptr`) that names a key
 * twice: cJSON would keep the first, Python's json the last, and a job
 * must mean one thing to both. Sorted, so a weight_map of 100,000
 * tensors costs n log n. Nesting is bounded by cJSON (1000 levels). */
static wex_status no_duplicates(const char *name, const cJSON *v,
                                const char *ptr)
{
    wex_status st = WEX_OK;
    const cJSON **keys = NULL;
    const cJSON *e;
    size_t n = 0;

    if (!cJSON_IsObject(v) && !cJSON_IsArray(v))
        return WEX_OK;
    cJSON_ArrayForEach(e, v) n++;
    if (cJSON_IsObject(v) && n > 1) {
        size_t i = 0;
        if ((keys = malloc(n * sizeof(*keys))) == NULL)
            return wex__error(WEX_ERR_NOMEM, "%s: out of memory", name);
        cJSON_ArrayForEach(e, v) keys[i++] = e;
        qsort(keys, n, sizeof(*keys), by_key);
        for (i = 1; i < n; i++)
            if (strcmp(keys[i]->string, keys[i - 1]->string) == 0) {
                st = wex__error(WEX_ERR_INVALID,
                                "%s: %s: key \"%s\" appears "
                                "more than once",
                                name, ptr[0] ? ptr : "the top-level object",
                                keys[i]->string);
                goto out;
            }
    }
    {
        size_t i = 0;
        cJSON_ArrayForEach(e, v)
        {
            char index[24], *child;
            if (!cJSON_IsObject(e) && !cJSON_IsArray(e)) {
                i++;
                continue;
            }
            snprintf(index, sizeof(index), "%zu", i++);
            child = pointer_append(ptr, cJSON_IsObject(v) ? e->string : index);
            if (child == NULL) {
                st = wex__error(WEX_ERR_NOMEM, "%s: out of memory", name);
                goto out;
            }
            st = no_duplicates(name, e, child);
            free(child);
            if (st != WEX_OK)
                goto out;
        }
    }
out:
    free(keys);
    return st;
}

wex_status wex__json_parse(const char *name, const char *text, size_t len,
                           cJSON **doc_p)
{
    const char *end = NULL, *nul;
    wex_status st;
    cJSON *doc;
    int line, col;
    char near[24];
    size_t n;

    /* cJSON stops at a NUL and would take what came before it as the
     * whole document. */
    if ((nul = memchr(text, '\0', len)) != NULL)
        return wex__error(WEX_ERR_INVALID,
                          "%s: a NUL byte at offset %zu: "
                          "not JSON text",
                          name, (size_t)(nul - text));
    doc = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (doc != NULL) {
        const char *p = end;
        while (p < text + len &&
               (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
            p++;
        if (p < text + len) {
            locate(text, p, &line, &col);
            cJSON_Delete(doc);
            return wex__error(WEX_ERR_INVALID,
                              "%s:%d:%d: bytes after the "
                              "JSON value, from offset %zu",
                              name, line, col, (size_t)(p - text));
        }
        if ((st = no_duplicates(name, doc, "")) != WEX_OK) {
            cJSON_Delete(doc);
            return st;
        }
        *doc_p = doc;
        return WEX_OK;
    }
    if (end == NULL || end < text || end > text + len)
        end = text + len;
    locate(text, end, &line, &col);
    n = strcspn(end, "\n");
    if (n >= sizeof(near))
        n = sizeof(near) - 1;
    memcpy(near, end, n);
    near[n] = '\0';
    if (end >= text + len)
        return wex__error(WEX_ERR_INVALID,
                          "%s:%d:%d: invalid JSON: unexpected end of input",
                          name, line, col);
    return wex__error(WEX_ERR_INVALID, "%s:%d:%d: invalid JSON near '%s'", name,
                      line, col, near);
}

wex_status wex__json_load(const char *path, cJSON **doc_p)
{
    wex_status status;
    char *text = NULL;
    size_t len = 0;

    status = wex__read_file(path, &text, &len);
    if (status != WEX_OK)
        return status;
    status = wex__json_parse(path, text, len, doc_p);
    free(text);
    return status;
}
