/* engram_log_set_handler: messages that pass the level reach the
 * program's handler (level, base name, line, text), engram_last_error()
 * is kept, and NULL restores stderr; an expected outcome (BUSY) is not an
 * error line. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "hal/log.h"
#include "tests/check.h"

typedef struct seen {
    int calls;
    engram_log_level_t level;
    char file[64];
    char msg[256];
} seen_t;

static void record(void *arg, engram_log_level_t level, const char *file, int line, const char *msg)
{
    seen_t *s = arg;
    s->calls++;
    s->level = level;
    snprintf(s->file, sizeof(s->file), "%s", file);
    snprintf(s->msg, sizeof(s->msg), "%s", msg);
    CHECK(line > 0);
}

int main(void)
{
    seen_t seen = {0};
    engram_log_set_handler(record, &seen);
    CHECK(ENGRAM_ERROR(ENGRAM_ERR_INVALID, "bad %s %d", "value", 7) == ENGRAM_ERR_INVALID);
    CHECK(seen.calls == 1);
    CHECK(seen.level == ENGRAM_LOG_LEVEL_ERROR);
    CHECK(strcmp(seen.file, "log_handler_test.c") == 0);
    CHECK(strstr(seen.msg, "bad value 7") != NULL);
    CHECK(strcmp(engram_last_error(), "bad value 7") == 0);
    ENGRAM_WARN("a warning %d", 1);
    CHECK(seen.calls == 2 && seen.level == ENGRAM_LOG_LEVEL_WARN && strcmp(seen.msg, "a warning 1") == 0);
    /* Below the level (default warn): not delivered. */
    ENGRAM_DEBUG("not shown");
    CHECK(seen.calls == 2);
    /* An expected outcome the caller receives (BUSY) is logged at debug
     * only: not delivered at warn, its text still the last error. */
    CHECK(ENGRAM_ERROR(ENGRAM_ERR_BUSY, "all %d slots in flight", 4) == ENGRAM_ERR_BUSY);
    CHECK(seen.calls == 2);
    CHECK(strcmp(engram_last_error(), "all 4 slots in flight") == 0);

    /* NULL restores stderr: the line appears there, the handler is not called. */
    engram_log_set_handler(NULL, &seen);
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    CHECK(saved >= 0 && dup2(pipefd[1], STDERR_FILENO) >= 0);
    ENGRAM_WARN("to stderr");
    fflush(stderr);
    CHECK(dup2(saved, STDERR_FILENO) >= 0);
    close(pipefd[1]);
    char buf[512] = {0};
    CHECK(read(pipefd[0], buf, sizeof(buf) - 1) > 0);
    CHECK(strstr(buf, "warn log_handler_test.c:") != NULL && strstr(buf, "to stderr") != NULL);
    CHECK(seen.calls == 2);
    printf("log_handler_test: ok\n");
    return 0;
}
