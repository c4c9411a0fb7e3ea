#include "hal/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A longer message is cut to ENGRAM_LAST_ERROR_BYTES - 1 bytes
 * (vsnprintf), in both engram_last_error() and the logged line; messages
 * name a parameter and a value, well short. */
static _Thread_local char last_error[ENGRAM_LAST_ERROR_BYTES];

/* engram_config_create refuses a bad ENGRAM_LOG_LEVEL; a process that logs
 * before (or without) one says so here and keeps the default. */
static engram_log_level_t parse_level(void)
{
    const char *env = getenv("ENGRAM_LOG_LEVEL");
    engram_log_level_t level = ENGRAM_LOG_LEVEL_WARN;
    if (env != NULL && !engram_log_level_parse(env, &level))
        fprintf(stderr, "engram[%d] warn ENGRAM_LOG_LEVEL: '%s' is not one of " ENGRAM_LOG_LEVEL_NAMES
                "; using warn\n", (int)getpid(), env);
    return level;
}

/* The level, read from the environment once (so a bad value is reported
 * once); -1 until then. Read on every log call, so the common path is one
 * atomic load. */
static _Atomic int cached_level = -1;

static void level_init(void)
{
    atomic_store_explicit(&cached_level, (int)parse_level(), memory_order_release);
}

engram_log_level_t engram_log_level(void)
{
    int level = atomic_load_explicit(&cached_level, memory_order_acquire);
    if (level < 0) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, level_init);
        level = atomic_load_explicit(&cached_level, memory_order_acquire);
    }
    return (engram_log_level_t)level;
}

/* The program's handler (engram_log_set_handler); the pair changes as one. */
static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static engram_log_handler_fn handler_fn;
static void *handler_arg;

void engram_log_set_handler(engram_log_handler_fn fn, void *arg)
{
    pthread_mutex_lock(&handler_lock);
    handler_fn = fn;
    handler_arg = fn ? arg : NULL;
    pthread_mutex_unlock(&handler_lock);
}

static void vwrite(engram_log_level_t level, const char *file, int line, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    pthread_mutex_lock(&handler_lock);
    engram_log_handler_fn fn = handler_fn;
    void *arg = handler_arg;
    pthread_mutex_unlock(&handler_lock);
    if (fn != NULL)
        fn(arg, level, base, line, msg);
    else
        fprintf(stderr, "engram[%d] %s %s:%d %s\n", (int)getpid(), engram_log_level_name(level), base, line, msg);
}

void engram_log_write(engram_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vwrite(level, file, line, fmt, ap);
    va_end(ap);
}

/* The level a reported status is logged at. BUSY (every receive slot in
 * flight, a table or context still in use: flow control the API documents,
 * answered again later) and INPROGRESS are outcomes a caller expects and
 * handles from the status alone, which it receives with the text in
 * engram_last_error(): logged at debug, so a program retrying a full
 * fetch from many threads does not print a line per attempt. Everything
 * else is a failure, logged at error where it is detected. */
static engram_log_level_t report_level(engram_status_t status)
{
    switch (status) {
    case ENGRAM_OK:
    case ENGRAM_INPROGRESS:
    case ENGRAM_ERR_BUSY:
        return ENGRAM_LOG_LEVEL_DEBUG;
    default:
        return ENGRAM_LOG_LEVEL_ERROR;
    }
}

engram_status_t engram_error_at(engram_status_t status, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    engram_log_level_t level = report_level(status);
    if (engram_log_level() >= level)
        engram_log_write(level, file, line, "%s (%s)", last_error, engram_status_str(status));
    return status;
}

const char *engram_last_error(void)
{
    return last_error;
}

void engram_last_error_restore(const char *text)
{
    if (text != last_error)
        snprintf(last_error, sizeof(last_error), "%s", text);
}
