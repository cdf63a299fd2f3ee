/*
 * wex conformance: numbered contract checks any plugin can be put
 * through (docs/conformance.md). Everything that runs plugin code runs in
 * a forked child (conformance_child.c), so a plugin that crashes, hangs or
 * prints fails its check instead of taking the kit down.
 *
 * Files: cmd_conformance.c (the command line),
 * conformance_find.c (the plugin, the hf engine and the sample model),
 * conformance_run.c (every check in order, and the report),
 * conformance_checks.c (the check table),
 * conformance_child.c (child processes, deadlines, captured output),
 * conformance_elf.c (the dynamic symbol table and DT_NEEDED),
 * conformance_manifest.c (C01, C02), conformance_symbols.c (C03, C04),
 * conformance_negotiate.c (C05 - C12), conformance_load.c (C13, and
 * loading the plugin as the host does),
 * conformance_boxes.c (volume of a union of boxes),
 * conformance_engine.c, conformance_policy.c, conformance_transport.c
 * (each kind's own checks).
 */
#ifndef CLI_CONFORMANCE_H
#define CLI_CONFORMANCE_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <wex/abi.h>
#include <wex/transport.h>

#include "tool_plugins.h"

/* Check numbers: Cnn in the output is the enum value. */
enum {
    CONF_MANIFEST = 1,
    CONF_OPTIONS_SCHEMA,
    CONF_EXPORTS,
    CONF_DEPENDENCIES,
    CONF_NEG_EXACT,
    CONF_NEG_ABOVE,
    CONF_NEG_BELOW,
    CONF_NEG_WIDE,
    CONF_DESCRIPTOR,
    CONF_IDENTITY,
    CONF_OPS,
    CONF_NEG_REPEAT,
    CONF_INIT_FINI,
    CONF_ENGINE_DESCRIBE,
    CONF_ENGINE_COVERAGE,
    CONF_ENGINE_REFUSE,
    CONF_POLICY_COVERAGE,
    CONF_POLICY_AGREE,
    CONF_TRANSPORT_ROUNDTRIP,
    CONF_TRANSPORT_DEAD_PEER,
    CONF_SILENT,
    CONF_POLICY_FAILOVER, /* after C21: numbers stay as first published */
    CONF_LAST = CONF_POLICY_FAILOVER
};

/* Outcomes. NOT_RUN only while the kit works. */
#define CONF_NOT_RUN 0
#define CONF_PASS 1
#define CONF_FAIL 2
#define CONF_SKIP 3

#define CONF_REASON_MAX 480

typedef struct conf_check_info {
    int id;
    const char *title; /* what a passing plugin does, one line */
    const char *rule;  /* the rule it enforces (docs/plugins.md) */
    const char *help;  /* how it is checked, for --help */
} conf_check_info;

/* The table, indexed by id - 1. */
extern const conf_check_info conf_checks[CONF_LAST];

typedef struct conf_result {
    int status;
    char reason[CONF_REASON_MAX];
} conf_result;

/* The model the engine and policy checks use. */
#define CONF_MODEL_FILE "Qwen3-0.6B.config.json"

typedef struct conf_ctx {
    char *manifest_path;              /* as resolved from the PLUGIN argument */
    wex_tool_manifest *manifest_file; /* loaded by C01 (NULL when it fails) */
    wex_tool_manifest_info manifest;  /* what it says (zeroed likewise) */
    int manifest_ok;
    char *model_path;     /* engines and policies */
    char *hf_manifest;    /* policies: the hf engine's manifest */
    const cJSON *options; /* --options, NULL when absent */
    double timeout_s;     /* per check process */
    double deadline_s;    /* C20: a put/flush to a dead peer */
    conf_result results[CONF_LAST + 1];
    /* Lines plugins printed themselves (C21), "phase: line" each. */
    char *stray;
    size_t stray_len;
    size_t stray_lines;
} conf_ctx;

/* The rendezvous a transport's connect is lent (ABI 1.3), as files in a
 * directory a check process and its forked children share
 * (conformance_exchange.c). */
typedef struct conf_exchange {
    char dir[200];
    double deadline_s; /* how long fetch waits for a name */
} conf_exchange;

/* Makes the directory; -1 (errno set, x->dir the path tried) when it
 * cannot. */
int conf_exchange_open(conf_exchange *x, double deadline_s);
/* Fills `ex` to lend `x` to a transport's connect. */
void conf_exchange_lend(conf_exchange *x, wex_transport_exchange *ex);
/* Removes the directory and everything published in it. */
void conf_exchange_close(conf_exchange *x);

