/*
 * What the two files of the fake NCCL share (fake_nccl.c says how it
 * works): a communicator and the ops it queues. fake_nccl.c has the API,
 * fake_nccl_wire.c the progress thread that moves the bytes.
 */
#ifndef WEX_FAKE_NCCL_H
#define WEX_FAKE_NCCL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/un.h>

#include <nccl.h>

/* fake_cudart.c: a device pointer's host alias, and stream work */
unsigned char *fake_cuda_reach(const void *ptr, size_t *left);
int fake_cuda_pinned(const void *ptr, size_t *left);
void *fake_cuda_work_begin(void *stream);
void fake_cuda_work_end(void *work);

#define ID_PREFIX "wexnccl-"
#define NAME_MAX_LEN 48
#define FRAME_MAGIC 0x4d524657u /* "WFRM" */
#define FRAME_BYTES 16          /* magic, zero, the payload's size */
#define RETRY_MS 2 /* between tries to reach a rank not listening yet */

typedef struct launch launch;

/* One send or receive, queued on its peer in issue order. */
typedef struct op {
    struct op *next;
    launch *launch;
    int peer, send;
    unsigned char *buf; /* host alias of the device buffer */
    size_t bytes, done;
    unsigned char frame[FRAME_BYTES];
    size_t framed; /* frame bytes moved */
} op;

/* A group's ops of one communicator on one stream: one piece of work on
 * that stream, finished with the last of them. */
struct launch {
    launch *next;
    void *stream, *work;
    size_t count, left;
    op ops[];
};

typedef struct peer {
    int fd;  /* -1 until connected */
    int hup; /* closed at its end: polled only while ops are queued */
    op *sends, *sends_tail, *recvs, *recvs_tail;
} peer;

struct ncclComm {
    int rank, size, blocking;
    char name[NAME_MAX_LEN];
    int listen_fd, wake[2];
    /* the progress thread's own */
    int joined; /* peers connected */
    double retry_at;
    peer *peers;
    launch *active; /* taken, not finished */
    pthread_t thread;
    int threaded;
    pthread_mutex_t lock; /* guards what follows */
    ncclResult_t state;
    int ready; /* init completed */
    int finalizing, stop;
    launch *posted, *posted_tail; /* not yet taken, in issue order */
    char why[256];
};

/* Records the communicator's first error; later calls report it. */
void fake_nccl_fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Interrupts the progress thread's poll: work was posted, or it stops. */
void fake_nccl_wake(ncclComm_t c);
/* "NAME.rank" (to < 0), where a rank listens, or "NAME.rank.to", where
 * it calls rank `to` from; returns the address's length. */
socklen_t fake_nccl_address(struct sockaddr_un *a, const char *name, int rank,
                            int to);
/* Sends this process signal `sig` once its communicators have moved
 * `bytes` more bytes, frames included, from now; 0 bytes disarms. For the
 * tests, which find it with dlsym: a rank that dies (SIGKILL) or stalls
 * (SIGSTOP) halfway through a transfer. */
void fake_nccl_signal_after(uint64_t bytes, int sig);
/* The bytes this process's communicators moved, both ways, frames
 * included: a test's proof that its bytes went this way. */
uint64_t fake_nccl_moved(void);
/* The progress thread of communicator `comm`, until it is told to stop. */
void *fake_nccl_progress(void *comm);

#endif /* WEX_FAKE_NCCL_H */
