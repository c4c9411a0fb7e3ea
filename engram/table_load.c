/* engram_write_rows_fd: a shard's rows straight from a file. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engram/gpu/gpu_table.h"
#include "engram/internal.h"
#include "hal/log.h"

enum { BOUNCE_BYTES = 16 << 20 };

/* The shard's rows as host memory the file may be read into: unpadded
 * (stride == row_bytes) and written by plain stores; NULL otherwise. */
static char *direct_rows(const engram_table_t *t)
{
    if (t->shape.row_stride != t->params.row_bytes)
        return NULL;
    if (t->params.recv == ENGRAM_RECV_HOST)
        return t->shard->addr;
    return engram_gpu_table_host_rows(t);
}

/* Exactly `bytes` of fd at `off` into dst. */
static engram_status_t read_all(int fd, char *dst, uint64_t bytes, uint64_t off, uint64_t first_row, uint32_t row_bytes)
{
    for (uint64_t done = 0; done < bytes;) {
        const uint64_t want = bytes - done < (1u << 30) ? bytes - done : (1u << 30);
        ssize_t n = pread(fd, dst + done, (size_t)want, (off_t)(off + done));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return ENGRAM_ERROR(ENGRAM_ERR_INVALID,
                                "engram_write_rows_fd: %s at file offset %llu (row %llu of the shard)",
                                n == 0 ? "the file ends" : strerror(errno), (unsigned long long)(off + done),
                                (unsigned long long)(first_row + (done / row_bytes)));
        done += (uint64_t)n;
    }
    return ENGRAM_OK;
}

engram_status_t engram_write_rows_fd(engram_table_t *t, int fd, uint64_t file_offset, uint64_t first_row,
                                     uint64_t num_rows)
{
    if (t == NULL)
        return ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_write_rows_fd: table is NULL");
    engram_status_t st = engram_table_check_writing(t, "engram_write_rows_fd");
    if (st != ENGRAM_OK)
        return st;
    const uint64_t rb = t->params.row_bytes;
    uint64_t bytes = 0;
    st = engram_table_check_range(t, "engram_write_rows_fd", first_row, num_rows);
    if (st == ENGRAM_OK && fd < 0)
        st = ENGRAM_ERROR(ENGRAM_ERR_INVALID, "engram_write_rows_fd: fd %d is not a file descriptor", fd);
    else if (st == ENGRAM_OK && (file_offset > INT64_MAX || (bytes = num_rows * rb) > INT64_MAX - file_offset))
        st = ENGRAM_ERROR(ENGRAM_ERR_OVERFLOW, "engram_write_rows_fd: file offset %llu + %llu bytes pass a file's "
                          "largest offset", (unsigned long long)file_offset, (unsigned long long)bytes);
    char *direct = st == ENGRAM_OK ? direct_rows(t) : NULL;
    if (st == ENGRAM_OK && direct != NULL) {
        st = read_all(fd, direct + first_row * rb, bytes, file_offset, first_row, (uint32_t)rb);
    } else if (st == ENGRAM_OK && num_rows > 0) {
        const uint64_t per = BOUNCE_BYTES / rb > 0 ? BOUNCE_BYTES / rb : 1;
        char *buf = malloc((size_t)((per < num_rows ? per : num_rows) * rb));
        if (buf == NULL)
            st = ENGRAM_ERROR(ENGRAM_ERR_NOMEM, "engram_write_rows_fd: out of memory for its read buffer");
        for (uint64_t done = 0; st == ENGRAM_OK && done < num_rows; done += per) {
            const uint64_t k = num_rows - done < per ? num_rows - done : per;
            st = read_all(fd, buf, k * rb, file_offset + done * rb, first_row + done, (uint32_t)rb);
            if (st == ENGRAM_OK)
                st = engram_write_rows(t, first_row + done, k, buf, (uint32_t)rb);
        }
        free(buf);
    }
    if (st != ENGRAM_OK && t->write_status == ENGRAM_OK)
        t->write_status = st;
    return st;
}
