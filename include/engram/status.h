/* Status codes shared by every layer, and the thread's last error message.
 * Public header (installed as <engram/status.h>). */
#ifndef ENGRAM_STATUS_H
#define ENGRAM_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the public API: the symbols libengram.so.0 exports (its version
 * script lists exactly these). */
#define ENGRAM_API __attribute__((visibility("default")))
/* Marks the services a transport plugin calls (<engram/plugin/...>):
 * exported too, in their own version node (ENGRAM_PLUGIN_<major>.<minor>).
 * A program that links their code into an object of its own without
 * exporting it defines it empty. */
#ifndef ENGRAM_PLUGIN_API
#define ENGRAM_PLUGIN_API __attribute__((visibility("default")))
#endif

typedef enum engram_status {
    ENGRAM_OK = 0,
    ENGRAM_INPROGRESS = 1,
    ENGRAM_ERR_INVALID = -1,     /* bad argument, unknown key, unparsable value */
    ENGRAM_ERR_NOMEM = -2,       /* allocation or mapping failed */
    ENGRAM_ERR_UNSUPPORTED = -3, /* backend or feature absent on this build/machine */
    ENGRAM_ERR_NOT_FOUND = -4,   /* named backend, plugin, device or file not found */
    ENGRAM_ERR_IO = -5,          /* system call or socket failure */
    ENGRAM_ERR_TIMEOUT = -6,     /* deadline passed before completion */
    ENGRAM_ERR_PEER = -7,        /* a peer process failed or disconnected */
    ENGRAM_ERR_BAD_INDEX = -8,   /* fetch indices out of range: rows zero-filled */
    ENGRAM_ERR_STATE = -9,       /* call out of order (fetch before write, ...) */
    ENGRAM_ERR_VERSION = -10,    /* ABI or library version mismatch */
    ENGRAM_ERR_TRANSPORT = -11,  /* the transport reported a failed operation */
    ENGRAM_ERR_OVERFLOW = -12,   /* sizes exceed a buffer or an integer type */
    ENGRAM_ERR_BUSY = -13,       /* resource in use (fetches in flight) */
} engram_status_t;

/* Short, static, human-readable name of a status ("invalid argument", ...). */
ENGRAM_API const char *engram_status_str(engram_status_t status);

/* Details of the last error this thread hit inside the library (the same
 * text that was logged once where the error was detected); "" if none. At
 * most ENGRAM_LAST_ERROR_BYTES - 1 bytes. */
ENGRAM_API const char *engram_last_error(void);
#define ENGRAM_LAST_ERROR_BYTES 512

#ifdef __cplusplus
}
#endif
#endif
