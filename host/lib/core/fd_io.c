#include "fd_io.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

int wex__write_all(int fd, const void *buf, size_t n)
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

int wex__read_all(int fd, void *buf, size_t n)
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

const char *wex__file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a file";
    }
}

wex_status wex__open_regular(const char *path, int flags, int *fd_p)
{
    wex_status st = WEX_OK;
    struct stat sb;
    int fd, fl;

    *fd_p = -1;
    fd = open(path, flags | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return wex__error(errno == ENOENT ? WEX_ERR_INVALID : WEX_ERR_SYSTEM,
                          "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &sb) != 0) {
        st = wex__error(WEX_ERR_SYSTEM, "%s: fstat: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = wex__error(WEX_ERR_INVALID, "%s: not a regular file (%s)", path,
                        wex__file_kind((unsigned)sb.st_mode));
        goto out;
    }
    /* a regular file never blocks; a later reader expects plain reads */
    if ((fl = fcntl(fd, F_GETFL)) < 0 ||
        fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        st = wex__error(WEX_ERR_SYSTEM, "%s: fcntl: %s", path, strerror(errno));
out:
    if (st != WEX_OK)
        close(fd);
    else
        *fd_p = fd;
    return st;
}
