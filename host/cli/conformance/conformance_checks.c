/*
 * The conformance kit's checks: number, title, the rule each enforces
 * (docs/plugins.md) and how it is checked, which `wex conformance --help`
 * prints and docs/conformance.md expands on.
 */
#include "conformance.h"

const conf_check_info conf_checks[CONF_LAST] = {
    {CONF_MANIFEST,
     "manifest is valid against the manifest schema and names a library",
     "manifest",
     "Reads the manifest as the host does (JSON syntax, "
     "schemas/manifest.schema.json, file format 1.x, abi.min <= abi.max) and "
     "checks that library_path, resolved against the manifest's directory, "
     "is a readable file."},
    {CONF_OPTIONS_SCHEMA,
     "options_schema is a usable JSON Schema and its defaults validate",
     "manifest: options_schema",
     "The manifest has an options_schema object that allows an object; the "
     "host's validator compiles it (validating {}); every property's "
     "default validates against that property's schema; and when {} is "
     "valid, {} with the defaults filled in is still valid."},
    {CONF_EXPORTS, "the library exports exactly its entry point", "PLP_HOST_1",
     "Reads the ELF dynamic symbol table (.dynsym) of the library itself: "
     "the entry point (wex_plugin_negotiate or the manifest's entry_point) "
     "is defined there, and no other global or weak function or object is "
     "(symbol-version nodes aside). An entry point that is only undefined "
     "there would come from a dependency."},
    {CONF_DEPENDENCIES,
     "undefined symbols resolve from its own dependencies; no libwex",
     "PLP_HOST_9",
     "DT_NEEDED must not name libwex. In a child process the library is "
     "loaded with dlopen(RTLD_NOW), and every symbol its .dynsym leaves "
     "undefined (weak ones aside) is looked up with dlsym on its handle, "
     "which searches the library's own dependency tree only: each must "
     "come from libc, libm, libdl, libpthread, librt, ld.so or its own "
     "DT_NEEDED libraries (what -z defs ensures), never from libwex or "
     "whatever else the loading process holds."},
    {CONF_NEG_EXACT, "negotiate accepts the host's offer", "PLP_HOST_2",
     "In a child process (as are C05-C12): dlopen(RTLD_NOW | RTLD_LOCAL), "
     "dlsym the entry point, and offer this host's ABI range cut to the "
     "manifest's (1.0..1.0 today). The plugin must return 0, choose a "
     "version inside the offer and inside its manifest's range, and set "
     "out->desc."},
    {CONF_NEG_ABOVE,
     "negotiate refuses an offer entirely above its ABI with WEX_ERR_ABI",
     "PLP_HOST_2",
     "Offers the two major versions after the manifest's abi.max (2.0..3.0 "
     "for a 1.x plugin): the answer must be WEX_ERR_ABI (-8)."},
    {CONF_NEG_BELOW,
     "negotiate refuses an offer entirely below its ABI with WEX_ERR_ABI",
     "PLP_HOST_2", "Offers 0.1..0.9: the answer must be WEX_ERR_ABI (-8)."},
    {CONF_NEG_WIDE, "negotiate picks a version inside a wide offer",
     "PLP_HOST_2",
     "Offers 1.0..9.9: the plugin must accept with a version inside the "
     "offer and inside its manifest's abi range, and set out->desc."},
    {CONF_DESCRIPTOR,
     "the descriptor is whole, follows the chosen ABI and has a version",
     "PLP_HOST_4, PLP_HOST_10",
     "The descriptor from C05: struct_size at least ABI 1.0's "
     "WEX_PLUGIN_DESC_SIZE_1_0, abi_version equal to the version negotiate "
     "chose, a non-empty version string, and a threading level "
     "(flags & 0xff) of WEX_PLUGIN_THREAD_SINGLE, _PER_CTX or _SAFE."},
    {CONF_IDENTITY, "the descriptor's kind and name equal the manifest's",
     "PLP_HOST_3", "desc->kind and desc->name against the manifest."},
    {CONF_OPS,
     "the ops table has its kind's ABI 1.0 size and every 1.0 function",
     "PLP_HOST_4",
     "desc->ops is set; its struct_size is at least ABI 1.0's "
     "WEX_ENGINE_OPS_SIZE_1_0, WEX_POLICY_OPS_SIZE_1_0 or "
     "WEX_TRANSPORT_OPS_SIZE_1_0 for the manifest's kind; reserved0 (and "
     "caps, for engines and policies) is zero; and no ABI 1.0 function "
     "pointer is NULL (recv may be NULL unless the transport is "
     "two-sided)."},
    {CONF_NEG_REPEAT, "negotiate answers the same offer the same way",
     "PLP_HOST_2",
     "C05's offer again: the same status, version and descriptor pointer "
     "(descriptors live in static storage)."},
    {CONF_INIT_FINI, "the host loads it; init and fini work twice",
     "PLP_HOST_5",
     "In a child process, loads the plugin through libwex's registry and "
     "loader, exactly as jobs do (WEX_PLUGIN_MANIFESTS = the manifest): "
     "dlopen, the entry symbol's origin, negotiation, the descriptor checks "
     "and init with the host's services table (its struct_size is ABI "
     "1.0's, so this also shows the plugin copes with a 1.0 host). Then "
     "fini, init again with the same services, and fini. A failing init "
     "must explain itself through host->set_error."},
    {CONF_ENGINE_DESCRIBE, "engine: describes a real model, the same way twice",
     "engine adapters: a pure function",
     "With the catalog of Qwen3-0.6B.config.json (see --models) and "
     "parallel {} (or {\"tp\": 1} when {} is refused), through the host's "
     "engine driver: ctx_create succeeds, rank_count >= 1, every rank "
     "describes (the host's layout builder checks every piece against both "
     "tensors), and describing every rank again, last first, gives the "
     "same coordinates, local tensors and pieces."},
    {CONF_ENGINE_COVERAGE,
     "engine: every canonical tensor is wholly held by some rank",
     "engine adapters: layouts",
     "Over all ranks of C14, the union of the pieces' boxes of each "
     "canonical tensor (computed exactly; replicas count once) is the whole "
     "tensor: no element is held by no rank, and no piece leaves its "
     "tensor."},
    {CONF_ENGINE_REFUSE,
     "engine: refuses an impossible parallel config in one line",
     "engine adapters: ctx_create refuses; PLP_HOST_5",
     "For engines whose manifest lists the \"tp\" capability: ctx_create "
     "with parallel {\"tp\": 7} on Qwen3-0.6B (16 attention heads, 8 KV "
     "heads) returns WEX_ERR_INVALID with a non-empty, one-line message "
     "through host->set_error."},
    {CONF_POLICY_COVERAGE,
     "policy: the destination's operations write each element once",
     "policies: the plan",
     "Plans the job Qwen3-0.6B, hf (one rank) -> hf (one rank) through the "
     "host's planner (the hf engine must be on the search path). "
     "Destination rank 0's operations, as boxes of its local tensors, "
     "cover every element its pieces hold exactly once and nothing "
     "outside them."},
    {CONF_POLICY_AGREE,
     "policy: both ends list the same operations in the same order",
     "policies: a pure function",
     "Source rank 0's operations with destination rank 0 equal destination "
     "rank 0's with source rank 0, in the same order, and planning "
     "destination rank 0 again gives the same list."},
    {CONF_TRANSPORT_ROUNDTRIP,
     "transport: put + flush land in another process's buffer", "transports",
     "A forked destination process (side destination, rank 0 of 1, job id "
     "wex-conformance-PID) and the tester (side source) first call the "
     "transport's connect, if it has one (ABI 1.3), with a stand-in "
     "rendezvous that holds the host's rule for names and sizes; then the "
     "destination exposes 4 MiB with mem_alloc "
     "(WEX_TRANSPORT_CAP_ALLOC) or mem_register of its own memory and sends "
     "mem_key over a pipe; the tester attaches it, puts a pattern in 67 "
     "writes (large, unaligned, at the very end, small strided), flushes, "
     "and the destination checks every byte: the pattern where written, "
     "zero elsewhere. Skipped without WEX_TRANSPORT_CAP_HOST_MEMORY (for a "
     "device-memory transport the skip says whether ctx_create found a "
     "device, e.g. \"no CUDA device\")."},
    {CONF_TRANSPORT_DEAD_PEER,
     "transport: a killed destination never makes put + flush hang",
     "transports; PLP_HOST_5",
     "C19's destination is killed (SIGKILL). A put + flush towards it must "
     "return within --deadline seconds, failing with a message or "
     "succeeding harmlessly (into memory the source still maps), and "
     "peer_detach and ctx_destroy must return too; an alarm() watchdog in "
     "the tester turns a hang into a FAIL."},
    {CONF_SILENT, "the plugin prints nothing itself", "PLP_HOST_6",
     "The stdout and stderr of every check process are captured: a line "
     "that did not come from the host's logger (\"wex: LEVEL: ...\") was "
     "printed by the plugin itself."},
    {CONF_POLICY_FAILOVER,
     "policy: plans around dead sources from their replicas",
     "policies: failover (dead_sources)",
     "Plans Qwen3-0.6B from an hf source with parallel {\"dp\": 2} (two "
     "ranks, each holding the whole model) to one hf destination rank, "
     "with source rank 0 listed in request->dead_sources, as the host asks "
     "after a source dies. Destination rank 0's operations must all come "
     "from source rank 1 and write each element exactly once, and source "
     "rank 1 must list the same operations towards it in the same order."},
};
