/*
 * fuzz_job: wex__job_config_parse on arbitrary text.
 *
 * Every input is parsed twice: against a registry scanned from an empty
 * directory (every plugin lookup fails) and against one scanned from the
 * real plugin manifests (WEX_FUZZ_PLUGIN_MANIFESTS, a directory; tools/
 * fuzz.sh generates it from plugins/ the way the build does), so plugin
 * options are validated against the plugins' own options schemas. Parsing
 * and schema validation must never crash or leak, whatever the outcome.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "job_config.h"
#include "host_registry.h"
#include "registry.h"

#include "fuzz_util.h"

static wex__registry *empty_registry;
static wex__registry *real_registry;

static wex__registry *scan(const char *place)
{
    wex__registry *r = NULL;

    if (setenv("WEX_PLUGIN_MANIFESTS", place, 1) != 0 ||
        wex__registry_scan(&r) != WEX_OK) {
        fprintf(stderr, "fuzz_job: cannot scan %s: %s\n", place,
                wex__last_error());
        exit(1);
    }
    return r;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static char empty_dir[] = "/tmp/wex-fuzz-job-XXXXXX";
    const char *real = getenv("WEX_FUZZ_PLUGIN_MANIFESTS");

    (void)argc;
    (void)argv;
    if (mkdtemp(empty_dir) == NULL) {
        perror("fuzz_job: mkdtemp");
        exit(1);
    }
    empty_registry = scan(empty_dir);
    rmdir(empty_dir);
    if (empty_registry->count != 0) {
        fprintf(stderr, "fuzz_job: the empty registry is not empty\n");
        exit(1);
    }
    if (real != NULL && *real) {
        real_registry = scan(real);
        if (real_registry->count == 0) {
            fprintf(stderr, "fuzz_job: no plugin manifests in %s\n", real);
            exit(1);
        }
    } else {
        fprintf(stderr, "fuzz_job: WEX_FUZZ_PLUGIN_MANIFESTS unset; "
                        "fuzzing with the empty registry only\n");
    }
    unsetenv("WEX_PLUGIN_MANIFESTS");
    return 0;
}

static void parse_one(const char *text, wex__registry *r, unsigned flags)
{
    wex__job_config *config = NULL;
    char *all = NULL;
    wex_status st;

    st = wex__job_config_parse("fuzz.json", text, "/jobs", r, flags, &config,
                               &all);
    if (st == WEX_OK) {
        FUZZ_CHECK(config != NULL);
        FUZZ_CHECK(config->doc != NULL && config->model_path != NULL);
        FUZZ_CHECK(config->source.plugin != NULL &&
                   config->destination.plugin != NULL &&
                   config->policy.plugin != NULL);
        FUZZ_CHECK((flags & WEX__JOB_PLAN_ONLY) ||
                   config->transport.plugin != NULL);
        wex__job_config_free(config);
    } else {
        /* A failure always explains itself. */
        FUZZ_CHECK(wex__last_error()[0] != '\0');
    }
    free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = fuzz_strndup(data, size);

    parse_one(text, empty_registry, 0);
    parse_one(text, empty_registry, WEX__JOB_PLAN_ONLY);
    if (real_registry != NULL) {
        parse_one(text, real_registry, 0);
        parse_one(text, real_registry, WEX__JOB_PLAN_ONLY);
    }
    free(text);
    return 0;
}
