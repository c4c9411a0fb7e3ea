/* Internal name of the public <engram/log.h>. */
#ifndef ENGRAM_HAL_LOG_H
#define ENGRAM_HAL_LOG_H

#include "engram/log.h"

#endif
