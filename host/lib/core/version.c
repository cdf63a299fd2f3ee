#include "version.h"

const char *wex__version(void)
{
    return WEX_VERSION_STRING;
}
