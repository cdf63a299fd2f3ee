/*
 * The safetensors format (Hugging Face): an 8-byte little-endian header
 * length N, N bytes of JSON, then the data. The JSON maps each tensor's
 * name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets into
 * the data), beside an optional "__metadata__" of strings.
 *
 * The parser trusts nothing: the header length must be sane and within
 * the file, the JSON an object of well-formed entries of known dtypes,
 * every tensor's bytes (dtype size x shape) exactly its offsets' span,
 * inside the data, and no two tensors may overlap. Every refusal is one
 * line naming the file and the tensor.
 */
#ifndef WEX_HOST_SAFETENSORS_H
#define WEX_HOST_SAFETENSORS_H

#include <stdint.h>

#include <wex/abi.h>

/* The most header bytes a file may declare (the safetensors library's
 * own limit is 100 MB). */
#define WEX__ST_MAX_HEADER (UINT64_C(100) << 20)

typedef struct wex__st_tensor {
    char *name;
    uint32_t dtype;
    uint32_t ndim;
    uint64_t shape[WEX_MAX_DIMS];
    uint64_t begin, end; /* offsets into the data */
} wex__st_tensor;

typedef struct wex__st_header {
    uint64_t data_start;     /* 8 + N: where the data begins in the file */
    uint64_t data_size;      /* file size - data_start */
    wex__st_tensor *tensors; /* sorted by begin */
    size_t count;
} wex__st_header;

/* Parses the header of a file of `size` bytes whose first `avail` bytes
 * are `bytes` (avail >= 8 + N is needed; a shorter prefix is refused as
 * truncated). `path` names the file in errors. */
wex_status wex__st_parse(const char *path, const unsigned char *bytes,
                         uint64_t avail, uint64_t size, wex__st_header *out);
void wex__st_free(wex__st_header *h);

/* The tensor called `name`, or NULL. */
const wex__st_tensor *wex__st_find(const wex__st_header *h, const char *name);

/* The dtype a safetensors dtype string names, WEX_DTYPE_INVALID when wex
 * has none. */
uint32_t wex__st_dtype(const char *name);

#endif /* WEX_HOST_SAFETENSORS_H */
