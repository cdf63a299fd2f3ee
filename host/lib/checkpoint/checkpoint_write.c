/* Writing a checkpoint: the catalog's tensors laid out in shards with
 * their headers (and the index), filled from any layout, in a staging
 * directory renamed into place only once every byte is written, so a
 * crash never leaves a checkpoint that looks whole. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <wex/bytes.h>

#include "checkpoint.h"
#include "error.h"

void wex__ckpt_plan_free(wex__ckpt_plan *p)
{
    for (size_t f = 0; f < p->nfiles; f++) {
        if (p->names != NULL)
            free(p->names[f]);
        if (p->headers != NULL)
            free(p->headers[f]);
        if (p->fds != NULL && p->fds[f] >= 0)
            close(p->fds[f]);
    }
    free(p->names);
    free(p->headers);
    free(p->header_bytes);
    free(p->file_bytes);
    free(p->file_of);
    free(p->offset_of);
    free(p->fds);
    memset(p, 0, sizeof(*p));
}

/* The JSON header of file f, padded with spaces so the data starts at a
 * multiple of 8 (as the safetensors library writes it). */
static wex_status make_header(wex__ckpt_plan *p, size_t f)
{
    const wex_model *m = p->model;
    cJSON *root = cJSON_CreateObject(), *meta = cJSON_CreateObject();
    char *text = NULL, *padded;
    size_t len, pad;
    int ok = root != NULL && meta != NULL;

    if (ok) {
        cJSON_AddItemToObject(root, "__metadata__", meta);
        meta = NULL;
        ok = cJSON_AddStringToObject(cJSON_GetObjectItem(root, "__metadata__"),
                                     "format", "pt") != NULL;
    }
    for (uint64_t c = 0; ok && c < m->count; c++) {
        const wex__tensor *t = &m->tensors[c];
        cJSON *e, *shape, *offs;
        double begin = (double)p->offset_of[c];
        if (p->file_of[c] != f)
            continue;
        e = cJSON_AddObjectToObject(root, t->name);
        ok = e != NULL &&
             cJSON_AddStringToObject(e, "dtype", wex_dtype_name(t->dtype)) &&
             (shape = cJSON_AddArrayToObject(e, "shape")) != NULL;
        for (uint32_t d = 0; ok && d < t->ndim; d++)
            ok = cJSON_AddItemToArray(shape,
                                      cJSON_CreateNumber((double)t->shape[d]));
        ok = ok && (offs = cJSON_AddArrayToObject(e, "data_offsets")) != NULL &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber(begin)) &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber(
                                            begin + (double)t->bytes));
    }
    if (ok)
        ok = (text = cJSON_PrintUnformatted(root)) != NULL;
    cJSON_Delete(root);
    cJSON_Delete(meta);
    if (!ok) {
        free(text);
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    }
    len = strlen(text);
    pad = (8 - (8 + len) % 8) % 8;
    padded = realloc(text, len + pad + 1);
    if (padded == NULL) {
        free(text);
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    }
    memset(padded + len, ' ', pad);
    padded[len + pad] = '\0';
    p->headers[f] = padded;
    p->header_bytes[f] = 8 + len + pad;
    return WEX_OK;
}

wex_status wex__ckpt_plan_make(const wex_model *model, uint64_t shard_bytes,
                               wex__ckpt_plan *p)
{
    const uint64_t n = model->count;
    uint64_t used = 0;
    size_t files = 0;
    wex_status st = WEX_OK;

    memset(p, 0, sizeof(*p));
    p->model = model;
    p->file_of = malloc((n + 1) * sizeof(*p->file_of));
    p->offset_of = malloc((n + 1) * sizeof(*p->offset_of));
    if (p->file_of == NULL || p->offset_of == NULL) {
        wex__ckpt_plan_free(p);
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    }
    /* a new shard when the tensor would overflow a shard that has one */
    for (uint64_t c = 0; c < n; c++) {
        if (files == 0 ||
            (shard_bytes > 0 && used > 0 &&
             used + model->tensors[c].bytes > shard_bytes)) {
            files++;
            used = 0;
        }
        p->file_of[c] = (uint32_t)(files - 1);
        p->offset_of[c] = used;
        used += model->tensors[c].bytes;
    }
    p->nfiles = files ? files : 1;
    p->names = calloc(p->nfiles, sizeof(*p->names));
    p->headers = calloc(p->nfiles, sizeof(*p->headers));
    p->header_bytes = calloc(p->nfiles, sizeof(*p->header_bytes));
    p->file_bytes = calloc(p->nfiles, sizeof(*p->file_bytes));
    p->fds = malloc(p->nfiles * sizeof(*p->fds));
    if (p->names == NULL || p->headers == NULL || p->header_bytes == NULL ||
        p->file_bytes == NULL || p->fds == NULL) {
        wex__ckpt_plan_free(p);
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    }
    for (size_t f = 0; f < p->nfiles; f++)
        p->fds[f] = -1;
    for (size_t f = 0; st == WEX_OK && f < p->nfiles; f++) {
        char name[64];
        if (p->nfiles == 1)
            snprintf(name, sizeof(name), "%s", WEX__CKPT_SINGLE);
        else
            snprintf(name, sizeof(name), "model-%05zu-of-%05zu.safetensors",
                     f + 1, p->nfiles);
        if ((p->names[f] = strdup(name)) == NULL)
            st = wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
        else
            st = make_header(p, f);
    }
    for (uint64_t c = 0; st == WEX_OK && c < n; c++) {
        uint64_t end = p->offset_of[c] + model->tensors[c].bytes;
        uint32_t f = p->file_of[c];
        if (p->header_bytes[f] + end > p->file_bytes[f])
            p->file_bytes[f] = p->header_bytes[f] + end;
    }
    for (size_t f = 0; st == WEX_OK && f < p->nfiles; f++)
        if (p->file_bytes[f] < p->header_bytes[f])
            p->file_bytes[f] = p->header_bytes[f];
    if (st != WEX_OK)
        wex__ckpt_plan_free(p);
    return st;
}

