/*
 * The encoding of plan shares: unsigned fields as LEB128 varints (most
 * are small), signed ones zigzagged, strings and byte runs after their
 * length. Writing grows a buffer and remembers a failed allocation;
 * reading bounds every field and count by what is left, so damaged
 * bytes can name what did not fit but never read past the end or ask
 * for a huge allocation.
 */
#ifndef WEX_HOST_SHARE_CODEC_H
#define WEX_HOST_SHARE_CODEC_H

#include <stddef.h>
#include <stdint.h>

typedef struct wex__out_buf {
    unsigned char *p;
    size_t len, cap;
    int failed; /* an allocation failed: what follows is dropped */
} wex__out_buf;

void wex__put_bytes(wex__out_buf *o, const void *src, size_t n);
void wex__put_u64(wex__out_buf *o, uint64_t v);
void wex__put_i64(wex__out_buf *o, int64_t v);
void wex__put_str(wex__out_buf *o, const char *s);
void wex__put_array(wex__out_buf *o, const uint64_t *v, size_t n);

typedef struct wex__in_buf {
    const unsigned char *p;
    size_t len, at;
    const char *bad; /* what first did not fit; NULL while all did */
} wex__in_buf;

/* Each returns 0 (NULL) once in->bad is set. */
uint64_t wex__get_u64(wex__in_buf *in);
int64_t wex__get_i64(wex__in_buf *in);
/* A count of things of at least one byte each. */
size_t wex__get_count(wex__in_buf *in);
/* A value below `limit`; `what` names it when it is not. */
uint64_t wex__get_below(wex__in_buf *in, uint64_t limit, const char *what);
/* malloc'd, NUL-terminated. */
char *wex__get_str(wex__in_buf *in);
void wex__get_array(wex__in_buf *in, uint64_t *v, size_t n);
/* calloc(n, size), at least one element. */
void *wex__get_table(wex__in_buf *in, size_t n, size_t size);

#endif /* WEX_HOST_SHARE_CODEC_H */
