/*
 * Elastic destination replicas (docs/design.md, "Elastic replicas") are
 * groups of consecutive destination ranks that each hold a whole copy
 * of what the destination side holds: a replica can then commit a step
 * without the others. Serving engines' dp replicas are such copies;
 * fsdp's dp shards, or vLLM's experts spread over tp x dp, are one copy
 * over every rank, and cannot come and go one group at a time.
 */
#ifndef WEX_HOST_REPLICA_COVER_H
#define WEX_HOST_REPLICA_COVER_H

#include "side.h"

/* Whether every group of `per` consecutive ranks of `side` holds each
 * canonical tensor's elements as much as the whole side does (pieces of
 * a tensor are either the same box on several ranks or disjoint, as the
 * engines lay them out). WEX_ERR_INVALID naming the first group and a
 * tensor it lacks, after `where` ("FILE: /destination/elastic"). */
wex_status wex__side_whole_replicas(const wex__side *side, uint64_t per,
                                    const char *where);

#endif /* WEX_HOST_REPLICA_COVER_H */
