/* Where the code running now was loaded from: libwex.so's directory, or
 * that of the program linked with the host statically (the wex command,
 * the tests). Plugins and libwex_cuda.so are found relative to it. */
#ifndef WEX_HOST_SELF_DIR_H
#define WEX_HOST_SELF_DIR_H

#include <stddef.h>

/* The directory into `dir` (`cap` bytes); 0, or -1 when unknown. */
int wex__self_dir(char *dir, size_t cap);

#endif /* WEX_HOST_SELF_DIR_H */
