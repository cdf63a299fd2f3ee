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
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <wex/bytes.h>

#include "checkpoint.h"
#include "error.h"
#include "fd_io.h"
#include "log.h"

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
    if (p->lock_fd >= 0)
        close(p->lock_fd);
    free(p->lock_path);
    memset(p, 0, sizeof(*p));
    p->lock_fd = -1;
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
             cJSON_AddItemToArray(offs,
                                  cJSON_CreateNumber(begin + (double)t->bytes));
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
    p->lock_fd = -1;
    p->model = model;
    p->file_of = malloc((n + 1) * sizeof(*p->file_of));
    p->offset_of = malloc((n + 1) * sizeof(*p->offset_of));
    if (p->file_of == NULL || p->offset_of == NULL) {
        wex__ckpt_plan_free(p);
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    }
    /* a new shard when the tensor would overflow a shard that has one */
    for (uint64_t c = 0; c < n; c++) {
        if (files == 0 || (shard_bytes > 0 && used > 0 &&
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

/* `dir` without trailing slashes, then `suffix`. */
static char *beside(const char *dir, const char *suffix)
{
    size_t len = strlen(dir), n = len + strlen(suffix) + 1;
    char *s = malloc(n);

    while (len > 1 && dir[len - 1] == '/')
        len--;
    if (s != NULL)
        snprintf(s, n, "%.*s%s", (int)len, dir, suffix);
    return s;
}

char *wex__ckpt_staging_dir(const char *dir, const char *tag)
{
    size_t n = strlen(tag) + 16;
    char *suffix = malloc(n), *s;

    if (suffix == NULL)
        return NULL;
    snprintf(suffix, n, ".wex-saving-%s", tag);
    s = beside(dir, suffix);
    free(suffix);
    return s;
}

/* Removes staging directory `path` and the files in it (a save creates
 * only files there). */
static wex_status remove_staging(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    wex_status st = WEX_OK;

    if (d == NULL)
        return errno == ENOENT ? WEX_OK
                               : wex__error(WEX_ERR_SYSTEM, "%s: %s", path,
                                            strerror(errno));
    while ((e = readdir(d)) != NULL) {
        char *f;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if ((f = wex__ckpt_path(path, e->d_name)) == NULL) {
            st = wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
            break;
        }
        if (unlink(f) != 0 && errno != ENOENT)
            st = wex__error(WEX_ERR_SYSTEM,
                            "removing %s, left by a save "
                            "that died: %s",
                            f, strerror(errno));
        free(f);
        if (st != WEX_OK)
            break;
    }
    closedir(d);
    if (st == WEX_OK && rmdir(path) != 0 && errno != ENOENT)
        st = wex__error(WEX_ERR_SYSTEM,
                        "removing %s, left by a save that "
                        "died: %s",
                        path, strerror(errno));
    return st;
}

/* Every "DIR.wex-saving-*" beside `dir`: with the lock held, each is what
 * a save into `dir` that died left (sparse full-size shards). */
static wex_status remove_dead_staging(const char *dir)
{
    char *prefix = beside(dir, ".wex-saving-"), *parent, *slash;
    const char *base;
    size_t base_len;
    DIR *d;
    struct dirent *e;
    wex_status st = WEX_OK;

    if (prefix == NULL || (parent = strdup(prefix)) == NULL) {
        free(prefix);
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    }
    slash = strrchr(parent, '/');
    if (slash == NULL) {
        base = prefix;
        strcpy(parent, ".");
    } else {
        base = prefix + (slash - parent) + 1;
        slash[slash == parent] = '\0';
    }
    base_len = strlen(base);
    if ((d = opendir(parent)) == NULL) {
        st = wex__error(WEX_ERR_SYSTEM, "%s: %s", parent, strerror(errno));
        goto out;
    }
    while (st == WEX_OK && (e = readdir(d)) != NULL) {
        struct stat sb;
        char *path;
        if (strncmp(e->d_name, base, base_len) != 0)
            continue;
        if ((path = wex__ckpt_path(parent, e->d_name)) == NULL) {
            st = wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
            break;
        }
        /* a save makes a real directory: a link or a file of that name
         * is someone else's, never followed or removed */
        if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            free(path);
            continue;
        }
        st = remove_staging(path);
        if (st == WEX_OK)
            WEX__INFO("%s: removed, what a save into %s that died left", path,
                      dir);
        free(path);
    }
    closedir(d);
out:
    free(parent);
    free(prefix);
    return st;
}

/* Takes "DIR.wex-saving.lock" for this save, refusing while another
 * process holds it. A finishing save unlinks the file while it holds it,
 * so a lock taken on a file no longer at the path is retried. */
static wex_status take_lock(wex__ckpt_plan *p, const char *dir)
{
    char *lock = beside(dir, ".wex-saving.lock");
    wex_status st = WEX_OK;

    if (lock == NULL)
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    for (int tries = 0; p->lock_fd < 0; tries++) {
        struct stat held, named;
        int fd = open(
            lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
        if (fd < 0) {
            st = wex__error(WEX_ERR_SYSTEM, "%s: %s", lock, strerror(errno));
            break;
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            st = errno == EWOULDBLOCK
                     ? wex__error(WEX_ERR_INVALID,
                                  "%s: another save into %s "
                                  "is running (it holds %s)",
                                  dir, dir, lock)
                     : wex__error(WEX_ERR_SYSTEM, "%s: flock: %s", lock,
                                  strerror(errno));
            close(fd);
            break;
        }
        if (fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
            stat(lock, &named) == 0 && held.st_dev == named.st_dev &&
            held.st_ino == named.st_ino) {
            p->lock_fd = fd;
            p->lock_path = lock;
            return WEX_OK;
        }
        close(fd);
        if (tries == 100) {
            st = wex__error(WEX_ERR_SYSTEM, "%s: cannot take the lock", lock);
            break;
        }
    }
    free(lock);
    return st;
}

/* Unlinks the lock while holding it, then lets go. */
static void drop_lock(wex__ckpt_plan *p)
{
    if (p->lock_fd < 0)
        return;
    unlink(p->lock_path);
    free(p->lock_path);
    p->lock_path = NULL;
    close(p->lock_fd);
    p->lock_fd = -1;
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
    char *text;
    wex_status st;

    if (p->model->config_text != NULL)
        return write_text(staging, WEX__CKPT_CONFIG, p->model->config_text);
    text = cJSON_Print(p->model->config);
    st = text != NULL ? write_text(staging, WEX__CKPT_CONFIG, text)
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
        return errno == ENOENT
                   ? WEX_OK
                   : wex__error(WEX_ERR_SYSTEM, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(sb.st_mode) || (d = opendir(dir)) == NULL)
        return wex__error(WEX_ERR_INVALID,
                          "%s exists and is not a directory "
                          "wex may save into",
                          dir);
    while (empty && (e = readdir(d)) != NULL)
        empty = strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0;
    closedir(d);
    return empty ? WEX_OK
                 : wex__error(WEX_ERR_INVALID,
                              "%s exists and is not empty: "
                              "wex saves a checkpoint into a new directory, "
                              "never over another",
                              dir);
}

wex_status wex__ckpt_create(wex__ckpt_plan *p, const char *dir,
                            const char *staging)
{
    wex_status st = wex__ckpt_target_free(dir);

    if (st == WEX_OK)
        st = take_lock(p, dir);
    if (st == WEX_OK)
        st = remove_dead_staging(dir);
    if (st == WEX_OK && mkdir(staging, 0755) != 0)
        st = wex__error(WEX_ERR_SYSTEM, "%s: %s", staging, strerror(errno));
    if (st != WEX_OK) {
        drop_lock(p);
        return st;
    }
    for (size_t f = 0; st == WEX_OK && f < p->nfiles; f++) {
        char *path = wex__ckpt_path(staging, p->names[f]);
        unsigned char len[8];
        uint64_t hlen = p->header_bytes[f] - 8;
        int fd = path
                     ? open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)
                     : -1;
        wex_put_le(len, hlen, 8);
        if (fd < 0 || pwrite(fd, len, 8, 0) != 8 ||
            pwrite(fd, p->headers[f], hlen, 8) != (ssize_t)hlen ||
            ftruncate(fd, (off_t)p->file_bytes[f]) != 0)
            st = wex__error(WEX_ERR_SYSTEM, "%s: %s", path ? path : staging,
                            strerror(errno));
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

    if (at > p->model->tensors[c].bytes || n > p->model->tensors[c].bytes - at)
        return wex__error(WEX_ERR_INTERNAL, "checkpoint: a write past %s",
                          p->model->tensors[c].name);
    if (p->fds[f] < 0) {
        char *path = wex__ckpt_path(staging, p->names[f]);
        p->fds[f] = path ? open(path, O_WRONLY | O_CLOEXEC) : -1;
        if (p->fds[f] < 0) {
            wex_status st = wex__error(WEX_ERR_SYSTEM, "%s: %s",
                                       path ? path : staging, strerror(errno));
            free(path);
            return st;
        }
        free(path);
    }
    while (n > 0) {
        ssize_t w = pwrite(p->fds[f], b, n, (off_t)off);
        if (w <= 0)
            return wex__error(WEX_ERR_SYSTEM, "%s/%s: %s", staging, p->names[f],
                              w < 0 ? strerror(errno) : "nothing written");
        b += w;
        off += (uint64_t)w;
        n -= (uint64_t)w;
    }
    return WEX_OK;
}

/* fsync of a file or a directory wex made; opened non-blocking, so a
 * FIFO put there in the meantime is refused, not waited on. */
static wex_status sync_path(const char *path)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat sb;
    wex_status st = WEX_OK;

    if (fd < 0 || fstat(fd, &sb) != 0)
        st = wex__error(WEX_ERR_SYSTEM, "%s: fsync: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode))
        st = wex__error(WEX_ERR_SYSTEM,
                        "%s: fsync: %s, not what the save "
                        "made",
                        path, wex__file_kind((unsigned)sb.st_mode));
    else if (fsync(fd) != 0)
        st = wex__error(WEX_ERR_SYSTEM, "%s: fsync: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    return st;
}

wex_status wex__ckpt_commit(wex__ckpt_plan *p, const char *dir,
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
    drop_lock(p);
    return st;
}

void wex__ckpt_abort(wex__ckpt_plan *p, const char *staging)
{
    /* only the save holding the lock owns the staging directory: one that
     * could not take it must leave a live save's alone */
    if (p->lock_fd < 0)
        return;
    (void)remove_staging(staging);
    drop_lock(p);
}
