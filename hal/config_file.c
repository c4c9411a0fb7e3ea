/* The ENGRAM_CONFIG_FILE reader: a regular, readable, bounded text file, or
 * an error saying which of those it is not. The text is read whole, to EOF,
 * and handed to the parser the fuzz target drives (engram_config_read_text). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal/config_keys.h"
#include "hal/log.h"

/* A configuration is a few dozen lines; anything far larger is not one. */
enum { CONFIG_FILE_MAX = 1 << 20 };

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    return "not a regular file";
}

engram_status_t engram_config_read_file(engram_config_t *cfg, const char *path)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return ENGRAM_ERROR(ENGRAM_ERR_IO, "ENGRAM_CONFIG_FILE=%s cannot be read: %s", path, strerror(errno));
    struct stat sb;
    engram_status_t st = ENGRAM_OK;
    char *text = NULL;
    if (fstat(fd, &sb) != 0) {
        st = ENGRAM_ERROR(ENGRAM_ERR_IO, "ENGRAM_CONFIG_FILE=%s cannot be read: fstat: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "ENGRAM_CONFIG_FILE=%s is %s, not a configuration file", path,
                          file_kind(sb.st_mode));
        goto out;
    }
    if (sb.st_size > CONFIG_FILE_MAX) {
        st = ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                          "ENGRAM_CONFIG_FILE=%s is %lld bytes, more than the %d a configuration file may have", path,
                          (long long)sb.st_size, CONFIG_FILE_MAX);
        goto out;
    }
    /* To EOF, whatever fstat says: procfs and sysfs files report size 0 (or
     * a page) for any content, so the size is only the first guess. The
     * buffer grows to one byte past the limit, so a longer file is noticed. */
    size_t cap = 0, got = 0;
    const size_t limit = (size_t)CONFIG_FILE_MAX + 1;
    for (;;) {
        if (got == cap) {
            if (cap == limit) {
                st = ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                                  "ENGRAM_CONFIG_FILE=%s is more than the %d bytes a configuration file may have",
                                  path, CONFIG_FILE_MAX);
                goto out;
            }
            size_t next = cap > 0 ? 2 * cap : sb.st_size > 0 ? (size_t)sb.st_size + 1 : 4096;
            next = next < limit ? next : limit;
            char *grown = realloc(text, next);
            if (grown == NULL) {
                st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "ENGRAM_CONFIG_FILE=%s: no memory for %zu bytes", path, next);
                goto out;
            }
            text = grown;
            cap = next;
        }
        ssize_t n = read(fd, text + got, cap - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            st = ENGRAM_ERROR(ENGRAM_ERR_IO, "ENGRAM_CONFIG_FILE=%s: read failed after %zu bytes: %s", path, got,
                              strerror(errno));
            goto out;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    st = engram_config_read_text(cfg, path, text, got);
out:
    free(text);
    close(fd);
    return st;
}
