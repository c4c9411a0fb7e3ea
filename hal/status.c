#include "hal/status.h"

const char *engram_status_str(engram_status_t status)
{
    switch (status) {
    case ENGRAM_OK: return "success";
    case ENGRAM_INPROGRESS: return "in progress";
    case ENGRAM_ERR_INVALID: return "invalid argument";
    case ENGRAM_ERR_NOMEM: return "out of memory";
    case ENGRAM_ERR_UNSUPPORTED: return "unsupported";
    case ENGRAM_ERR_NOT_FOUND: return "not found";
    case ENGRAM_ERR_IO: return "I/O error";
    case ENGRAM_ERR_TIMEOUT: return "timed out";
    case ENGRAM_ERR_PEER: return "peer failure";
    case ENGRAM_ERR_BAD_INDEX: return "index out of range";
    case ENGRAM_ERR_STATE: return "call out of order";
    case ENGRAM_ERR_VERSION: return "version mismatch";
    case ENGRAM_ERR_TRANSPORT: return "transport error";
    case ENGRAM_ERR_OVERFLOW: return "size overflow";
    case ENGRAM_ERR_BUSY: return "busy";
    }
    return "unknown status";
}
