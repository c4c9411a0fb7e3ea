#include "tools/trace/npy.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* A cursor over the header's dictionary text (not NUL-terminated). */
typedef struct cur {
    const char *p, *end;
} cur_t;

static void skip_blanks(cur_t *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t'))
        c->p++;
}

static bool eat(cur_t *c, const char *lit)
{
    skip_blanks(c);
    size_t n = strlen(lit);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, lit, n) != 0)
        return false;
    c->p += n;
    return true;
}

/* A quoted Python string literal without escapes, into out[0..cap). */
static bool quoted(cur_t *c, char *out, size_t cap)
{
    skip_blanks(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || n + 1 >= cap)
            return false;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return false;
    c->p++;
    out[n] = '\0';
    return true;
}

static bool integer(cur_t *c, uint64_t *out)
{
    skip_blanks(c);
    uint64_t x = 0;
    const char *start = c->p;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned d = (unsigned)(*c->p - '0');
        if (x > (UINT64_MAX - d) / 10)
            return false;
        x = x * 10 + d;
        c->p++;
    }
    *out = x;
    return c->p > start;
}

/* (), (n,), (n, m), (n, m,) ... */
static int shape_tuple(cur_t *c, npy_info_t *info, char *err, size_t errlen)
{
    if (!eat(c, "("))
        return fail(err, errlen, "npy header: 'shape' is not a tuple");
    info->ndim = 0;
    if (eat(c, ")"))
        return 0;
    for (;;) {
        uint64_t d;
        if (!integer(c, &d))
            return fail(err, errlen, "npy header: a dimension of 'shape' is not a non-negative integer below 2^64");
        if (info->ndim == NPY_MAX_DIMS)
            return fail(err, errlen, "npy header: 'shape' has more than %d dimensions", NPY_MAX_DIMS);
        info->shape[info->ndim++] = d;
        bool comma = eat(c, ",");
        if (eat(c, ")")) {
            if (info->ndim == 1 && !comma)
                return fail(err, errlen, "npy header: 'shape' (n) is not a tuple (Python writes (n,))");
            return 0;
        }
        if (!comma)
            return fail(err, errlen, "npy header: 'shape' is malformed");
    }
}

static int parse_dict(cur_t *c, npy_info_t *info, char *err, size_t errlen)
{
    if (!eat(c, "{"))
        return fail(err, errlen, "npy header: does not start with '{'");
    bool have_descr = false, have_order = false, have_shape = false;
    for (;;) {
        if (eat(c, "}"))
            break;
        char key[32], descr[16];
        if (!quoted(c, key, sizeof(key)) || !eat(c, ":"))
            return fail(err, errlen, "npy header: expected a quoted key and ':'");
        if (strcmp(key, "descr") == 0 && !have_descr) {
            have_descr = true;
            if (!quoted(c, descr, sizeof(descr)))
                return fail(err, errlen, "npy header: 'descr' is not a simple type string (structured dtypes are refused)");
            if (strcmp(descr, "<i4") == 0)
                info->elem_bytes = 4;
            else if (strcmp(descr, "<i8") == 0)
                info->elem_bytes = 8;
            else
                return fail(err, errlen, "npy: dtype '%s' is not supported; indices must be '<i4' or '<i8' (little-endian int32/int64)",
                            descr);
        } else if (strcmp(key, "fortran_order") == 0 && !have_order) {
            have_order = true;
            if (eat(c, "True"))
                return fail(err, errlen, "npy: Fortran-order arrays are not supported; save a C-order array (np.ascontiguousarray)");
            if (!eat(c, "False"))
                return fail(err, errlen, "npy header: 'fortran_order' is neither True nor False");
        } else if (strcmp(key, "shape") == 0 && !have_shape) {
            have_shape = true;
            if (shape_tuple(c, info, err, errlen) != 0)
                return -1;
        } else {
            return fail(err, errlen, "npy header: unexpected or repeated key '%s'", key);
        }
        if (!eat(c, ",")) {
            if (!eat(c, "}"))
                return fail(err, errlen, "npy header: expected ',' or '}' after '%s'", key);
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return fail(err, errlen, "npy header: needs 'descr', 'fortran_order' and 'shape'");
    skip_blanks(c);
    if (c->p != c->end)
        return fail(err, errlen, "npy header: text after the dictionary");
    return 0;
}

int npy_parse(const uint8_t *buf, uint64_t len, npy_info_t *out, char *err, size_t errlen)
{
    static const uint8_t magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (len < 10 || memcmp(buf, magic, sizeof(magic)) != 0)
        return fail(err, errlen, "not a .npy file (no \\x93NUMPY magic)");
    uint8_t major = buf[6], minor = buf[7];
    if (major < 1 || major > 3 || minor != 0)
        return fail(err, errlen, "npy: format version %u.%u is not 1.0, 2.0 or 3.0", major, minor);
    uint64_t hlen, start;
    if (major == 1) {
        hlen = (uint64_t)buf[8] | (uint64_t)buf[9] << 8;
        start = 10;
    } else {
        if (len < 12)
            return fail(err, errlen, "npy: truncated header length");
        hlen = (uint64_t)buf[8] | (uint64_t)buf[9] << 8 | (uint64_t)buf[10] << 16 | (uint64_t)buf[11] << 24;
        start = 12;
    }
    if (hlen > len - start)
        return fail(err, errlen, "npy: header of %llu bytes runs past the end of the %llu-byte file",
                    (unsigned long long)hlen, (unsigned long long)len);
    const char *text = (const char *)buf + start;
    if (hlen == 0 || text[hlen - 1] != '\n')
        return fail(err, errlen, "npy header: does not end with a newline");
    for (uint64_t i = 0; i < hlen; i++)
        if ((unsigned char)text[i] < 0x20 && text[i] != '\n' && text[i] != '\t')
            return fail(err, errlen, "npy header: control character at byte %llu", (unsigned long long)(start + i));
    /* the dictionary, then blank padding, then the newline */
    const char *end = text + hlen - 1;
    while (end > text && end[-1] == ' ')
        end--;
    if (memchr(text, '\n', (size_t)(end - text)) != NULL)
        return fail(err, errlen, "npy header: newline inside the dictionary");
    npy_info_t info = {0};
    cur_t c = {text, end};
    if (parse_dict(&c, &info, err, errlen) != 0)
        return -1;
    uint64_t count = 1;
    for (int i = 0; i < info.ndim; i++)
        if (__builtin_mul_overflow(count, info.shape[i], &count))
            return fail(err, errlen, "npy: the shape's element count overflows 64 bits");
    uint64_t bytes;
    if (__builtin_mul_overflow(count, (uint64_t)info.elem_bytes, &bytes))
        return fail(err, errlen, "npy: the shape's byte size overflows 64 bits");
    uint64_t data = start + hlen;
    if (bytes != len - data)
        return fail(err, errlen, "npy: the shape needs %llu data bytes but the file holds %llu after its header",
                    (unsigned long long)bytes, (unsigned long long)(len - data));
    info.count = count;
    info.data_offset = data;
    *out = info;
    return 0;
}
