/*
 * Child processes for the checks that run plugin code. Each group of
 * checks runs in a forked child in its own process group; the child
 * reports through a pipe, one fixed-size record per message (smaller than
 * PIPE_BUF, so every write is atomic), and its stdout and stderr go to a
 * memfd the parent reads afterwards for C21. A child that crashes or runs
 * past its deadline fails the check it was in, and the whole process
 * group (transport destinations included) is killed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "conformance.h"
#include "tool_base.h"

typedef struct record {
    int32_t id;
    int32_t status; /* CONF_NOT_RUN: the check has begun */
    char reason[CONF_REASON_MAX];
} record;

_Static_assert(sizeof(record) <= PIPE_BUF, "records must be atomic");

/* How much of a child's output C21 reads. */
#define OUTPUT_MAX (256u << 10)
/* How many stray lines are kept for the report (all are counted). */
#define STRAY_KEEP 8

static int report_pipe = -1;

/* One line: newlines and tabs become spaces. */
static void flatten(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\r' || *s == '\t')
            *s = ' ';
}

/* ---- child side --------------------------------------------------------- */

static void send_record(const record *r)
{
    ssize_t n;

    if (report_pipe < 0)
        return;
    do
        n = write(report_pipe, r, sizeof(*r));
    while (n < 0 && errno == EINTR);
}

void conf_begin(int id)
{
    record r;

    memset(&r, 0, sizeof(r));
    r.id = id;
    r.status = CONF_NOT_RUN;
    send_record(&r);
}

void conf_report(int id, int status, const char *fmt, ...)
{
    va_list ap;
    record r;

    memset(&r, 0, sizeof(r));
    r.id = id;
    r.status = status;
    va_start(ap, fmt);
    vsnprintf(r.reason, sizeof(r.reason), fmt, ap);
    va_end(ap);
    flatten(r.reason);
    send_record(&r);
}

int conf_report_fd(void)
{
    return report_pipe;
}

/* The watchdog's record is formatted up front: the handler only writes
 * it, which is async-signal-safe. */
static record watchdog_record;

static void watchdog_fired(int sig)
{
    (void)sig;
    send_record(&watchdog_record);
    _exit(0);
}

void conf_watchdog(unsigned seconds, int id, const char *fmt, ...)
{
    struct sigaction sa;
    va_list ap;

    alarm(0);
    if (seconds == 0)
        return;
    memset(&watchdog_record, 0, sizeof(watchdog_record));
    watchdog_record.id = id;
    watchdog_record.status = CONF_FAIL;
    va_start(ap, fmt);
    vsnprintf(watchdog_record.reason, sizeof(watchdog_record.reason), fmt, ap);
    va_end(ap);
    flatten(watchdog_record.reason);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = watchdog_fired;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGALRM, &sa, NULL);
    alarm(seconds);
}

/* ---- parent side -------------------------------------------------------- */

int conf_set(conf_ctx *ctx, int id, int status, const char *fmt, ...)
{
    conf_result *r;
    va_list ap;

    if (id < 1 || id > CONF_LAST)
        return status;
    r = &ctx->results[id];
    if (r->status != CONF_NOT_RUN)
        return status;
    r->status = status;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    flatten(r->reason);
    return status;
}

static void add_stray(conf_ctx *ctx, const char *phase, const char *line,
                      size_t len)
{
    size_t need;
    char *grown;

    ctx->stray_lines++;
    if (ctx->stray_lines > STRAY_KEEP)
        return;
    if (len > 200)
        len = 200;
    need = ctx->stray_len + strlen(phase) + len + 8;
    grown = realloc(ctx->stray, need);
    if (grown == NULL)
        return;
    ctx->stray = grown;
    ctx->stray_len += (size_t)snprintf(
        grown + ctx->stray_len, need - ctx->stray_len, "%s%s: %.*s",
        ctx->stray_len ? " | " : "", phase, (int)len, line);
}

/* Every line the child printed that did not come through the host's
 * logger ("wex: LEVEL: ...") was printed by the plugin itself. */
static void scan_output(conf_ctx *ctx, const char *phase, int fd)
{
    char *buf = malloc(OUTPUT_MAX + 1);
    size_t len = 0;
    ssize_t n;

    if (buf == NULL || lseek(fd, 0, SEEK_SET) < 0) {
        free(buf);
        return;
    }
    while (len < OUTPUT_MAX &&
           (n = read(fd, buf + len, OUTPUT_MAX - len)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    for (char *line = buf; line < buf + len;) {
        char *end = memchr(line, '\n', (size_t)(buf + len - line));
        size_t l = end ? (size_t)(end - line) : (size_t)(buf + len - line);
        if (l > 0 && strncmp(line, "wex: ", 5) != 0)
            add_stray(ctx, phase, line, l);
        line += l + 1;
    }
    free(buf);
}

static void handle(conf_ctx *ctx, const record *r, int *begun, int *reported)
{
    if (r->id < 1 || r->id > CONF_LAST)
        return;
    if (r->status == CONF_NOT_RUN) {
        begun[r->id] = 1;
        return;
    }
    reported[r->id] = 1;
    conf_set(ctx, r->id, r->status, "%.*s", (int)sizeof(r->reason), r->reason);
}

/* The child has ended, but stays a zombie: its process group (and any
 * grandchild in it) still exists and cannot be another one's yet. */
static int has_ended(pid_t pid)
{
    siginfo_t info;

    memset(&info, 0, sizeof(info));
    return waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
           info.si_pid == pid;
}

static void how_it_ended(int timed_out, double limit, int wstatus, char *out,
                         size_t cap)
{
    if (timed_out)
        snprintf(out, cap, "did not finish within %.0f s (hung?)", limit);
    else if (WIFSIGNALED(wstatus))
        snprintf(out, cap, "the check process died of signal %d (%s)",
                 WTERMSIG(wstatus), strsignal(WTERMSIG(wstatus)));
    else if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) != 0)
        snprintf(out, cap,
                 "the check process exited with status %d "
                 "(the plugin called exit?)",
                 WEXITSTATUS(wstatus));
    else
        snprintf(out, cap,
                 "the check process ended without a result "
                 "(the plugin called exit?)");
}

