#include "hal/host_id.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static engram_status_t boot_id(char out[ENGRAM_BOOT_ID_LEN])
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

engram_status_t engram_host_id_self(engram_host_id_t *out, const char **why)
{
    memset(out, 0, sizeof(*out));
    struct stat net, pid;
    const char *what = NULL;
    if (boot_id(out->boot_id) != ENGRAM_OK)
        what = "cannot read the kernel boot id (/proc/sys/kernel/random/boot_id)";
    else if (stat("/proc/self/ns/net", &net) != 0)
        what = "cannot stat its network namespace (/proc/self/ns/net)";
    else if (stat("/proc/self/ns/pid", &pid) != 0)
        what = "cannot stat its pid namespace (/proc/self/ns/pid)";
    if (what != NULL) {
        memset(out, 0, sizeof(*out));
        if (why != NULL)
            *why = what;
        return ENGRAM_ERR_IO;
    }
    out->ns_dev = (uint64_t)net.st_dev;
    out->netns = (uint64_t)net.st_ino;
    out->pidns = (uint64_t)pid.st_ino;
    return ENGRAM_OK;
}

const char *engram_host_id_difference(const engram_host_id_t *a, const engram_host_id_t *b)
{
    if (strncmp(a->boot_id, b->boot_id, ENGRAM_BOOT_ID_LEN) != 0)
        return "another kernel";
    if (a->ns_dev != b->ns_dev || a->netns != b->netns)
        return "another network namespace of the same kernel";
    if (a->pidns != b->pidns)
        return "another pid namespace of the same kernel";
    return NULL;
}

bool engram_host_id_same(const engram_host_id_t *a, const engram_host_id_t *b)
{
    return engram_host_id_difference(a, b) == NULL;
}

bool engram_host_id_pids_shared(const engram_host_id_t *a, const engram_host_id_t *b)
{
    return strncmp(a->boot_id, b->boot_id, ENGRAM_BOOT_ID_LEN) == 0 && a->ns_dev == b->ns_dev && a->pidns == b->pidns;
}
