/*
 * A directory of a process's own under $TMPDIR (else /tmp), and its
 * removal with the files in it: wex run's plan shares, the conformance
 * kit's stand-in rendezvous.
 */
#ifndef WEX_HOST_TEMP_DIR_H
#define WEX_HOST_TEMP_DIR_H

#include <stddef.h>

/* Makes "$TMPDIR/PREFIX-XXXXXX" into dir (cap bytes). 0, or -1 with errno
 * set and dir holding the path it tried. */
int wex__temp_dir_make(char *dir, size_t cap, const char *prefix);
/* Removes every file in dir (not subdirectories), then dir. */
void wex__temp_dir_remove(const char *dir);

#endif /* WEX_HOST_TEMP_DIR_H */
