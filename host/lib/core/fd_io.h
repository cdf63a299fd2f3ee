/*
 * Whole reads and writes on blocking file descriptors (pipes between a
 * process and the children it forks). The rendezvous's sockets have
 * their own, with deadlines (store.h).
 */
#ifndef WEX_HOST_FD_IO_H
#define WEX_HOST_FD_IO_H

#include <stddef.h>

/* 0 once all `n` bytes are written; -1 when the descriptor fails or its
 * reader is gone. EINTR is retried. */
int wex__write_all(int fd, const void *buf, size_t n);
/* 0 once all `n` bytes are read; -1 on failure or end of file first. */
int wex__read_all(int fd, void *buf, size_t n);

#endif /* WEX_HOST_FD_IO_H */
