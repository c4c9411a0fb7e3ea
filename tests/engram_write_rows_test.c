/* A shard written in pieces (engram_write_begin / engram_write_rows /
 * engram_write_end) on 3 forked ranks (loopback): chunks in any order
 * fetch bit for bit as engram_write's table does, and every misuse gets a
 * clear error on the rank that made it, or on every rank for the
 * collective steps, leaving the table in a known state. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/engram_harness.h"
#include "tests/table_gen.h"

#define EPR 300u
#define EPT 3u
#define MAX_TOKENS 16u

static const engram_table_params_t params = {.size = sizeof(engram_table_params_t), .entries_per_rank = EPR,
                                             .row_bytes = 40, .entries_per_token = EPT, .max_tokens = MAX_TOKENS,
                                             .scale_packs = 1, .recv = ENGRAM_RECV_HOST};

static void check_all_rows(harness_t *h)
{
    int64_t idx[MAX_TOKENS * EPT];
    uint64_t total = EPR * (uint64_t)engram_group_size(h->g);
    for (uint64_t base = 0; base < total; base += MAX_TOKENS * EPT) {
        for (uint32_t i = 0; i < MAX_TOKENS * EPT; i++)
            idx[i] = (int64_t)((base + i) % total);
        bool match = false;
        CHECK_OK(harness_fetch_check(h, idx, MAX_TOKENS, false, &match));
        CHECK(match);
    }
}

static void check_unwritten(harness_t *h)
{
    int64_t idx[EPT] = {0};
    engram_fetch_t *f = NULL;
    CHECK_STATUS(engram_fetch(h->table, idx, 1, 0, &f), ENGRAM_ERR_STATE);
    CHECK(strstr(engram_last_error(), "before any engram_write") != NULL);
}

/* Local misuse inside an open write: refused on this rank (and, as rows it
 * meant to write are missing, at engram_write_end on every rank). */
static void check_rows_args(harness_t *h)
{
    uint8_t row[40] = {0};
    CHECK_STATUS(engram_write_rows(h->table, 0, 1, row, 64), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "engram_write_rows: rows of 64 bytes, table rows are 40 bytes") != NULL);
    CHECK_STATUS(engram_write_rows(h->table, 0, 1, NULL, 40), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "engram_write_rows: rows is NULL") != NULL);
    CHECK_STATUS(engram_write_rows(h->table, EPR, 1, row, 40), ENGRAM_ERR_OVERFLOW);
    CHECK(strstr(engram_last_error(), "pass the shard's 300 rows") != NULL);
    CHECK_STATUS(engram_write_rows(h->table, EPR + 1, 0, row, 40), ENGRAM_ERR_OVERFLOW);
    CHECK_STATUS(engram_write_rows(h->table, 1, UINT64_MAX, row, 40), ENGRAM_ERR_OVERFLOW); /* no wrap */
    CHECK_STATUS(engram_write_rows(h->table, UINT64_MAX, 2, row, 40), ENGRAM_ERR_OVERFLOW);
    CHECK_OK(engram_write_rows(h->table, EPR, 0, NULL, 40)); /* empty, at the end */
    CHECK_STATUS(engram_write(h->table, row, 40, NULL), ENGRAM_ERR_STATE); /* collective: every rank refuses */
    CHECK(strstr(engram_last_error(), "end it with engram_write_end") != NULL);
    CHECK_STATUS(engram_write_begin(h->table), ENGRAM_ERR_STATE);
    CHECK(strstr(engram_last_error(), "a write has begun already") != NULL);
    check_unwritten(h);
}

enum { FILE_HEADER = 128 }; /* bytes before the rows, as a .npy header */

/* A file of this rank's shard rows after FILE_HEADER bytes; returns its fd. */
static int shard_file(const harness_t *h)
{
    const engram_table_params_t *p = &h->params;
    char path[] = "/tmp/engram_write_rows_test.XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    uint8_t *buf = calloc(FILE_HEADER + EPR * (size_t)p->row_bytes, 1);
    const uint64_t first = (uint64_t)engram_group_rank(h->g) * EPR;
    for (uint64_t i = 0; i < EPR; i++)
        table_gen_row(first + i, p->row_bytes, buf + FILE_HEADER + i * p->row_bytes);
    CHECK(write(fd, buf, FILE_HEADER + EPR * (size_t)p->row_bytes) == (ssize_t)(FILE_HEADER + EPR * p->row_bytes));
    free(buf);
    return fd;
}

/* The shard read from a file (engram_write_rows_fd), in two pieces, last
 * first: straight into the shard (row_bytes 64: unpadded) or through the
 * read buffer (row_bytes 40: rows at a 64-byte stride); then each refusal. */