void conf_run_child(conf_ctx *ctx, const char *phase, const int *ids,
                    size_t count, void (*fn)(conf_ctx *ctx, void *arg),
                    void *arg)
{
    int begun[CONF_LAST + 1] = {0}, reported[CONF_LAST + 1] = {0};
    int fds[2], out_fd, timed_out = 0, exited = 0, eof = 0, wstatus = 0;
    double deadline;
    char ended[160];
    pid_t pid;
    record r;

    if (pipe2(fds, O_CLOEXEC) != 0) {
        for (size_t i = 0; i < count; i++)
            conf_set(ctx, ids[i], CONF_FAIL, "kit: pipe: %s", strerror(errno));
        return;
    }
    out_fd = memfd_create("wex-conformance-output", MFD_CLOEXEC);
    if (out_fd < 0) /* no capture, but never the terminal */
        out_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    fflush(stdout);
    fflush(stderr);
    pid = fork();
    if (pid < 0) {
        for (size_t i = 0; i < count; i++)
            conf_set(ctx, ids[i], CONF_FAIL, "kit: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        if (out_fd >= 0)
            close(out_fd);
        return;
    }
    if (pid == 0) {
        /* a crash is reported as the signal it is, even where a sanitizer
         * runtime installed handlers of its own */
        static const int fatal[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL};
        for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
            signal(fatal[i], SIG_DFL);
        setpgid(0, 0);
        close(fds[0]);
        report_pipe = fds[1];
        if (out_fd >= 0) {
            dup2(out_fd, STDOUT_FILENO);
            dup2(out_fd, STDERR_FILENO);
        }
        fn(ctx, arg);
        fflush(NULL);
        _exit(0);
    }
    setpgid(pid, pid); /* either side may win the race; both set it */
    close(fds[1]);
    deadline = wex_tool_now() + ctx->timeout_s;
    while (!eof) {
        struct pollfd p = {fds[0], POLLIN, 0};
        double left = deadline - wex_tool_now();
        ssize_t n;

        if (left <= 0) {
            timed_out = 1;
            break;
        }
        if (poll(&p, 1, left > 0.2 ? 200 : (int)(left * 1000) + 1) > 0) {
            n = read(fds[0], &r, sizeof(r));
            if (n == (ssize_t)sizeof(r))
                handle(ctx, &r, begun, reported);
            else if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
                eof = 1;
        }
        if (!exited && has_ended(pid)) {
            exited = 1;
            /* drain what is left; a grandchild may still hold the pipe */
            fcntl(fds[0], F_SETFL, O_NONBLOCK);
            while (read(fds[0], &r, sizeof(r)) == (ssize_t)sizeof(r))
                handle(ctx, &r, begun, reported);
            break;
        }
    }
    while (!exited && !timed_out) {
        if (has_ended(pid)) {
            exited = 1;
            break;
        }
        if (wex_tool_now() >= deadline) {
            timed_out = 1;
            break;
        }
        usleep(20000);
    }
    /* the child's whole group: transport destinations, helpers */
    kill(-pid, SIGKILL);
    if (!exited)
        kill(pid, SIGKILL);
    waitpid(pid, &wstatus, 0);
    close(fds[0]);
    how_it_ended(timed_out, ctx->timeout_s, wstatus, ended, sizeof(ended));
    for (size_t i = 0; i < count; i++) {
        int id = ids[i];
        if (reported[id])
            continue;
        if (begun[id]) {
            conf_set(ctx, id, CONF_FAIL, "%s", ended);
            continue;
        }
        /* never begun: the process ended during an earlier check */
        int during = 0;
        for (size_t j = 0; j < count; j++)
            if (begun[ids[j]] && !reported[ids[j]])
                during = ids[j];
        if (during)
            conf_set(ctx, id, CONF_SKIP,
                     "not run: the check process ended "
                     "during C%02d",
                     during);
        else
            conf_set(ctx, id, CONF_FAIL, "%s", ended);
    }
    if (out_fd >= 0) {
        scan_output(ctx, phase, out_fd);
        close(out_fd);
    }
}
