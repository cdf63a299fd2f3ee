/*
 * Plan shares: what one rank needs to replay its part of a job's plan,
 * in a file of its own, so that opening the job on that rank reads its
 * share instead of laying out every rank of both sides and planning
 * (docs/design.md, "Plan shares").
 *
 * A share's name carries a key over everything the plan is a function
 * of: the job document but its rendezvous, both model configs' bytes,
 * the engine and policy plugins' manifests and libraries, a fingerprint
 * of the host library's sources (source_id.cmake) and the format. A
 * share made for any other job, model, plugin build or wex build is
 * never found, so it is never used.
 */
#ifndef WEX_HOST_PLAN_SHARE_H
#define WEX_HOST_PLAN_SHARE_H

#include "planner.h"
#include "quantize_plan.h"

/* The file of rank `rank` of `side`'s share in `dir`:
 * DIR/KEY-SIDE-RANK.wexplan. */
wex_status wex__share_path(const wex__job_config *job, const char *dir,
                           uint32_t side, uint64_t rank, char *path,
                           size_t cap);

/* Writes the share of `rank` of `side` of the plan `p` laid out: `ops`
 * are its operations with every source live. The file appears whole or
 * not at all (written aside, then renamed); `dir` is made if missing. */
wex_status wex__share_write(wex__planner *p, const char *dir, uint32_t side,
                            uint64_t rank, const wex__op *ops, size_t count,
                            uint64_t *bytes);

/* Plans rank `rank` of `side` with every source live and writes its
 * share; adds the file's bytes to *bytes. */
wex_status wex__share_make(wex__planner *p, const char *dir, uint32_t side,
                           uint64_t rank, uint64_t *bytes);

/* Opens `p` from the share of `rank` of `side` in `dir`, with its
 * operations in `b` (initialised here on p's sides). Returns 1 when it
 * did (p owns `job` from here on), 0 when there is no share to use: p
 * is left zeroed and `job` is still the caller's. A share that is there
 * but damaged is reported at warn level, and not used. */
int wex__planner_open_share(wex__planner *p, wex__registry *registry,
                            wex__job_config *job, const char *dir,
                            uint32_t side, uint64_t rank, wex_plan_builder *b);

#endif /* WEX_HOST_PLAN_SHARE_H */
