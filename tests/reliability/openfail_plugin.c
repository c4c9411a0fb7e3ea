/* A plugin that loads, says it is available, and fails to open: what a NIC
 * transport does when its device vanished between probe and use. It marks
 * each attempt in the process environment so the test can tell it was
 * tried. Built as libengram_transport_openfail.so. */
#include <stdlib.h>

#include <engram/log.h>
#include <engram/plugin/plugin.h>

static bool openfail_available(engram_group_t *group, const char **why)
{
    (void)group, (void)why;
    return true;
}

static engram_status_t openfail_open(engram_group_t *group, const engram_config_view_t *cfg,
                                     engram_transport_t **out)
{
    (void)group, (void)cfg, (void)out;
    setenv("OPENFAIL_PLUGIN_TRIED", "1", 1);
    return ENGRAM_ERR_NOT_FOUND;
}

/* Never reached: open always fails. */
static void openfail_unreachable(void)
{
    abort();
}

static const engram_transport_ops_t ops = {
    .name = "openfail",
    .available = openfail_available,
    .open = openfail_open,
    .caps = (void *)openfail_unreachable,
    .reg_symmetric = (void *)openfail_unreachable,
    .reg_local = (void *)openfail_unreachable,
    .dereg = (void *)openfail_unreachable,
    .get = (void *)openfail_unreachable,
    .flush = (void *)openfail_unreachable,
    .test = (void *)openfail_unreachable,
    .request_free = (void *)openfail_unreachable,
    .close = (void *)openfail_unreachable,
};

ENGRAM_TRANSPORT_PLUGIN(ops);
