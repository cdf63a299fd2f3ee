/* The landing board (see landing.h). */
#include "landing.h"

#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "error.h"
#include "job.h"

/* A word per source, each on its own cache line: sources writing their
 * words at once do not take the line from each other. */
#define WORD_STRIDE 64u

int wex__landing_on(const wex_job *job)
{
    uint64_t need = WEX_TRANSPORT_CAP_PUTS_LAND_IN_ORDER |
                    WEX_TRANSPORT_CAP_ONE_SIDED | WEX_TRANSPORT_CAP_ALLOC;

    return job->tops != NULL && (job->tops->caps & need) == need;
}

uint32_t wex__landing_tag(uint64_t step, uint64_t number)
{
    uint64_t both[2] = {step, number};

    return (uint32_t)XXH3_64bits(both, sizeof(both)) | 1u;
}

static void free_scratch(wex_job *job)
{
    free(job->peer_first);
    free(job->peer_ops);
    free(job->landed);
    free(job->early);
    free(job->board_peer);
}

wex_status wex__landing_size(wex_job *job)
{
    size_t n = job->op_count ? job->op_count : 1;
    size_t peers = job->peer_count;

    free_scratch(job);
    job->peer_first = calloc(peers + 1, sizeof(*job->peer_first));
    job->peer_ops = malloc(n * sizeof(*job->peer_ops));
    job->landed = calloc(peers + 1, sizeof(*job->landed));
    job->early = calloc(n, 1);
    job->board_peer = calloc(peers + 1, sizeof(*job->board_peer));
    if (job->peer_first == NULL || job->peer_ops == NULL ||
        job->landed == NULL || job->early == NULL || job->board_peer == NULL)
        return WEX_ERR_NOMEM;
    for (size_t i = 0; i < job->op_count; i++)
        job->peer_first[job->op_peer_index[i] + 1]++;
    for (size_t p = 0; p < peers; p++)
        job->peer_first[p + 1] += job->peer_first[p];
    /* each peer's ops in plan order: the order its source puts them in */
    for (size_t i = 0; i < job->op_count; i++)
        job->peer_ops[job->peer_first[job->op_peer_index[i]] +
                      job->landed[job->op_peer_index[i]]++] = i;
    memset(job->landed, 0, (peers + 1) * sizeof(*job->landed));
    return WEX_OK;
}

wex_status wex__landing_key(wex_job *job, unsigned char *key, uint64_t *len)
{
    wex_status st;

    if (job->board == NULL) {
        wex__error_clear();
        st = job->tops->mem_alloc(job->tctx,
                                  job->plan.src.ranks * WORD_STRIDE,
                                  &job->board, &job->board_mem);
        if (st != WEX_OK) {
            job->board = NULL;
            return wex__error_prefix(st, "the landing board");
        }
    }
    wex__error_clear();
    st = job->tops->mem_key(job->tctx, job->board_mem, key, len);
    return st == WEX_OK ? st : wex__error_prefix(st, "the landing board");
}

wex_status wex__landing_tell(wex_job *job, size_t i, uint32_t tag)
{
    uint32_t p = job->op_peer_index[i];
    uint64_t word;
    wex_status st;

    if (tag == 0 || job->board_peer[p] == NULL)
        return WEX_OK;
    word = (uint64_t)tag << 32 | (uint32_t)++job->landed[p];
    /* The op's bytes before the word that says they are there. */
    st = job->tops->flush(job->tctx);
    if (st == WEX_OK)
        st = job->tops->put(job->tctx, job->board_peer[p],
                            job->rank * WORD_STRIDE, &word, sizeof(word));
    return st;
}

uint64_t wex__landing_count(const wex_job *job, size_t p, uint32_t tag)
{
    const uint64_t *at = (const uint64_t *)(const void *)(
        (const unsigned char *)job->board + job->peers[p] * WORD_STRIDE);
    uint64_t word = __atomic_load_n(at, __ATOMIC_ACQUIRE);
    uint64_t mine = job->peer_first[p + 1] - job->peer_first[p];

    if ((uint32_t)(word >> 32) != tag)
        return 0;
    /* never past the source's ops, whatever the word says */
    return (uint32_t)word < mine ? (uint32_t)word : mine;
}

void wex__landing_free(wex_job *job)
{
    if (job->board_mem != NULL)
        job->tops->mem_deregister(job->tctx, job->board_mem);
    free_scratch(job);
}
