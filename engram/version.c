#include "engram/engram.h"

const char *engram_version(int *major, int *minor, int *patch)
{
    if (major != NULL)
        *major = ENGRAM_VERSION_MAJOR;
    if (minor != NULL)
        *minor = ENGRAM_VERSION_MINOR;
    if (patch != NULL)
        *patch = ENGRAM_VERSION_PATCH;
    return ENGRAM_VERSION_STRING;
}
