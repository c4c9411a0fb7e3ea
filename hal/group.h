/* Internal name of the public <engram/group.h>. */
#ifndef ENGRAM_HAL_GROUP_H
#define ENGRAM_HAL_GROUP_H

#include "engram/group.h"

#endif
