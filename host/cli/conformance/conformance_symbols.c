/*
 * The checks of the library's dynamic symbols: it exports its entry
 * point and nothing else (C03), and what it leaves undefined comes from
 * its own dependencies, never libwex or the loading process (C04).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "conformance.h"

/* ---- C03, C04: symbols -------------------------------------------------- */

static int listed(char *const *list, size_t count, const char *name)
{
    for (size_t i = 0; i < count; i++)
        if (strcmp(list[i], name) == 0)
            return 1;
    return 0;
}

/* "a, b, c and 4 more" into out. */
static void join(char *const *list, size_t count, const char *skip, char *out,
                 size_t cap)
{
    size_t used = 0, shown = 0, total = 0;

    out[0] = '\0';
    for (size_t i = 0; i < count; i++) {
        if (skip && strcmp(list[i], skip) == 0)
            continue;
        total++;
        if (shown < 6 && used < cap) {
            used += (size_t)snprintf(out + used, cap - used, "%s%s",
                                     shown ? ", " : "", list[i]);
            shown++;
        }
    }
    if (total > shown && used < cap)
        snprintf(out + used, cap - used, " and %zu more", total - shown);
}

static void resolve_child(conf_ctx *ctx, void *arg)
{
    const conf_elf *elf = arg;
    char list[320] = "";
    size_t missing = 0, used = 0;
    void *handle;

    conf_begin(CONF_DEPENDENCIES);
    handle = dlopen(ctx->manifest.library, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        conf_report(CONF_DEPENDENCIES, CONF_FAIL,
                    "does not load with RTLD_NOW: %s", dlerror());
        return;
    }
    /* dlsym on the handle searches the library and its dependency tree
     * only: not libwex, not the kit, not the global scope that let the
     * load succeed. Whatever is missing there came from the process. */
    for (size_t i = 0; i < elf->undefined_count; i++) {
        dlerror();
        if (dlsym(handle, elf->undefined[i]) != NULL || dlerror() == NULL)
            continue;
        if (missing++ < 5 && used < sizeof(list))
            used +=
                (size_t)snprintf(list + used, sizeof(list) - used, "%s%s",
                                 missing > 1 ? ", " : "", elf->undefined[i]);
    }
    if (missing > 0)
        conf_report(CONF_DEPENDENCIES, CONF_FAIL,
                    "%zu undefined symbol%s resolved by no library it "
                    "depends on, only by the process that loads it: "
                    "%s%s (link with -z defs)",
                    missing, missing == 1 ? " is" : "s are", list,
                    missing > 5 ? ", ..." : "");
    else
        conf_report(CONF_DEPENDENCIES, CONF_PASS,
                    "%zu undefined symbols, all resolved from its %zu "
                    "DT_NEEDED libraries and theirs",
                    elf->undefined_count, elf->needed_count);
}

void conf_check_symbols(conf_ctx *ctx)
{
    const char *entry = ctx->manifest.entry_point;
    static const int ids[] = {CONF_DEPENDENCIES};
    char err[256], list[320];
    conf_elf elf;

    if (conf_elf_read(ctx->manifest.library, &elf, err, sizeof(err)) != 0) {
        conf_set(ctx, CONF_EXPORTS, CONF_FAIL, "%s", err);
        conf_set(ctx, CONF_DEPENDENCIES, CONF_FAIL, "%s", err);
        return;
    }
    if (!listed(elf.exported, elf.exported_count, entry)) {
        if (listed(elf.undefined, elf.undefined_count, entry)) {
            join(elf.needed, elf.needed_count, NULL, list, sizeof(list));
            conf_set(ctx, CONF_EXPORTS, CONF_FAIL,
                     "'%s' is not defined by the library itself: it is "
                     "undefined, so it would come from a dependency (%s)",
                     entry, list);
        } else {
            conf_set(ctx, CONF_EXPORTS, CONF_FAIL,
                     "does not export '%s' (mark it WEX_PLUGIN_EXPORT)", entry);
        }
    } else if (elf.exported_count > 1) {
        join(elf.exported, elf.exported_count, entry, list, sizeof(list));
        conf_set(ctx, CONF_EXPORTS, CONF_FAIL,
                 "exports %zu symbol%s besides '%s': %s (build with "
                 "-fvisibility=hidden)",
                 elf.exported_count - 1, elf.exported_count == 2 ? "" : "s",
                 entry, list);
    } else {
        conf_set(ctx, CONF_EXPORTS, CONF_PASS, "exports only '%s'", entry);
    }
    for (size_t i = 0; i < elf.needed_count; i++)
        if (strncmp(elf.needed[i], "libwex.so", 9) == 0) {
            conf_set(ctx, CONF_DEPENDENCIES, CONF_FAIL,
                     "links the host library (DT_NEEDED %s): everything a "
                     "plugin needs from the host comes through its services "
                     "table",
                     elf.needed[i]);
            break;
        }
    if (ctx->results[CONF_DEPENDENCIES].status == CONF_NOT_RUN)
        conf_run_child(ctx, "C04 symbols", ids, 1, resolve_child, &elf);
    conf_elf_free(&elf);
}
