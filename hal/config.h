/* Internal name of the public <engram/config.h>. */
#ifndef ENGRAM_HAL_CONFIG_H
#define ENGRAM_HAL_CONFIG_H

#include "engram/config.h"

#endif