/* ---- parent side ------------------------------------------------------ */

/* The manifest PLUGIN names (a manifest, a library with its manifest
 * beside it, NAME or KIND/NAME on the search path), malloc'd; NULL with
 * a one-line reason in err (conformance_find.c). */
char *conf_resolve_plugin(const char *arg, char *err, size_t cap);
/* The hf engine's manifest, for planning a policy's job; NULL if none. */
char *conf_hf_manifest(void);
/* CONF_MODEL_FILE in `models`, or (models NULL) in $WEX_MODELS_DIR, the
 * install's share/wex/models or the source tree's samples/models; NULL
 * when not found. */
char *conf_find_model(const char *models);

/* Puts the plugin through every check, in order (conformance_run.c). */
void conf_run_checks(conf_ctx *ctx);
/* Prints the results, as text or JSON; returns how many checks failed. */
int conf_print(const conf_ctx *ctx, const char *arg, int json, int verbose);

/* Records a result (the first one for an id wins). Returns `status`. */
int conf_set(conf_ctx *ctx, int id, int status, const char *fmt, ...)
    WEX_PRINTF(4, 5);

/* Runs fn(ctx, arg) in a forked child (its own process group, stdout and
 * stderr captured for C21) that reports the checks `ids` with conf_begin
 * and conf_report. Checks it never reports are failed (the one in
 * progress when it crashed or ran past ctx->timeout_s) or skipped. */
void conf_run_child(conf_ctx *ctx, const char *phase, const int *ids,
                    size_t count, void (*fn)(conf_ctx *ctx, void *arg),
                    void *arg);

/* ---- child side ------------------------------------------------------- */

/* Marks check `id` as in progress (a crash from here on is its fault). */
void conf_begin(int id);
void conf_report(int id, int status, const char *fmt, ...) WEX_PRINTF(3, 4);
/* The child's report pipe, for a grandchild to close. */
int conf_report_fd(void);
/* Unless conf_watchdog is called again first (0 disarms it), reports
 * check `id` failed with this message after `seconds` and ends the
 * child: how a hang inside a plugin becomes a FAIL with a reason. */
void conf_watchdog(unsigned seconds, int id, const char *fmt, ...)
    WEX_PRINTF(3, 4);

/* ---- the checks ------------------------------------------------------- */

void conf_check_manifest(conf_ctx *ctx);       /* C01 */
void conf_check_options_schema(conf_ctx *ctx); /* C02 */
void conf_check_symbols(conf_ctx *ctx);        /* C03, C04 */
void conf_check_negotiation(conf_ctx *ctx);    /* C05 - C12 */
void conf_check_init_fini(conf_ctx *ctx);      /* C13 */
void conf_check_engine(conf_ctx *ctx);         /* C14 - C16 */
void conf_check_policy(conf_ctx *ctx);         /* C17, C18 */
void conf_check_transport(conf_ctx *ctx);      /* C19, C20 */

/* Loads the plugin under test through a registry of just `manifests`
 * (colon-separated), as the host would; child side. On failure returns
 * NULL with the loader's message in the thread's error. */
wex_tool_plugin *conf_load_plugin(const conf_ctx *ctx, const char *manifests,
                                  wex_tool_registry **registry_p);

/* ---- ELF (conformance_elf.c) ------------------------------------------ */

typedef struct conf_elf {
    char **exported; /* defined global or weak dynamic symbols */
    size_t exported_count;
    char **undefined; /* undefined, non-weak */
    size_t undefined_count;
    char **needed; /* DT_NEEDED */
    size_t needed_count;
} conf_elf;

/* Reads the dynamic symbol table and DT_NEEDED entries of `path`; on
 * failure returns -1 with a one-line reason in err. */
int conf_elf_read(const char *path, conf_elf *elf, char *err, size_t cap);
void conf_elf_free(conf_elf *elf);

/* ---- boxes (conformance_boxes.c) -------------------------------------- */

typedef struct conf_box {
    uint64_t lo[WEX_MAX_DIMS];
    uint64_t hi[WEX_MAX_DIMS]; /* exclusive */
} conf_box;

uint64_t conf_box_volume(const conf_box *box, uint32_t ndim);
/* Elements covered by at least one of the boxes (all of rank ndim); -1
 * when out of memory. Reorders `boxes`. */
int conf_union_volume(conf_box *boxes, size_t count, uint32_t ndim,
                      uint64_t *volume_p);

#endif /* CLI_CONFORMANCE_H */
