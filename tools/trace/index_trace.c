#include "tools/trace/index_trace.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tools/trace/npy.h"

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int64_t element(const index_trace_t *t, uint64_t i)
{
    if (t->elem_bytes == 4) {
        int32_t v;
        memcpy(&v, t->data + i * 4, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, t->data + i * 8, 8);
    return v;
}

static int map_file(const char *path, index_trace_t *t, char *err, size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(err, errlen, "--indices %s: %s", path, strerror(errno));
    struct stat sb;
    int rc = 0;
    if (fstat(fd, &sb) != 0)
        rc = fail(err, errlen, "--indices %s: %s", path, strerror(errno));
    else if (!S_ISREG(sb.st_mode))
        rc = fail(err, errlen, "--indices %s: not a regular file", path);
    else if (sb.st_size == 0)
        rc = fail(err, errlen, "--indices %s: the file is empty", path);
    if (rc == 0) {
        t->map_len = (uint64_t)sb.st_size;
        t->map = mmap(NULL, (size_t)t->map_len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (t->map == MAP_FAILED) {
            t->map = NULL;
            rc = fail(err, errlen, "--indices %s: mmap: %s", path, strerror(errno));
        }
    }
    close(fd);
    return rc;
}

static int npy_shape(const char *path, const index_trace_want_t *w, index_trace_t *t, char *err, size_t errlen)
{
    npy_info_t info;
    char why[256];
    if (npy_parse(t->map, t->map_len, &info, why, sizeof(why)) != 0)
        return fail(err, errlen, "--indices %s: %s", path, why);
    if (info.ndim != 3)
        return fail(err, errlen, "--indices %s: shape has %d dimensions; needs [steps, tokens, entries_per_token]",
                    path, info.ndim);
    if (info.shape[0] == 0 || info.shape[1] == 0 || info.shape[2] == 0)
        return fail(err, errlen, "--indices %s: shape (%llu, %llu, %llu) holds no fetch; every dimension must be >= 1",
                    path, (unsigned long long)info.shape[0], (unsigned long long)info.shape[1],
                    (unsigned long long)info.shape[2]);
    if (info.shape[1] > UINT32_MAX || info.shape[2] > UINT32_MAX)
        return fail(err, errlen, "--indices %s: tokens %llu or entries_per_token %llu exceed %u", path,
                    (unsigned long long)info.shape[1], (unsigned long long)info.shape[2], UINT32_MAX);
    if (w->tokens_set && info.shape[1] != w->tokens)
        return fail(err, errlen, "--indices %s: the file has %llu tokens per step but --tokens is %u", path,
                    (unsigned long long)info.shape[1], w->tokens);
    if (w->entries_per_token_set && info.shape[2] != w->entries_per_token)
        return fail(err, errlen, "--indices %s: the file has %llu entries per token but --entries-per-token is %u",
                    path, (unsigned long long)info.shape[2], w->entries_per_token);
    t->data = (const uint8_t *)t->map + info.data_offset;
    t->elem_bytes = info.elem_bytes;
    t->steps = info.shape[0];
    t->tokens = (uint32_t)info.shape[1];
    t->entries_per_token = (uint32_t)info.shape[2];
    return 0;
}

static int raw_shape(const char *path, const index_trace_want_t *w, index_trace_t *t, char *err, size_t errlen)
{
    if (w->tokens == 0 || w->entries_per_token == 0)
        return fail(err, errlen, "--indices %s: a raw trace needs tokens and entries per token >= 1", path);
    /* tokens * entries_per_token < 2^64, but * 8 bytes may not be */
    uint64_t step_bytes;
    if (__builtin_mul_overflow((uint64_t)w->tokens * w->entries_per_token, 8u, &step_bytes))
        return fail(err, errlen, "--indices %s: a step of %u x %u int64 overflows 64 bits", path, w->tokens,
                    w->entries_per_token);
    if (t->map_len % step_bytes != 0)
        return fail(err, errlen,
                    "--indices %s: not a .npy file, and its %llu bytes are not a whole number of raw int64 steps "
                    "of %u tokens x %u entries (%llu bytes each)",
                    path, (unsigned long long)t->map_len, w->tokens, w->entries_per_token,
                    (unsigned long long)step_bytes);
    t->data = t->map;
    t->elem_bytes = 8;
    t->steps = t->map_len / step_bytes;
    t->tokens = w->tokens;
    t->entries_per_token = w->entries_per_token;
    return 0;
}

/* Every index in range, so the check can compare every row. */
static int check_range(const char *path, const index_trace_t *t, uint64_t total_rows, char *err, size_t errlen)
{
    uint64_t per_step = (uint64_t)t->tokens * t->entries_per_token;
    for (uint64_t i = 0; i < t->steps * per_step; i++) {
        int64_t v = element(t, i);
        if (v < 0 || (uint64_t)v >= total_rows) {
            uint64_t in_step = i % per_step;
            return fail(err, errlen,
                        "--indices %s: step %llu token %llu entry %llu is %lld, outside the table's rows [0, %llu)",
                        path, (unsigned long long)(i / per_step), (unsigned long long)(in_step / t->entries_per_token),
                        (unsigned long long)(in_step % t->entries_per_token), (long long)v,
                        (unsigned long long)total_rows);
        }
    }
    return 0;
}

int index_trace_open(const char *path, const index_trace_want_t *want, index_trace_t *out, char *err, size_t errlen)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    index_trace_t t = {0};
    if (map_file(path, &t, err, errlen) != 0)
        return -1;
    bool npy = t.map_len >= sizeof(magic) && memcmp(t.map, magic, sizeof(magic)) == 0;
    int rc = npy ? npy_shape(path, want, &t, err, errlen) : raw_shape(path, want, &t, err, errlen);
    if (rc == 0)
        rc = check_range(path, &t, want->total_rows, err, errlen);
    if (rc != 0) {
        index_trace_close(&t);
        return -1;
    }
    *out = t;
    return 0;
}

void index_trace_step(const index_trace_t *t, uint64_t step, int64_t *out)
{
    uint64_t n = (uint64_t)t->tokens * t->entries_per_token;
    uint64_t first = (step % t->steps) * n;
    for (uint64_t i = 0; i < n; i++)
        out[i] = element(t, first + i);
}

void index_trace_close(index_trace_t *t)
{
    if (t->map)
        munmap(t->map, (size_t)t->map_len);
    memset(t, 0, sizeof(*t));
}