char *wex__ckpt_staging_dir(const char *dir, const char *tag)
{
    size_t n = strlen(dir) + strlen(tag) + 32;
    char *s = malloc(n);
    size_t len = strlen(dir);

    while (len > 1 && dir[len - 1] == '/')
        len--;
    if (s != NULL)
        snprintf(s, n, "%.*s.wex-saving-%s", (int)len, dir, tag);
    return s;
}

/* `text` and a newline as file `name` of the staging directory, flushed
 * to disk. */
static wex_status write_text(const char *staging, const char *name,
                             const char *text)
{
    char *path = wex__ckpt_path(staging, name);
    wex_status st = WEX_OK;
    FILE *out;

    if (path == NULL)
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    if ((out = fopen(path, "wx")) == NULL) {
        st = wex__error(WEX_ERR_SYSTEM, "%s: %s", path, strerror(errno));
    } else {
        int bad = fputs(text, out) < 0 || fputc('\n', out) < 0 ||
                  fflush(out) != 0 || fsync(fileno(out)) != 0;
        if (fclose(out) != 0 || bad)
            st = wex__error(WEX_ERR_SYSTEM, "%s: %s", path, strerror(errno));
    }
    free(path);
    return st;
}

/* The model's config.json beside its weights, so the directory is a
 * checkpoint transformers' from_pretrained loads as it is. */
static wex_status write_config(const wex__ckpt_plan *p, const char *staging)
{
    char *text = cJSON_Print(p->model->config);
    wex_status st = text != NULL
                        ? write_text(staging, WEX__CKPT_CONFIG, text)
                        : wex__error(WEX_ERR_NOMEM, "checkpoint: out of "
                                     "memory");

    free(text);
    return st;
}

static wex_status write_index(const wex__ckpt_plan *p, const char *staging)
{
    cJSON *root = cJSON_CreateObject(), *meta, *map;
    char *text = NULL;
    wex_status st;
    int ok;

    ok = root != NULL &&
         (meta = cJSON_AddObjectToObject(root, "metadata")) != NULL &&
         cJSON_AddNumberToObject(meta, "total_size",
                                 (double)p->model->total_bytes) != NULL &&
         (map = cJSON_AddObjectToObject(root, "weight_map")) != NULL;
    for (uint64_t c = 0; ok && c < p->model->count; c++)
        ok = cJSON_AddStringToObject(map, p->model->tensors[c].name,
                                     p->names[p->file_of[c]]) != NULL;
    if (ok)
        ok = (text = cJSON_Print(root)) != NULL;
    st = ok ? write_text(staging, WEX__CKPT_INDEX, text)
            : wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    free(text);
    cJSON_Delete(root);
    return st;
}

int wex__ckpt_savable(uint32_t held, uint32_t stored)
{
    int held_float = held == WEX_DTYPE_BF16 || held == WEX_DTYPE_F16 ||
                     held == WEX_DTYPE_F32;
    int stored_float = stored == WEX_DTYPE_BF16 || stored == WEX_DTYPE_F16 ||
                       stored == WEX_DTYPE_F32;

    return held == stored || (held_float && stored_float);
}

wex_status wex__ckpt_target_free(const char *dir)
{
    struct stat sb;
    DIR *d;
    struct dirent *e;
    int empty = 1;

    if (stat(dir, &sb) != 0)
        return errno == ENOENT ? WEX_OK
                               : wex__error(WEX_ERR_SYSTEM, "%s: %s", dir,
                                            strerror(errno));
    if (!S_ISDIR(sb.st_mode) || (d = opendir(dir)) == NULL)
        return wex__error(WEX_ERR_INVALID, "%s exists and is not a directory "
                          "wex may save into", dir);
    while (empty && (e = readdir(d)) != NULL)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty ? WEX_OK
                 : wex__error(WEX_ERR_INVALID, "%s exists and is not empty: "
                              "wex saves a checkpoint into a new directory, "
                              "never over another", dir);
}

