/* The key naming a plan share: an XXH3-128 over everything a rank's
 * part of the plan is a function of (plan_share.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "error.h"
#include "fd_io.h"
#include "plan_share.h"
#include "plan_share_format.h"
#include "source_id.h"

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
    FILE *f;
    int fd;
    wex_status st = wex__open_regular(path, O_RDONLY, &fd);

    if (st != WEX_OK)
        return st;
    if ((f = fdopen(fd, "rb")) == NULL) {
        close(fd);
        return wex__error(WEX_ERR_SYSTEM, "%s: %s", path, strerror(errno));
    }
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        XXH3_128bits_update(h, buf, n);
    n = (size_t)ferror(f);
    fclose(f);
    return n ? wex__error(WEX_ERR_SYSTEM, "%s: read error", path) : WEX_OK;
}

wex_status wex__share_key(const wex__job_config *j, uint64_t key[2])
{
    XXH3_state_t *h = XXH3_createState();
    cJSON *doc = cJSON_Duplicate(j->doc, 1);
    char *text = NULL;
    wex_status st = WEX_OK;
    XXH128_hash_t k;
    uint32_t format = WEX__SHARE_FORMAT;

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

const char *wex__share_side_word(uint32_t side)
{
    return side == WEX_SIDE_SOURCE ? "source" : "destination";
}

wex_status wex__share_file(const uint64_t key[2], const char *dir,
                           uint32_t side, uint64_t rank, char *path, size_t cap)
{
    int n = snprintf(path, cap, "%s/%016llx%016llx-%s-%llu.wexplan", dir,
                     (unsigned long long)key[1], (unsigned long long)key[0],
                     wex__share_side_word(side), (unsigned long long)rank);

    if (n < 0 || (size_t)n >= cap)
        return wex__error(WEX_ERR_INVALID,
                          "%s: plan share directory path "
                          "too long",
                          dir);
    return WEX_OK;
}

wex_status wex__share_path(const wex__job_config *job, const char *dir,
                           uint32_t side, uint64_t rank, char *path, size_t cap)
{
    uint64_t key[2];
    wex_status st = wex__share_key(job, key);

    return st == WEX_OK ? wex__share_file(key, dir, side, rank, path, cap) : st;
}
