/* Reading JSON files with errors that name the file, line and column. */
#ifndef WEX_HOST_JSON_FILE_H
#define WEX_HOST_JSON_FILE_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <wex/abi.h>

/* Files larger than this are refused: configs and manifests are small,
 * and a bound keeps a wrong path (a checkpoint, /dev/zero) harmless. */
#define WEX__JSON_FILE_MAX (16u << 20)

/* Reads a whole regular file into a NUL-terminated buffer; anything else
 * (a FIFO, a device, a directory) is refused without blocking. */
wex_status wex__read_file(const char *path, char **data_p, size_t *len_p);

/* Parses `text` (NUL-terminated, `len` bytes before the NUL); on a syntax error the message reads
 * "NAME:LINE:COLUMN: invalid JSON near '...'". Also refused, so a file means to wex what it
 * means to Python's json: a NUL byte in the `len` bytes and anything but whitespace after the
 * value (each with its byte offset), and an object naming a key twice (with the object's JSON
 * Pointer and the key). */
wex_status wex__json_parse(const char *name, const char *text, size_t len,
                           cJSON **doc_p);

/* wex__read_file + wex__json_parse. */
wex_status wex__json_load(const char *path, cJSON **doc_p);

#endif /* WEX_HOST_JSON_FILE_H */
