/* Logging. Level from ENGRAM_LOG_LEVEL = error|warn|info|debug|trace
 * (default warn; the names of engram_log_level_t's values), read once;
 * trace lines exist only in builds with ENGRAM_WITH_TRACE (ENGRAM_TRACE). Output goes to stderr, one line per message,
 * prefixed "engram[<pid>] <level> <file>:<line>", unless the program
 * installs a handler (engram_log_set_handler).
 * Public header (installed as <engram/log.h>) for transport plugins: their
 * errors become the caller's engram_last_error() like the library's own. */
#ifndef ENGRAM_LOG_H
#define ENGRAM_LOG_H

#include "engram/status.h"

typedef enum engram_log_level {
    ENGRAM_LOG_LEVEL_ERROR = 0,
    ENGRAM_LOG_LEVEL_WARN = 1,
    ENGRAM_LOG_LEVEL_INFO = 2,
    ENGRAM_LOG_LEVEL_DEBUG = 3,
    ENGRAM_LOG_LEVEL_TRACE = 4,
} engram_log_level_t;

ENGRAM_API engram_log_level_t engram_log_level(void);

/* A program's own logger: called for every message that passes the level,
 * with the message text (no prefix, no newline), the source file's base
 * name and line; from whichever thread logs, so it must be thread-safe.
 * fn NULL restores stderr. The handler and arg are swapped atomically: a
 * message being logged while the handler changes goes to one or the other.
 * engram_last_error() is kept either way. */
typedef void (*engram_log_handler_fn)(void *arg, engram_log_level_t level, const char *file, int line,
                                      const char *msg);
ENGRAM_API void engram_log_set_handler(engram_log_handler_fn fn, void *arg);
ENGRAM_API void engram_log_write(engram_log_level_t level, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Report an error once, where it is detected: logs it at ERROR, stores the
 * text as this thread's engram_last_error(), and returns `status` so call
 * sites read `return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "...", ...);`.
 * Expected outcomes the caller handles from the status (ENGRAM_ERR_BUSY:
 * every fetch slot in flight, a table or context still in use;
 * ENGRAM_INPROGRESS) are logged at DEBUG instead, the text kept the same
 * way: a result the caller receives is not also an error line. */
ENGRAM_API engram_status_t engram_error_at(engram_status_t status, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define ENGRAM_LOG(level, ...)                                                  \
    do {                                                                        \
        if ((level) <= engram_log_level())                                      \
            engram_log_write((level), __FILE__, __LINE__, __VA_ARGS__);        \
    } while (0)
#define ENGRAM_WARN(...) ENGRAM_LOG(ENGRAM_LOG_LEVEL_WARN, __VA_ARGS__)
#define ENGRAM_INFO(...) ENGRAM_LOG(ENGRAM_LOG_LEVEL_INFO, __VA_ARGS__)
#define ENGRAM_DEBUG(...) ENGRAM_LOG(ENGRAM_LOG_LEVEL_DEBUG, __VA_ARGS__)
/* The data path (every get, flush and completion): compiled in only where
 * the build defines ENGRAM_WITH_TRACE (bazel build --config=trace), as
 * even a level check per get costs; elsewhere the arguments are still
 * type-checked, and nothing is emitted. */
#ifdef ENGRAM_WITH_TRACE
#define ENGRAM_TRACE(...) ENGRAM_LOG(ENGRAM_LOG_LEVEL_TRACE, __VA_ARGS__)
#else
#define ENGRAM_TRACE(...)                                                       \
    do {                                                                        \
        if (0)                                                                  \
            engram_log_write(ENGRAM_LOG_LEVEL_TRACE, __FILE__, __LINE__, __VA_ARGS__); \
    } while (0)
#endif
#define ENGRAM_ERROR(status, ...) engram_error_at((status), __FILE__, __LINE__, __VA_ARGS__)

#endif
