/* The README's example: 4 ranks (forked on this host) each own a shard of
 * a table of 64-byte rows; every rank fetches rows of all shards by global
 * index and checks them. Build against an installed engram:
 *   cc fetch.c $(pkg-config --cflags --libs engram) -o fetch
 * or with CMake: find_package(engram) and target_link_libraries(... engram::engram).
 * Optional argument: the number of ranks (default 4).
 * Exit status 0 when every rank got every row right. */
#include <engram/engram.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { ENTRIES_PER_RANK = 1000, ROW_BYTES = 64, TOKENS = 32, ENTRIES_PER_TOKEN = 3 };

/* Byte b of global row g: any value that differs between rows and bytes. */
static unsigned char row_byte(uint64_t g, unsigned b)
{
    return (unsigned char)(g * 131u + b * 7u + 1u);
}

static int fail(int rank, const char *what, engram_status_t st)
{
    fprintf(stderr, "rank %d: %s: %s (%s)\n", rank, what, engram_status_str(st), engram_last_error());
    return 1;
}

static int rank_main(engram_group_t *group, void *arg)
{
    (void)arg;
    int rank = engram_group_rank(group), ranks = engram_group_size(group);
    engram_context_t *ctx;
    engram_status_t st = engram_context_create(NULL, group, &ctx); /* config from ENGRAM_* env */
    if (st != ENGRAM_OK)
        return fail(rank, "engram_context_create", st);
    engram_table_params_t params = {
        .size = sizeof(params),
        .entries_per_rank = ENTRIES_PER_RANK,
        .row_bytes = ROW_BYTES,
        .entries_per_token = ENTRIES_PER_TOKEN,
        .max_tokens = TOKENS,
        .recv = ENGRAM_RECV_HOST,
    };
    engram_table_t *table;
    if ((st = engram_table_create(ctx, &params, &table)) != ENGRAM_OK)
        return fail(rank, "engram_table_create", st);
    static unsigned char shard[ENTRIES_PER_RANK][ROW_BYTES];
    for (unsigned r = 0; r < ENTRIES_PER_RANK; r++)
        for (unsigned b = 0; b < ROW_BYTES; b++)
            shard[r][b] = row_byte((uint64_t)rank * ENTRIES_PER_RANK + r, b);
    if ((st = engram_write(table, shard, ROW_BYTES, NULL)) != ENGRAM_OK)
        return fail(rank, "engram_write", st);

    int64_t indices[TOKENS * ENTRIES_PER_TOKEN];
    for (unsigned i = 0; i < TOKENS * ENTRIES_PER_TOKEN; i++)
        indices[i] = (int64_t)((i * 7919u + (unsigned)rank * 31u) % ((unsigned)ranks * ENTRIES_PER_RANK));
    engram_fetch_t *f;
    if ((st = engram_fetch(table, indices, TOKENS, 0, &f)) != ENGRAM_OK)
        return fail(rank, "engram_fetch", st);
    const void *rows;
    const uint32_t *scales;
    if ((st = engram_wait(f, &rows, &scales)) != ENGRAM_OK)
        return fail(rank, "engram_wait", st);
    int bad = 0;
    for (unsigned i = 0; i < TOKENS * ENTRIES_PER_TOKEN; i++)
        for (unsigned b = 0; b < ROW_BYTES; b++)
            bad += ((const unsigned char *)rows)[i * ROW_BYTES + b] != row_byte((uint64_t)indices[i], b);
    engram_fetch_release(f);
    if ((st = engram_table_destroy(table)) != ENGRAM_OK)
        return fail(rank, "engram_table_destroy", st);
    if ((st = engram_context_destroy(ctx)) != ENGRAM_OK)
        return fail(rank, "engram_context_destroy", st);
    if (bad != 0) {
        fprintf(stderr, "rank %d: %d wrong bytes\n", rank, bad);
        return 1;
    }
    if (rank == 0)
        printf("engram %s: %d ranks fetched %d rows each on %s, all correct\n", engram_version(NULL, NULL, NULL),
               ranks, TOKENS * ENTRIES_PER_TOKEN, getenv("ENGRAM_TRANSPORT") ? getenv("ENGRAM_TRANSPORT") : "auto");
    return 0;
}

int main(int argc, char **argv)
{
    int ranks = argc > 1 ? atoi(argv[1]) : 4;
    if (ranks < 1 || ranks > 64) {
        fprintf(stderr, "fetch: ranks '%s' is not 1..64\n", argv[1]);
        return 2;
    }
    engram_status_t st = engram_group_fork_run(ranks, 0, rank_main, NULL, NULL);
    if (st != ENGRAM_OK) {
        fprintf(stderr, "fetch: %s (%s)\n", engram_status_str(st), engram_last_error());
        return 1;
    }
    return 0;
}
