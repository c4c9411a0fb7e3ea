/* Plugins transport=auto tries first (they are on plugin_path) and passes
 * over on every rank: one that fails to initialise (logged at warn, naming
 * it explicitly is an error), and one that opens host-proxied
 * (ENGRAM_CAP_HOST_PROXIED: logged at info with the reason, naming it
 * explicitly runs on it). auto lands on loopback.
 * Usage: engram_auto_fallthrough_test <path of libengram_transport_openfail.so>
 * (libengram_transport_proxied.so beside it) */
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
 * it must reach the log, at warn; passing over the proxied one is a
 * choice, at info, with its reason and the way to run on it anyway. */
static int fallback_warnings, proxied_infos;

static void keep_warning(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg, (void)file, (void)line;
    if (level == ENGRAM_LOG_LEVEL_WARN && strstr(msg, "openfail failed to open") != NULL)
        fallback_warnings++;
    if (level == ENGRAM_LOG_LEVEL_INFO &&
        strstr(msg, "transport=auto passes over proxied: every get goes through a host proxy thread here "
                    "(test proxy thread), slower than the next backend; set transport=proxied to run on it "
                    "anyway") != NULL)
        proxied_infos++;
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
    CHECK(proxied_infos == 1);
    CHECK(getenv("OPENFAIL_PLUGIN_TRIED") != NULL); /* tried first ... */
    CHECK(strcmp(engram_context_transport(ctx), "loopback") == 0); /* ... then fell through */
    CHECK_OK(engram_context_destroy(ctx));
    ctx = NULL;
    CHECK_STATUS(open_context(g, "openfail", &ctx), ENGRAM_ERR_NOT_FOUND);
    CHECK(ctx == NULL);
    CHECK_OK(open_context(g, "proxied", &ctx));
    CHECK(strcmp(engram_context_transport(ctx), "proxied") == 0);
    CHECK_OK(engram_context_destroy(ctx));
    return 0;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2);
    setenv("ENGRAM_LOG_LEVEL", "info", 1); /* read once, at the first log call: the pass-over is at info */
    CHECK(realpath(argv[1], plugin_dir) != NULL);
    *strrchr(plugin_dir, '/') = '\0';
    CHECK_OK(engram_group_fork_run(2, 0, rank_main, NULL, NULL));
    puts("engram_auto_fallthrough_test: ok");
    return 0;
}
