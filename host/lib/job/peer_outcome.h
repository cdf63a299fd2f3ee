/*
 * How one source's part of a destination's step went, as the checks
 * that look at it (job_sync.c's digest check, window.c's staging drain)
 * report it: the worst outcome over the sources decides whether the try
 * is retried without the dead ones or the step fails. Ordered: a later
 * outcome is worse.
 */
#ifndef WEX_HOST_PEER_OUTCOME_H
#define WEX_HOST_PEER_OUTCOME_H

typedef enum wex__peer_outcome {
    WEX__PEER_OK = 0,
    WEX__PEER_DIED,  /* the rendezvous saw it die: retry without it */
    WEX__PEER_FAILED /* it failed, stalled or sent bytes that landed wrong */
} wex__peer_outcome;

#endif /* WEX_HOST_PEER_OUTCOME_H */
