/* Work split over a few threads for the moments a rank waits on its own
 * CPU work alone (a destination's delta apply at commit). */
#ifndef WEX_HOST_PARALLEL_H
#define WEX_HOST_PARALLEL_H

#include <stddef.h>

/* Runs fn(arg, k) for every k in [0, tasks) on up to `threads` threads,
 * the caller's among them, each taking the next task as it frees up.
 * Returns 0, or the first nonzero fn returned (the tasks not yet begun
 * are then not run). Threads that cannot be started leave their share
 * to the others. */
int wex__parallel(size_t tasks, unsigned threads, int (*fn)(void *, size_t),
                  void *arg);

/* The threads a rank lends such work by default: the CPUs it may run on,
 * at most `cap`. */
unsigned wex__parallel_default(unsigned cap);

#endif /* WEX_HOST_PARALLEL_H */
