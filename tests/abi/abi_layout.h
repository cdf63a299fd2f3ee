/*
 * The golden layout of every public ABI struct on LP64 (x86-64, aarch64).
 * A change here is an ABI break: append members instead, and add them to
 * this table with their new offsets.
 */
#include <wex/plugin.h>
#include <wex/wex.h>

#define WEX_ABI_LAYOUT(SIZE, FIELD)                                            \
    SIZE(wex_negotiate_in, 24)                                                 \
    FIELD(wex_negotiate_in, struct_size, 0)                                    \
    FIELD(wex_negotiate_in, abi_min, 4)                                        \
    FIELD(wex_negotiate_in, abi_max, 8)                                        \
    FIELD(wex_negotiate_in, reserved0, 12)                                     \
    FIELD(wex_negotiate_in, host_version, 16)                                  \
    SIZE(wex_negotiate_out, 16)                                                \
    FIELD(wex_negotiate_out, struct_size, 0)                                   \
    FIELD(wex_negotiate_out, abi_version, 4)                                   \
    FIELD(wex_negotiate_out, desc, 8)                                          \
    SIZE(wex_plugin_desc, 56)                                                  \
    FIELD(wex_plugin_desc, struct_size, 0)                                     \
    FIELD(wex_plugin_desc, abi_version, 4)                                     \
    FIELD(wex_plugin_desc, kind, 8)                                            \
    FIELD(wex_plugin_desc, flags, 12)                                          \
    FIELD(wex_plugin_desc, name, 16)                                           \
    FIELD(wex_plugin_desc, version, 24)                                        \
    FIELD(wex_plugin_desc, init, 32)                                           \
    FIELD(wex_plugin_desc, fini, 40)                                           \
    FIELD(wex_plugin_desc, ops, 48)                                            \
    SIZE(wex_tensor_info, 32)                                                  \
    FIELD(wex_tensor_info, dtype, 4)                                           \
    FIELD(wex_tensor_info, ndim, 8)                                            \
    FIELD(wex_tensor_info, name, 16)                                           \
    FIELD(wex_tensor_info, shape, 24)                                          \
    SIZE(wex_local_tensor_desc, 32)                                            \
    FIELD(wex_local_tensor_desc, dtype, 4)                                     \
    FIELD(wex_local_tensor_desc, ndim, 8)                                      \
    FIELD(wex_local_tensor_desc, name, 16)                                     \
    FIELD(wex_local_tensor_desc, shape, 24)                                    \
    SIZE(wex_piece_desc, 40)                                                   \
    FIELD(wex_piece_desc, transform, 4)                                        \
    FIELD(wex_piece_desc, canonical, 8)                                        \
    FIELD(wex_piece_desc, offset, 16)                                          \
    FIELD(wex_piece_desc, extent, 24)                                          \
    FIELD(wex_piece_desc, at, 32)                                              \
    SIZE(wex_host_services, 216)                                               \
    FIELD(wex_host_services, abi_version, 4)                                   \
    FIELD(wex_host_services, ctx, 8)                                           \
    FIELD(wex_host_services, log, 16)                                          \
    FIELD(wex_host_services, log_enabled, 24)                                  \
    FIELD(wex_host_services, set_error, 32)                                    \
    FIELD(wex_host_services, opt_type, 40)                                     \
    FIELD(wex_host_services, opt_get_i64, 48)                                  \
    FIELD(wex_host_services, opt_get_f64, 56)                                  \
    FIELD(wex_host_services, opt_get_bool, 64)                                 \
    FIELD(wex_host_services, opt_get_str, 72)                                  \
    FIELD(wex_host_services, opt_count, 80)                                    \
    FIELD(wex_host_services, opt_key, 88)                                      \
    FIELD(wex_host_services, model_tensor_count, 96)                           \
    FIELD(wex_host_services, model_tensor, 104)                                \
    FIELD(wex_host_services, model_find, 112)                                  \
    FIELD(wex_host_services, model_config, 120)                                \
    FIELD(wex_host_services, model_architecture, 128)                          \
    FIELD(wex_host_services, layout_set_coord, 136)                            \
    FIELD(wex_host_services, layout_add_tensor, 144)                           \
    FIELD(wex_host_services, layout_add_piece, 152)                            \
    FIELD(wex_host_services, layout_rank_count, 160)                           \
    FIELD(wex_host_services, layout_host, 168)                                 \
    FIELD(wex_host_services, layout_tensor, 176)                               \
    FIELD(wex_host_services, layout_canonical_pieces, 184)                     \
    FIELD(wex_host_services, layout_rank_piece_count, 192)                     \
    FIELD(wex_host_services, layout_rank_piece, 200)                           \
    FIELD(wex_host_services, plan_add_op, 208)                                 \
    SIZE(wex_piece_view, 64)                                                   \
    FIELD(wex_piece_view, ndim, 4)                                             \
    FIELD(wex_piece_view, local_ndim, 8)                                       \
    FIELD(wex_piece_view, rank, 16)                                            \
    FIELD(wex_piece_view, tensor, 24)                                          \
    FIELD(wex_piece_view, canonical, 32)                                       \
    FIELD(wex_piece_view, offset, 40)                                          \
    FIELD(wex_piece_view, extent, 48)                                          \
    FIELD(wex_piece_view, at, 56)                                              \
    SIZE(wex_plan_op, 64)                                                      \
    FIELD(wex_plan_op, ndim, 4)                                                \
    FIELD(wex_plan_op, src_rank, 8)                                            \
    FIELD(wex_plan_op, src_tensor, 16)                                         \
    FIELD(wex_plan_op, dst_rank, 24)                                           \
    FIELD(wex_plan_op, dst_tensor, 32)                                         \
    FIELD(wex_plan_op, src_offset, 40)                                         \
    FIELD(wex_plan_op, dst_offset, 48)                                         \
    FIELD(wex_plan_op, extent, 56)                                             \
    SIZE(wex_engine_args, 32)                                                  \
    FIELD(wex_engine_args, model, 8)                                           \
    FIELD(wex_engine_args, parallel, 16)                                       \
    FIELD(wex_engine_args, options, 24)                                        \
    SIZE(wex_engine_ops, 48)                                                   \
    FIELD(wex_engine_ops, caps, 8)                                             \
    FIELD(wex_engine_ops, ctx_create, 16)                                      \
    FIELD(wex_engine_ops, ctx_destroy, 24)                                     \
    FIELD(wex_engine_ops, rank_count, 32)                                      \
    FIELD(wex_engine_ops, describe_rank, 40)                                   \
    SIZE(wex_policy_args, 16)                                                  \
    FIELD(wex_policy_args, options, 8)                                         \
    SIZE(wex_plan_request, 56)                                                 \
    FIELD(wex_plan_request, side, 4)                                           \
    FIELD(wex_plan_request, rank, 8)                                           \
    FIELD(wex_plan_request, source, 16)                                        \
    FIELD(wex_plan_request, destination, 24)                                   \
    FIELD(wex_plan_request, topology, 32)                                      \
    FIELD(wex_plan_request, dead_sources, 40)                                  \
    FIELD(wex_plan_request, dead_source_count, 48)                             \
    SIZE(wex_policy_ops, 40)                                                   \
    FIELD(wex_policy_ops, caps, 8)                                             \
    FIELD(wex_policy_ops, ctx_create, 16)                                      \
    FIELD(wex_policy_ops, ctx_destroy, 24)                                     \
    FIELD(wex_policy_ops, plan, 32)                                            \
    SIZE(wex_transport_args, 64)                                               \
    FIELD(wex_transport_args, side, 4)                                         \
    FIELD(wex_transport_args, rank, 8)                                         \
    FIELD(wex_transport_args, source_ranks, 16)                                \
    FIELD(wex_transport_args, destination_ranks, 24)                           \
    FIELD(wex_transport_args, options, 32)                                     \
    FIELD(wex_transport_args, job_id, 40)                                      \
    FIELD(wex_transport_args, peer_ranks, 48)                                  \
    FIELD(wex_transport_args, peer_count, 56)                                  \
    SIZE(wex_transport_ops, 128)                                               \
    FIELD(wex_transport_ops, caps, 8)                                          \
    FIELD(wex_transport_ops, ctx_create, 16)                                   \
    FIELD(wex_transport_ops, ctx_destroy, 24)                                  \
    FIELD(wex_transport_ops, mem_alloc, 32)                                    \
    FIELD(wex_transport_ops, mem_register, 40)                                 \
    FIELD(wex_transport_ops, mem_deregister, 48)                               \
    FIELD(wex_transport_ops, mem_key, 56)                                      \
    FIELD(wex_transport_ops, peer_attach, 64)                                  \
    FIELD(wex_transport_ops, peer_detach, 72)                                  \
    FIELD(wex_transport_ops, put, 80)                                          \
    FIELD(wex_transport_ops, flush, 88)                                        \
    FIELD(wex_transport_ops, recv, 96)                                         \
    FIELD(wex_transport_ops, peer_path, 104)                                   \
    FIELD(wex_transport_ops, connect, 112)                                     \
    FIELD(wex_transport_ops, fence, 120)                                       \
    SIZE(wex_transport_fence, 32)                                              \
    FIELD(wex_transport_fence, op, 4)                                          \
    FIELD(wex_transport_fence, epoch, 8)                                       \
    FIELD(wex_transport_fence, abandoned, 16)                                  \
    FIELD(wex_transport_fence, grace_ms, 20)                                   \
    FIELD(wex_transport_fence, rekeyed, 24)                                    \
    SIZE(wex_transport_exchange, 32)                                           \
    FIELD(wex_transport_exchange, ctx, 8)                                      \
    FIELD(wex_transport_exchange, publish, 16)                                 \
    FIELD(wex_transport_exchange, fetch, 24)                                   \
    SIZE(wex_job_options, 32)                                                  \
    FIELD(wex_job_options, rendezvous, 8)                                      \
    FIELD(wex_job_options, token, 16)                                          \
    FIELD(wex_job_options, job_id, 24)                                         \
    SIZE(wex_tensor, 40)                                                       \
    FIELD(wex_tensor, dtype, 4)                                                \
    FIELD(wex_tensor, ndim, 8)                                                 \
    FIELD(wex_tensor, name, 16)                                                \
    FIELD(wex_tensor, shape, 24)                                               \
    FIELD(wex_tensor, bytes, 32)                                               \
    SIZE(wex_sync_report, 168)                                                 \
    FIELD(wex_sync_report, verified, 4)                                        \
    FIELD(wex_sync_report, step, 8)                                            \
    FIELD(wex_sync_report, committed_step, 16)                                 \
    FIELD(wex_sync_report, operations, 24)                                     \
    FIELD(wex_sync_report, bytes, 32)                                          \
    FIELD(wex_sync_report, peers, 40)                                          \
    FIELD(wex_sync_report, seconds, 48)                                        \
    FIELD(wex_sync_report, attempts, 56)                                       \
    FIELD(wex_sync_report, failed_over, 64)                                    \
    FIELD(wex_sync_report, puts, 72)                                           \
    FIELD(wex_sync_report, wire_bytes, 80)                                     \
    FIELD(wex_sync_report, delta_elements, 88)                                 \
    FIELD(wex_sync_report, changed_elements, 96)                               \
    FIELD(wex_sync_report, mode, 104)                                          \
    FIELD(wex_sync_report, apply_seconds, 112)                                 \
    FIELD(wex_sync_report, replicas, 120)                                      \
    FIELD(wex_sync_report, replicas_committed, 128)                            \
    FIELD(wex_sync_report, replicas_joined, 136)                               \
    FIELD(wex_sync_report, replicas_left, 144)                                 \
    FIELD(wex_sync_report, replicas_seeded, 152)                               \
    FIELD(wex_sync_report, seeded_bytes, 160)

