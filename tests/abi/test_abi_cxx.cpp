// The SDK headers compile as C++ and give the same layout as in C.
// The checks are static_asserts: this file failing to compile is the
// failure; the program reports what it checked.
#include <cstdio>

#include "abi_layout.h"

#define CXX_SIZE(type, size)                                                   \
    static_assert(sizeof(type) == (size), #type " size changed");
#define CXX_FIELD(type, member, off)                                           \
    static_assert(offsetof(type, member) == (off), #type "." #member " move"   \
                                                         "d");

WEX_ABI_LAYOUT(CXX_SIZE, CXX_FIELD)
#define CXX_CONST(name, value)                                                 \
    static_assert((name) == (value), #name " changed");
WEX_ABI_SIZES_1_0(CXX_CONST)

// The entry-point helper compiles as C++ too (extern "C", exported).
static const wex_plugin_desc cxx_desc = {WEX_PLUGIN_DESC_SIZE_1_0,
                                         WEX_ABI_1_0,
                                         WEX_KIND_ENGINE,
                                         0,
                                         "cxx",
                                         "0",
                                         nullptr,
                                         nullptr,
                                         nullptr};
WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_0, cxx_desc)

#define COUNT(...) +1
int main()
{
    wex_negotiate_in in = {sizeof(in), WEX_ABI_1_0, WEX_ABI_1_0, 0, "test"};
    wex_negotiate_out out = {sizeof(out), 0, nullptr};
    if (wex_plugin_negotiate(&in, &out) != WEX_OK || out.desc != &cxx_desc) {
        std::printf("C++: WEX_PLUGIN_DEFINE_ENTRY did not negotiate 1.0\n");
        return 1;
    }
    std::printf("C++: %d struct sizes and offsets match the golden ABI\n",
                0 WEX_ABI_LAYOUT(COUNT, COUNT));
    return 0;
}