static void check_from_file(engram_group_t *g, uint32_t row_bytes)
{
    engram_table_params_t p = params;
    p.row_bytes = row_bytes;
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &p));
    int fd = shard_file(&h);
    uint32_t *sf = malloc(EPR * (size_t)engram_group_size(g) * sizeof(uint32_t));
    for (uint64_t i = 0; i < EPR * (uint64_t)engram_group_size(g); i++)
        sf[i] = table_gen_scale(i, 0);
    CHECK_STATUS(engram_write_rows_fd(h.table, fd, FILE_HEADER, 0, EPR), ENGRAM_ERR_STATE);
    CHECK_OK(engram_write_begin(h.table));
    CHECK_OK(engram_write_rows_fd(h.table, fd, FILE_HEADER + 100 * (uint64_t)row_bytes, 100, EPR - 100));
    CHECK_OK(engram_write_rows_fd(h.table, fd, FILE_HEADER, 0, 100));
    CHECK_OK(engram_write_rows_fd(h.table, fd, 0, EPR, 0)); /* empty, at the end */
    CHECK_OK(engram_write_end(h.table, sf));
    check_all_rows(&h);
    /* refusals, each failing the write on every rank */
    CHECK_OK(engram_write_begin(h.table));
    CHECK_STATUS(engram_write_rows_fd(h.table, fd, FILE_HEADER + 10 * (uint64_t)row_bytes, 0, EPR),
                 ENGRAM_ERR_INVALID); /* 10 rows short */
    CHECK(strstr(engram_last_error(), "the file ends at file offset") != NULL);
    CHECK_STATUS(engram_write_rows_fd(h.table, -1, 0, 0, 1), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_write_rows_fd(h.table, fd, 0, EPR, 1), ENGRAM_ERR_OVERFLOW);
    CHECK_STATUS(engram_write_rows_fd(h.table, fd, 0, 1, UINT64_MAX), ENGRAM_ERR_OVERFLOW);
    CHECK_STATUS(engram_write_rows_fd(h.table, fd, UINT64_MAX - 8, 0, 1), ENGRAM_ERR_OVERFLOW);
    CHECK_STATUS(engram_write_rows_fd(NULL, fd, 0, 0, 1), ENGRAM_ERR_INVALID);
    int closed = dup(fd);
    close(closed);
    CHECK_STATUS(engram_write_rows_fd(h.table, closed, 0, 0, 1), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "Bad file descriptor") != NULL);
    CHECK(engram_write_end(h.table, sf) != ENGRAM_OK);
    check_unwritten(&h);
    close(fd);
    free(sf);
    harness_close(&h);
}

static int rank_main(engram_group_t *g, void *arg)
{
    (void)arg;
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &params));
    uint8_t row[40] = {0};
    /* outside a write */
    CHECK_STATUS(engram_write_rows(h.table, 0, 1, row, 40), ENGRAM_ERR_STATE);
    CHECK(strstr(engram_last_error(), "outside engram_write_begin") != NULL);
    CHECK_STATUS(engram_write_end(h.table, NULL), ENGRAM_ERR_STATE);
    CHECK(strstr(engram_last_error(), "engram_write_end without engram_write_begin") != NULL);
    CHECK_STATUS(engram_write_begin(NULL), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_write_rows(NULL, 0, 0, NULL, 40), ENGRAM_ERR_INVALID);
    CHECK_STATUS(engram_write_end(NULL, NULL), ENGRAM_ERR_INVALID);

    /* chunks of every size, last first, against engram_write's table */
    static const uint64_t chunks[] = {1, 7, 128, EPR - 1, EPR, EPR * 4};
    for (size_t c = 0; c < sizeof(chunks) / sizeof(chunks[0]); c++) {
        CHECK_OK(harness_write_chunks(&h, chunks[c]));
        check_all_rows(&h);
    }

    /* local misuse inside a write, then the write ends well */
    CHECK_OK(engram_write_begin(h.table));
    check_rows_args(&h);
    uint32_t *sf = calloc(EPR * (size_t)engram_group_size(g), sizeof(uint32_t));
    CHECK(engram_write_end(h.table, sf) != ENGRAM_OK); /* every rank: rank r's refused rows */
    check_unwritten(&h);
    CHECK_STATUS(engram_write_end(h.table, sf), ENGRAM_ERR_STATE); /* the write is closed */

    /* wrong scales: every rank refuses, the write closes unwritten */
    CHECK_OK(engram_write_begin(h.table));
    CHECK_STATUS(engram_write_end(h.table, NULL), ENGRAM_ERR_INVALID);
    CHECK(strstr(engram_last_error(), "engram_write_end: scales missing but the table has 1 scale packs") != NULL);
    check_unwritten(&h);
    CHECK_STATUS(engram_write_end(h.table, NULL), ENGRAM_ERR_STATE);

    /* one rank's failed write_rows fails engram_write_end on every rank */
    CHECK_OK(engram_write_begin(h.table));
    if (engram_group_rank(g) == 1)
        CHECK_STATUS(engram_write_rows(h.table, 0, EPR + 1, row, 40), ENGRAM_ERR_OVERFLOW);
    else
        CHECK_OK(engram_write_rows(h.table, 0, 1, row, 40));
    CHECK(engram_write_end(h.table, sf) != ENGRAM_OK);
    check_unwritten(&h);

    /* begin with a fetch in flight (rank 0's) is refused on every rank */
    CHECK_OK(harness_write(&h));
    int64_t idx[EPT] = {0, 1, 2};
    engram_fetch_t *f = NULL;
    if (engram_group_rank(g) == 0)
        CHECK_OK(engram_fetch(h.table, idx, 1, 0, &f));
    CHECK_STATUS(engram_write_begin(h.table), ENGRAM_ERR_BUSY);
    if (f != NULL) {
        CHECK_OK(engram_wait(f, NULL, NULL));
        engram_fetch_release(f);
    }
    check_all_rows(&h); /* still written */
    free(sf);
    harness_close(&h);
    check_from_file(g, 64);
    check_from_file(g, 40);
    return 0;
}

int main(void)
{
    CHECK_OK(engram_group_fork_run(3, 0, rank_main, NULL, NULL));
    printf("engram_write_rows_test: ok\n");
    return 0;
}