/* The sizes ABI 1.0 froze: the smallest struct_size a reader accepts.
 * They never change; a minor version appends past them. */
#define WEX_ABI_SIZES_1_0(CONST)                                               \
    CONST(WEX_NEGOTIATE_IN_SIZE_1_0, 24)                                       \
    CONST(WEX_NEGOTIATE_OUT_SIZE_1_0, 16)                                      \
    CONST(WEX_PLUGIN_DESC_SIZE_1_0, 56)                                        \
    CONST(WEX_TENSOR_INFO_SIZE_1_0, 32)                                        \
    CONST(WEX_LOCAL_TENSOR_DESC_SIZE_1_0, 32)                                  \
    CONST(WEX_PIECE_DESC_SIZE_1_0, 40)                                         \
    CONST(WEX_PIECE_VIEW_SIZE_1_0, 64)                                         \
    CONST(WEX_PLAN_OP_SIZE_1_0, 64)                                            \
    CONST(WEX_HOST_SERVICES_SIZE_1_0, 216)                                     \
    CONST(WEX_ENGINE_ARGS_SIZE_1_0, 32)                                        \
    CONST(WEX_ENGINE_OPS_SIZE_1_0, 48)                                         \
    CONST(WEX_POLICY_ARGS_SIZE_1_0, 16)                                        \
    CONST(WEX_PLAN_REQUEST_SIZE_1_0, 56)                                       \
    CONST(WEX_POLICY_OPS_SIZE_1_0, 40)                                         \
    CONST(WEX_TRANSPORT_ARGS_SIZE_1_0, 64)                                     \
    CONST(WEX_TRANSPORT_OPS_SIZE_1_0, 104)                                     \
    CONST(WEX_TRANSPORT_OPS_SIZE_1_2, 112)                                     \
    CONST(WEX_TRANSPORT_OPS_SIZE_1_3, 120)                                     \
    CONST(WEX_TRANSPORT_EXCHANGE_SIZE_1_3, 32)                                 \
    CONST(WEX_TRANSPORT_OPS_SIZE_1_4, 128)                                     \
    CONST(WEX_TRANSPORT_FENCE_SIZE_1_4, 32)                                    \
    CONST(WEX_JOB_OPTIONS_SIZE_1_0, 32)                                        \
    CONST(WEX_TENSOR_SIZE_1_0, 40)                                             \
    CONST(WEX_SYNC_REPORT_SIZE_1_0, 72)                                        \
    CONST(WEX_SYNC_REPORT_SIZE_1_2, 80)                                        \
    CONST(WEX_SYNC_REPORT_SIZE_1_5, 120)                                       \
    CONST(WEX_SYNC_REPORT_SIZE_1_6, 168)
