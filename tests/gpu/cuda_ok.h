/* The GPU tests' check of a CUDA runtime call: on failure, say which
 * call and why, and return 1 from the function. */
#ifndef WEX_TEST_CUDA_OK_H
#define WEX_TEST_CUDA_OK_H

#include <cuda_runtime.h>
#include <stdio.h>

#define CUDA_OK(call)                                                          \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));        \
            return 1;                                                          \
        }                                                                      \
    } while (0)

#endif /* WEX_TEST_CUDA_OK_H */
