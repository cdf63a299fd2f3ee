/*
 * What a plan share file is (plan_share_write.c writes it,
 * plan_share_read.c reads it): this header, then a payload of varints
 * (share_codec.h) in the order the writer puts them.
 */
#ifndef WEX_HOST_PLAN_SHARE_FORMAT_H
#define WEX_HOST_PLAN_SHARE_FORMAT_H

#include "plan.h"

/* Bumped whenever what a share holds, or how, changes. */
#define WEX__SHARE_FORMAT 1u
#define WEX__SHARE_MAGIC "WEXPLAN" /* 8 bytes with its NUL */

/* Every field of these is written; one added must be too. */
_Static_assert(sizeof(wex__op) == 384, "encode the new wex__op field");
_Static_assert(sizeof(wex__piece) == 216, "encode the new wex__piece field");

typedef struct wex__share_header {
    char magic[8];
    uint32_t format, side;
    uint64_t rank;
    uint64_t key[2];
    uint64_t payload_bytes, payload_hash; /* XXH3 of the payload */
} wex__share_header;

/* Bounds a share's counts are checked against, so damaged bytes cannot
 * ask for a huge allocation: ranks a side has, local tensors a rank. */
#define WEX__SHARE_RANKS_MAX (1u << 20)
#define WEX__SHARE_TENSORS_MAX (1u << 20)

/* Fills p's sides, its kept cells and b (initialised on p's sides) from
 * a share's payload: NULL when all of it fit, else what did not. */
const char *wex__share_decode(wex__planner *p, const void *payload, size_t len,
                              uint32_t side, uint64_t rank,
                              wex_plan_builder *b);

/* The key over everything the plan is a function of (plan_share_key.c),
 * and the file it names in `dir`. */
wex_status wex__share_key(const wex__job_config *job, uint64_t key[2]);
wex_status wex__share_file(const uint64_t key[2], const char *dir,
                           uint32_t side, uint64_t rank, char *path,
                           size_t cap);
const char *wex__share_side_word(uint32_t side);

#endif /* WEX_HOST_PLAN_SHARE_FORMAT_H */
