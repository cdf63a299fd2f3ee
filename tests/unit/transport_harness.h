/*
 * What the transport tests (test_shm_transport.c, test_ucx_transport.c)
 * share: a transport loaded through the host's registry like any plugin,
 * its contexts, the writes and the pattern they carry, and a forked
 * destination process that exposes buffers, publishes their keys up a
 * pipe, waits, and checks every byte on request.
 *
 * Names here start with th_ ("transport harness"); they are private to
 * these tests. The functions fail the running Check test (ck_assert) on
 * what they cannot do; the destination process reports through its exit
 * status.
 */
#ifndef WEX_TEST_TRANSPORT_HARNESS_H
#define WEX_TEST_TRANSPORT_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <wex/plugin.h>

/* The destination rank the forked destination process plays. */
#define TH_DEST_RANK 3u
/* Buffers one destination process exposes at the most. */
#define TH_MAX_BUFFERS 2

/* Loads transport `name` from the build's plugins (for a checked
 * fixture's setup) and returns its ops; th_unload is the teardown. */
const wex_transport_ops *th_load(const char *name);
void th_unload(void);

/* A context of job `job_id` with 2 source and 4 destination ranks;
 * `options` is JSON text or NULL. The last error is cleared first. */
wex_status th_open_ctx(const char *job_id, uint32_t side, uint64_t rank,
                       const char *options, wex_transport_ctx **ctx_p);
/* The same, failing the test (with the transport's message) unless it
 * opens. */
wex_transport_ctx *th_must_open(const char *job_id, uint32_t side,
                                uint64_t rank, const char *options);

/* ---- the writes: contiguous runs and many small strided pieces ------- */

typedef struct th_op {
    uint64_t offset, bytes;
} th_op;

/* Into a buffer of `size` bytes: an aligned head, an unaligned run, the
 * very end, up to 20000 strided 61-byte pieces and 256 single bytes.
 * The caller frees the array. */
th_op *th_make_ops(uint64_t size, size_t *count_p);
/* Byte `i` of buffer `salt`: never zero, so a missed write shows. */
uint8_t th_pattern(uint64_t i, unsigned salt);
/* `size` bytes of the pattern of buffer `salt` (the caller frees). */
uint8_t *th_pattern_buffer(uint64_t size, unsigned salt);
/* 0 when every byte th_make_ops(size) writes holds the pattern of buffer
 * `salt` and every other one is zero; else 1, naming the first wrong
 * byte on stderr. */
int th_verify(const uint8_t *buf, uint64_t size, unsigned salt);
double th_gbps(uint64_t bytes, double seconds);

/* ---- the destination process ------------------------------------------ */

typedef struct th_buffer {
    uint64_t bytes;
    int registered; /* 0: mem_alloc; 1: mem_register of its own memory */
} th_buffer;

typedef struct th_dest_spec {
    const char *job_id;
    const char *options;               /* JSON text or NULL */
    th_buffer buffers[TH_MAX_BUFFERS]; /* buffer i carries pattern i */
    size_t count;
    /* Runs in the destination process before its context opens; nonzero
     * makes it give up (exit status 2). May be NULL. */
    int (*prepare)(void);
} th_dest_spec;

typedef struct th_dest {
    pid_t pid;
    int go_fd; /* 'v': verify and exit; 'x': exit at once */
    uint8_t key[TH_MAX_BUFFERS][WEX_TRANSPORT_KEY_MAX];
    uint64_t key_len[TH_MAX_BUFFERS];
} th_dest;

/* Forks a destination process that opens a context as rank
 * TH_DEST_RANK, exposes `spec`'s buffers and sends their keys, in order,
 * which land in d->key; it then waits in a blocking read, calling nothing
 * of the transport's (only the transport's own threads run there) until
 * th_finish_destination or th_kill_destination. */
void th_spawn_destination(th_dest *d, const th_dest_spec *spec);
/* Tells the destination what to do and returns its exit status: 0 when
 * it found every byte right ('v') or exited at once ('x'). */
int th_finish_destination(th_dest *d, char cmd);
/* SIGKILLs the destination and reaps it. */
void th_kill_destination(th_dest *d);

/* ---- keys ------------------------------------------------------------------ */

/* Attaches a key as destination rank `rank`'s and detaches it again; a
 * refusal must come with a message. */
wex_status th_attach_key(wex_transport_ctx *ctx, uint64_t rank, const void *key,
                         uint64_t len);
/* Attaching `key` as rank 2's is WEX_ERR_INVALID, with `says` in the
 * message; `what` names the case in failures. */
void th_expect_invalid(wex_transport_ctx *ctx, const uint8_t *key, uint64_t len,
                       const char *what, const char *says);

#endif /* WEX_TEST_TRANSPORT_HARNESS_H */
