/*
 * Whole reads and writes on blocking file descriptors (pipes between a
 * process and the children it forks), and opening a file wex is pointed
 * at without ever blocking on it. The rendezvous's sockets have their
 * own, with deadlines (store.h).
 */
#ifndef WEX_HOST_FD_IO_H
#define WEX_HOST_FD_IO_H

#include <stddef.h>
#include <wex/abi.h>

/* 0 once all `n` bytes are written; -1 when the descriptor fails or its
 * reader is gone. EINTR is retried. */
int wex__write_all(int fd, const void *buf, size_t n);
/* 0 once all `n` bytes are read; -1 on failure or end of file first. */
int wex__read_all(int fd, void *buf, size_t n);

/* Opens `path` (O_CLOEXEC added) for reading a file wex was pointed at:
 * non-blocking, so a FIFO or a terminal cannot hang the open, then
 * refuses anything but a regular file in one line ("PATH: not a regular
 * file (a FIFO)"), and clears O_NONBLOCK. A missing file is
 * WEX_ERR_INVALID, other failures WEX_ERR_SYSTEM. */
wex_status wex__open_regular(const char *path, int flags, int *fd_p);

/* What `mode` is, for those messages: "a FIFO", "a directory", ... */
const char *wex__file_kind(unsigned mode);

#endif /* WEX_HOST_FD_IO_H */
