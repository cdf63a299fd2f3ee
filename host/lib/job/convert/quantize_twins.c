/* Twins on a running source (plan/quantize_once.h): QUANTIZE operations
 * that make the same bytes for several destination replicas. The first
 * of them in plan order leads: its blocks' amaxes are read once
 * (transforms_amax.c), and the first of them to run makes the bytes into
 * the staging arena, from where the others put them while they are
 * still there (transforms.c). For that, twins run close together, each
 * destination's ops still in plan order; a two-sided transport (its
 * receives posted per destination, in plan order, and matched across
 * peers) keeps plan order, and there a twin whose bytes left the arena
 * is made again. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "quantize_once.h"
#include "transforms_internal.h"

/* Appends op i to the order. */
static void emit(size_t *order, size_t *at, unsigned char *done,
                 size_t *next_of_peer, const uint32_t *peer, size_t i)
{
    order[(*at)++] = i;
    done[i] = 1;
    next_of_peer[peer[i]]++;
}

wex_status wex__twins_prepare(wex_job *job)
{
    struct wex__quant_state *q = job->src.quant;
    size_t n = job->op_count, np = job->peer_count, at = 0;
    size_t *chain, *tail, *first, *queue, *pos;
    unsigned char *done;
    const uint32_t *peer = job->op_peer_index;
    int twins = 0;
    wex_status st;

    q->leader = malloc((n ? n : 1) * sizeof(*q->leader));
    if (q->leader == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    if ((st = wex__quantize_leaders(job->ops, n, q->leader)) != WEX_OK)
        return st;
    q->made = calloc(n ? n : 1, sizeof(*q->made));
    q->made_gen = calloc(n ? n : 1, sizeof(*q->made_gen));
    q->gen = 1; /* no leader's bytes are made yet */
    if (q->made == NULL || q->made_gen == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (size_t i = 0; i < n && !twins; i++)
        twins = q->leader[i] != i;
    if (!twins)
        return WEX_OK;
    chain = malloc(n * sizeof(*chain));
    tail = malloc(n * sizeof(*tail));
    first = calloc(np + 1, sizeof(*first));
    queue = malloc(n * sizeof(*queue));
    pos = calloc(np + 1, sizeof(*pos));
    done = calloc(n, 1);
    q->order = malloc(n * sizeof(*q->order));
    if (chain == NULL || tail == NULL || first == NULL || queue == NULL ||
        pos == NULL || done == NULL || q->order == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "job: out of memory");
        goto out;
    }
    /* each twin group chained in plan order, from its leader */
    for (size_t i = 0; i < n; i++) {
        chain[i] = SIZE_MAX;
        tail[i] = i;
        if (q->leader[i] != i) {
            chain[tail[q->leader[i]]] = i;
            tail[q->leader[i]] = i;
        }
    }
    /* each destination's ops in plan order: the order they must keep */
    for (size_t i = 0; i < n; i++)
        first[peer[i] + 1]++;
    for (size_t p = 0; p < np; p++)
        first[p + 1] += first[p];
    for (size_t i = 0; i < n; i++)
        queue[first[peer[i]] + pos[peer[i]]++] = i;
    memset(pos, 0, (np + 1) * sizeof(*pos));
    /* Plan order, but after an op, each of its twins comes with what its
     * destination takes before it: every destination still sees its
     * ops in plan order (its landing board counts on that). */
    for (size_t i = 0; i < n; i++) {
        if (done[i])
            continue;
        emit(q->order, &at, done, pos, peer, i);
        if (q->leader[i] != i)
            continue;
        for (size_t t = chain[i]; t != SIZE_MAX; t = chain[t])
            while (!done[t])
                emit(q->order, &at, done, pos, peer,
                     queue[first[peer[t]] + pos[peer[t]]]);
    }
    st = WEX_OK;
out:
    free(chain);
    free(tail);
    free(first);
    free(queue);
    free(pos);
    free(done);
    return st;
}

size_t wex__transforms_nth(const wex_job *job, size_t k)
{
    const struct wex__quant_state *q = job->src.quant;

    return q != NULL && q->order != NULL && job->transport.ops != NULL &&
                   !(job->transport.ops->caps & WEX_TRANSPORT_CAP_TWO_SIDED)
               ? q->order[k]
               : k;
}
