/* Fault: segment allocation failures at table creation, on 2 forked ranks
 * (loopback). Each ends in a clean error on every rank (or, for
 * huge_pages=auto, a logged fallback), and a table can be created after it.
 *   - huge_pages=auto on a machine without free huge pages: the table is
 *     created on normal pages and the fallback is logged (INFO);
 *   - huge_pages=on without huge pages: ENGRAM_ERR_UNSUPPORTED everywhere;
 *   - RLIMIT_AS on one rank below the shard size: an error on every rank
 *     (not under ASan, whose shadow memory needs the address space).
 * RLIMIT_FSIZE on one rank's memfd is tests/engram_errors_test.c's
 * check_partial_init_failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/engram_harness.h"

static const engram_table_params_t small = {.size = sizeof(engram_table_params_t), .entries_per_rank = 512,
                                            .row_bytes = 64, .entries_per_token = 2, .max_tokens = 4,
                                            .scale_packs = 0, .recv = ENGRAM_RECV_HOST};

static long meminfo(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    long v = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, key, n) == 0 && line[n] == ':')
            v = atol(line + n + 1);
    if (f)
        fclose(f);
    return v;
}

static void check_usable(engram_group_t *g)
{
    harness_t h;
    CHECK_OK(harness_open(&h, g, "loopback", false, &small));
    CHECK_OK(harness_write(&h));
    int64_t idx[8] = {0, 1, 511, 512, 1023, 7, 600, 3};
    bool match = false;
    CHECK_OK(harness_fetch_check(&h, idx, 4, false, &match));
    CHECK(match);
    harness_close(&h);
}

/* stderr goes to a memfd while the first table is created; the log must
 * carry the fallback line. */
static void check_auto_fallback(engram_group_t *g)
{
    int saved = dup(2), log = memfd_create("stderr", 0);
    CHECK(saved >= 0 && log >= 0);
    fflush(stderr);
    CHECK(dup2(log, 2) == 2);
    harness_t h;
    engram_status_t st = harness_open(&h, g, "loopback", false, &small);
    fflush(stderr);
    CHECK(dup2(saved, 2) == 2);
    char text[8192] = "";
    ssize_t n = pread(log, text, sizeof(text) - 1, 0);
    CHECK(n >= 0);
    text[n] = '\0';
    fputs(text, stderr);
    close(log);
    close(saved);
    CHECK_OK(st);
    CHECK(strstr(text, "huge pages unavailable, using normal pages") != NULL);
    harness_close(&h);
}

static void check_huge_on(engram_group_t *g)
{
    CHECK(setenv("ENGRAM_HUGE_PAGES", "on", 1) == 0);
    harness_t h;
    CHECK_STATUS(harness_open(&h, g, "loopback", false, &small), ENGRAM_ERR_UNSUPPORTED);
    CHECK(h.table == NULL);
    CHECK_OK(engram_context_destroy(h.ctx));
    CHECK(unsetenv("ENGRAM_HUGE_PAGES") == 0);
}

static void check_address_space_limit(engram_group_t *g)
{
#if defined(__SANITIZE_ADDRESS__)
    (void)g;
    puts("RLIMIT_AS case skipped under ASan");
#else
    /* 512 MiB shard; rank 1 may map only 128 MiB more than it has now */
    engram_table_params_t big = small;
    big.entries_per_rank = (512u << 20) / 64;
    bool victim = engram_group_rank(g) == 1;
    struct rlimit old;
    CHECK(getrlimit(RLIMIT_AS, &old) == 0);
    if (victim) {
        long vm_kib = -1;
        FILE *f = fopen("/proc/self/status", "r");
        char line[256];
        while (f && fgets(line, sizeof(line), f))
            if (strncmp(line, "VmSize:", 7) == 0)
                vm_kib = atol(line + 7);
        if (f)
            fclose(f);
        CHECK(vm_kib > 0);
        struct rlimit lim = {.rlim_cur = ((rlim_t)vm_kib << 10) + (128u << 20), .rlim_max = old.rlim_max};
        CHECK(setrlimit(RLIMIT_AS, &lim) == 0);
    }
    harness_t h;
    engram_status_t st = harness_open(&h, g, "loopback", false, &big);
    if (victim)
        CHECK(setrlimit(RLIMIT_AS, &old) == 0);
    printf("rank %d: RLIMIT_AS case: %s (%s)\n", engram_group_rank(g), engram_status_str(st), engram_last_error());
    CHECK(st != ENGRAM_OK && h.table == NULL);
    if (victim)
        CHECK(st == ENGRAM_ERR_NOMEM);
    CHECK_OK(engram_context_destroy(h.ctx));
#endif
}

static int rank_main(engram_group_t *g, void *arg)
{
    bool no_huge = *(const bool *)arg;
    if (no_huge) {
        check_auto_fallback(g);
        check_huge_on(g);
    } else {
        puts("huge pages are free on this machine: the fallback and huge_pages=on cases do not apply");
    }
    check_usable(g);
    check_address_space_limit(g);
    check_usable(g);
    fflush(stdout);
    return 0;
}

int main(void)
{
    /* before any log call: the level is read once per process */
    CHECK(setenv("ENGRAM_LOG_LEVEL", "info", 1) == 0);
    bool no_huge = meminfo("HugePages_Free") <= 0;
    CHECK_OK(engram_group_fork_run(2, 0, rank_main, &no_huge, NULL));
    puts("engram_segment_fault_test: ok");
    return 0;
}
