/* npy_parse: what numpy writes is read; every malformed header, other
 * dtype, Fortran order, overflowing shape or size mismatch is refused with
 * a message, never read past the buffer (run under ASan), and every
 * truncation and single-byte corruption of a valid file either parses to a
 * consistent result or is refused. */
#include "tools/trace/npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

/* A file of version `major` with header text `dict` (padded with blanks to
 * 64 bytes and a newline, as numpy does) and `data` bytes of zeros. */
static uint8_t *make(int major, const char *dict, uint64_t data, uint64_t *len)
{
    size_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    size_t hlen = (pre + dl + 1 + 63) / 64 * 64 - pre;
    *len = pre + hlen + data;
    uint8_t *b = calloc(1, (size_t)*len + 1);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    b[8] = (uint8_t)hlen;
    b[9] = (uint8_t)(hlen >> 8);
    if (major != 1) {
        b[10] = (uint8_t)(hlen >> 16);
        b[11] = (uint8_t)(hlen >> 24);
    }
    memset(b + pre, ' ', hlen);
    memcpy(b + pre, dict, dl);
    b[pre + hlen - 1] = '\n';
    return b;
}

static void expect_ok(int major, const char *dict, uint64_t data, uint32_t elem, int ndim, uint64_t count)
{
    uint64_t len;
    uint8_t *b = make(major, dict, data, &len);
    npy_info_t info;
    char err[256] = "";
    if (npy_parse(b, len, &info, err, sizeof(err)) != 0 || info.elem_bytes != elem || info.ndim != ndim ||
        info.count != count || info.data_offset + data != len) {
        fprintf(stderr, "FAIL ok v%d %s: %s\n", major, dict, err);
        failures++;
    }
    free(b);
}

static void expect_bad_buf(const char *what, const uint8_t *b, uint64_t len, const char *needle)
{
    npy_info_t info = {.ndim = 99};
    char err[256] = "";
    if (npy_parse(b, len, &info, err, sizeof(err)) == 0 || info.ndim != 99 || strstr(err, needle) == NULL) {
        fprintf(stderr, "FAIL bad %s: message '%s' (wanted '%s')\n", what, err, needle);
        failures++;
    }
}

static void expect_bad(int major, const char *dict, uint64_t data, const char *needle)
{
    uint64_t len;
    uint8_t *b = make(major, dict, data, &len);
    expect_bad_buf(dict, b, len, needle);
    free(b);
}

/* Every prefix and every byte changed to a few values: no crash, and a
 * success is self-consistent. */
static void mutate(const char *dict, uint64_t data)
{
    uint64_t len;
    uint8_t *b = make(1, dict, data, &len);
    static const uint8_t vals[] = {0, '\n', ' ', '(', ')', ',', '\'', '9', 0xff, 'T'};
    for (uint64_t cut = 0; cut < len; cut++) {
        uint8_t *p = malloc(cut ? cut : 1); /* exact size, so ASan sees any overread */
        memcpy(p, b, cut);
        npy_info_t info;
        char err[256];
        if (npy_parse(p, cut, &info, err, sizeof(err)) == 0) {
            fprintf(stderr, "FAIL truncated to %llu bytes parsed\n", (unsigned long long)cut);
            failures++;
        }
        free(p);
    }
    for (uint64_t i = 0; i < len - data; i++) {
        for (size_t v = 0; v < sizeof(vals); v++) {
            uint8_t *p = malloc(len);
            memcpy(p, b, len);
            p[i] = vals[v];
            npy_info_t info;
            char err[256];
            if (npy_parse(p, len, &info, err, sizeof(err)) == 0 &&
                (info.data_offset + info.count * info.elem_bytes != len || info.ndim > NPY_MAX_DIMS)) {
                fprintf(stderr, "FAIL byte %llu = %u parsed inconsistently\n", (unsigned long long)i, vals[v]);
                failures++;
            }
            free(p);
        }
    }
    free(b);
}

