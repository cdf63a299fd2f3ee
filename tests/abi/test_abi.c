/* Pins the ABI: sizes and offsets of every public struct (C build). */
#include <check.h>
#include <stdlib.h>

#include "../unit/check_run.h"

#include "abi_layout.h"

#define CHECK_SIZE(type, size)                                                 \
    ck_assert_msg(sizeof(type) == (size), #type " is %zu bytes, ABI says %d",  \
                  sizeof(type), (size));
#define CHECK_FIELD(type, member, off)                                         \
    ck_assert_msg(offsetof(type, member) == (off),                             \
                  #type "." #member " at %zu, ABI says %d",                    \
                  offsetof(type, member), (off));

START_TEST(struct_layout_is_pinned){
    WEX_ABI_LAYOUT(CHECK_SIZE, CHECK_FIELD)} END_TEST

#define CHECK_CONST(name, value)                                               \
    ck_assert_msg((name) == (value), #name " is %u, ABI 1.0 froze %d",         \
                  (unsigned)(name), (value));

    START_TEST(frozen_1_0_sizes_are_pinned){
        WEX_ABI_SIZES_1_0(CHECK_CONST)} END_TEST

    static const wex_plugin_desc one_desc = {WEX_PLUGIN_DESC_SIZE_1_0,
                                             WEX_ABI_1_0,
                                             WEX_KIND_ENGINE,
                                             0,
                                             "one",
                                             "0",
                                             NULL,
                                             NULL,
                                             NULL};

/* The SDK's negotiate helper: accepts exactly offers that contain its
 * literal version, and only from a host whose structs are whole. */
START_TEST(negotiate_helper_keeps_to_its_version)
{
    wex_negotiate_in in = {sizeof(in), WEX_ABI_1_0, WEX_MAKE_VERSION(1, 9), 0,
                           "t"};
    wex_negotiate_out out = {sizeof(out), 0, NULL};
    wex_plugin_desc wrong = one_desc;

    ck_assert_int_eq(wex_negotiate_one(&in, &out, WEX_ABI_1_0, &one_desc),
                     WEX_OK);
    ck_assert_uint_eq(out.abi_version, WEX_ABI_1_0);
    ck_assert_ptr_eq(out.desc, &one_desc);
    in.abi_min = WEX_MAKE_VERSION(1, 1);
    out.desc = NULL;
    ck_assert_int_eq(wex_negotiate_one(&in, &out, WEX_ABI_1_0, &one_desc),
                     WEX_ERR_ABI);
    ck_assert_ptr_null(out.desc);
    in.abi_min = WEX_ABI_1_0;
    in.struct_size = WEX_NEGOTIATE_IN_SIZE_1_0 - 1;
    ck_assert_int_eq(wex_negotiate_one(&in, &out, WEX_ABI_1_0, &one_desc),
                     WEX_ERR_ABI);
    in.struct_size = sizeof(in);
    out.struct_size = 8;
    ck_assert_int_eq(wex_negotiate_one(&in, &out, WEX_ABI_1_0, &one_desc),
                     WEX_ERR_ABI);
    out.struct_size = sizeof(out);
    /* a descriptor that states another version than the one negotiated */
    wrong.abi_version = WEX_MAKE_VERSION(1, 1);
    ck_assert_int_eq(wex_negotiate_one(&in, &out, WEX_ABI_1_0, &wrong),
                     WEX_ERR_ABI);
    ck_assert_int_eq(wex_negotiate_one(NULL, &out, WEX_ABI_1_0, &one_desc),
                     WEX_ERR_ABI);
}
END_TEST

START_TEST(constants_are_pinned)
{
    ck_assert_int_eq(WEX_OK, 0);
    ck_assert_int_eq(WEX_INPROGRESS, 1);
    ck_assert_int_eq(WEX_ERR_INVALID, -1);
    ck_assert_int_eq(WEX_ERR_ABI, -8);
    ck_assert_uint_eq(WEX_ABI_1_0, 0x10000u);
    ck_assert_uint_eq(WEX_ABI_1_2, 0x10002u);
    ck_assert_uint_eq(WEX_ABI_1_3, 0x10003u);
    ck_assert_uint_eq(WEX_ABI_1_4, 0x10004u);
    ck_assert_uint_eq(WEX_ABI_1_5, 0x10005u);
    ck_assert_uint_eq(WEX_ABI_1_6, 0x10006u);
    ck_assert_uint_eq(WEX_SYNC_FULL, 0);
    ck_assert_uint_eq(WEX_SYNC_DELTA, 1);
    ck_assert_uint_eq(WEX_SYNC_MIXED, 2);
    ck_assert_uint_eq(WEX_FENCE_OPEN, 1);
    ck_assert_uint_eq(WEX_FENCE_CLOSE, 2);
    ck_assert_uint_eq(WEX_FENCE_WRITE, 3);
    ck_assert_uint_eq(WEX_KIND_ENGINE, 1);
    ck_assert_uint_eq(WEX_KIND_TRANSPORT, 3);
    ck_assert_uint_eq(WEX_TRANSPORT_CAP_TWO_SIDED, 1ull << 6);
    ck_assert_uint_eq(WEX_TRANSPORT_CAP_REGISTER_SOURCE, 1ull << 7);
    ck_assert_uint_eq(WEX_TRANSPORT_CAP_PUTS_LAND_IN_ORDER, 1ull << 8);
    ck_assert_uint_eq(WEX_MEMORY_CUDA, 1);
    ck_assert_uint_eq(WEX_DTYPE_BF16, 1);
    ck_assert_uint_eq(wex_dtype_size(WEX_DTYPE_BF16), 2);
    ck_assert_uint_eq(wex_dtype_size(WEX_DTYPE_F8_E4M3), 1);
    ck_assert_uint_eq(wex_dtype_size(WEX_DTYPE_I64), 8);
    ck_assert_uint_eq(wex_dtype_size(99), 0);
    ck_assert_str_eq(wex_dtype_name(WEX_DTYPE_F32), "F32");
    ck_assert_str_eq(wex_status_string(WEX_ERR_TIMEOUT), "timed out");
    ck_assert(WEX_HAS_MEMBER(wex_host_services, layout_add_piece,
                             sizeof(wex_host_services)));
    ck_assert(!WEX_HAS_MEMBER(wex_host_services, layout_add_piece, 152));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("abi");
    TCase *tc = tcase_create("layout");

    tcase_add_test(tc, struct_layout_is_pinned);
    tcase_add_test(tc, frozen_1_0_sizes_are_pinned);
    tcase_add_test(tc, negotiate_helper_keeps_to_its_version);
    tcase_add_test(tc, constants_are_pinned);
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
