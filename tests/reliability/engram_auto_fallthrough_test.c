/* A plugin that fails to initialise: transport=auto tries it first (it is
 * on plugin_path), logs why it failed, and falls through to the next
 * backend on every rank; naming it explicitly is an error.
 * Usage: engram_auto_fallthrough_test <path of libengram_transport_openfail.so> */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "engram/engram.h"
#include "engram/log.h"
#include "tests/check.h"

static char plugin_dir[PATH_MAX];

static engram_status_t open_context(engram_group_t *g, const char *transport, engram_context_t **ctx)
{
    engram_config_t *cfg;
    CHECK_OK(engram_config_create(&cfg));
    CHECK_OK(engram_config_set(cfg, "transport", transport));
    CHECK_OK(engram_config_set(cfg, "plugin_path", plugin_dir));
    engram_status_t st = engram_context_create(cfg, g, ctx);
    engram_config_destroy(cfg);
    return st;
}

/* The fallback is an error the caller never receives (its context opens):
 * it must reach the log, at warn. */
static int fallback_warnings;

static void keep_warning(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg, (void)file, (void)line;
    if (level == ENGRAM_LOG_LEVEL_WARN && strstr(msg, "openfail failed to open") != NULL)
        fallback_warnings++;
}

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    unsetenv("OPENFAIL_PLUGIN_TRIED");
    engram_context_t *ctx = NULL;
    engram_log_set_handler(keep_warning, NULL);
    CHECK_OK(open_context(g, "auto", &ctx));
    engram_log_set_handler(NULL, NULL);
    CHECK(fallback_warnings == 1);
    CHECK(getenv("OPENFAIL_PLUGIN_TRIED") != NULL); /* tried first ... */
    CHECK(strcmp(engram_context_transport(ctx), "loopback") == 0); /* ... then fell through */
    CHECK_OK(engram_context_destroy(ctx));
    ctx = NULL;
    CHECK_STATUS(open_context(g, "openfail", &ctx), ENGRAM_ERR_NOT_FOUND);
    CHECK(ctx == NULL);
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    CHECK(realpath(argv[1], plugin_dir) != NULL);
    *strrchr(plugin_dir, '/') = '\0';
    CHECK_OK(engram_group_fork_run(2, 0, rank_main, NULL, NULL));
    puts("engram_auto_fallthrough_test: ok");
    return 0;
}
