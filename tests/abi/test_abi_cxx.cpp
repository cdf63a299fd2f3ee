// The SDK headers compile as C++ and give the same layout as in C.
// The checks are static_asserts: this file failing to compile is the
// failure; the program reports what it checked.
#include <cstdio>

#include "abi_layout.h"

#define CXX_SIZE(type, size) \
    static_assert(sizeof(type) == (size), #type " size changed");
#define CXX_FIELD(type, member, off) \
    static_assert(offsetof(type, member) == (off), #type "." #member " moved");

WEX_ABI_LAYOUT(CXX_SIZE, CXX_FIELD)

#define COUNT(...) +1
int main()
{
    std::printf("C++: %d struct sizes and offsets match the golden ABI\n",
                0 WEX_ABI_LAYOUT(COUNT, COUNT));
    return 0;
}
