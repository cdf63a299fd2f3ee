/*
 * The shm transport's rendezvous for buffers: a destination context runs
 * a small server on an abstract Unix socket; a source connects, names a
 * buffer from the key it was given, and receives the buffer's memfd over
 * SCM_RIGHTS (or, for a private buffer, only a confirmation that it is
 * still registered).
 *
 * Abstract sockets live in the network namespace, not the filesystem:
 * nothing is left behind when a process dies. Either end checks the
 * other's credentials (SO_PEERCRED): only the same user (or root) is
 * served, and a source checks that the socket belongs to the process the
 * key names, so a stale key is refused rather than trusted.
 */
#ifndef WEX_SHM_FDPASS_H
#define WEX_SHM_FDPASS_H

#include <sys/types.h>

#include <wex/host.h>

#define SHM_WIRE_MAGIC 0x51525857u /* "WXRQ" */

/* Source to destination, right after connecting. */
typedef struct shm_request {
    uint32_t magic;
    uint32_t kind; /* SHM_KIND_* */
    uint64_t buffer_id;
    uint64_t size;
    uint64_t address; /* private buffers: where the source will write */
} shm_request;

/* Destination to source; an SCM_RIGHTS descriptor rides along for an
 * accepted memfd or fence request. */
typedef struct shm_reply {
    uint32_t magic;
    uint32_t status; /* SHM_REPLY_* */
    uint64_t size;   /* the buffer's size, when known */
    uint32_t slot;   /* a fence request: the source's slot (shm_fence.c) */
    uint32_t reserved;
} shm_reply;

#define SHM_REPLY_OK 0u
#define SHM_REPLY_UNKNOWN 1u  /* no such buffer: deregistered or stale key */
#define SHM_REPLY_MISMATCH 2u /* the buffer has another kind/size/address */
#define SHM_REPLY_FAILED 3u   /* malformed request, or a failure there */

/* One request as the server's thread hands it to the lookup: who sent
 * it (SO_PEERCRED; pid 0 when the source lives in a pid namespace this
 * process cannot see) and on which connection. */
typedef struct shm_asked {
    const shm_request *request;
    pid_t pid;
    int client;
    /* Set by the lookup to keep `client` open (it then owns it): a
     * fence slot lives as long as its source's connection. */
    int keep_client;
} shm_asked;

/* Answers one request with SHM_REPLY_*, filling the reply's size and
 * slot; for an accepted memfd or fence request *fd_p receives a
 * descriptor the server closes after sending. Called on the server's
 * thread. */
typedef uint32_t (*shm_lookup_fn)(void *arg, shm_asked *asked, shm_reply *reply,
                                  int *fd_p);

typedef struct shm_server shm_server;

/* Binds the abstract socket `name` (name_len bytes, no leading NUL) and
 * serves it from a background thread until shm_server_stop. */
wex_status shm_server_start(const wex_host_services *host, const char *name,
                            size_t name_len, shm_lookup_fn lookup, void *arg,
                            shm_server **server_p);
/* Stops the thread (it wakes at once), closes the socket. NULL is fine. */
void shm_server_stop(shm_server *server);

typedef struct shm_fetch {
    const char *name; /* the destination's abstract socket name */
    size_t name_len;
    const char *who; /* "destination rank 3 (pid 1234)", for messages */
    pid_t pid;       /* the destination's pid, from the key */
    int timeout_ms;  /* for connecting (retried) and the exchange */
    shm_request request;
} shm_fetch;

/* Connects, retrying while nothing listens yet (failing at once when the
 * destination's process is gone), sends the request and reads the reply.
 * A memfd request returns the descriptor in *fd_p (caller closes); a
 * private one sets *fd_p to -1. */
wex_status shm_fetch_buffer(const wex_host_services *host,
                            const shm_fetch *fetch, int *fd_p);

/* The same for a fence request (SHM_KIND_FENCE): the fence page's memfd
 * in *fd_p, the slot the destination gave this source in *slot_p, and
 * the connection in *sock_p, which the source keeps open for as long as
 * it holds the slot (closing it gives the slot back). */
wex_status shm_fetch_fence(const wex_host_services *host,
                           const shm_fetch *fetch, int *fd_p, uint32_t *slot_p,
                           int *sock_p);

#endif /* WEX_SHM_FDPASS_H */
