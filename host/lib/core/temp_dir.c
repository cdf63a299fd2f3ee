#include "temp_dir.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int wex__temp_dir_make(char *dir, size_t cap, const char *prefix)
{
    const char *tmp = getenv("TMPDIR");

    if ((size_t)snprintf(dir, cap, "%s/%s-XXXXXX", tmp && tmp[0] ? tmp : "/tmp",
                         prefix) >= cap) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(dir) != NULL ? 0 : -1;
}

void wex__temp_dir_remove(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d != NULL) {
        while ((e = readdir(d)) != NULL) {
            char path[4096];
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}
