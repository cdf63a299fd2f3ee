/* Socket I/O with deadlines and address parsing, shared by the
 * rendezvous store's client and server (store.h). */
#include "store.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"

static int poll_ms(double deadline)
{
    double left;

    if (deadline < 0)
        return -1;
    left = deadline - wex__now();
    if (left <= 0)
        return 0;
    if (left > 1e6) /* poll takes an int; it is re-armed after waking */
        return 1000000000;
    return (int)(left * 1000.0) + 1;
}

/* Waits until fd is ready for `events` (or reports an error/hang-up,
 * which the next recv/send turns into a status). */
wex_status wex__store_wait_fd(int fd, short events, double deadline)
{
    struct pollfd p = {fd, events, 0};

    for (;;) {
        int n = poll(&p, 1, poll_ms(deadline));
        if (n > 0)
            return WEX_OK;
        if (n == 0 && deadline >= 0 && wex__now() >= deadline)
            return wex__error(WEX_ERR_TIMEOUT, "timed out");
        if (n < 0 && errno != EINTR)
            return wex__error(WEX_ERR_SYSTEM, "poll: %s", strerror(errno));
    }
}

static wex_status io_error(const char *what)
{
    if (errno == ECONNRESET || errno == EPIPE)
        return wex__error(WEX_ERR_PEER, "connection reset");
    return wex__error(WEX_ERR_SYSTEM, "%s: %s", what, strerror(errno));
}

/* MSG_DONTWAIT on every call, so the deadline holds whatever mode the
 * socket is in. */
wex_status wex__store_read_full(int fd, void *buf, size_t n, double deadline)
{
    uint8_t *p = buf;
    size_t got = 0;

    while (got < n) {
        ssize_t r = recv(fd, p + got, n - got, MSG_DONTWAIT);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r == 0)
            return wex__error(WEX_ERR_PEER, "connection closed");
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return io_error("recv");
        wex_status st = wex__store_wait_fd(fd, POLLIN, deadline);
        if (st != WEX_OK)
            return st;
    }
    return WEX_OK;
}

wex_status wex__store_write_full(int fd, const void *buf, size_t n,
                                 double deadline)
{
    const uint8_t *p = buf;
    size_t sent = 0;

    while (sent < n) {
        /* MSG_NOSIGNAL: a closed peer is a status, not a SIGPIPE. */
        ssize_t r = send(fd, p + sent, n - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (r >= 0) {
            sent += (size_t)r;
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return io_error("send");
        wex_status st = wex__store_wait_fd(fd, POLLOUT, deadline);
        if (st != WEX_OK)
            return st;
    }
    return WEX_OK;
}

wex_status wex__store_split_address(const char *address, char *host,
                                    size_t host_cap, char *port,
                                    size_t port_cap)
{
    const char *colon, *h;
    size_t host_len, port_len;
    unsigned long value;
    char *end;

    if (address == NULL || address[0] == '\0')
        return wex__error(WEX_ERR_INVALID, "rendezvous address is empty; "
                                           "expected HOST:PORT");
    colon = strrchr(address, ':');
    if (colon == NULL)
        return wex__error(WEX_ERR_INVALID,
                          "rendezvous address '%s': "
                          "expected HOST:PORT",
                          address);
    h = address;
    host_len = (size_t)(colon - address);
    if (host_len >= 2 && h[0] == '[' && h[host_len - 1] == ']') {
        h++;
        host_len -= 2;
    } else if (memchr(h, ':', host_len) != NULL) {
        return wex__error(WEX_ERR_INVALID,
                          "rendezvous address '%s': write "
                          "an IPv6 host in brackets, [HOST]:PORT",
                          address);
    }
    port_len = strlen(colon + 1);
    errno = 0;
    value = strtoul(colon + 1, &end, 10);
    if (port_len == 0 || port_len > 5 || *end != '\0' || errno != 0 ||
        value > 65535 || colon[1] < '0' || colon[1] > '9')
        return wex__error(WEX_ERR_INVALID,
                          "rendezvous address '%s': bad "
                          "port '%s'",
                          address, colon + 1);
    if (host_len == 0) {
        h = "127.0.0.1"; /* loopback unless asked otherwise */
        host_len = strlen(h);
    }
    if (host_len >= host_cap || port_len >= port_cap)
        return wex__error(WEX_ERR_INVALID,
                          "rendezvous address '%s' is too "
                          "long",
                          address);
    memcpy(host, h, host_len);
    host[host_len] = '\0';
    memcpy(port, colon + 1, port_len + 1);
    return WEX_OK;
}
