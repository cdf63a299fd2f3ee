#include "self_dir.h"

#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

int wex__self_dir(char *dir, size_t cap)
{
    Dl_info info;
    char *slash;
    ssize_t n;

    /* The main program's own entry has no path of its own: ask the
     * kernel where it was loaded from. */
    if (dladdr((void *)wex__self_dir, &info) != 0 && info.dli_fname != NULL &&
        strchr(info.dli_fname, '/') != NULL && strlen(info.dli_fname) < cap) {
        strcpy(dir, info.dli_fname);
    } else {
        if (cap < 2)
            return -1;
        n = readlink("/proc/self/exe", dir, cap - 1);
        if (n <= 0)
            return -1;
        dir[n] = '\0';
    }
    slash = strrchr(dir, '/');
    if (slash == NULL)
        return -1;
    *slash = '\0';
    return 0;
}
