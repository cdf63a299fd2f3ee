/*
 * What the multi-process transport tests share: a monotonic clock, and
 * whole reads and writes on the pipes between a test and the destination
 * processes it forks.
 */
#ifndef WEX_TEST_PROC_IO_H
#define WEX_TEST_PROC_IO_H

#include <errno.h>
#include <stddef.h>
#include <time.h>
#include <unistd.h>

static inline double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* 0 once all `n` bytes are written; -1 when the pipe fails or closes. */
static inline int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;

    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* 0 once all `n` bytes are read; -1 on failure or end of file first. */
static inline int read_all(int fd, void *buf, size_t n)
{
    char *p = buf;

    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

#endif /* WEX_TEST_PROC_IO_H */
