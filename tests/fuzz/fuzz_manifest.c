/*
 * fuzz_manifest: the plugin manifest reader and validator
 * (wex__manifest_load) on arbitrary text. The manifest reader only reads
 * files, so each input is written to a file in a private temporary
 * directory first. A manifest that loads must hold every field the
 * registry relies on.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "manifest.h"

#include "fuzz_util.h"

static char dir[] = "/tmp/wex-fuzz-manifest-XXXXXX";
static char path[sizeof(dir) + 32];

static void cleanup(void)
{
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    if (mkdtemp(dir) == NULL) {
        perror("fuzz_manifest: mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/plugin.json", dir);
    atexit(cleanup);
    return 0;
}

static void write_input(const uint8_t *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    size_t done = 0;

    if (fd < 0) {
        perror("fuzz_manifest: open");
        abort();
    }
    while (done < size) {
        ssize_t n = write(fd, data + done, size - done);
        if (n <= 0) {
            perror("fuzz_manifest: write");
            abort();
        }
        done += (size_t)n;
    }
    close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wex__manifest m;
    wex_status st;

    write_input(data, size);
    st = wex__manifest_load(path, &m);
    if (st == WEX_OK) {
        FUZZ_CHECK(m.path && m.name && m.library && m.entry_point &&
                   m.version && m.description && m.json);
        FUZZ_CHECK(m.kind != 0 &&
                   strcmp(wex__kind_name(m.kind), "unknown") != 0);
        FUZZ_CHECK(m.abi_min <= m.abi_max);
        FUZZ_CHECK(strncmp(m.library, dir, strlen(dir)) == 0 ||
                   m.library[0] == '/');
        wex__manifest_fini(&m);
    } else {
        FUZZ_CHECK(wex__last_error()[0] != '\0');
        FUZZ_CHECK(m.json == NULL && m.name == NULL);
    }
    return 0;
}
