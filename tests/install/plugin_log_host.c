/* plugin_log_test's host: opens a context on a transport whose open fails
 * inside a plugin or module and checks that the failure is this program's:
 *   plugin_log_host TRANSPORT SOURCE_FILE ERROR_TEXT [WARN_TEXT]
 * engram_last_error() holds ERROR_TEXT, and the log handler installed here
 * received the plugin's own line (its source file SOURCE_FILE) at error
 * level with ERROR_TEXT, and at warn level with WARN_TEXT when given.
 * Built against the installed library only. The config comes from the
 * environment (ENGRAM_PLUGIN_PATH for a plugin). */
#include <engram/engram.h>
#include <engram/log.h>

#include <stdio.h>
#include <string.h>

static const char *source_file;
static int error_lines, warn_lines;
static const char *error_text, *warn_text;

static void handler(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    (void)arg;
    printf("handler: level %d %s:%d %s\n", (int)level, file, line, msg);
    if (strcmp(file, source_file) != 0)
        return;
    error_lines += level == ENGRAM_LOG_LEVEL_ERROR && strstr(msg, error_text) != NULL;
    warn_lines += level == ENGRAM_LOG_LEVEL_WARN && warn_text != NULL && strstr(msg, warn_text) != NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: plugin_log_host TRANSPORT SOURCE_FILE ERROR_TEXT [WARN_TEXT]\n");
        return 2;
    }
    source_file = argv[2];
    error_text = argv[3];
    warn_text = argc == 5 ? argv[4] : NULL;
    engram_log_set_handler(handler, NULL);
    engram_config_t *cfg;
    engram_group_t *group;
    if (engram_config_create(&cfg) != ENGRAM_OK || engram_config_set(cfg, "transport", argv[1]) != ENGRAM_OK ||
        engram_group_solo_create(&group) != ENGRAM_OK) {
        fprintf(stderr, "setup failed: %s\n", engram_last_error());
        return 1;
    }
    engram_context_t *ctx = NULL;
    engram_status_t st = engram_context_create(cfg, group, &ctx);
    int bad = 0;
    if (st == ENGRAM_OK) {
        fprintf(stderr, "FAIL: engram_context_create on %s succeeded\n", argv[1]);
        engram_context_destroy(ctx);
        bad = 1;
    }
    if (strstr(engram_last_error(), error_text) == NULL) {
        fprintf(stderr, "FAIL: engram_last_error() is '%s', not the plugin's '%s'\n", engram_last_error(), error_text);
        bad = 1;
    }
    if (error_lines == 0) {
        fprintf(stderr, "FAIL: the handler got no error line from %s with '%s'\n", source_file, error_text);
        bad = 1;
    }
    if (warn_text != NULL && warn_lines == 0) {
        fprintf(stderr, "FAIL: the handler got no warn line from %s with '%s'\n", source_file, warn_text);
        bad = 1;
    }
    engram_group_destroy(group);
    engram_config_destroy(cfg);
    if (!bad)
        printf("plugin_log_host: %s's error and log lines reached the host (%s)\n", argv[1], engram_last_error());
    return bad;
}
