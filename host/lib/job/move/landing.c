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

    /* A delta job's ops may land in an inbox instead: it checks them
     * after the sources are done. */
    return job->transport.ops != NULL &&
           (job->transport.ops->caps & need) == need && !job->plan.job->delta;
}

uint32_t wex__landing_tag(uint64_t step, uint64_t number)
{
    uint64_t both[2] = {step, number};

    return (uint32_t)XXH3_64bits(both, sizeof(both)) | 1u;
}

static void free_scratch(wex_job *job)
{
    free(job->scratch.peer_first);
    free(job->scratch.peer_ops);
    free(job->scratch.landed);
    free(job->dst.early);
    free(job->src.board_peer);
}

wex_status wex__landing_size(wex_job *job)
{
    size_t n = job->op_count ? job->op_count : 1;
    size_t peers = job->peer_count;

    free_scratch(job);
    job->scratch.peer_first =
        calloc(peers + 1, sizeof(*job->scratch.peer_first));
    job->scratch.peer_ops = malloc(n * sizeof(*job->scratch.peer_ops));
    job->scratch.landed = calloc(peers + 1, sizeof(*job->scratch.landed));
    job->dst.early = calloc(n, 1);
    job->src.board_peer = calloc(peers + 1, sizeof(*job->src.board_peer));
    if (job->scratch.peer_first == NULL || job->scratch.peer_ops == NULL ||
        job->scratch.landed == NULL || job->dst.early == NULL ||
        job->src.board_peer == NULL)
        return WEX_ERR_NOMEM;
    for (size_t i = 0; i < job->op_count; i++)
        job->scratch.peer_first[job->op_peer_index[i] + 1]++;
    for (size_t p = 0; p < peers; p++)
        job->scratch.peer_first[p + 1] += job->scratch.peer_first[p];
    /* each peer's ops in plan order: the order its source puts them in */
    for (size_t i = 0; i < job->op_count; i++)
        job->scratch.peer_ops[job->scratch.peer_first[job->op_peer_index[i]] +
                              job->scratch.landed[job->op_peer_index[i]]++] = i;
    memset(job->scratch.landed, 0, (peers + 1) * sizeof(*job->scratch.landed));
    return WEX_OK;
}

wex_status wex__landing_key(wex_job *job, unsigned char *key, uint64_t *len)
{
    wex_status st;

    if (job->dst.board == NULL) {
        wex__error_clear();
        st = job->transport.ops->mem_alloc(
            job->transport.ctx, job->plan.src.ranks * WORD_STRIDE,
            &job->dst.board, &job->dst.board_mem);
        if (st != WEX_OK) {
            job->dst.board = NULL;
            return wex__error_prefix(st, "the landing board");
        }
    }
    wex__error_clear();
    st = job->transport.ops->mem_key(job->transport.ctx, job->dst.board_mem,
                                     key, len);
    return st == WEX_OK ? st : wex__error_prefix(st, "the landing board");
}

wex_status wex__landing_tell(wex_job *job, size_t i, uint32_t tag)
{
    uint32_t p = job->op_peer_index[i];
    uint64_t word;
    wex_status st;

    if (tag == 0 || job->src.board_peer[p] == NULL)
        return WEX_OK;
    word = (uint64_t)tag << 32 | (uint32_t)++job->scratch.landed[p];
    /* The op's bytes before the word that says they are there. */
    st = job->transport.ops->flush(job->transport.ctx);
    if (st == WEX_OK)
        st = job->transport.ops->put(job->transport.ctx, job->src.board_peer[p],
                                     job->rank * WORD_STRIDE, &word,
                                     sizeof(word));
    return st;
}

uint64_t wex__landing_count(const wex_job *job, size_t p, uint32_t tag)
{
    const uint64_t *at =
        (const uint64_t *)(const void *)((const unsigned char *)job->dst.board +
                                         job->peers[p] * WORD_STRIDE);
    uint64_t word = __atomic_load_n(at, __ATOMIC_ACQUIRE);
    uint64_t mine = job->scratch.peer_first[p + 1] - job->scratch.peer_first[p];

    if ((uint32_t)(word >> 32) != tag)
        return 0;
    /* never past the source's ops, whatever the word says */
    return (uint32_t)word < mine ? (uint32_t)word : mine;
}

void wex__landing_free(wex_job *job)
{
    if (job->dst.board_mem != NULL)
        job->transport.ops->mem_deregister(job->transport.ctx,
                                           job->dst.board_mem);
    free_scratch(job);
}