wex_status wex__ckpt_create(const wex__ckpt_plan *p, const char *dir,
                            const char *staging)
{
    wex_status st = wex__ckpt_target_free(dir);

    if (st != WEX_OK)
        return st;
    wex__ckpt_abort(p, staging); /* a save of the same name that died */
    if (mkdir(staging, 0755) != 0)
        return wex__error(WEX_ERR_SYSTEM, "%s: %s", staging, strerror(errno));
    for (size_t f = 0; st == WEX_OK && f < p->nfiles; f++) {
        char *path = wex__ckpt_path(staging, p->names[f]);
        unsigned char len[8];
        uint64_t hlen = p->header_bytes[f] - 8;
        int fd = path ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
                             0644)
                      : -1;
        wex_put_le(len, hlen, 8);
        if (fd < 0 || pwrite(fd, len, 8, 0) != 8 ||
            pwrite(fd, p->headers[f], hlen, 8) != (ssize_t)hlen ||
            ftruncate(fd, (off_t)p->file_bytes[f]) != 0)
            st = wex__error(WEX_ERR_SYSTEM, "%s: %s",
                            path ? path : staging, strerror(errno));
        if (fd >= 0)
            close(fd);
        free(path);
    }
    if (st == WEX_OK && p->nfiles > 1)
        st = write_index(p, staging);
    if (st == WEX_OK && p->model->config != NULL)
        st = write_config(p, staging);
    if (st != WEX_OK)
        wex__ckpt_abort(p, staging);
    return st;
}

wex_status wex__ckpt_write(const wex__ckpt_plan *p, const char *staging,
                           uint64_t c, uint64_t at, const void *bytes,
                           uint64_t n)
{
    uint32_t f = p->file_of[c];
    uint64_t off = p->header_bytes[f] + p->offset_of[c] + at;
    const unsigned char *b = bytes;

    if (at > p->model->tensors[c].bytes ||
        n > p->model->tensors[c].bytes - at)
        return wex__error(WEX_ERR_INTERNAL, "checkpoint: a write past %s",
                          p->model->tensors[c].name);
    if (p->fds[f] < 0) {
        char *path = wex__ckpt_path(staging, p->names[f]);
        p->fds[f] = path ? open(path, O_WRONLY | O_CLOEXEC) : -1;
        if (p->fds[f] < 0) {
            wex_status st = wex__error(WEX_ERR_SYSTEM, "%s: %s",
                                       path ? path : staging,
                                       strerror(errno));
            free(path);
            return st;
        }
        free(path);
    }
    while (n > 0) {
        ssize_t w = pwrite(p->fds[f], b, n, (off_t)off);
        if (w <= 0)
            return wex__error(WEX_ERR_SYSTEM, "%s/%s: %s", staging,
                              p->names[f], w < 0 ? strerror(errno)
                                                 : "nothing written");
        b += w;
        off += (uint64_t)w;
        n -= (uint64_t)w;
    }
    return WEX_OK;
}

static wex_status sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    int bad = fd < 0 || fsync(fd) != 0;

    if (fd >= 0)
        close(fd);
    return bad ? wex__error(WEX_ERR_SYSTEM, "%s: fsync: %s", path,
                            strerror(errno))
               : WEX_OK;
}

wex_status wex__ckpt_commit(const wex__ckpt_plan *p, const char *dir,
                            const char *staging)
{
    wex_status st = WEX_OK;
    char *parent = strdup(dir), *slash;

    for (size_t f = 0; st == WEX_OK && f < p->nfiles; f++) {
        char *path = wex__ckpt_path(staging, p->names[f]);
        st = path ? sync_path(path)
                  : wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
        free(path);
    }
    if (st == WEX_OK)
        st = sync_path(staging);
    if (st == WEX_OK && rename(staging, dir) != 0)
        st = wex__error(WEX_ERR_SYSTEM, "renaming %s to %s: %s", staging, dir,
                        strerror(errno));
    if (st == WEX_OK && parent != NULL) {
        slash = strrchr(parent, '/');
        if (slash == parent)
            slash[1] = '\0';
        else if (slash != NULL)
            *slash = '\0';
        else
            strcpy(parent, ".");
        st = sync_path(parent);
    }
    free(parent);
    if (st != WEX_OK)
        wex__ckpt_abort(p, staging);
    return st;
}

void wex__ckpt_abort(const wex__ckpt_plan *p, const char *staging)
{
    for (size_t f = 0; f < p->nfiles + 2; f++) {
        const char *name = f < p->nfiles    ? p->names[f]
                           : f == p->nfiles ? WEX__CKPT_INDEX
                                            : WEX__CKPT_CONFIG;
        char *path = wex__ckpt_path(staging, name);
        if (path != NULL)
            unlink(path);
        free(path);
    }
    rmdir(staging);
}
