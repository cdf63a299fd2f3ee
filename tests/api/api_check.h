/*
 * What the programs of tests/api share: a failure count and EXPECT,
 * which counts and names a failed check and goes on, and the byte every
 * rank expects at an offset of a tensor in a step, and `wex store`
 * started as a child process. They see libwex.so
 * through <wex/wex.h> only.
 */
#ifndef WEX_TEST_API_CHECK_H
#define WEX_TEST_API_CHECK_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;

#define EXPECT(cond, ...)                                                      \
    do {                                                                       \
        if (!(cond)) {                                                         \
            failures++;                                                        \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
            fprintf(stderr, __VA_ARGS__);                                      \
            fprintf(stderr, "\n");                                             \
        }                                                                      \
    } while (0)

/* The byte every rank expects at `offset` of tensor `name` in `step`. */
static inline unsigned char expected(const char *name, uint64_t offset,
                                     uint64_t step)
{
    uint64_t h = 1469598103934665603ull ^ step;

    for (const char *p = name; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h ^= offset * 0x9e3779b97f4a7c15ull;
    h ^= h >> 29;
    return (unsigned char)(h * 0xbf58476d1ce4e5b9ull >> 56);
}

/* Starts `wex store` and reads the address it listens on. */
static inline pid_t start_store(const char *wex, const char *token,
                                char *address, size_t cap)
{
    int fds[2];
    pid_t pid;
    FILE *out;
    char line[512];

    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        execl(wex, wex, "store", "--token", token, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    out = fdopen(fds[0], "r");
    address[0] = '\0';
    if (out != NULL && fgets(line, sizeof(line), out) != NULL &&
        sscanf(line, "listening on %255s", address) == 1 &&
        strlen(address) < cap)
        return pid; /* the pipe stays open: the store may print more */
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return -1;
}

#endif /* WEX_TEST_API_CHECK_H */
