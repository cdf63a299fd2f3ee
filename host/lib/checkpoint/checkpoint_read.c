/* Reading a checkpoint directory: its files mapped, their headers
 * checked, their tensors matched against the catalog. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "checkpoint.h"
#include "error.h"
#include "fd_io.h"
#include "json_file.h"
#include "log.h"
#include "quantize.h"

char *wex__ckpt_path(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);

    if (p != NULL)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static wex_status map_file(wex__ckpt_file *f)
{
    struct stat sb;
    int fd;
    wex_status st = wex__open_regular(f->path, O_RDONLY, &fd);

    if (st != WEX_OK)
        return st;
    if (fstat(fd, &sb) != 0) {
        st = wex__error(WEX_ERR_SYSTEM, "%s: fstat: %s", f->path,
                        strerror(errno));
        close(fd);
        return st;
    }
    f->size = (uint64_t)sb.st_size;
    if (f->size > 0) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            close(fd);
            return wex__error(WEX_ERR_SYSTEM, "%s: mmap: %s", f->path,
                              strerror(errno));
        }
        f->map = m;
    }
    close(fd);
    st = wex__st_parse(f->path, f->map, f->size, f->size, &f->header);
    return st;
}

/* A shard's name as an index gives it: a plain file name in the
 * directory, nothing that leads out of it. */
static int plain_name(const char *s)
{
    return s[0] != '\0' && s[0] != '.' && strchr(s, '/') == NULL;
}

