/*
 * The cuda-ipc transport's memory key: what a destination rank publishes
 * for one registered buffer, and a source decodes to open it.
 *
 * Wire format, little-endian, 120 bytes:
 *   0  u32  magic "WXCI"           32 u64 allocation size
 *   4  u16  version (1)            40 u64 buffer offset in the allocation
 *   6  u16  reserved, zero         48 u64 buffer size in bytes
 *   8  u32  destination pid        56 64 bytes: cudaIpcMemHandle_t of the
 *  12  u32  destination device             whole allocation
 *  16  u64  destination rank
 *  24  u64  allocation base (in the destination: with the pid, it names
 *           the allocation, so a source opens each one once)
 * Decoding checks every field, so a corrupt or foreign key is refused
 * with a reason, never trusted.
 */
#ifndef WEX_CUDA_IPC_KEY_H
#define WEX_CUDA_IPC_KEY_H

#include <stddef.h>
#include <stdint.h>

#define CUDA_IPC_KEY_MAGIC 0x49435857u /* "WXCI" as little-endian bytes */
#define CUDA_IPC_KEY_VERSION 1u
#define CUDA_IPC_HANDLE_BYTES 64u
#define CUDA_IPC_KEY_BYTES (56u + CUDA_IPC_HANDLE_BYTES)

typedef struct cuda_ipc_key {
    uint32_t pid;
    uint32_t device;
    uint64_t rank;
    uint64_t alloc_base;
    uint64_t alloc_size;
    uint64_t offset;
    uint64_t bytes;
    unsigned char handle[CUDA_IPC_HANDLE_BYTES];
} cuda_ipc_key;

/* Writes the key into out (cap bytes); returns its length, or 0 when it
 * does not fit. */
size_t cuda_ipc_key_encode(const cuda_ipc_key *key, void *out, size_t cap);

/* Decodes and validates; 0 on success, otherwise -1 with a reason. */
int cuda_ipc_key_decode(const void *data, size_t len, cuda_ipc_key *key,
                        char *why, size_t why_cap);

#endif /* WEX_CUDA_IPC_KEY_H */
