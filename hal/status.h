/* Internal name of the public <engram/status.h>. */
#ifndef ENGRAM_HAL_STATUS_H
#define ENGRAM_HAL_STATUS_H

#include "engram/status.h"

#endif
