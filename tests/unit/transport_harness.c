#include "transport_harness.h"

#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "fd_io.h"
#include "host_registry.h"
#include "options.h"
#include "registry.h"

/* Set by th_load, in the test's process (Check forks one per test). */
static wex__registry *registry;
static const wex_transport_ops *ops;
static wex_plugin_state *state;

const wex_transport_ops *th_load(const char *name)
{
    wex__plugin *plugin;

    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 1);
    ck_assert_int_eq(wex__registry_scan(&registry), WEX_OK);
    plugin = wex__registry_find(registry, WEX_KIND_TRANSPORT, name);
    ck_assert_msg(plugin != NULL, "no %s transport in %s", name,
                  WEX_BUILD_PLUGINS);
    ck_assert_msg(wex__plugin_load(registry, plugin) == WEX_OK, "%s",
                  wex__last_error());
    ops = &plugin->ops.transport;
    state = plugin->plugin_state;
    ck_assert_uint_ge(ops->struct_size, sizeof(wex_transport_ops));
    return ops;
}

void th_unload(void)
{
    wex__registry_free(registry);
    registry = NULL;
    ops = NULL;
    state = NULL;
}

wex_status th_open_ctx(const char *job_id, uint32_t side, uint64_t rank,
                       const char *options, wex_transport_ctx **ctx_p)
{
    cJSON *doc = options ? cJSON_Parse(options) : NULL;
    wex_options view = wex__options_view(doc);
    wex_transport_args args;
    wex_status st;

    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.side = side;
    args.rank = rank;
    args.source_ranks = 2;
    args.destination_ranks = 4;
    args.options = &view;
    args.job_id = job_id;
    wex__error_clear();
    st = ops->ctx_create(state, &args, ctx_p);
    cJSON_Delete(doc); /* the plugin reads options only while creating */
    return st;
}

wex_transport_ctx *th_must_open(const char *job_id, uint32_t side,
                                uint64_t rank, const char *options)
{
    wex_transport_ctx *ctx = NULL;

    ck_assert_msg(th_open_ctx(job_id, side, rank, options, &ctx) == WEX_OK,
                  "%s", wex__last_error());
    return ctx;
}

/* ---- the writes: contiguous runs and many small strided pieces ------- */

th_op *th_make_ops(uint64_t size, size_t *count_p)
{
    uint64_t strided = size * 3 / 8 / 997;
    size_t n = 0;
    th_op *v;

    if (strided > 20000)
        strided = 20000;
    v = malloc((size_t)(strided + 300) * sizeof(*v));
    ck_assert_ptr_nonnull(v);
    v[n++] = (th_op){0, size / 16};                 /* aligned head */
    v[n++] = (th_op){size / 8 + 123, size / 4 + 7}; /* unaligned */
    v[n++] = (th_op){size - 1000, 1000};            /* the very end */
    for (uint64_t k = 0; k < strided; k++)          /* strided */
        v[n++] = (th_op){size / 2 + k * 997, 61};
    for (uint64_t k = 0; k < 256; k++) /* single bytes */
        v[n++] = (th_op){size / 8 * 7 + k * 4099, 1};
    *count_p = n;
    return v;
}

uint8_t th_pattern(uint64_t i, unsigned salt)
{
    return (uint8_t)(((i + 17 + salt * 7919) * 0x9e3779b97f4a7c15ull) >> 56) |
           1u;
}

uint8_t *th_pattern_buffer(uint64_t size, unsigned salt)
{
    uint8_t *src = malloc(size);

    ck_assert_ptr_nonnull(src);
    for (uint64_t i = 0; i < size; i++)
        src[i] = th_pattern(i, salt);
    return src;
}