int main(void)
{
    /* as numpy writes them */
    expect_ok(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2, 3, 4), }", 2 * 3 * 4 * 8, 8, 3, 24);
    expect_ok(1, "{'descr': '<i4', 'fortran_order': False, 'shape': (5,), }", 20, 4, 1, 5);
    expect_ok(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (), }", 8, 8, 0, 1);
    expect_ok(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (0, 3, 4), }", 0, 8, 3, 0);
    expect_ok(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (1, 1, 1), }", 8, 8, 3, 1);
    expect_ok(3, "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2, 1), }", 8, 4, 3, 2);
    /* other key order, no trailing comma, double quotes */
    expect_ok(1, "{\"shape\": (1, 2, 3), \"fortran_order\": False, \"descr\": \"<i4\"}", 24, 4, 3, 6);

    expect_bad(1, "{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }", 8, "'>i8' is not supported");
    expect_bad(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4, "'<f4' is not supported");
    expect_bad(1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }", 1, "is not supported");
    expect_bad(1, "{'descr': [('a', '<i8')], 'fortran_order': False, 'shape': (1,), }", 8, "structured");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': True, 'shape': (2, 2), }", 32, "Fortran");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': 0, 'shape': (1,), }", 8, "neither True nor False");
    expect_bad(1, "{'descr': '<i8', 'shape': (1,), }", 8, "needs 'descr', 'fortran_order' and 'shape'");
    expect_bad(1, "{'descr': '<i8', 'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", 8, "repeated");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), 'x': 1, }", 8, "unexpected");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1), }", 8, "not a tuple");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': [1], }", 8, "not a tuple");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (-1,), }", 8, "non-negative");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,, 2), }", 8, "non-negative");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1 2), }", 8, "malformed");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,2,3,4,5,6,7,8,9), }", 8, "more than 8");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (18446744073709551616,), }", 8, "below 2^64");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8,
               "element count overflows");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (3074457345618258603,), }", 8,
               "byte size overflows");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", 8, "needs 16 data bytes");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", 16, "needs 8 data bytes");
    expect_bad(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), } x", 8, "text after");
    expect_bad(1, "['descr', '<i8']", 8, "does not start with '{'");
    expect_bad(1, "{'descr' '<i8', 'fortran_order': False, 'shape': (1,)}", 8, "quoted key and ':'");
    expect_bad(1, "{'descr': '<i8' 'fortran_order': False, 'shape': (1,)}", 8, "expected ',' or '}'");
    expect_bad(1, "{'descr': '<i\\x38', 'fortran_order': False, 'shape': (1,)}", 8, "structured");
    expect_bad(1, "{'descr': '<i8',\n 'fortran_order': False, 'shape': (1,)}", 8, "newline inside");

    /* the preamble */
    uint64_t len;
    uint8_t *b = make(1, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", 8, &len);
    expect_bad_buf("short", b, 9, "magic");
    b[0] = 0x92;
    expect_bad_buf("magic", b, len, "magic");
    b[0] = 0x93;
    b[6] = 4;
    expect_bad_buf("version 4", b, len, "version 4.0");
    b[6] = 0;
    expect_bad_buf("version 0", b, len, "version 0.0");
    b[6] = 1;
    b[7] = 1;
    expect_bad_buf("version 1.1", b, len, "version 1.1");
    b[7] = 0;
    b[8] = 0xff;
    b[9] = 0xff;
    expect_bad_buf("header length", b, len, "runs past the end");
    b[8] = 0;
    b[9] = 0;
    expect_bad_buf("empty header", b, len, "newline");
    free(b);
    b = make(2, "{'descr': '<i8', 'fortran_order': False, 'shape': (1,), }", 8, &len);
    expect_bad_buf("v2 short", b, 11, "truncated header length");
    b[11] = 0x80;
    expect_bad_buf("v2 huge header", b, len, "runs past the end");
    free(b);

    mutate("{'descr': '<i4', 'fortran_order': False, 'shape': (2, 1, 2), }", 16);
    if (failures == 0)
        printf("npy_test: all passed\n");
    return failures ? 1 : 0;
}
