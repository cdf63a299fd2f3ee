/* Work split over a few threads for the moments a rank waits on its own
 * CPU work alone (a destination's delta apply at commit). */
#ifndef WEX_HOST_PARALLEL_H
#define WEX_HOST_PARALLEL_H

#include <stddef.h>

/* Runs fn(arg, k, worker, why, cap) for every k in [0, tasks) on up to
 * `threads` threads, the caller's among them (worker 0; the others 1,
 * 2, ... for scratch of their own), each taking the next task as it
 * frees up. A task that fails returns nonzero and may say why in its
 * `why` (cap bytes, the thread's own). Returns 0, or the first nonzero
 * fn returned, with what that call said in `why` (when not NULL; "" if
 * it said nothing); the tasks not yet begun are then not run. Threads
 * that cannot be started leave their share to the others. */
typedef int (*wex__parallel_fn)(void *arg, size_t task, unsigned worker,
                                char *why, size_t cap);
int wex__parallel(size_t tasks, unsigned threads, wex__parallel_fn fn,
                  void *arg, char *why, size_t cap);

/* The threads a rank lends such work by default: the CPUs it may run on,
 * at most `cap`. */
unsigned wex__parallel_default(unsigned cap);

#endif /* WEX_HOST_PARALLEL_H */
