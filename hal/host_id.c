#include "hal/host_id.h"

#include <stdio.h>
#include <string.h>

engram_status_t engram_host_boot_id(char out[ENGRAM_BOOT_ID_LEN])
{
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
    if (f == NULL)
        return ENGRAM_ERR_IO;
    char buf[64] = {0};
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    if (n < ENGRAM_BOOT_ID_LEN - 1)
        return ENGRAM_ERR_IO;
    memcpy(out, buf, ENGRAM_BOOT_ID_LEN - 1);
    out[ENGRAM_BOOT_ID_LEN - 1] = '\0';
    return ENGRAM_OK;
}
