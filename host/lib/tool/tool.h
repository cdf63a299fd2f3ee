/*
 * The tool API: what the `wex` command (host/cli: its subcommands, `wex
 * run`'s launcher and workers, the conformance kit) needs from libwex
 * beyond the public <wex/wex.h>, named and documented, and nothing else.
 *
 * The rule (docs/design.md, "host/lib, bottom to top"): a file of
 * host/cli includes <wex/wex.h>, the SDK's <wex/...> headers, the
 * headers of this folder and its own, never another host/lib header;
 * structure_cli_api checks it. So the internals behind these functions
 * can change without the command noticing, and a reader of the command
 * sees in one place what it leans on.
 *
 * Handles (wex_tool_registry, wex_tool_planner, ...) are libwex's own
 * objects, opaque here: the command holds them and hands them back, and
 * never reaches inside. Where it needs what one holds, a plain struct of
 * just those fields is filled for it (wex_tool_plugin_info,
 * wex_tool_job_info, wex_tool_plan_summary, ...); the strings and
 * pointers in one are borrowed from the handle and live as long as it.
 * A call that returns a wex_status leaves its one line in
 * wex_last_error() when it fails, as the public API does.
 *
 * Headers, one concept each:
 *   tool_base.h     errors, logging, the clock, pipes, temporary dirs
 *   tool_json.h     JSON files, schemas, the documents plugins read
 *   tool_plugins.h  the registry, plugins and their manifests
 *   tool_model.h    model catalogs, engines and the layouts they describe
 *   tool_checkpoint.h  Hugging Face checkpoints
 *   tool_plan.h     planning a job: sides, operations, summaries, shares
 *   tool_store.h    the rendezvous store, served and joined
 *   tool_job.h      what `wex run`'s workers reach inside a job, and the
 *                   test oracle's synthetic weights
 *
 * libwex.so leaves this folder out (with the oracle it uses): it is the
 * command's, linked from the static wex_host.
 */
#ifndef WEX_TOOL_H
#define WEX_TOOL_H

#include "tool_base.h"
#include "tool_checkpoint.h"
#include "tool_job.h"
#include "tool_json.h"
#include "tool_model.h"
#include "tool_plan.h"
#include "tool_plugins.h"
#include "tool_store.h"

#endif /* WEX_TOOL_H */