int th_verify(const uint8_t *buf, uint64_t size, unsigned salt)
{
    size_t n;
    th_op *v = th_make_ops(size, &n);
    uint8_t *want = calloc(1, size);
    int rc = 0;

    if (want == NULL) {
        fprintf(stderr, "destination: out of memory\n");
        free(v);
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        for (uint64_t b = v[i].offset; b < v[i].offset + v[i].bytes; b++)
            want[b] = th_pattern(b, salt);
    if (memcmp(buf, want, size) != 0) {
        for (uint64_t b = 0; b < size; b++)
            if (buf[b] != want[b]) {
                fprintf(stderr,
                        "destination: buffer %u: byte %llu is %u, "
                        "expected %u\n",
                        salt, (unsigned long long)b, buf[b], want[b]);
                break;
            }
        rc = 1;
    }
    free(want);
    free(v);
    return rc;
}

double th_gbps(uint64_t bytes, double seconds)
{
    return seconds > 0 ? (double)bytes / seconds / 1e9 : 0.0;
}

/* ---- the destination process ------------------------------------------ */

/* One buffer of `b`'s kind: mem_alloc, or mem_register of fresh pages of
 * this process. 0, or -1 with nothing left to undo. */
static int expose(wex_transport_ctx *ctx, const th_buffer *b, void **buf_p,
                  wex_transport_mem **mem_p)
{
    void *buf;

    if (!b->registered)
        return ops->mem_alloc(ctx, b->bytes, buf_p, mem_p) == WEX_OK ? 0 : -1;
    buf = mmap(NULL, b->bytes, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buf == MAP_FAILED)
        return -1;
    if (ops->mem_register(ctx, buf, b->bytes, WEX_MEMORY_HOST, mem_p) !=
        WEX_OK) {
        munmap(buf, b->bytes);
        return -1;
    }
    *buf_p = buf;
    return 0;
}

static int send_key(wex_transport_ctx *ctx, wex_transport_mem *mem, int fd)
{
    uint8_t key[WEX_TRANSPORT_KEY_MAX];
    uint64_t key_len = sizeof(key);
    uint32_t len;

    if (ops->mem_key(ctx, mem, key, &key_len) != WEX_OK)
        return -1;
    len = (uint32_t)key_len;
    return wex__write_all(fd, &len, sizeof(len)) == 0 &&
                   wex__write_all(fd, key, len) == 0
               ? 0
               : -1;
}

/* The child's whole life; returns its exit status. While the test
 * process writes, this thread sits in read(). */
static int destination_main(const th_dest_spec *spec, int key_fd, int go_fd)
{
    wex_transport_ctx *ctx = NULL;
    wex_transport_mem *mem[TH_MAX_BUFFERS] = {NULL};
    void *buf[TH_MAX_BUFFERS] = {NULL};
    size_t exposed = 0;
    int sent = 0, rc = 2;
    char cmd = 0;

    if (spec->prepare != NULL && spec->prepare() != 0)
        goto out;
    if (th_open_ctx(spec->job_id, WEX_SIDE_DESTINATION, TH_DEST_RANK,
                    spec->options, &ctx) != WEX_OK)
        goto out;
    for (; exposed < spec->count; exposed++)
        if (expose(ctx, &spec->buffers[exposed], &buf[exposed],
                   &mem[exposed]) != 0)
            goto out;
    for (size_t i = 0; i < spec->count; i++)
        if (send_key(ctx, mem[i], key_fd) != 0)
            goto out;
    sent = 1;
    if (wex__read_all(go_fd, &cmd, 1) != 0)
        cmd = 0;
    if (cmd == 'v') {
        rc = 0;
        for (size_t i = 0; i < spec->count; i++)
            rc |= th_verify(buf[i], spec->buffers[i].bytes, (unsigned)i);
    } else {
        rc = cmd == 'x' ? 0 : 2;
    }
out:
    if (rc == 2 && wex__last_error()[0])
        fprintf(stderr, "destination: %s\n", wex__last_error());
    if (!sent) {
        uint32_t zero = 0;
        (void)wex__write_all(key_fd, &zero, sizeof(zero));
    }
    for (size_t i = exposed; i-- > 0;)
        ops->mem_deregister(ctx, mem[i]);
    ops->ctx_destroy(ctx);
    for (size_t i = 0; i < exposed; i++)
        if (spec->buffers[i].registered)
            munmap(buf[i], spec->buffers[i].bytes);
    return rc;
}

void th_spawn_destination(th_dest *d, const th_dest_spec *spec)
{
    int key_pipe[2], go_pipe[2];

    ck_assert_uint_le(spec->count, TH_MAX_BUFFERS);
    ck_assert_int_eq(pipe(key_pipe), 0);
    ck_assert_int_eq(pipe(go_pipe), 0);
    fflush(stdout);
    fflush(stderr);
    d->pid = fork();
    ck_assert_int_ge(d->pid, 0);
    if (d->pid == 0) {
        close(key_pipe[0]);
        close(go_pipe[1]);
        _exit(destination_main(spec, key_pipe[1], go_pipe[0]));
    }
    close(key_pipe[1]);
    close(go_pipe[0]);
    d->go_fd = go_pipe[1];
    for (size_t i = 0; i < spec->count; i++) {
        uint32_t len = 0;
        ck_assert_msg(wex__read_all(key_pipe[0], &len, sizeof(len)) == 0 &&
                          len > 0 && len <= sizeof(d->key[i]) &&
                          wex__read_all(key_pipe[0], d->key[i], len) == 0,
                      "the destination failed to expose its buffers");
        d->key_len[i] = len;
    }
    close(key_pipe[0]);
}

int th_finish_destination(th_dest *d, char cmd)
{
    int status = 0;

    ck_assert_int_eq(wex__write_all(d->go_fd, &cmd, 1), 0);
    close(d->go_fd);
    ck_assert_int_eq(waitpid(d->pid, &status, 0), d->pid);
    ck_assert_msg(WIFEXITED(status), "destination died (status 0x%x)", status);
    return WEXITSTATUS(status);
}

void th_kill_destination(th_dest *d)
{
    int status = 0;

    ck_assert_int_eq(kill(d->pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(d->pid, &status, 0), d->pid);
    ck_assert(WIFSIGNALED(status));
    close(d->go_fd);
}

/* ---- keys ------------------------------------------------------------------ */

wex_status th_attach_key(wex_transport_ctx *ctx, uint64_t rank, const void *key,
                         uint64_t len)
{
    wex_transport_peer *peer = NULL;
    wex_status st;

    wex__error_clear();
    st = ops->peer_attach(ctx, rank, key, len, &peer);
    if (st == WEX_OK)
        ops->peer_detach(ctx, peer);
    else
        ck_assert_msg(wex__last_error()[0] != '\0', "status %d, no message",
                      st);
    return st;
}

void th_expect_invalid(wex_transport_ctx *ctx, const uint8_t *key, uint64_t len,
                       const char *what, const char *says)
{
    wex_status st = th_attach_key(ctx, 2, key, len);

    ck_assert_msg(st == WEX_ERR_INVALID, "%s: status %d (%s)", what, st,
                  wex__last_error());
    ck_assert_msg(strstr(wex__last_error(), says) != NULL, "%s: %s", what,
                  wex__last_error());
}