/* The files of the directory: the index's shards, or the single file. */
static wex_status list_files(wex__checkpoint *ck)
{
    char *index = wex__ckpt_path(ck->dir, WEX__CKPT_INDEX);
    cJSON *doc = NULL;
    const cJSON *map, *e;
    wex_status st = WEX_OK;

    if (index == NULL)
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    if (access(index, F_OK) != 0) {
        free(index);
        ck->files = calloc(1, sizeof(*ck->files));
        if (ck->files == NULL || (ck->files[0].path = wex__ckpt_path(
                                      ck->dir, WEX__CKPT_SINGLE)) == NULL)
            return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
        ck->files[0].name = WEX__CKPT_SINGLE;
        ck->nfiles = 1;
        if (access(ck->files[0].path, F_OK) != 0)
            return wex__error(WEX_ERR_INVALID,
                              "%s: neither %s nor %s is "
                              "there: not a Hugging Face checkpoint",
                              ck->dir, WEX__CKPT_INDEX, WEX__CKPT_SINGLE);
        return WEX_OK;
    }
    st = wex__json_load(index, &doc);
    if (st != WEX_OK)
        goto out;
    map = cJSON_GetObjectItemCaseSensitive(doc, "weight_map");
    if (!cJSON_IsObject(map)) {
        st = wex__error(WEX_ERR_INVALID,
                        "%s: /weight_map: expected an "
                        "object of tensor names to shard files",
                        index);
        goto out;
    }
    ck->files = calloc((size_t)cJSON_GetArraySize(map) + 1, sizeof(*ck->files));
    if (ck->files == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    cJSON_ArrayForEach(e, map)
    {
        size_t i;
        if (!cJSON_IsString(e) || !plain_name(e->valuestring)) {
            st = wex__error(WEX_ERR_INVALID,
                            "%s: /weight_map/%s: expected "
                            "the name of a file in the checkpoint's "
                            "directory",
                            index, e->string);
            goto out;
        }
        for (i = 0; i < ck->nfiles; i++)
            if (strcmp(ck->files[i].name, e->valuestring) == 0)
                break;
        if (i < ck->nfiles)
            continue;
        ck->files[i].path = wex__ckpt_path(ck->dir, e->valuestring);
        if (ck->files[i].path == NULL) {
            st = wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
            goto out;
        }
        ck->files[i].name = ck->files[i].path + strlen(ck->dir) + 1;
        ck->nfiles++;
        if (access(ck->files[i].path, F_OK) != 0) {
            st = wex__error(WEX_ERR_INVALID,
                            "%s: /weight_map/%s names "
                            "shard %s, which is not there",
                            index, e->string, e->valuestring);
            goto out;
        }
    }
out:
    cJSON_Delete(doc);
    free(index);
    return st;
}

static void tell(wex__ckpt_report report, void *arg, uint64_t *count,
                 char *first, size_t first_len, const char *fmt, ...)
    WEX_PRINTF(6, 7);

static void tell(wex__ckpt_report report, void *arg, uint64_t *count,
                 char *first, size_t first_len, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (report != NULL)
        report(arg, line);
    if ((*count)++ == 0)
        snprintf(first, first_len, "%s", line);
}

/* "BF16 [1024, 256]" */
static void describe(char *out, size_t len, uint32_t dtype, uint32_t ndim,
                     const uint64_t *shape)
{
    int n = snprintf(out, len, "%s [", wex_dtype_name(dtype));

    for (uint32_t d = 0; d < ndim && n > 0 && (size_t)n < len; d++)
        n += snprintf(out + n, len - (size_t)n, d ? ", %" PRIu64 : "%" PRIu64,
                      shape[d]);
    if (n > 0 && (size_t)n < len)
        snprintf(out + n, len - (size_t)n, "]");
}

/* Converts the tensors stored in another float dtype than the
 * catalog's (transformers 5 keeps DeepSeek-V3's router weight in float32
 * where the published checkpoint and the engines hold bfloat16), as the
 * engines' loaders cast them into their parameters: rounded to nearest
 * even when narrower. Names them once at info level. */
static wex_status convert_stored(wex__checkpoint *ck)
{
    const wex_model *m = ck->model;
    uint64_t n = 0;
    char names[256] = "";
    wex_status st = WEX_OK;

    for (uint64_t c = 0; c < m->count && st == WEX_OK; c++) {
        const wex__st_tensor *t = ck->entry[c];
        const wex__tensor *ct = &m->tensors[c];
        const wex__ckpt_file *f;
        if (t == NULL || t->dtype == ct->dtype)
            continue;
        f = &ck->files[ck->file_of[c]];
        ck->converted[c] = malloc(ct->bytes + 1);
        if (ck->converted[c] == NULL) {
            st = wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
            break;
        }
        wex__convert_floats(t->dtype, f->map + f->header.data_start + t->begin,
                            wex__tensor_elements(ct), ct->dtype,
                            ck->converted[c]);
        if (n++ < 3)
            snprintf(names + strlen(names), sizeof(names) - strlen(names),
                     "%s%s (%s as %s)", n > 1 ? ", " : "", ct->name,
                     wex_dtype_name(t->dtype), wex_dtype_name(ct->dtype));
    }
    if (n > 0 && st == WEX_OK)
        WEX__INFO("%s: %" PRIu64 " tensor%s stored in another float dtype "
                  "than the model's, read converted as the engines' loaders "
                  "do: %s%s",
                  ck->dir, n, n > 1 ? "s" : "", names, n > 3 ? ", ..." : "");
    return st;
}

static wex_status match(wex__checkpoint *ck, wex__ckpt_report report, void *arg)
{
    const wex_model *m = ck->model;
    uint64_t mismatches = 0, extra = 0;
    char first[1024] = "", want[256], got[256], extras[256] = "";

    for (size_t f = 0; f < ck->nfiles; f++) {
        const wex__st_header *h = &ck->files[f].header;
        for (size_t i = 0; i < h->count; i++) {
            const wex__st_tensor *t = &h->tensors[i];
            int64_t c = wex__model_find(m, t->name);
            const wex__tensor *ct;
            if (c < 0) {
                if (extra++ < 3)
                    snprintf(extras + strlen(extras),
                             sizeof(extras) - strlen(extras), "%s%s",
                             extra > 1 ? ", " : "", t->name);
                continue;
            }
            ct = &m->tensors[c];
            if (ck->entry[c] != NULL) {
                tell(report, arg, &mismatches, first, sizeof(first),
                     "%s: tensor %s: also in %s", ck->files[f].path, t->name,
                     ck->files[ck->file_of[c]].name);
                continue;
            }
            describe(want, sizeof(want), ct->dtype, ct->ndim, ct->shape);
            describe(got, sizeof(got), t->dtype, t->ndim, t->shape);
            if ((t->dtype != ct->dtype && !(wex__is_float_dtype(t->dtype) &&
                                            wex__is_float_dtype(ct->dtype))) ||
                t->ndim != ct->ndim ||
                memcmp(t->shape, ct->shape, ct->ndim * sizeof(uint64_t))) {
                tell(report, arg, &mismatches, first, sizeof(first),
                     "%s: tensor %s: expected %s, got %s", ck->files[f].path,
                     t->name, want, got);
                ck->file_of[c] = UINT32_MAX; /* there, but wrong */
                continue;
            }
            ck->entry[c] = t;
            ck->file_of[c] = (uint32_t)f;
        }
    }
    for (uint64_t c = 0; c < m->count; c++)
        if (ck->entry[c] == NULL && ck->file_of[c] != UINT32_MAX) {
            describe(want, sizeof(want), m->tensors[c].dtype,
                     m->tensors[c].ndim, m->tensors[c].shape);
            tell(report, arg, &mismatches, first, sizeof(first),
                 "%s: tensor %s: missing; expected %s", ck->dir,
                 m->tensors[c].name, want);
        }
    ck->extra = extra;
    if (extra > 0)
        WEX__INFO("%s: %" PRIu64 " tensor%s the model's catalog does not "
                  "hold, skipped: %s%s",
                  ck->dir, extra, extra > 1 ? "s" : "", extras,
                  extra > 3 ? ", ..." : "");
    if (mismatches == 0)
        return convert_stored(ck);
    return wex__error(WEX_ERR_INVALID, "%s%s", first,
                      mismatches > 1 ? " (and more: 'wex check' lists "
                                       "every mismatch)"
                                     : "");
}

wex_status wex__checkpoint_open(const char *dir, const wex_model *model,
                                wex__ckpt_report report, void *arg,
                                wex__checkpoint *ck)
{
    wex_status st;

    memset(ck, 0, sizeof(*ck));
    ck->model = model;
    ck->dir = strdup(dir);
    ck->entry = calloc(model->count + 1, sizeof(*ck->entry));
    ck->file_of = calloc(model->count + 1, sizeof(*ck->file_of));
    ck->converted = calloc(model->count + 1, sizeof(*ck->converted));
    if (ck->dir == NULL || ck->entry == NULL || ck->file_of == NULL ||
        ck->converted == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
        goto out;
    }
    st = list_files(ck);
    for (size_t f = 0; st == WEX_OK && f < ck->nfiles; f++)
        st = map_file(&ck->files[f]);
    if (st == WEX_OK)
        st = match(ck, report, arg);
out:
    if (st != WEX_OK)
        wex__checkpoint_close(ck);
    return st;
}

void wex__checkpoint_close(wex__checkpoint *ck)
{
    for (size_t f = 0; ck->files != NULL && f < ck->nfiles; f++) {
        if (ck->files[f].map != NULL)
            munmap(ck->files[f].map, ck->files[f].size);
        wex__st_free(&ck->files[f].header);
        free(ck->files[f].path);
    }
    for (uint64_t c = 0; ck->converted != NULL && c < ck->model->count; c++)
        free(ck->converted[c]);
    free(ck->converted);
    free(ck->files);
    free(ck->entry);
    free(ck->file_of);
    free(ck->dir);
    memset(ck, 0, sizeof(*ck));
}

const unsigned char *wex__checkpoint_data(const wex__checkpoint *ck, uint64_t c)
{
    const wex__ckpt_file *f = &ck->files[ck->file_of[c]];

    if (ck->converted[c] != NULL)
        return ck->converted[c];
    return f->map + f->header.data_start + ck->entry[c]->begin;
}
