#include "json_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"

wex_status wex__read_file(const char *path, char **data_p, size_t *len_p)
{
    wex_status status = WEX_OK;
    struct stat st;
    char *data = NULL;
    size_t done = 0;
    int fd;

    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return wex__error(errno == ENOENT ? WEX_ERR_INVALID : WEX_ERR_SYSTEM,
                          "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        status = wex__error(WEX_ERR_INVALID, "%s: not a regular file", path);
        goto out;
    }
    if ((unsigned long long)st.st_size > WEX__JSON_FILE_MAX) {
        status = wex__error(WEX_ERR_INVALID,
                            "%s: %lld bytes, more than the %u allowed", path,
                            (long long)st.st_size, WEX__JSON_FILE_MAX);
        goto out;
    }
    data = malloc((size_t)st.st_size + 1);
    if (data == NULL) {
        status = wex__error(WEX_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    while (done < (size_t)st.st_size) {
        ssize_t n = read(fd, data + done, (size_t)st.st_size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            status = wex__error(WEX_ERR_SYSTEM, "%s: read failed: %s", path,
                                n < 0 ? strerror(errno) : "short file");
            goto out;
        }
        done += (size_t)n;
    }
    data[done] = '\0';
    *data_p = data;
    *len_p = done;
    data = NULL;
out:
    free(data);
    close(fd);
    return status;
}

/* Line and column (both from 1) of `at` inside `text`. */
static void locate(const char *text, const char *at, int *line_p,
                   int *col_p)
{
    int line = 1, col = 1;

    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    *line_p = line;
    *col_p = col;
}

wex_status wex__json_parse(const char *name, const char *text, size_t len,
                           cJSON **doc_p)
{
    const char *end = NULL;
    cJSON *doc;
    int line, col;
    char near[24];
    size_t n;

    /* `text` is NUL-terminated; cJSON wants the terminator counted when
     * it must check that nothing follows the document. An embedded NUL
     * ends the document early and fails that check. */
    doc = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    if (doc != NULL) {
        *doc_p = doc;
        return WEX_OK;
    }
    if (end == NULL || end < text || end > text + len)
        end = text + len;
    locate(text, end, &line, &col);
    n = strcspn(end, "\n");
    if (n >= sizeof(near))
        n = sizeof(near) - 1;
    memcpy(near, end, n);
    near[n] = '\0';
    if (end >= text + len)
        return wex__error(WEX_ERR_INVALID,
                          "%s:%d:%d: invalid JSON: unexpected end of input",
                          name, line, col);
    return wex__error(WEX_ERR_INVALID, "%s:%d:%d: invalid JSON near '%s'",
                      name, line, col, near);
}

wex_status wex__json_load(const char *path, cJSON **doc_p)
{
    wex_status status;
    char *text = NULL;
    size_t len = 0;

    status = wex__read_file(path, &text, &len);
    if (status != WEX_OK)
        return status;
    status = wex__json_parse(path, text, len, doc_p);
    free(text);
    return status;
}
