/*
 * Hugging Face safetensors checkpoints (docs/design.md, "Checkpoints"):
 * read as a sync source, written as a sink, checked against the model
 * catalog.
 *
 * A checkpoint directory holds model.safetensors.index.json and the
 * shards its weight_map names, or one model.safetensors. Reading maps
 * every file read-only, so the page cache is the source memory: a sync
 * moves bytes from it straight into the destinations' live buffers.
 * Writing (checkpoint_write.c) lays the catalog's tensors out in shards,
 * fills them from any side's layout, and renames a complete directory
 * into place.
 */
#ifndef WEX_HOST_CHECKPOINT_H
#define WEX_HOST_CHECKPOINT_H

#include "catalog.h"
#include "safetensors.h"

#define WEX__CKPT_INDEX "model.safetensors.index.json"
#define WEX__CKPT_SINGLE "model.safetensors"
#define WEX__CKPT_CONFIG "config.json"

typedef struct wex__ckpt_file {
    char *path; /* the directory's path joined with the file's name */
    const char *name;
    unsigned char *map; /* the whole file, read-only (NULL when empty) */
    uint64_t size;
    wex__st_header header;
} wex__ckpt_file;

typedef struct wex__checkpoint {
    char *dir;
    const wex_model *model;
    wex__ckpt_file *files;
    size_t nfiles;
    /* per canonical tensor: its entry and file, or NULL */
    const wex__st_tensor **entry;
    uint32_t *file_of;
    uint64_t extra; /* tensors the catalog does not hold, skipped */
    /* per canonical tensor: its bytes converted into the catalog's dtype
     * when the file stores another float dtype (checkpoint_read.c),
     * else NULL */
    unsigned char **converted;
} wex__checkpoint;

/* Called once per mismatch with one line: "FILE: tensor NAME: expected
 * ..., got ...". */
typedef void (*wex__ckpt_report)(void *arg, const char *line);

/* Opens checkpoint directory `dir` for `model`. A file that cannot be
 * read or parsed fails the open at once, in one line. Then every
 * canonical tensor must be there with the catalog's shape and dtype, or
 * another float dtype (float32, bfloat16, half), read converted and
 * listed once at info level:
 * each that is not is told to `report` (may be NULL), and the open
 * fails naming the first and how many. Tensors the catalog does not
 * hold are listed once at info level and skipped. */
wex_status wex__checkpoint_open(const char *dir, const wex_model *model,
                                wex__ckpt_report report, void *arg,
                                wex__checkpoint *ck);
void wex__checkpoint_close(wex__checkpoint *ck);

/* "DIR/NAME", malloc'd (NULL when out of memory). */
char *wex__ckpt_path(const char *dir, const char *name);

/* The bytes of canonical tensor `c` (row-major, the catalog's dtype). */
const unsigned char *wex__checkpoint_data(const wex__checkpoint *ck,
                                          uint64_t c);

/* ---- writing (checkpoint_write.c) ------------------------------------ */

/* Where every canonical tensor goes in a checkpoint of `model` sharded
 * at `shard_bytes` (at least one tensor a shard; 0: one file). */
typedef struct wex__ckpt_plan {
    const wex_model *model;
    size_t nfiles;
    char **names;           /* per file: model-0000i-of-0000n.safetensors */
    char **headers;         /* per file: the JSON header, padded to 8 */
    uint64_t *header_bytes; /* per file: 8 + the header's length */
    uint64_t *file_bytes;   /* per file */
    uint32_t *file_of;      /* per canonical tensor */
    uint64_t *offset_of;    /* per canonical tensor: where in its file's data */
    int *fds;               /* per file: open for writing, or -1 */
    int lock_fd;            /* the staging lock, held by the creator, or -1 */
    char *lock_path;        /* its path, while held */
} wex__ckpt_plan;

wex_status wex__ckpt_plan_make(const wex_model *model, uint64_t shard_bytes,
                               wex__ckpt_plan *p);
void wex__ckpt_plan_free(wex__ckpt_plan *p);

/* The directory a save fills before it is renamed to `dir`:
 * "DIR.wex-saving-TAG", TAG what every rank of the save agrees on (the
 * job's id). Its creator holds "DIR.wex-saving.lock" (flock) from create
 * to commit or abort; the next save into `dir` takes that lock and so
 * knows every "DIR.wex-saving-*" it finds is a dead save's, and removes
 * it. */
char *wex__ckpt_staging_dir(const char *dir, const char *tag);

/* A tensor held as `held` can be saved in the checkpoint's `stored`: the
 * same dtype, or floats converted (rounded to nearest even); an fp8
 * weight held as floats cannot (its blocks would need quantizing). */
int wex__ckpt_savable(uint32_t held, uint32_t stored);

/* `dir` may be saved to: it does not exist, or is an empty directory. */
wex_status wex__ckpt_target_free(const char *dir);

/* Takes the staging lock, removes a staging directory a dead save left
 * (refusing while a live one holds the lock), and creates the staging
 * directory and every file at its full size, with its header (and the
 * index, when sharded), and the model's config.json. `dir` must not
 * exist, or be an empty directory. */
wex_status wex__ckpt_create(wex__ckpt_plan *p, const char *dir,
                            const char *staging);
/* Writes `n` bytes of canonical tensor `c`, from its byte `at` (any
 * process may, once the files are created). */
wex_status wex__ckpt_write(const wex__ckpt_plan *p, const char *staging,
                           uint64_t c, uint64_t at, const void *bytes,
                           uint64_t n);
/* Flushes every file, renames the staging directory to `dir` and drops
 * the lock. */
wex_status wex__ckpt_commit(wex__ckpt_plan *p, const char *dir,
                            const char *staging);
/* Removes what a save that did not finish left, and drops the lock. */
void wex__ckpt_abort(wex__ckpt_plan *p, const char *staging);

#endif /* WEX_HOST_CHECKPOINT_H */
